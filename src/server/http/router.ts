// The server's HTTP front (node:http): routes by method and path, the two
// kinds of credentials (the public API's key, a private location's agent
// key), rate limits per key, bounded JSON bodies, and the service's error
// body for every failure. Handlers return a JSON answer or write a stream
// themselves; they never see an unauthenticated or over-limit request.

import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { capConnectionsPerAddress, refusalReporter } from '../../core/connection-cap.js';
import type { KeyRecord } from '../../store/store.js';
import { NotFoundError } from '../../store/store.js';
import type { Logger } from '../../observability/logger.js';
import { ApiError, errorBody, unauthorized } from './api-error.js';
import { bearerToken, sameKey } from './credentials.js';
import { RateLimiter } from './rate-limit.js';
import { diskFailure, storageFailure } from '../../store/write-health.js';
import { MAX_DOCUMENT_DEPTH, textNestedDeeperThan } from '../../core/json-depth.js';
import { hasNul } from '../../core/nul.js';
import { MIN_BODY_BYTES_PER_SECOND, transferAllowanceMs } from '../../core/transfer-allowance.js';

/** Retry-After of a 503 while the database cannot write: the write probe's period (src/server/database-writes.ts). */
export const STORAGE_RETRY_AFTER_SECONDS = 5;

export type Principal = { kind: 'anonymous' } | { kind: 'public' } | { kind: 'agent'; key: KeyRecord; agentId: string };

export interface RouteContext {
  params: Readonly<Record<string, string>>;
  query: URLSearchParams;
  /** The parsed JSON body; undefined for a route with bodyLimit 0. */
  body: unknown;
  principal: Principal;
  req: IncomingMessage;
  res: ServerResponse;
  /** Aborted when the caller goes away (a long poll stops waiting; nothing is handed to a closed socket). */
  signal: AbortSignal;
  /** The origin this request came in on (`http://host:port`), for URLs in answers. */
  origin: string;
  /** Bytes of the JSON body read (0 for a route with bodyLimit 0). */
  bodyBytes: number;
  /**
   * A route that reads `req` itself calls this once it will read it: a client that sent `Expect: 100-continue`
   * then gets `100 Continue` (never before the request is authorized and its checks passed).
   */
  acceptBody(): void;
}

export interface JsonAnswer {
  status: number;
  body?: unknown;
  headers?: Readonly<Record<string, string>>;
}

export interface Route {
  method: 'GET' | 'HEAD' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  /** `/v2/check-results/:checkId`: `:name` matches one non-empty path segment. */
  path: string;
  /**
   * 'public': the API key (OUTPOST_API_KEY); 'agent': a location's agent key;
   * 'none': no credentials (heartbeat pings, badges), still rate limited per
   * client address.
   */
  auth: 'public' | 'agent' | 'none';
  /**
   * Routes without credentials: the per-address budget this route spends (routes naming the same one share
   * it; 'address' when absent). Heartbeat pings have one of their own, so that a status wall or badges
   * behind the same NAT cannot use up a cron job's pings.
   */
  budget?: string;
  /** Largest JSON body in bytes; 0: the body is not read (a streaming handler reads `req` itself). */
  bodyLimit: number;
  /**
   * Called once the caller is authenticated, before its body is read: a route throws here (an ApiError) to
   * refuse what it will not read at all, such as a location's write past its budget (src/server/write-budget.ts).
   */
  beforeBody?(principal: Principal, req: IncomingMessage): void;
  /** A JSON answer, or 'streamed' when the handler wrote the response itself. */
  handle(ctx: RouteContext): Promise<JsonAnswer | 'streamed'>;
}

export interface RouterOptions {
  /** OUTPOST_API_KEY; undefined leaves the public routes open (local mode on loopback only). */
  publicKey: string | undefined;
  agentKey(token: string): Promise<KeyRecord | undefined>;
  publicLimiter: RateLimiter;
  agentLimiter: RateLimiter;
  /** Routes without credentials, per client address; the public limiter's limit when absent. */
  anonymousLimiter?: RateLimiter;
  /** Wrong or missing keys on the public and agent routes, per client address; FAILED_AUTH_PER_MINUTE when absent. */
  failedAuthLimiter?: RateLimiter;
  logger: Logger;
  now?: () => number;
  /** How long a JSON body may take to arrive (JSON_BODY_DEADLINE_MS). */
  bodyDeadlineMs?: number;
  /** How long an answer being written may make no progress (RESPONSE_IDLE_MS). */
  responseIdleMs?: number;
}

