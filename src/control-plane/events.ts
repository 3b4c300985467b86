// Error events of the agent itself, sent to the control plane
// (`POST /v1/agent/events`, docs/events.md) so that the service can see agents
// that crash or whose executors throw. Agent mode only; off with
// EXTERNAL_OBSERVABILITY=off.
//
// - Technical metadata only: error name, message and stack, with secrets
//   scrubbed and URLs, host names, IP addresses, header values, quoted text
//   (bodies, values) and long tokens removed; agent version, Node version,
//   check type and where in the agent it happened.
// - Batched (every FLUSH_INTERVAL_MS or at BATCH_SIZE events), rate-limited
//   (MAX_PER_MINUTE, the rest dropped and counted), fire-and-forget: a job
//   never waits for an event, a failed send is logged at debug and dropped
//   (never retried, and never itself reported as an event), and what is
//   queued at shutdown is sent best-effort within a short deadline.

import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { AgentEvent, EventsRequest } from '../core/protocol.js';
import { urlAuthorities } from '../core/text-scan.js';
import { Scrubber } from '../secrets/scrubber.js';
import type { Logger } from '../observability/logger.js';

export const FLUSH_INTERVAL_MS = 5_000;
export const BATCH_SIZE = 20;
export const MAX_PER_MINUTE = 30;
export const MAX_MESSAGE_CHARS = 1_000;
export const MAX_STACK_LINES = 40;
export const MAX_STACK_CHARS = 8_000;

/** Where in the agent the error happened. */
export type EventOrigin = 'uncaught-exception' | 'unhandled-rejection' | 'executor' | 'spool' | 'results-batch' | 'upload' | 'rate-limit';

export interface EventSender {
  sendEvents(body: EventsRequest): Promise<unknown>;
}

export interface ReportContext {
  origin: EventOrigin;
  checkType?: string;
  /** The job's scrubber (agent-wide plus the job's secrets) when the error belongs to a job. */
  scrubber?: Scrubber;
  /** Strings of the job (request fields, variable values, host names) that must not appear in the event. */
  targetStrings?: readonly string[];
}

/** The installation directory, shown as `<outpost>` in stack frames. */
const PACKAGE_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const ROOT_URL = pathToFileURL(PACKAGE_ROOT).href;

