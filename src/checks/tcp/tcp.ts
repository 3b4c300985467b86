// TCP monitor: connect to hostname:port, optionally send `data` and read the
// reply, RESPONSE_DATA / RESPONSE_TIME assertions, measured timings.
//
// What is read (docs/checks/tcp.md):
// - with `data`: the data is sent right after the connect, then the reply is
//   read until the peer closes, `readLimitBytes` is reached, or no byte came
//   for `idleTimeoutMs` after the last one. The first byte is awaited up to
//   the check's hard cap; a silent peer is a "no reply" error.
// - without `data` and without RESPONSE_DATA assertions: connect only.
// - without `data` but with RESPONSE_DATA assertions: a banner is read if the
//   peer starts sending within `idleTimeoutMs` of the connect (then as above);
//   no banner is not an error, the assertions judge the empty text.

import net from 'node:net';
import { performance } from 'node:perf_hooks';
import { type IpFamily, MAX_HOSTNAME_LENGTH, type ResolvedTarget } from '../../net/ip-family.js';
import { resolvePermitted } from '../../net/network-policy.js';
import { type AssertionOutcome, evaluate } from '../assertions/assertions.js';
import { withMatchBudget } from '../assertions/bounded-match.js';
import type { CheckDefinition } from '../definition.js';
import { describeError, errorCode, JobAbortedError } from '../../core/errors.js';
import { timedSignal } from '../../core/timed-signal.js';
import type { CheckLimits, ExecutionContext, Executor } from '../executor.js';
import type { Outcome } from '../../core/outcome.js';
import type { Fields } from '../fields.js';

export interface TcpRequest {
  hostname: string;
  port: number;
  ipFamily: IpFamily;
  /** Sent as UTF-8 right after the connect; absent for a connect (or banner) check. */
  data?: string;
  /** Bytes read at most; more is cut off and `truncated` set. */
  readLimitBytes: number;
  /** The reply is complete when no byte arrived for this long (and the banner wait without `data`). */
  idleTimeoutMs: number;
}

export const MAX_DATA_LENGTH = 65_536;
export const DEFAULT_READ_LIMIT_BYTES = 65_536;
export const MAX_READ_LIMIT_BYTES = 1_048_576;
export const DEFAULT_IDLE_TIMEOUT_MS = 500;
export const MIN_IDLE_TIMEOUT_MS = 10;
export const MAX_IDLE_TIMEOUT_MS = 5_000;

const LIMITS: CheckLimits = { degradedMs: 4000, maxMs: 5000, capMs: 5000 };

/** Durations in ms; null for a phase that was not reached. */
export interface TcpTimings {
  /** Name resolution (0 for an IP literal). */
  dns: number | null;
  /** The TCP handshake. */
  connect: number | null;
  /** From the data sent (or the connect, for a banner) to the first reply byte. */
  firstByte: number | null;
  /** The whole run; the result's responseTime. */
  total: number;
}

const round = (ms: number) => Math.round(ms * 100) / 100;

/** host:port, with IPv6 literals in brackets. */
export function tcpTarget(host: string, port: number): string {
  const bare = host.replace(/^\[(.*)\]$/, '$1');
  return net.isIPv6(bare) ? `[${bare}]:${port}` : `${bare}:${port}`;
}

/** `host:port` or `[v6]:port`: a port where only a host belongs (a bare IPv6 address has several colons). */
function hasPort(hostname: string): boolean {
  return /^[^:]+:\d+$/.test(hostname) || /^\[.*\]:\d+$/.test(hostname);
}

function parseTcp(fields: Fields): TcpRequest {
  const hostname = fields.string('hostname', { required: true, minLength: 1, maxLength: MAX_HOSTNAME_LENGTH }) ?? '';
  if (/\s|\//.test(hostname)) {
    fields.fail(fields.at('hostname'), `must be a host name or an IP address, without scheme, path or spaces (got ${JSON.stringify(hostname.slice(0, 80))})`);
  } else if (hasPort(hostname)) {
    fields.fail(fields.at('hostname'), `must be a host name or an IP address without a port; put the port in request.port (got ${JSON.stringify(hostname.slice(0, 80))})`);
  }
  if (!fields.has('port')) fields.fail(fields.at('port'), 'is required (1-65535)');
  const port = fields.integer('port', { min: 1, max: 65_535, default: 0 });
  // An empty string sends nothing: the same as no data.
  const data = fields.string('data', { maxLength: MAX_DATA_LENGTH }) || undefined;
  return {
    hostname,
    port,
    ipFamily: fields.oneOf('ipFamily', ['IPv4', 'IPv6'] as const, { default: 'IPv4' }),
    ...(data !== undefined ? { data } : {}),
    readLimitBytes: fields.integer('readLimitBytes', {
      min: 1,
      max: MAX_READ_LIMIT_BYTES,
      default: DEFAULT_READ_LIMIT_BYTES,
      unit: 'bytes',
    }),
    idleTimeoutMs: fields.integer('idleTimeoutMs', {
      min: MIN_IDLE_TIMEOUT_MS,
      max: MAX_IDLE_TIMEOUT_MS,
      default: DEFAULT_IDLE_TIMEOUT_MS,
      unit: 'ms',
    }),
  };
}