interface CompiledRoute {
  route: Route;
  segments: string[];
}

const AGENT_ID = /^[A-Za-z0-9._:-]{1,64}$/;

/**
 * Wrong or missing keys one client address may send per minute to the public
 * and agent routes (one budget for both). Agent keys are 256 random bits, but
 * OUTPOST_API_KEY is the operator's (16 characters at least, config.ts) and
 * makes agent keys, so guessing it must stay slow, as a private dashboard's
 * keys do (dashboards-api.ts, KEY_ATTEMPTS_PER_MINUTE). Generous enough that
 * agents with a revoked key behind one NAT, which retry slowly
 * (control-plane/client.ts, withRetry), do not lock out the others.
 */
export const FAILED_AUTH_PER_MINUTE = 60;

function compile(route: Route): CompiledRoute {
  return { route, segments: route.path.split('/').slice(1) };
}

function match(compiled: CompiledRoute, parts: readonly string[]): Record<string, string> | undefined {
  if (compiled.segments.length !== parts.length) return undefined;
  const params: Record<string, string> = {};
  for (let i = 0; i < parts.length; i++) {
    const want = compiled.segments[i] as string;
    const got = parts[i] as string;
    if (want.startsWith(':')) {
      if (got === '') return undefined;
      params[want.slice(1)] = got;
    } else if (want !== got) {
      return undefined;
    }
  }
  return params;
}

/**
 * A JSON body must arrive within this long, plus the time what has arrived takes at MIN_BODY_BYTES_PER_SECOND
 * (src/core/transfer-allowance.ts): a client trickling one byte at a time does not hold a connection for ever,
 * and an agent on a slow link still gets its largest batch through.
 */
export const JSON_BODY_DEADLINE_MS = 30_000;

/**
 * An answer that goes out while the client has no progress to show for this long (it reads nothing, the socket's
 * buffers stay full) is cut: an unread 15 MB answer would otherwise hold its connection and memory for ever.
 */
export const RESPONSE_IDLE_MS = 60_000;

/** The request announced a body (Content-Length above 0, or chunked) that has not been received to its end. */
function bodyUnread(req: IncomingMessage): boolean {
  if (req.complete) return false;
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

/** `100 Continue` for a client waiting for it (node:http's 'checkContinue' hands such requests to the router). */
export function acceptBody(req: IncomingMessage, res: ServerResponse): void {
  if (!res.headersSent && /^100-continue$/i.test(req.headers.expect ?? '')) res.writeContinue();
}

/**
 * Deepest nesting of a JSON body, checked on its text before it is parsed. Above what any route takes
 * (a result nested MAX_DOCUMENT_DEPTH deep inside its batch's three levels), so such a result still gets
 * its own answer in the batch (src/server/agent-api.ts envelopeProblem).
 */
export const MAX_BODY_DEPTH = 2 * MAX_DOCUMENT_DEPTH;

/**
 * Reads at most `limit` bytes of JSON within `deadlineMs` plus the transfer allowance of the bytes received;
 * more is a 413, slower a 408, and what is not JSON
 * or nested deeper than MAX_BODY_DEPTH a 400. Given `res`, a client waiting for `100 Continue` gets it once
 * the announced size is known to fit.
 */
export async function readJsonBody(
  req: IncomingMessage,
  limit: number,
  deadlineMs = JSON_BODY_DEADLINE_MS,
  res?: ServerResponse,
  /** Told the body's size once it is read whole. */
  onSize?: (bytes: number) => void,
): Promise<unknown> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > limit) throw new ApiError(413, `the body is larger than ${limit} bytes`, { limit });
  if (res) acceptBody(req, res);
  const chunks: Buffer[] = [];
  let size = 0;
  let late = false;
  const deadline = bodyDeadline(deadlineMs, () => size, () => {
    late = true;
    // Ends the iteration below by cutting the connection: a client this slow gets no answer, only its socket back.
    req.destroy();
  });
  try {
    for await (const chunk of req as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size > limit) throw new ApiError(413, `the body is larger than ${limit} bytes`, { limit });
      chunks.push(chunk);
    }
  } catch (error) {
    if (!late) throw error;
  } finally {
    deadline.cancel();
  }
  if (late) {
    throw new ApiError(408, `the body did not arrive in time: ${deadlineMs / 1000} s, plus 1 s per ${MIN_BODY_BYTES_PER_SECOND / 1024} KiB received`);
  }
  onSize?.(size);
  if (size === 0) return undefined;
  const bytes = Buffer.concat(chunks, size);
  // Before parsing: JSON.parse builds any depth, and a body of brackets held the event loop seconds doing so.
  if (textNestedDeeperThan(bytes, MAX_BODY_DEPTH)) throw new ApiError(400, `the body is nested deeper than ${MAX_BODY_DEPTH} levels`, { limit: MAX_BODY_DEPTH });
  try {
    return JSON.parse(bytes.toString('utf8'));
  } catch (error) {
    throw new ApiError(400, `the body is not valid JSON: ${(error as Error).message}`);
  }
}

