// A small HTTP target for agent tests that need controllable behaviour
// (delays, statuses). Real-peer tests use nginx (test/support/nginx.ts).

import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface TargetServer {
  url: string;
  hits: () => number;
  /** Most requests in progress at once since start. */
  maxConcurrent: () => number;
  close(): Promise<void>;
}

/**
 * Routes: /ok → 200, /status/<code>, /slow/<ms> → 200 after ms, /redirect/<n> → chain of n redirects to /ok,
 * /echo → JSON {method, headers, body}, /redirect-to?status=<code>&url=<url> → that redirect,
 * /zeros/<bytes> → that many NUL bytes (each becomes six characters, `\u0000`, in a JSON result).
 */
export async function startTargetServer(): Promise<TargetServer> {
  let hits = 0;
  let current = 0;
  let maxConcurrent = 0;
  const zeros = new Map<number, Buffer>();
  const server = http.createServer((req, res) => {
    hits++;
    current++;
    maxConcurrent = Math.max(maxConcurrent, current);
    res.on('close', () => current--);
    const url = req.url ?? '/';
    const [, route, arg] = (url.split('?')[0] ?? '').split('/');
    const reply = (status: number, body = 'ok') => {
      res.writeHead(status, { 'content-type': 'text/plain' });
      res.end(body);
    };
    if (route === 'ok') return reply(200);
    if (route === 'status') return reply(Number(arg) || 500, 'status');
    if (route === 'zeros') {
      const size = Math.min(Number(arg) || 0, 64 * 1024 * 1024);
      const body = zeros.get(size) ?? Buffer.alloc(size);
      zeros.set(size, body);
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': size });
      return res.end(body);
    }
    if (route === 'slow') {
      const timer = setTimeout(() => reply(200, 'slow'), Number(arg) || 1000);
      res.on('close', () => clearTimeout(timer));
      return;
    }
    if (route?.startsWith('echo')) {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = JSON.stringify({ method: req.method, url: req.url, headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
        res.writeHead(200, { 'content-type': 'application/json', 'x-echo': 'yes' });
        res.end(body);
      });
      return;
    }
    if (route?.startsWith('redirect-to')) {
      const query = new URL(url, 'http://x').searchParams;
      res.writeHead(Number(query.get('status')) || 302, { location: query.get('url') ?? '/ok' });
      return res.end();
    }
    if (route === 'redirect') {
      const n = Number(arg) || 0;
      res.writeHead(302, { location: n <= 1 ? '/ok' : `/redirect/${n - 1}` });
      return res.end();
    }
    reply(404, 'not found');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    hits: () => hits,
    maxConcurrent: () => maxConcurrent,
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
