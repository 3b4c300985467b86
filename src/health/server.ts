// Kubernetes probes and /metrics on node:http (DESIGN §2). Handlers only read
// in-memory state, so they answer promptly however many jobs are running.

import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';

export interface HealthStatus {
  version: string;
  mode: string;
  ready: boolean;
  shuttingDown: boolean;
  inFlight: number;
  queued: number;
  spooled: number;
  uptime: number;
}

export interface HealthSource {
  isReady(): boolean;
  status(): HealthStatus;
  registry: Registry;
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

export async function startHealthServer(
  port: number,
  source: HealthSource,
  host?: string,
): Promise<{ server: http.Server; port: number; close(): Promise<void> }> {
  const server = http.createServer((req, res) => {
    const pathname = (req.url ?? '/').split('?')[0] ?? '/';
    // Error bodies never repeat the request: a check aimed at this port could
    // put a secret in the path and read it back, in pieces its scrubber cannot
    // recognise. A known route and a method from Node's fixed list are safe to name.
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
        const reason = status.shuttingDown ? 'shutting down' : ready ? 'ready' : 'not ready';
        return sendJson(res, ready ? 200 : 503, { status: reason });
      }
      case '/health':
        return sendJson(res, 200, source.status());
      case '/metrics':
        source.registry.metrics().then(
          (text) => {
            res.writeHead(200, { 'content-type': source.registry.contentType, 'cache-control': 'no-store' });
            res.end(text);
          },
          (error: Error) => sendJson(res, 500, errorBody(500, error.message)),
        );
        return;
    }
  });
  server.keepAliveTimeout = 5_000;
  server.requestTimeout = 10_000;
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