/**
 * Calls `onLate` once a body has taken longer than `deadlineMs` plus the transfer allowance of the bytes
 * `received()` says have arrived (src/core/transfer-allowance.ts): checked at the deadline, and again as
 * often as the bytes that came meanwhile push it back.
 */
function bodyDeadline(deadlineMs: number, received: () => number, onLate: () => void): { cancel(): void } {
  const started = performance.now();
  let timer: NodeJS.Timeout | undefined;
  const check = () => {
    const leftMs = deadlineMs + transferAllowanceMs(received()) - (performance.now() - started);
    if (leftMs > 0) timer = setTimeout(check, leftMs);
    else onLate();
  };
  timer = setTimeout(check, deadlineMs);
  return { cancel: () => clearTimeout(timer) };
}

/**
 * Reads a body to its end and drops it, within the same bounds as readJsonBody (at most `limit` bytes, the
 * deadline plus the transfer allowance); past either it stops, and the answer then closes the connection.
 * A client waiting for `100 Continue` sends no body: its answer goes at once.
 */
function discardBody(req: IncomingMessage, limit: number, deadlineMs = JSON_BODY_DEADLINE_MS): Promise<void> {
  const declared = Number(req.headers['content-length']);
  if (req.complete || /^100-continue$/i.test(req.headers.expect ?? '') || (Number.isFinite(declared) && declared > limit)) return Promise.resolve();
  return new Promise<void>((resolve) => {
    let size = 0;
    const finish = () => {
      deadline.cancel();
      req.off('data', onData);
      req.off('end', finish);
      req.off('error', finish);
      req.off('close', finish);
      resolve();
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) finish();
    };
    const deadline = bodyDeadline(deadlineMs, () => size, finish);
    req.on('data', onData);
    req.once('end', finish);
    req.once('error', finish);
    req.once('close', finish);
  });
}

export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Readonly<Record<string, string>> = {}): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const text = body === undefined ? '' : JSON.stringify(body);
  // A body left unread is not drained (a client trickling a byte every few seconds held a connection for the
  // 15-minute request deadline): the connection closes once this answer is out (node:http ends it on `close`).
  const close = bodyUnread(res.req) ? { connection: 'close' } : {};
  res.writeHead(status, {
    ...headers,
    ...close,
    ...(text ? { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text) } : { 'content-length': 0 }),
  });
  res.end(text);
}

/**
 * The request target as a URL. An origin-form target is a path even when it starts with `//` (which
 * new URL(target, base) would read as a host: `//x/v2/…` served as `/v2/…`, and `//[` a thrown 500).
 */
function requestUrl(target: string): URL {
  try {
    return target.startsWith('/') ? new URL(`http://outpost.invalid${target}`) : new URL(target);
  } catch {
    throw new ApiError(400, `the request target is not valid: ${JSON.stringify(target.slice(0, 200))}`);
  }
}

