// How the server's HTTP front (src/server/http/router.ts) lets go of a
// connection, over real sockets: a body no route reads is not waited for (the
// connection closes after the answer, however slowly the client trickles),
// `100 Continue` goes only to a request that may send its body, and an
// answer the client does not read is cut once it makes no progress.

import type { Server } from 'node:http';
import { connect, type Socket } from 'node:net';
import type { AddressInfo, Socket as ServerSocket } from 'node:net';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { RateLimiter } from '../../src/server/http/rate-limit.js';
import { retryUntil } from '../support/daemon.js';
import { idleConnections, rawRequest } from '../support/raw-request.js';
import { closeApiServer, type Route, Router, type RouterOptions, startApiServer } from '../../src/server/http/router.js';
import { REFUSAL_REPORT_EVERY_MS, refusalReporter } from '../../src/core/connection-cap.js';

const PUBLIC_KEY = 'public-key-0123456789';
const BIG = 'x'.repeat(16 * 1024 * 1024);

const routes: Route[] = [
  { method: 'GET', path: '/ping/:token', auth: 'none', bodyLimit: 0, handle: async () => ({ status: 200, body: { ok: true } }) },
  { method: 'GET', path: '/v1/thing', auth: 'public', bodyLimit: 0, handle: async () => ({ status: 200, body: { ok: true } }) },
  { method: 'POST', path: '/v1/echo', auth: 'public', bodyLimit: 64, handle: async (ctx) => ({ status: 200, body: { got: ctx.body } }) },
  { method: 'GET', path: '/v1/big', auth: 'public', bodyLimit: 0, handle: async () => ({ status: 200, body: { big: BIG } }) },
];

const servers: Server[] = [];
const sockets: Socket[] = [];
afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.destroy();
  for (const server of servers.splice(0)) await closeApiServer(server, 100);
});

/** The test's routes behind the public key, with limits no test reaches. */
function testRouter(options: Partial<RouterOptions> = {}): Router {
  return new Router(routes, {
    publicKey: PUBLIC_KEY,
    agentKey: async () => undefined,
    publicLimiter: new RateLimiter(1000, 60),
    agentLimiter: new RateLimiter(1000, 60),
    logger: pino({ level: 'silent' }),
    ...options,
  });
}

async function serve(options: Partial<RouterOptions> = {}): Promise<{ server: Server; port: number }> {
  const router = testRouter(options);
  const server = await startApiServer(router, { host: '127.0.0.1', port: 0 });
  servers.push(server);
  return { server, port: (server.address() as AddressInfo).port };
}

/** Sends `head`, then a body byte every 200 ms; resolves with what came back and how long after the answer's first byte the server ended the connection. */
function trickle(port: number, head: string): Promise<{ text: string; heldAfterAnswerMs: number }> {
  const socket = connect(port, '127.0.0.1');
  sockets.push(socket);
  socket.on('error', () => undefined);
  let text = '';
  let answeredAt = 0;
  socket.on('data', (chunk) => {
    if (!answeredAt && /\r\n\r\n/.test(text + chunk.toString('latin1'))) answeredAt = Date.now();
    text += chunk.toString('latin1');
  });
  socket.write(head);
  const timer = setInterval(() => socket.write('a'), 200);
  return new Promise((resolve) => {
    // The server's FIN ('end') or its reset ('close'): either way it let go.
    const done = () => {
      clearInterval(timer);
      resolve({ text, heldAfterAnswerMs: Date.now() - (answeredAt || Date.now()) });
    };
    socket.once('end', done);
    socket.once('close', done);
  });
}

const huge = 'Content-Length: 100000000\r\n';