const URL_PATTERN = /\b[a-z][a-z0-9+.-]*:\/\/[^\s"'`<>()[\]{}]*/gi;
const IPV4 = /\b(?:\d{1,3}\.){3}\d{1,3}(?::\d{1,5})?\b/g;
const IPV6 = /\[?(?:[0-9a-f]{0,4}:){2,7}[0-9a-f]{0,4}\]?(?::\d{1,5})?/gi;
const HOST = /\b(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+([a-z](?:[a-z0-9-]{0,61}[a-z0-9])?)\b/g;
/** "Hosts" whose last label is a source-file extension are file names (queue.js). */
const FILE_EXTENSIONS = new Set(['js', 'mjs', 'cjs', 'ts', 'mts', 'cts', 'json', 'node', 'map', 'jsx', 'tsx']);
const QUOTED = /"(?:[^"\\\n]|\\.){2,}"|'(?:[^'\\\n]|\\.){2,}'|`(?:[^`\\\n]|\\.){2,}`/g;
const AUTH_SCHEME = /\b(Bearer|Basic|Digest|Token|Negotiate|NTLM)\s+[^\s,;"']+/gi;
const HEADER_VALUE = /\b(authorization|proxy-authorization|x-api-key|set-cookie|cookie)\b(\s*[:=]\s*)[^\n]*/gi;
const HEADER_LINE = /^([ \t]*(?:[A-Za-z][A-Za-z0-9]*-[A-Za-z0-9-]+|host|location|referer|server|via|cookie|authorization)):[ \t].*$/gim;
/**
 * Token-like runs (keys, hashes, base64 blobs): 32 or more such characters,
 * with both letters and digits. One character class, no lookahead: each run
 * is read once (a lookahead per start position made this quadratic).
 */
const LONG_TOKEN = /[A-Za-z0-9+/=_%-]{32,}/g;
const HAS_DIGIT = /[0-9]/;
const HAS_LETTER = /[A-Za-z]/;
/**
 * Some of the patterns above backtrack over a whole line when they fail
 * (a host name, a URL scheme, a quoted string without its closing quote), so
 * their cost grows with the square of a line's length: lines are cut to this
 * length, and the whole text to MAX_CLEAN_CHARS, before they run. Both are
 * above what an event keeps (MAX_MESSAGE_CHARS, MAX_STACK_CHARS).
 */
export const MAX_LINE_CHARS = 1_000;
export const MAX_CLEAN_CHARS = 2 * MAX_STACK_CHARS;
const FRAME = /^\s+at\s/;

function removeNetworkData(text: string): string {
  return text
    .replace(URL_PATTERN, '<url>')
    .replace(IPV4, '<ip>')
    .replace(IPV6, (match) => {
      const colons = match.split(':').length - 1;
      return /[0-9a-f]/i.test(match) && (match.includes('::') || colons >= 5) ? '<ip>' : match;
    })
    .replace(HOST, (match, last: string) => (FILE_EXTENSIONS.has(last) ? match : '<host>'));
}

function sanitizeMessageLine(text: string): string {
  return removeNetworkData(
    text
      .replace(HEADER_LINE, '$1: <redacted>')
      .replace(HEADER_VALUE, '$1$2<redacted>')
      .replace(AUTH_SCHEME, '$1 <redacted>')
      .replace(QUOTED, (match) => `${match[0]}<redacted>${match[0]}`),
  ).replace(LONG_TOKEN, (run) => (HAS_DIGIT.test(run) && HAS_LETTER.test(run) ? '<redacted>' : run));
}

function isTokenChar(c: number): boolean {
  return (
    (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a) || c === 0x2b || c === 0x2f || c === 0x3d || c === 0x5f || c === 0x25 || c === 0x2d
  );
}

/**
 * `text` cut to `max` characters (and `…`). A token-like run that the cut
 * splits is dropped whole: a 31-character piece of a long token would be too
 * short for LONG_TOKEN.
 */
function cutForCleaning(text: string, max: number): string {
  if (text.length <= max) return text;
  let end = max;
  if (isTokenChar(text.charCodeAt(end))) while (end > 0 && isTokenChar(text.charCodeAt(end - 1))) end--;
  const high = text.charCodeAt(end - 1);
  if (high >= 0xd800 && high <= 0xdbff) end--;
  return `${text.slice(0, end)}…`;
}

/**
 * Sanitizes error text for an event: secrets scrubbed first (every scrubber
 * given), the job's own strings removed, the installation path shortened to
 * `<outpost>`, then URLs, IP addresses, host names, header values, quoted
 * text and long tokens replaced. Stack frame lines keep their function names
 * and file positions (those are code, not data).
 */
export function sanitizeEventText(text: string, scrubbers: readonly Scrubber[]): string {
  let out = text;
  // Secrets first, on the whole text (the scrubber is linear): a cut made before could split one and keep its first half.
  for (const scrubber of scrubbers) out = scrubber.scrubText(out);
  out = out.split(ROOT_URL).join('<outpost>').split(PACKAGE_ROOT).join('<outpost>');
  return cutForCleaning(out, MAX_CLEAN_CHARS)
    .split('\n')
    .map((line) => cutForCleaning(line, MAX_LINE_CHARS))
    .map((line) => (FRAME.test(line) ? removeNetworkData(line) : sanitizeMessageLine(line)))
    .join('\n');
}

function truncate(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

function errorParts(error: unknown): { name: string; message: string; stack?: string } {
  if (error instanceof Error) {
    const name = /^[A-Za-z_$][\w$.-]{0,79}$/.test(error.name) ? error.name : 'Error';
    return { name, message: String(error.message), ...(typeof error.stack === 'string' ? { stack: error.stack } : {}) };
  }
  return { name: 'NonError', message: typeof error === 'string' ? error : Object.prototype.toString.call(error) };
}

/** The strings of a job that must not reach an event: the check's request fields, name, id, variable values, host names. */
export function jobTargetStrings(check: { id?: unknown; name?: unknown; request?: unknown }, variables: ReadonlyArray<{ value: string }>): string[] {
  const strings = new Set<string>();
  const visit = (value: unknown, depth: number) => {
    if (depth > 20) return;
    if (typeof value === 'string') {
      // Enum-like words (GET, IPv4, JSON) are the agent's vocabulary, not target data.
      if (/^[A-Z0-9_]+$/.test(value) || /^IPv[46]$/.test(value)) return;
      strings.add(value);
      for (const authority of urlAuthorities(value)) {
        const host = authority.slice(authority.lastIndexOf('@') + 1).replace(/:\d+$/, '').replace(/^\[|\]$/g, '');
        if (host) strings.add(host.toLowerCase());
      }
    } else if (Array.isArray(value)) {
      for (const v of value) visit(v, depth + 1);
    } else if (value && typeof value === 'object') {
      for (const [k, v] of Object.entries(value)) {
        visit(k, depth + 1);
        visit(v, depth + 1);
      }
    }
  };
  visit(check.request, 0);
  visit(check.name, 0);
  visit(check.id, 0);
  for (const v of variables) visit(v.value, 0);
  return [...strings];
}

export interface EventReporterOptions {
  agentVersion: string;
  nodeVersion?: string;
  /** Agent-wide secrets. */
  scrubber: Scrubber;
  flushIntervalMs?: number;
  batchSize?: number;
  maxPerMinute?: number;
}

export class EventReporter {
  private queue: AgentEvent[] = [];
  private readonly accepted: number[] = [];
  private readonly inFlight = new Set<Promise<void>>();
  private readonly timer: NodeJS.Timeout;
  private closed = false;
  private droppedSinceReport = 0;
  /** Events dropped by the rate limit since start. */
  dropped = 0;
  /** Events handed to the control plane (accepted or not). */
  sent = 0;
  private readonly batchSize: number;
  private readonly maxPerMinute: number;

  constructor(
    private readonly sender: EventSender,
    private readonly logger: Logger,
    private readonly options: EventReporterOptions,
  ) {
    this.batchSize = options.batchSize ?? BATCH_SIZE;
    this.maxPerMinute = options.maxPerMinute ?? MAX_PER_MINUTE;
    this.timer = setInterval(() => void this.flush(), options.flushIntervalMs ?? FLUSH_INTERVAL_MS);
    this.timer.unref();
  }

  /** Queues an error event; never throws, never waits. */
  report(error: unknown, context: ReportContext): void {
    if (this.closed) return;
    try {
      if (!this.admit()) {
        this.dropped++;
        if (this.droppedSinceReport++ === 0) this.logger.debug({ maxPerMinute: this.maxPerMinute }, 'error events over the rate limit: dropping');
        return;
      }
      this.queue.push(this.build(error, context));
      if (this.queue.length >= this.batchSize) void this.flush();
    } catch (failure) {
      this.logger.debug({ err: failure }, 'could not build an error event');
    }
  }

  /** Sends what is queued now (one call); resolves when that call ended, however it ended. */
  flush(): Promise<void> {
    if (this.droppedSinceReport > 0 && this.admit()) {
      const n = this.droppedSinceReport;
      this.droppedSinceReport = 0;
      this.queue.push({
        ...this.base(),
        name: 'EventsDropped',
        message: `${n} error event${n === 1 ? ' was' : 's were'} dropped by the agent's rate limit (${this.maxPerMinute} per minute)`,
        origin: 'rate-limit',
      });
    }
    if (this.queue.length === 0) return Promise.resolve();
    const events = this.queue.splice(0, this.queue.length);
    this.sent += events.length;
    const sending = this.sender
      .sendEvents({ events })
      .then(
        () => undefined,
        (error: unknown) => {
          this.logger.debug({ events: events.length, error: (error as Error)?.message ?? String(error) }, 'could not send error events; dropped');
        },
      )
      .finally(() => this.inFlight.delete(sending));
    this.inFlight.add(sending);
    return sending;
  }

  /** Stops the timer and sends what is queued, waiting at most `timeoutMs`. */
  async close(timeoutMs = 2_000): Promise<void> {
    clearInterval(this.timer);
    void this.flush();
    this.closed = true;
    const flushed = Promise.all([...this.inFlight]);
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([flushed, new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs)))]);
    clearTimeout(timer);
  }

  private admit(): boolean {
    const now = Date.now();
    while (this.accepted.length > 0 && (this.accepted[0] as number) <= now - 60_000) this.accepted.shift();
    if (this.accepted.length >= this.maxPerMinute) return false;
    this.accepted.push(now);
    return true;
  }

  private base(): Pick<AgentEvent, 'level' | 'agentVersion' | 'nodeVersion'> {
    return { level: 'error', agentVersion: this.options.agentVersion, nodeVersion: this.options.nodeVersion ?? process.version };
  }

  private build(error: unknown, context: ReportContext): AgentEvent {
    const scrubbers: Scrubber[] = [context.scrubber ?? this.options.scrubber];
    if (context.targetStrings && context.targetStrings.length > 0) scrubbers.push(Scrubber.of(context.targetStrings));
    const parts = errorParts(error);
    const clean = (text: string) => sanitizeEventText(text, scrubbers);
    const event: AgentEvent = {
      ...this.base(),
      name: clean(parts.name),
      message: truncate(clean(parts.message), MAX_MESSAGE_CHARS),
      origin: context.origin,
    };
    if (parts.stack) {
      const lines = clean(parts.stack).split('\n').slice(0, MAX_STACK_LINES);
      event.stack = truncate(lines.join('\n'), MAX_STACK_CHARS);
    }
    if (context.checkType) event.checkType = context.checkType;
    return event;
  }
}