/**
 * No id or value the server keeps holds U+0000 (src/core/nul.ts), and PostgreSQL cannot even be asked for
 * one (SQLite could, and found nothing): a path segment holding it names nothing, a 404, and a query
 * parameter holding it is a 400 naming the parameter, the same on both stores, before any route runs.
 */
function refuseNul(params: Readonly<Record<string, string>>, query: URLSearchParams): void {
  for (const [name, value] of Object.entries(params)) {
    if (hasNul(value)) throw new ApiError(404, `no ${name} ${JSON.stringify(value.slice(0, 200))} exists: an id never holds U+0000`, { parameter: name });
  }
  for (const [name, value] of query) {
    if (hasNul(name) || hasNul(value)) throw new ApiError(400, `query parameter ${JSON.stringify(name.slice(0, 200))} must not contain U+0000`, { parameter: name });
  }
}

export class Router {
  private readonly routes: CompiledRoute[];

  private readonly failedAuth: RateLimiter;

  constructor(
    routes: readonly Route[],
    private readonly options: RouterOptions,
  ) {
    this.routes = routes.map(compile);
    this.failedAuth = options.failedAuthLimiter ?? new RateLimiter(FAILED_AUTH_PER_MINUTE, 60);
  }

  /** The node:http request listener. */
  readonly listener = (req: IncomingMessage, res: ServerResponse): void => {
    this.serve(req, res).catch((error: unknown) => {
      this.options.logger.error({ err: error }, 'api request failed');
      if (!res.headersSent) sendJson(res, 500, errorBody(500, 'internal error'));
      else res.destroy();
    });
  };