describe('router connections', () => {
  it('closes the connection after answering a request whose announced body no route reads, while the client still trickles', async () => {
    const { port } = await serve();
    const cases = [
      { head: `POST /v1/nothing HTTP/1.1\r\nHost: x\r\n${huge}\r\n`, status: 404 },
      { head: `POST /v1/echo HTTP/1.1\r\nHost: x\r\n${huge}\r\n`, status: 401 },
      { head: `GET /ping/abc HTTP/1.1\r\nHost: x\r\n${huge}\r\n`, status: 200 },
      { head: `GET /v1/thing HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${PUBLIC_KEY}\r\nTransfer-Encoding: chunked\r\n\r\n1\r\n`, status: 200 },
    ];
    const results = await Promise.all(cases.map((c) => trickle(port, c.head)));
    results.forEach((result, i) => {
      expect(result.text).toMatch(new RegExp(`^HTTP/1\\.1 ${cases[i]?.status} `));
      expect(result.text.toLowerCase()).toContain('connection: close');
      // Was held until the 15-minute request deadline; a generous bound for a busy machine.
      expect(result.heldAfterAnswerMs).toBeLessThan(5_000);
    });
  });

  it('keeps a connection without an unread body open for the next request', async () => {
    const { port } = await serve();
    const socket = connect(port, '127.0.0.1');
    sockets.push(socket);
    let text = '';
    socket.on('data', (chunk) => {
      text += chunk.toString('latin1');
    });
    const request = `GET /v1/thing HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${PUBLIC_KEY}\r\n\r\n`;
    socket.write(`${request}POST /v1/echo HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${PUBLIC_KEY}\r\nContent-Length: 7\r\n\r\n{"a":1}${request}`);
    const deadline = Date.now() + 5_000;
    while ((text.match(/HTTP\/1\.1 200 /g) ?? []).length < 3 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    expect((text.match(/HTTP\/1\.1 200 /g) ?? []).length).toBe(3);
    expect(text.toLowerCase()).not.toContain('connection: close');
  });

  it('answers Expect: 100-continue only once the request is authorized for a route that reads its body', async () => {
    const { port } = await serve();
    const refused = await trickle(port, `POST /v1/echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n${huge}\r\n`);
    expect(refused.text).toMatch(/^HTTP\/1\.1 401 /);
    expect(refused.text).not.toContain('100 Continue');
    expect(refused.heldAfterAnswerMs).toBeLessThan(5_000);

    const socket = connect(port, '127.0.0.1');
    sockets.push(socket);
    let text = '';
    socket.on('data', (chunk) => {
      text += chunk.toString('latin1');
      if (text.startsWith('HTTP/1.1 100 Continue\r\n\r\n') && !socket.writableEnded) socket.end('{"a":1}');
    });
    socket.write(`POST /v1/echo HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${PUBLIC_KEY}\r\nExpect: 100-continue\r\nContent-Length: 7\r\n\r\n`);
    await new Promise((resolve) => socket.once('close', resolve));
    expect(text).toMatch(/^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 200 /);
    expect(text).toContain('{"got":{"a":1}}');
  });

  it('cuts a connection whose answer the client does not read once the answer stops moving', async () => {
    const { server, port } = await serve({ responseIdleMs: 500 });
    const serverSide = new Promise<ServerSocket>((resolve) => server.once('connection', resolve));
    const socket = connect(port, '127.0.0.1');
    sockets.push(socket);
    socket.on('error', () => undefined);
    socket.write(`GET /v1/big HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${PUBLIC_KEY}\r\n\r\n`);
    // Never read: the kernel's buffers fill and the server's write stops moving.
    socket.pause();
    const held = await serverSide;
    const started = Date.now();
    await new Promise((resolve) => held.once('close', resolve));
    // Was held for good (an unread 15 MB answer still queued 15 minutes later).
    expect(Date.now() - started).toBeLessThan(10_000);
  });
});

describe('connections per address', () => {
  it('refuses at accept a connection from an address that holds its share, and serves other addresses', async () => {
    const router = testRouter();
    const server = await startApiServer(router, { host: '127.0.0.1', port: 0, maxConnectionsPerAddress: 3 });
    servers.push(server);
    const port = (server.address() as AddressInfo).port;
    const held = await idleConnections(port, '127.0.0.1', 3);
    sockets.push(...held);
    const ping = 'GET /ping/x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n';
    // Closed without a byte: it was never served (without the cap: 200).
    expect(await rawRequest(port, '127.0.0.1', ping)).toBe('');
    expect(await rawRequest(port, '127.0.0.2', ping)).toMatch(/^HTTP\/1\.1 200 /);
    held[0]?.destroy();
    expect(await retryUntil(5_000, async () => (await rawRequest(port, '127.0.0.1', ping)).startsWith('HTTP/1.1 200 '))).toBe(true);
  });

  it('says so in one warning naming the address and the setting, not one a refused connection', async () => {
    const lines: string[] = [];
    const logger = pino({ level: 'warn' }, { write: (line: string) => lines.push(line) });
    const server = await startApiServer(testRouter(), { host: '127.0.0.1', port: 0, maxConnectionsPerAddress: 2, logger });
    servers.push(server);
    const port = (server.address() as AddressInfo).port;
    sockets.push(...(await idleConnections(port, '127.0.0.1', 2)));
    const ping = 'GET /ping/x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n';
    for (let i = 0; i < 5; i++) expect(await rawRequest(port, '127.0.0.1', ping)).toBe('');
    const warnings = lines.map((line) => JSON.parse(line) as { msg: string; address: string; refused: number; limit: number });
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ address: '127.0.0.1', refused: 1, limit: 2 });
    expect(warnings[0]?.msg).toContain('API_MAX_CONNECTIONS_PER_ADDRESS');
  });
});

describe('refusalReporter', () => {
  it('reports an address at most once per ten minutes, with the refusals since its last report', () => {
    let now = 0;
    const reports: [string, number][] = [];
    const refused = refusalReporter((address, count) => reports.push([address, count]), () => now);
    for (let i = 0; i < 7; i++) refused('10.0.0.1');
    refused('10.0.0.2');
    now = REFUSAL_REPORT_EVERY_MS - 1;
    refused('10.0.0.1');
    now = REFUSAL_REPORT_EVERY_MS;
    refused('10.0.0.1');
    expect(reports).toEqual([
      ['10.0.0.1', 1],
      ['10.0.0.2', 1],
      ['10.0.0.1', 8],
    ]);
  });

  it('remembers a bounded number of addresses: a flood from many forgets the stalest, never grows without end', () => {
    let now = 0;
    let reports = 0;
    const refused = refusalReporter(() => reports++, () => now);
    for (let i = 0; i < 100_000; i++) refused(`10.${i >> 16}.${(i >> 8) & 255}.${i & 255}`);
    expect(reports).toBe(100_000);
    now = 1;
    // The first address was forgotten long ago: reported again. The last is remembered: not.
    refused('10.0.0.0');
    refused(`10.1.134.159`);
    expect(reports).toBe(100_001);
  });
});
