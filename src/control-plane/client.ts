// The control-plane client: protocol v1 over undici, one request at a time per
// call, with classification of every failure. Retry policy lives in
// `withRetry`, shared by the source, the lease keeper and the sink.

import { Agent, type Dispatcher, EnvHttpProxyAgent, errors as undiciErrors, request } from 'undici';
import { FileChunkStream } from '../artifacts/file-stream.js';
import type { ProxyConfig } from '../net/proxy.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import { Backoff, parseRetryAfter, SlidingWindowLimiter, sleep } from '../core/backoff.js';
import { withoutTrailingSlashes } from '../core/text-scan.js';
import { transferAllowanceMs } from '../core/transfer-allowance.js';
import { type LenientClaimAnswer, parseClaimAnswerLeniently } from './claim-answer.js';
import {
  AGENT_ROUTE_LIMIT_PER_MINUTE,
  type ArtifactRequest,
  type ArtifactResponse,
  type ClaimRequest,
  type ClaimResponse,
  type ErrorBody,
  type EventsRequest,
  type LeasesRequest,
  type LeasesResponse,
  PROTOCOL_ROUTES,
  type ResultsRequest,
  type ResultsResponse,
  type RouteName,
} from '../core/protocol.js';

/** A claim answer; `unreadable` and `lost` only when it was not valid JSON and was read job by job. */
export type ClaimAnswer = ClaimResponse & Partial<Pick<LenientClaimAnswer, 'unreadable' | 'lost'>>;

/** A request body that is already JSON text. */
class RawJson {
  constructor(readonly text: string) {}
}

export type FailureKind = 'auth' | 'retryable' | 'fatal';

export class ControlPlaneError extends Error {
  constructor(
    readonly route: RouteName,
    readonly kind: FailureKind,
    message: string,
    readonly statusCode?: number,
    readonly retryAfterMs?: number,
    /** The answer's body as received (up to 1,000 characters), for logs. */
    readonly body?: string,
  ) {
    super(message);
    this.name = 'ControlPlaneError';
  }
}

/** 90 % of the agent routes' limit, so skew between our window and the service's never trips it. */
export const CLIENT_REQUEST_LIMIT = Math.floor(AGENT_ROUTE_LIMIT_PER_MINUTE * 0.9);
/** Claims may use at most this share of the limit; the rest is kept for leases, results and the others. */
export const CLAIM_SHARE_OF_LIMIT = 0.5;

export interface ClientOptions {
  apiUrl: string;
  apiKey: string;
  agentId: string;
  version: string;
  timeoutMs: number;
  proxy: ProxyConfig;
}

/** Characters of a control plane's error message a log line or an error keeps: it is logged at every retry. */
const ERROR_MESSAGE_CHARS = 500;

function errorMessage(body: unknown, fallback: string): string {
  if (body && typeof body === 'object' && typeof (body as ErrorBody).message === 'string') {
    const { error, message } = body as ErrorBody;
    const text = error ? `${error}: ${message}` : message;
    return text.length > ERROR_MESSAGE_CHARS ? `${text.slice(0, ERROR_MESSAGE_CHARS)}… (${text.length} characters)` : text;
  }
  return fallback;
}

/** A difference between the clocks below this is the Date header's rounding, not skew. */
const CLOCK_SKEW_IGNORED_MS = 2_000;

/** Bytes of any answer but a claim's (leases, results, events: ids and short messages). */
export const ANSWER_MAX_BYTES = 4 * 1024 * 1024;
/** A claim answer: this much, plus CLAIM_JOB_MAX_BYTES a job asked for, at most CLAIM_ANSWER_MAX_BYTES. */
const CLAIM_ANSWER_BASE_BYTES = 1024 * 1024;
/** A job's definition at most as a claim answer holds it: a 1 MB script (MAX_SCRIPT_LENGTH), escaped. */
const CLAIM_JOB_MAX_BYTES = 2.5 * 1024 * 1024;
const CLAIM_ANSWER_MAX_BYTES = 256 * 1024 * 1024;

/** The largest answer a claim for `max` jobs may get. */
export function claimAnswerMaxBytes(max: number): number {
  return Math.min(CLAIM_ANSWER_MAX_BYTES, CLAIM_ANSWER_BASE_BYTES + Math.max(1, max) * CLAIM_JOB_MAX_BYTES);
}

/** The time a results request of these lines may take on top of its timeout to cross a slow link (src/core/transfer-allowance.ts). */
export function resultsTransferAllowanceMs(lines: readonly string[]): number {
  let bytes = 16;
  for (const line of lines) bytes += Buffer.byteLength(line) + 1;
  return transferAllowanceMs(bytes);
}