/** Why the run was stopped early, when the signal says it was not a timeout (lease lost, shutdown). */
function abortMessage(signal: AbortSignal): string | undefined {
  const reason = signal.reason;
  if (reason instanceof JobAbortedError && reason.reason !== 'timeout') return reason.message;
  return undefined;
}

type EndReason = 'connect-only' | 'closed' | 'idle' | 'limit' | 'no-banner' | 'reset' | 'time-limit';

interface Exchange {
  connectedAt?: number;
  sentAt?: number;
  firstByteAt?: number;
  lastByteAt?: number;
  chunks: Buffer[];
  bytes: number;
  truncated: boolean;
  endReason?: EndReason;
  error?: string;
  /** errno-style code behind `error` (ETIMEDOUT for our own timeouts), for retry rules. */
  errorCode?: string;
}

interface ExchangeOptions {
  address: string;
  family: 4 | 6;
  port: number;
  display: string;
  data?: string;
  readReply: boolean;
  readLimitBytes: number;
  idleTimeoutMs: number;
  signal: AbortSignal;
  start: number;
}

/** One connection: connect, send, read. Always resolves; failures are in `error`. */
function exchange(opts: ExchangeOptions): Promise<Exchange> {
  const result: Exchange = { chunks: [], bytes: 0, truncated: false };
  return new Promise((resolve) => {
    const socket = new net.Socket();
    let idleTimer: NodeJS.Timeout | undefined;
    let done = false;
    const finish = (endReason?: EndReason, error?: string, code?: string) => {
      if (done) return;
      done = true;
      if (endReason) result.endReason = endReason;
      if (error !== undefined) result.error = error;
      if (code !== undefined) result.errorCode = code;
      if (idleTimer) clearTimeout(idleTimer);
      opts.signal.removeEventListener('abort', onAbort);
      socket.destroy();
      resolve(result);
    };
    const armIdle = (reason: EndReason) => {
      if (idleTimer) clearTimeout(idleTimer);
      idleTimer = setTimeout(() => finish(reason), opts.idleTimeoutMs);
    };
    const elapsed = () => Math.round(performance.now() - opts.start);
    function onAbort() {
      const stopped = abortMessage(opts.signal);
      if (stopped) return finish(undefined, stopped);
      if (result.connectedAt === undefined) {
        return finish(
          undefined,
          `Connection to ${opts.display} timed out after ${elapsed()} ms: no answer to the TCP handshake (a firewall may be dropping the packets)`,
          'ETIMEDOUT',
        );
      }
      if (result.firstByteAt === undefined) {
        // Waiting for a banner that may never come is not an error (the assertions judge the empty text).
        if (opts.data === undefined) return finish('no-banner');
        const sent = Buffer.byteLength(opts.data);
        return finish(undefined, `No reply from ${opts.display} within ${elapsed()} ms after sending ${sent} bytes`, 'ETIMEDOUT');
      }
      // A reply has come: what was read is judged (maxResponseTime still applies).
      finish('time-limit');
    }
    if (opts.signal.aborted) return onAbort();
    opts.signal.addEventListener('abort', onAbort, { once: true });

    socket.on('connect', () => {
      result.connectedAt = performance.now();
      if (opts.data !== undefined) {
        // Only a check that sends has a write for Nagle's algorithm to hold back.
        socket.setNoDelay(true);
        socket.write(opts.data, 'utf8');
        result.sentAt = performance.now();
        // The first reply byte is awaited up to the cap; then the idle gap applies.
      } else if (opts.readReply) {
        armIdle('no-banner');
      } else {
        finish('connect-only');
      }
    });
    socket.on('data', (chunk: Buffer) => {
      if (done) return;
      result.lastByteAt = performance.now();
      result.firstByteAt ??= result.lastByteAt;
      const room = opts.readLimitBytes - result.bytes;
      if (chunk.length >= room) {
        result.chunks.push(chunk.subarray(0, room));
        result.bytes += room;
        result.truncated = chunk.length > room;
        return finish('limit');
      }
      result.chunks.push(chunk);
      result.bytes += chunk.length;
      armIdle('idle');
    });
    socket.on('end', () => finish('closed'));
    socket.on('close', () => finish('closed'));
    socket.on('error', (error: NodeJS.ErrnoException) => {
      // A reset after a reply ends the reply (servers that close with unread data reset).
      if (error.code === 'ECONNRESET' && result.firstByteAt !== undefined) return finish('reset');
      if (error.code === 'EPIPE' && result.connectedAt !== undefined && result.firstByteAt === undefined) {
        return finish(undefined, `Connection to ${opts.display} closed by the peer while sending (EPIPE)`, 'ECONNRESET');
      }
      finish(undefined, describeError(error, opts.signal, opts.display), errorCode(error));
    });
    socket.connect({ host: opts.address, port: opts.port, family: opts.family, noDelay: true });
  });
}