  private async serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const caller = new AbortController();
    res.on('close', () => caller.abort(new Error('the caller went away')));
    // After the head the socket has no deadline of node's but the request's; while an answer is being written
    // it must make progress. A handler still working (a long poll) or reading (an upload, bounded by its own
    // rules) is left alone: only an answer whose head is out and whose end is not is cut.
    const idleMs = this.options.responseIdleMs ?? RESPONSE_IDLE_MS;
    // Kept: node detaches req.socket from a request whose answer has finished.
    const socket = req.socket;
    socket.setTimeout(idleMs);
    res.on('timeout', (socket: Socket) => {
      if (res.headersSent && !res.writableFinished) socket.destroy();
      else socket.setTimeout(idleMs);
    });
    try {
      const answer = await this.dispatch(req, res, caller.signal);
      if (answer !== 'streamed') sendJson(res, answer.status, answer.body, answer.headers);
    } catch (error) {
      if (error instanceof ApiError) {
        sendJson(res, error.statusCode, error.body, error.headers);
      } else if (error instanceof NotFoundError) {
        sendJson(res, 404, errorBody(404, error.message, { id: error.id }));
      } else if (storageFailure(error) !== undefined || diskFailure(error) !== undefined) {
        // The database's failures are logged once by its write watch (src/server/database-writes.ts), not per
        // request; a file's (an artifact upload) here. Either way the caller retries.
        const database = storageFailure(error);
        if (database !== undefined) this.options.logger.debug({ err: error }, 'api request failed: the database cannot write');
        else this.options.logger.warn({ err: error }, 'api request failed: the disk cannot take the file');
        sendJson(res, 503, errorBody(503, `the server cannot store this now: ${database ?? diskFailure(error)}; retry later`), { 'retry-after': String(STORAGE_RETRY_AFTER_SECONDS) });
      } else {
        throw error;
      }
    } finally {
      // A body nobody read is not drained (see sendJson): a streamed answer's connection ends with the answer.
      if (bodyUnread(req)) {
        if (res.writableFinished) socket.destroy();
        else res.once('finish', () => socket.destroy());
      }
    }
  }

  /** The route for `method` whose path matches, with its params. */
  private find(parts: string[], method: string | undefined): { compiled: CompiledRoute; params: Record<string, string> } | undefined {
    for (const compiled of this.routes) {
      if (compiled.route.method !== method) continue;
      const params = match(compiled, parts);
      if (params) return { compiled, params };
    }
    return undefined;
  }

  private async dispatch(req: IncomingMessage, res: ServerResponse, signal: AbortSignal): Promise<JsonAnswer | 'streamed'> {
    const url = requestUrl(req.url ?? '/');
    const parts = url.pathname.split('/').slice(1).map((part) => {
      try {
        return decodeURIComponent(part);
      } catch {
        throw new ApiError(400, `the path is not valid: ${url.pathname}`);
      }
    });
    let allowed: string[] = [];
    // HEAD is answered by the GET route where there is no HEAD route of its own (node:http sends no body for it).
    const found = this.find(parts, req.method) ?? (req.method === 'HEAD' ? this.find(parts, 'GET') : undefined);
    for (const compiled of found ? [found.compiled] : this.routes) {
      const params = found?.params ?? match(compiled, parts);
      if (!params) continue;
      if (!found) {
        allowed.push(compiled.route.method);
        continue;
      }
      const principal = await this.authenticate(compiled.route, req);
      refuseNul(params, url.searchParams);
      try {
        compiled.route.beforeBody?.(principal, req);
      } catch (error) {
        // An authorized client refused before its body (the write budget's 429) is read to the end first: closed
        // with its body unread, the connection is reset and the client never sees the answer nor its Retry-After.
        if (compiled.route.bodyLimit > 0) await discardBody(req, compiled.route.bodyLimit, this.options.bodyDeadlineMs);
        throw error;
      }
      let bodyBytes = 0;
      const body =
        compiled.route.bodyLimit > 0
          ? await readJsonBody(req, compiled.route.bodyLimit, this.options.bodyDeadlineMs, res, (bytes) => {
              bodyBytes = bytes;
            })
          : undefined;
      const host = req.headers.host ?? `${req.socket.localAddress}:${req.socket.localPort}`;
      const accept = () => acceptBody(req, res);
      return compiled.route.handle({ params, query: url.searchParams, body, principal, req, res, signal, origin: `http://${host}`, acceptBody: accept, bodyBytes });
    }
    if (allowed.includes('GET')) allowed.push('HEAD');
    allowed = [...new Set(allowed)];
    if (allowed.length > 0) throw new ApiError(405, `${req.method} is not allowed on ${url.pathname}`, { allowed }, { allow: allowed.join(', ') });
    throw new ApiError(404, `no route ${req.method} ${url.pathname}`);
  }

  private async authenticate(route: Route, req: IncomingMessage): Promise<Principal> {
    const token = bearerToken(req.headers.authorization);
    const now = this.options.now?.() ?? Date.now();
    if (route.auth === 'none') {
      this.limit(this.options.anonymousLimiter ?? this.options.publicLimiter, `${route.budget ?? 'address'}:${req.socket.remoteAddress ?? 'unknown'}`, now);
      return { kind: 'anonymous' };
    }
    const address = `address:${req.socket.remoteAddress ?? 'unknown'}`;
    if (route.auth === 'public') {
      const key = this.options.publicKey;
      if (key !== undefined) {
        this.keysAllowed(address, now);
        if (token === undefined || !sameKey(token, key)) this.wrongKey(address, now);
      }
      this.limit(this.options.publicLimiter, 'public', now);
      return { kind: 'public' };
    }
    this.keysAllowed(address, now);
    const key = token === undefined ? undefined : await this.options.agentKey(token);
    if (!key) this.wrongKey(address, now);
    this.limit(this.options.agentLimiter, key.id, now);
    const agentId = req.headers['x-agent-id'];
    if (typeof agentId !== 'string' || !AGENT_ID.test(agentId)) {
      throw new ApiError(400, 'the x-agent-id header is required: 1 to 64 letters, digits or ._:-', { header: 'x-agent-id' });
    }
    return { kind: 'agent', key, agentId };
  }

  /**
   * Before any key is compared: while an address is limited none is, so a
   * right key gets the same 429 as a wrong one and the limit is no oracle.
   */
  private keysAllowed(address: string, now: number): void {
    const decision = this.failedAuth.peek(address, now);
    if (!decision.allowed) throw new ApiError(429, 'Too Many Requests', {}, { 'retry-after': String(decision.retryAfterSeconds) });
  }

  /** A wrong or missing key: counted against the address, then 401 (429 once over FAILED_AUTH_PER_MINUTE). */
  private wrongKey(address: string, now: number): never {
    this.limit(this.failedAuth, address, now);
    throw unauthorized();
  }

  private limit(limiter: RateLimiter, key: string, now: number): void {
    const decision = limiter.take(key, now);
    if (!decision.allowed) {
      throw new ApiError(429, 'Too Many Requests', {}, { 'retry-after': String(decision.retryAfterSeconds) });
    }
  }
}