/** The body as text, or a retryable error once it passes `maxBytes` (read no further: the rest is not held). */
async function boundedText(body: Dispatcher.ResponseData['body'], maxBytes: number, route: RouteName, status: number): Promise<string> {
  const chunks: Buffer[] = [];
  let bytes = 0;
  for await (const chunk of body as AsyncIterable<Buffer>) {
    bytes += chunk.length;
    if (bytes > maxBytes) {
      body.destroy();
      throw new ControlPlaneError(route, 'retryable', `${route}: the answer is larger than ${maxBytes} bytes: refused unread (HTTP ${status})`, status);
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks, bytes).toString('utf8');
}

export class ControlPlaneClient {
  readonly limiter = new SlidingWindowLimiter(CLIENT_REQUEST_LIMIT, 60_000, Date.now, CLAIM_SHARE_OF_LIMIT);
  private readonly dispatcher: Dispatcher;
  private readonly base: string;
  /** true after any 2xx, false after a 401; undefined before the first answer. */
  authorized: boolean | undefined;

  constructor(
    private readonly options: ClientOptions,
    private readonly metrics: Metrics,
  ) {
    this.base = withoutTrailingSlashes(options.apiUrl);
    const { httpProxy, httpsProxy, noProxy } = options.proxy;
    const tuning = { connections: 16, keepAliveTimeout: 30_000, connectTimeout: 10_000 };
    this.dispatcher =
      httpProxy || httpsProxy
        ? new EnvHttpProxyAgent({ ...tuning, httpProxy, httpsProxy, noProxy })
        : new Agent(tuning);
  }

  /** Where a route's requests go: API_URL and the route's path. */
  routeUrl(route: RouteName): string {
    return `${this.base}${PROTOCOL_ROUTES[route]}`;
  }

  claim(body: ClaimRequest, signal?: AbortSignal): Promise<ClaimAnswer> {
    // A long poll is held open up to waitSeconds; allow that on top of the usual timeout.
    // An answer that is not JSON is read job by job: one bad job must not cost the others.
    const lenient = (text: string) => (parseClaimAnswerLeniently(text) as ClaimAnswer | null) ?? undefined;
    return this.post<ClaimAnswer>('claim', body, this.options.timeoutMs + body.waitSeconds * 1000, signal, lenient, claimAnswerMaxBytes(body.max)).then((answer) => {
      if (!answer || !Array.isArray(answer.jobs)) {
        // A 2xx whose body is not an answer: the status says it arrived (source.ts names the next try anew).
        throw new ControlPlaneError('claim', 'retryable', 'malformed claim answer: jobs is not an array', 200);
      }
      return answer;
    });
  }

  extendLeases(body: LeasesRequest, signal?: AbortSignal): Promise<LeasesResponse> {
    return this.post<LeasesResponse>('leases', body, this.options.timeoutMs, signal).then((answer) => {
      if (!answer || !Array.isArray(answer.extended) || !Array.isArray(answer.lost)) {
        throw new ControlPlaneError('leases', 'retryable', 'malformed leases answer: extended or lost is not an array');
      }
      return answer;
    });
  }

  sendResults(body: ResultsRequest, signal?: AbortSignal): Promise<ResultsResponse> {
    return this.sendResultLines(body.results.map((r) => JSON.stringify(r)), signal);
  }

  /**
   * `results` with each envelope already serialized (as the spool holds them): no parse and re-stringify per send.
   * The request is given its time to cross a slow link on top of the timeout (resultsTransferAllowanceMs,
   * unless the caller measured it already).
   */
  sendResultLines(lines: string[], signal?: AbortSignal, allowanceMs = resultsTransferAllowanceMs(lines)): Promise<ResultsResponse> {
    const body = new RawJson(`{"results":[${lines.join(',')}]}`);
    const timeoutMs = this.options.timeoutMs + allowanceMs;
    return this.post<ResultsResponse>('results', body, timeoutMs, signal).then((answer) => {
      if (!answer || !Array.isArray(answer.accepted) || !Array.isArray(answer.rejected)) {
        throw new ControlPlaneError('results', 'retryable', 'malformed results answer: accepted or rejected is not an array');
      }
      return answer;
    });
  }

  /** One attempt, no retry: error events are best-effort (src/control-plane/events.ts). */
  async sendEvents(body: EventsRequest, signal?: AbortSignal): Promise<void> {
    await this.post<unknown>('events', body, Math.min(this.options.timeoutMs, 10_000), signal);
  }

  /** `artifacts`: announces an artifact; the answer says where to PUT it and where it will be. */
  createArtifact(body: ArtifactRequest, signal?: AbortSignal): Promise<ArtifactResponse> {
    return this.post<ArtifactResponse>('artifacts', body, this.options.timeoutMs, signal).then((answer) => {
      if (!answer || typeof answer.uploadUrl !== 'string' || typeof answer.url !== 'string') {
        throw new ControlPlaneError('artifacts', 'retryable', 'malformed artifacts answer: uploadUrl or url is not a string');
      }
      return answer;
    });
  }

  /**
   * PUTs a file to an artifact's `uploadUrl`, streamed from disk with an
   * explicit Content-Length (never held in memory). The API key goes along
   * only when the upload URL is the control plane's own origin: a pre-signed
   * storage URL must not see it. One attempt; failures are classified like
   * the other calls (5xx and network errors are retryable).
   */
  async uploadArtifact(uploadUrl: string, file: { path: string; size: number; contentType: string }, signal: AbortSignal): Promise<void> {
    await this.limiter.acquire(signal);
    if (signal.aborted) throw new ControlPlaneError('artifacts', 'retryable', 'upload: aborted');
    const sameOrigin = new URL(uploadUrl).origin === new URL(this.base).origin;
    // Read into a small ring of reused buffers: the RSS stays flat however big the file (src/artifacts/file-stream.ts).
    const body = new FileChunkStream(file.path, file.size);
    let statusLabel = 'network_error';
    try {
      const response = await request(uploadUrl, {
        method: 'PUT',
        dispatcher: this.dispatcher,
        signal,
        // The whole upload is bounded by `signal`; these only catch a peer that stops answering.
        headersTimeout: this.options.timeoutMs,
        bodyTimeout: this.options.timeoutMs,
        headers: {
          ...(sameOrigin ? { authorization: `Bearer ${this.options.apiKey}` } : {}),
          'user-agent': `outpost/${this.options.version}`,
          'x-agent-id': this.options.agentId,
          'content-type': file.contentType,
          'content-length': String(file.size),
        },
        body,
      });
      statusLabel = String(response.statusCode);
      const status = response.statusCode;
      const text = (await boundedText(response.body, ANSWER_MAX_BYTES, 'artifacts', status)).slice(0, 1000);
      if (status >= 200 && status < 300) return;
      let parsed: unknown;
      try {
        parsed = JSON.parse(text);
      } catch {
        parsed = undefined;
      }
      const message = `upload: HTTP ${status} (${errorMessage(parsed, text.slice(0, 200) || `HTTP ${status}`)})`;
      const kind: FailureKind = status === 429 || status === 408 || status >= 500 ? 'retryable' : (status === 401 || status === 403) && sameOrigin ? 'auth' : 'fatal';
      throw new ControlPlaneError('artifacts', kind, message, status, parseRetryAfter(response.headers['retry-after']), text);
    } catch (error) {
      if (error instanceof ControlPlaneError) throw error;
      const reason = error instanceof Error ? `${(error as NodeJS.ErrnoException).code ?? error.name}: ${error.message}` : String(error);
      throw new ControlPlaneError('artifacts', 'retryable', `upload: ${reason}`);
    } finally {
      body.destroy();
      this.metrics.controlPlaneRequests.inc({ route: 'artifact_upload', status: statusLabel });
    }
  }

  async close(): Promise<void> {
    await this.dispatcher.destroy().catch(() => undefined);
  }

  /**
   * How far the control plane's clock is ahead of this host's (negative: behind), from the Date header of
   * its last answer; 0 within CLOCK_SKEW_IGNORED_MS (the header has whole seconds). Lease expiries are the
   * control plane's times: the lease keeper reads them on this host's clock through it.
   */
  clockSkewMs = 0;

  private noteServerDate(header: string | string[] | undefined): void {
    const at = typeof header === 'string' ? Date.parse(header) : Number.NaN;
    if (Number.isNaN(at)) return;
    const skew = at - Date.now();
    this.clockSkewMs = Math.abs(skew) > CLOCK_SKEW_IGNORED_MS ? skew : 0;
  }

  /** `lenient` reads a 2xx answer that is not valid JSON, if it can (undefined: malformed as a whole). */
  private async post<T>(
    route: RouteName,
    body: unknown,
    timeoutMs: number,
    signal?: AbortSignal,
    lenient?: (text: string) => T | undefined,
    maxBytes = ANSWER_MAX_BYTES,
  ): Promise<T> {
    await this.limiter.acquire(signal, route === 'claim');
    if (signal?.aborted) throw new ControlPlaneError(route, 'retryable', 'aborted');
    const url = this.routeUrl(route);
    const timeout = AbortSignal.timeout(timeoutMs);
    const combined = signal ? AbortSignal.any([signal, timeout]) : timeout;
    let statusLabel = 'network_error';
    try {
      const response = await request(url, {
        method: 'POST',
        dispatcher: this.dispatcher,
        signal: combined,
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs,
        headers: {
          authorization: `Bearer ${this.options.apiKey}`,
          'user-agent': `outpost/${this.options.version}`,
          'x-agent-id': this.options.agentId,
          'content-type': 'application/json',
          accept: 'application/json',
        },
        body: body instanceof RawJson ? body.text : JSON.stringify(body),
      });
      statusLabel = String(response.statusCode);
      this.noteServerDate(response.headers.date);
      const text = await boundedText(response.body, maxBytes, route, response.statusCode);
      let parsed: unknown;
      let malformed = false;
      try {
        parsed = text.length > 0 ? JSON.parse(text) : undefined;
      } catch {
        malformed = true;
      }
      const status = response.statusCode;
      if (status >= 200 && status < 300) {
        const rescued = malformed ? lenient?.(text) : undefined;
        if (rescued !== undefined) {
          this.authorized = true;
          return rescued;
        }
        if (malformed) throw new ControlPlaneError(route, 'retryable', `malformed JSON in the ${route} answer (HTTP ${status})`, status);
        this.authorized = true;
        return parsed as T;
      }
      const message = errorMessage(parsed, malformed ? text.slice(0, 200) : `HTTP ${status}`);
      if (status === 401 || status === 403) {
        this.authorized = false;
        throw new ControlPlaneError(route, 'auth', `${route}: HTTP ${status} (${message})`, status);
      }
      if (status === 429 || status >= 500 || status === 408) {
        const retryAfterMs = parseRetryAfter(response.headers['retry-after']);
        throw new ControlPlaneError(route, 'retryable', `${route}: HTTP ${status} (${message})`, status, retryAfterMs);
      }
      throw new ControlPlaneError(route, 'fatal', `${route}: HTTP ${status} (${message})`, status);
    } catch (error) {
      if (error instanceof ControlPlaneError) throw error;
      const reason =
        timeout.aborted && !signal?.aborted
          ? `timed out after ${timeoutMs} ms`
          : error instanceof undiciErrors.UndiciError || error instanceof Error
            ? `${(error as NodeJS.ErrnoException).code ?? error.name}: ${error.message}`
            : String(error);
      throw new ControlPlaneError(route, 'retryable', `${route}: ${reason}`);
    } finally {
      this.metrics.controlPlaneRequests.inc({ route, status: statusLabel });
    }
  }
}

export interface RetryOptions {
  signal: AbortSignal;
  logger: Logger;
  authRetryMs: number;
  backoff?: Backoff;
  /** Called after every failed attempt; e.g. to flip readiness. */
  onFailure?: (error: ControlPlaneError) => void;
  /** Called before each wait between attempts, with its length (a heartbeat promises the next attempt). */
  onWait?: (ms: number) => void;
}

/**
 * Calls `attempt` until it succeeds or `signal` aborts (then rejects with the
 * last error). 429/5xx/network: exponential backoff with jitter, or
 * Retry-After when given. 401/403: one clear log line per episode, then a slow
 * retry, since the key may be rotated in. Other 4xx: thrown to the caller.
 */
export async function withRetry<T>(attempt: () => Promise<T>, options: RetryOptions): Promise<T> {
  const backoff = options.backoff ?? new Backoff();
  let authLogged = false;
  for (;;) {
    try {
      const value = await attempt();
      if (authLogged) options.logger.info('control plane accepts the API key again');
      backoff.reset();
      return value;
    } catch (error) {
      if (!(error instanceof ControlPlaneError)) throw error;
      options.onFailure?.(error);
      if (options.signal.aborted || error.kind === 'fatal') throw error;
      let wait: number;
      if (error.kind === 'auth') {
        if (!authLogged) {
          options.logger.error(
            { route: error.route, status: error.statusCode, retryInSeconds: options.authRetryMs / 1000 },
            'control plane rejected the API key (bad token): check API_KEY; the agent stays up, not ready, and retries slowly',
          );
          authLogged = true;
        }
        wait = options.authRetryMs;
      } else {
        // Retry-After is a floor: "0" on every answer must not turn into a tight loop.
        wait = Math.max(error.retryAfterMs ?? 0, backoff.next());
        options.logger.warn({ route: error.route, status: error.statusCode, retryInMs: wait }, error.message);
      }
      options.onWait?.(wait);
      await sleep(wait, options.signal);
      if (options.signal.aborted) throw error;
    }
  }
}