async function runTcp(check: CheckDefinition<TcpRequest>, ctx: ExecutionContext): Promise<Outcome> {
  const startedAt = new Date();
  const start = performance.now();
  // {{NAME}} in hostname and data; the result reports the filled-in values (the scrubber hides secrets).
  let spec: TcpRequest;
  try {
    const hostname = ctx.variables.interpolate(check.request.hostname, 'request.hostname').trim();
    const data = check.request.data === undefined ? undefined : ctx.variables.interpolate(check.request.data, 'request.data');
    if (!hostname || /\s|\//.test(hostname) || hasPort(hostname)) throw new Error(`request.hostname is not a host name after variables were filled in`);
    const { data: _template, ...rest } = check.request;
    spec = { ...rest, hostname, ...(data ? { data } : {}) };
  } catch (caught) {
    // An unknown {{NAME}} (UnknownVariableError names it and the field), or a hostname that is no longer one.
    const message = (caught as Error).message;
    ctx.jobLog.push(message);
    return tcpOutcome(startedAt, 0, { error: message }, [], check.request, null, ctx);
  }
  // The queue aborts at the cap; the executor keeps its own bound too, so that
  // a caller without a timed signal still gets a result.
  const bounded = timedSignal(ctx.signal, LIMITS.capMs);
  const signal = bounded.signal;
  const display = tcpTarget(spec.hostname, spec.port);
  const readReply = spec.data !== undefined || check.assertions.some((a) => a.source === 'RESPONSE_DATA');

  const timings: TcpTimings = { dns: null, connect: null, firstByte: null, total: 0 };
  let resolved: ResolvedTarget | undefined;
  let error: string | undefined;
  let code: string | undefined;
  let exchanged: Exchange | undefined;
  try {
    try {
      resolved = await resolvePermitted(spec.hostname, spec.ipFamily, ctx.settings.networkPolicy, spec.port, signal);
      timings.dns = round(resolved.lookupMs);
      if (resolved.fallback) ctx.jobLog.push(resolved.fallback);
      if (resolved.address !== spec.hostname.replace(/^\[(.*)\]$/, '$1')) {
        ctx.jobLog.push(`Resolved ${spec.hostname} to ${resolved.address} (IPv${resolved.family})`);
      }
    } catch (caught) {
      if (signal.aborted) {
        error =
          abortMessage(signal) ?? `DNS lookup of ${spec.hostname} timed out after ${Math.round(performance.now() - start)} ms`;
        code = abortMessage(signal) ? undefined : 'ETIMEDOUT';
      } else {
        error = describeError(caught, signal, spec.hostname);
        code = errorCode(caught);
      }
    }

    if (resolved) {
      const connectStart = performance.now();
      const shown = tcpTarget(resolved.address, spec.port);
      exchanged = await exchange({
        address: resolved.address,
        family: resolved.family,
        port: spec.port,
        display: shown === display ? display : `${display} (${shown})`,
        ...(spec.data !== undefined ? { data: spec.data } : {}),
        readReply,
        readLimitBytes: spec.readLimitBytes,
        idleTimeoutMs: spec.idleTimeoutMs,
        signal,
        start,
      });
      error = exchanged.error;
      code = exchanged.errorCode;
      if (exchanged.connectedAt !== undefined) {
        timings.connect = round(exchanged.connectedAt - connectStart);
        ctx.jobLog.push(`Connected to ${shown}`);
        if (spec.data !== undefined) ctx.jobLog.push(`Sent ${Buffer.byteLength(spec.data)} bytes`);
      }
      if (exchanged.firstByteAt !== undefined) {
        const from = exchanged.sentAt ?? exchanged.connectedAt ?? connectStart;
        timings.firstByte = round(Math.max(0, exchanged.firstByteAt - from));
      }
    }
  } finally {
    bounded.dispose();
  }
  const stoppedAt = new Date();
  // The wait that ends a read (the idle gap, or a banner that never came) is
  // the agent's own, not the peer's: it is not counted.
  let end = performance.now();
  if (!error && exchanged?.endReason === 'idle' && exchanged.lastByteAt !== undefined) end = exchanged.lastByteAt;
  if (!error && exchanged?.endReason === 'no-banner' && exchanged.connectedAt !== undefined) end = exchanged.connectedAt;
  timings.total = round(end - start);

  const bytes = exchanged?.bytes ?? 0;
  const text = Buffer.concat(exchanged?.chunks ?? []).toString('utf8');
  if (!error && exchanged) {
    switch (exchanged.endReason) {
      case 'connect-only':
        break;
      case 'closed':
        ctx.jobLog.push(`Received ${bytes} bytes; the peer closed the connection`);
        break;
      case 'idle':
        ctx.jobLog.push(`Received ${bytes} bytes; nothing more for ${spec.idleTimeoutMs} ms`);
        break;
      case 'limit':
        ctx.jobLog.push(
          `Received ${bytes} bytes: stopped at readLimitBytes${exchanged.truncated ? ', the reply was truncated' : ''}`,
        );
        break;
      case 'no-banner':
        ctx.jobLog.push(`No banner within ${spec.idleTimeoutMs} ms of the connect`);
        break;
      case 'reset':
        ctx.jobLog.push(`Received ${bytes} bytes; then the peer reset the connection`);
        break;
      case 'time-limit':
        ctx.jobLog.push(`Received ${bytes} bytes; stopped reading at the check's time limit`);
        break;
    }
  }
  if (error) ctx.jobLog.push(`Request failed: ${error}`);

  const assertions: AssertionOutcome[] =
    error === undefined ? withMatchBudget(() => check.assertions.map((assertion) => evaluate(assertion, assertion.source === 'RESPONSE_TIME' ? timings.total : text))) : [];
  return tcpOutcome(
    startedAt,
    timings.total,
    { ...(error !== undefined ? { error } : {}), ...(error !== undefined && code !== undefined ? { code } : {}) },
    assertions,
    spec,
    resolved === undefined
      ? null
      : {
          data: text,
          bytes,
          truncated: exchanged?.truncated ?? false,
          address: resolved.address,
          family: resolved.family === 6 ? 'IPv6' : 'IPv4',
          connected: exchanged?.connectedAt !== undefined,
          end: exchanged?.endReason ?? null,
          timings,
        },
    ctx,
    stoppedAt,
  );
}

/** The outcome and its `tcpCheckResult` detail. */
function tcpOutcome(
  startedAt: Date,
  total: number,
  failure: { error?: string; code?: string },
  assertions: AssertionOutcome[],
  spec: TcpRequest,
  response: Record<string, unknown> | null,
  ctx: ExecutionContext,
  stoppedAt = new Date(),
): Outcome {
  const { error, code } = failure;
  // Without assertions a TCP check passes when the connection was made (and,
  // with data, the exchange ended without an error: a reply or a clean close).
  const assertionsFailed = error === undefined && assertions.some((a) => !a.passed);
  return {
    startedAt,
    stoppedAt,
    responseTime: total,
    ...(error !== undefined ? { error } : {}),
    ...(code !== undefined ? { errorCode: code } : {}),
    assertionsFailed,
    member: 'tcpCheckResult',
    detail: {
      assertions,
      request: {
        hostname: spec.hostname,
        port: spec.port,
        ipFamily: spec.ipFamily,
        data: spec.data ?? null,
        readLimitBytes: spec.readLimitBytes,
        idleTimeoutMs: spec.idleTimeoutMs,
      },
      response,
      requestError: error ?? null,
      jobLog: ctx.jobLog,
      jobAssets: [],
    },
  };
}

export const tcpExecutor: Executor<TcpRequest> = {
  checkType: 'TCP',
  member: 'tcpCheckResult',
  limits: LIMITS,
  assertionSources: ['RESPONSE_DATA', 'RESPONSE_TIME'],
  parseRequest: parseTcp,
  target: (request) => tcpTarget(request.hostname, request.port),
  run: runTcp,
};