export interface ApiServerOptions {
  host: string;
  port: number;
  /** Connections held at once; node:http closes any beyond this as it accepts them. */
  maxConnections?: number;
  /** Connections one client address holds at once (API_MAX_CONNECTIONS_PER_ADDRESS unless given). */
  maxConnectionsPerAddress?: number;
  /** API_HEADERS_TIMEOUT_MS unless given (tests). */
  headersTimeoutMs?: number;
  /** Told of refused connections (at most one line per address per REFUSAL_REPORT_EVERY_MS). */
  logger?: Logger;
}

/** Connections the API holds at once, from every client together. */
export const API_MAX_CONNECTIONS = 2_048;

/**
 * Of the API's 2,048 connections, what one client address may hold unless API_MAX_CONNECTIONS_PER_ADDRESS says
 * otherwise: a client reconnecting faster than the head deadline closes its connections fills no more than this,
 * and the rest stay for everyone else. An agent holds up to 16 (src/control-plane/client.ts), so 16 agents behind
 * one NAT address fit whatever they do.
 */
export const API_MAX_CONNECTIONS_PER_ADDRESS = 256;

/** A request head must arrive within this of the connection (or of its first byte); then the connection is closed. */
export const API_HEADERS_TIMEOUT_MS = 10_000;

/** Starts listening; resolves once bound (a port in use rejects with EADDRINUSE). */
export async function startApiServer(router: Router, options: ApiServerOptions): Promise<Server> {
  const server = createServer(
    {
      // Headers must arrive promptly; JSON bodies within JSON_BODY_DEADLINE_MS; a body no route reads is not
      // waited for at all (sendJson); a whole request (an artifact's 150 MB upload, which must also keep
      // moving: src/server/agent-api.ts) within 15 minutes. Long polls end themselves: their request is small.
      headersTimeout: options.headersTimeoutMs ?? API_HEADERS_TIMEOUT_MS,
      requestTimeout: 15 * 60_000,
      keepAliveTimeout: 5_000,
      // Node checks those deadlines this often (30 s by default: a slow head could hold a connection 40 s).
      connectionsCheckingInterval: 1_000,
    },
    router.listener,
  );
  // `Expect: 100-continue` is the router's to answer (acceptBody), once the request may send its body: node
  // would otherwise send `100 Continue` to anyone, and then wait for a body the router never reads.
  server.on('checkContinue', router.listener);
  server.maxConnections = options.maxConnections ?? API_MAX_CONNECTIONS;
  const perAddress = options.maxConnectionsPerAddress ?? API_MAX_CONNECTIONS_PER_ADDRESS;
  const { logger } = options;
  const onRefused = logger
    ? refusalReporter((address, refused) =>
        logger.warn(
          { address, refused, limit: perAddress },
          'API: connections refused, this address already holds API_MAX_CONNECTIONS_PER_ADDRESS (many agents behind one NAT address need it raised)',
        ),
      )
    : undefined;
  capConnectionsPerAddress(server, perAddress, onRefused);
  // headersTimeout counts from a request's first byte: a connection that never sends one would be held for
  // ever, and enough of them would fill maxConnections. Until its first byte, a connection has the same time.
  server.on('connection', (socket) => {
    socket.setTimeout(options.headersTimeoutMs ?? API_HEADERS_TIMEOUT_MS);
    // Before node:http's own 'data' listener parses the head: the router then sets the answer's deadline.
    socket.prependOnceListener('data', () => socket.setTimeout(0));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return server;
}

/** Stops taking connections, lets requests in flight finish for up to `graceMs`, then cuts the rest. */
export async function closeApiServer(server: Server, graceMs: number): Promise<void> {
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  server.closeIdleConnections();
  const timer = setTimeout(() => server.closeAllConnections(), graceMs);
  await closed;
  clearTimeout(timer);
}
