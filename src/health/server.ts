// Kubernetes probes and /metrics on node:http. Handlers only read
// in-memory state, so they answer promptly however many jobs are running.

import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';
import type { WatchdogReport } from './watchdog.js';
import { capConnectionsPerAddress } from '../core/connection-cap.js';

export interface HealthStatus {
  version: string;
  mode: string;
  ready: boolean;
  shuttingDown: boolean;
  inFlight: number;
  queued: number;
  spooled: number;
  quarantined: number;
  spoolDropped: number;
  spoolWritable: boolean;
  uptime: number;
  /** Parts that stopped making progress (the watchdog); empty when all are well. */
  stuck: string[];
  components: WatchdogReport['components'];
  /** BLOCKED_NETWORKS and ALLOWED_NETWORKS as rules (docs/network-policy.md); null when no policy is set. */
  networkPolicy?: { blocked: string[]; allowed: string[] } | null;
  /** What a mode adds (the server: its database, without credentials, and whether this replica leads). */
  [extra: string]: unknown;
}

/** What a reload of the checks file came to: the checks now in force, or why the file was refused. */
export type ReloadOutcome = { ok: true; checks: number; unchanged?: boolean } | { ok: false; status: 400 | 500 | 503; problems: string[] };

export interface HealthSource {
  isReady(): boolean;
  status(): HealthStatus;
  registry: Registry;
  /** More Prometheus text after the registry's (the per-check series). */
  extraMetrics?: () => string;
  /** Re-reads the checks file (local and server modes); undefined where there is nothing to reload, and POST /-/reload is then 404. */
  reload?(): Promise<ReloadOutcome> | undefined;
  /** A connection refused for its address holding HEALTH_MAX_CONNECTIONS_PER_ADDRESS already. */
  onRefusedConnection?(address: string): void;
}

function sendJson(res: http.ServerResponse, statusCode: number, body: unknown, extra: http.OutgoingHttpHeaders = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(statusCode, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(text),
    'cache-control': 'no-store',
    ...extra,
  });
  res.end(text);
}

function errorBody(statusCode: number, message: string) {
  return { statusCode, error: http.STATUS_CODES[statusCode] ?? 'Error', message, attributes: {} };
}

const ROUTES = new Set(['/-/readiness', '/-/liveness', '/health', '/metrics']);

/**
 * Connections held at once; node:http destroys any beyond this at accept, so a
 * flood of idle sockets costs at most this many descriptors. Probes and a
 * Prometheus scraper need a handful.
 */
export const HEALTH_MAX_CONNECTIONS = 256;
/**
 * What one client address may hold of those: a flood from one address (reconnecting faster than the head
 * deadline closes its sockets) leaves the other 224 to the kubelet, which probes from the node's address, and
 * to Prometheus. A flood from the kubelet's own address, or from eight addresses, still fills the port: that
 * port belongs behind a network policy (docs/configuration.md).
 */
export const HEALTH_MAX_CONNECTIONS_PER_ADDRESS = 32;
/** A connection that sends no complete request head within this is closed. */
export const HEALTH_HEADERS_TIMEOUT_MS = 5_000;
/** A socket with no traffic at all for this long is closed (one that never sends a byte included). */
export const HEALTH_IDLE_TIMEOUT_MS = 10_000;

const SERVER_OPTIONS: http.ServerOptions = {
  headersTimeout: HEALTH_HEADERS_TIMEOUT_MS,
  requestTimeout: 10_000,
  keepAliveTimeout: 5_000,
  // How often the two timeouts above are enforced (node's default is every 30 s).
  connectionsCheckingInterval: 1_000,
};

export async function startHealthServer(
  port: number,
  source: HealthSource,
  host?: string,
): Promise<{ server: http.Server; port: number; close(): Promise<void> }> {
  const server = http.createServer(SERVER_OPTIONS, (req, res) => {
    const pathname = (req.url ?? '/').split('?')[0] ?? '/';
    // Error bodies never repeat the request: a check aimed at this port could
    // put a secret in the path and read it back, in pieces its scrubber cannot
    // recognise. A known route and a method from Node's fixed list are safe to name.
    if (pathname === '/-/reload') {
      if (req.method !== 'POST') {
        return source.reload ? sendJson(res, 405, errorBody(405, 'Only POST reloads the checks file'), { allow: 'POST' }) : sendJson(res, 404, errorBody(404, 'No such route'));
      }
      const reloading = source.reload?.();
      if (!reloading) return sendJson(res, 404, errorBody(404, 'No such route'));
      // The body, if any, is not read: the request is the whole message.
      req.resume();
      reloading.then(
        (outcome) =>
          outcome.ok
            ? sendJson(res, 200, { reloaded: true, checks: outcome.checks })
            : sendJson(res, outcome.status, { ...errorBody(outcome.status, 'The checks file was not reloaded; the running checks stay as they were'), reloaded: false, problems: outcome.problems }),
        (error: Error) => sendJson(res, 500, errorBody(500, error.message)),
      );
      return;
    }
    if (!ROUTES.has(pathname)) return sendJson(res, 404, errorBody(404, 'No such route'));
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      const method = req.method !== undefined && http.METHODS.includes(req.method) ? req.method : 'this method';
      return sendJson(res, 405, errorBody(405, `${method} not allowed on ${pathname}`), { allow: 'GET, HEAD' });
    }
    switch (pathname) {
      case '/-/liveness':
        return sendJson(res, 200, { status: 'ok' });
      case '/-/readiness': {
        const ready = source.isReady();
        const status = source.status();
        const reason = status.shuttingDown ? 'shutting down' : ready ? 'ready' : status.stuck.length > 0 ? 'stuck' : 'not ready';
        return sendJson(res, ready ? 200 : 503, { status: reason, ...(status.stuck.length > 0 ? { stuck: status.stuck } : {}) });
      }
      case '/health':
        return sendJson(res, 200, source.status());
      case '/metrics':
        source.registry
          .metrics()
          .then((text) => {
            // Rendered before anything is written: a failure (a body past V8's string limit) is still a 500.
            const body = source.extraMetrics ? text + source.extraMetrics() : text;
            res.writeHead(200, { 'content-type': source.registry.contentType, 'cache-control': 'no-store' });
            res.end(body);
          })
          .catch((error: Error) => sendJson(res, 500, errorBody(500, error.message)));
        return;
    }
  });
  server.maxConnections = HEALTH_MAX_CONNECTIONS;
  capConnectionsPerAddress(server, HEALTH_MAX_CONNECTIONS_PER_ADDRESS, source.onRefusedConnection);
  // With no 'timeout' listener, node:http destroys a socket idle this long.
  server.setTimeout(HEALTH_IDLE_TIMEOUT_MS);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return {
    server,
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
