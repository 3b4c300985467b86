// The server's HTTP front (src/server/http/router.ts) with small fake routes
// over real HTTP: routing, both kinds of credentials, rate limits, bodies,
// and the service's error body for every failure.

import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { keyHash } from '../../src/server/http/credentials.js';
import { RateLimiter } from '../../src/server/http/rate-limit.js';
import { closeApiServer, type Route, Router, type RouterOptions, startApiServer } from '../../src/server/http/router.js';
import { type KeyRecord, NotFoundError } from '../../src/store/store.js';

const PUBLIC_KEY = 'public-key-0123456789';
const AGENT_KEY = 'pl_agent-key-abcdef';
const KEY: KeyRecord = { id: 'key-1', locationId: 'loc-a', maskedKey: 'pl_********cdef', created_at: '2026-11-24T00:00:00.000Z', updated_at: '2026-11-24T00:00:00.000Z' };

const routes: Route[] = [
  {
    method: 'GET',
    path: '/v1/things/:id',
    auth: 'public',
    bodyLimit: 0,
    handle: async (ctx) => ({ status: 200, body: { id: ctx.params.id, q: ctx.query.get('q'), principal: ctx.principal.kind } }),
  },
  { method: 'DELETE', path: '/v1/things/:id', auth: 'public', bodyLimit: 0, handle: async () => ({ status: 204 }) },
  {
    method: 'POST',
    path: '/v1/echo',
    auth: 'public',
    bodyLimit: 64,
    handle: async (ctx) => ({ status: 200, body: { got: ctx.body }, headers: { 'x-echo': 'yes' } }),
  },
  {
    method: 'POST',
    path: '/v1/big-echo',
    auth: 'public',
    bodyLimit: 1024 * 1024,
    handle: async (ctx) => ({ status: 200, body: { length: String((ctx.body as { pad: string }).pad).length } }),
  },
  {
    method: 'POST',
    path: '/v1/agent/whoami',
    auth: 'agent',
    bodyLimit: 1024,
    handle: async (ctx) => ({ status: 200, body: ctx.principal }),
  },
  {
    method: 'GET',
    path: '/v1/missing/:id',
    auth: 'public',
    bodyLimit: 0,
    handle: async (ctx) => {
      throw new NotFoundError('thing', ctx.params.id as string);
    },
  },
  {
    method: 'GET',
    path: '/ping/:token',
    auth: 'none',
    bodyLimit: 0,
    handle: async (ctx) => ({ status: 200, body: { token: ctx.params.token, principal: ctx.principal.kind } }),
  },
  { method: 'GET', path: '/badge/:id', auth: 'none', bodyLimit: 0, handle: async () => ({ status: 200 }) },
  { method: 'GET', path: '/own-budget/:id', auth: 'none', budget: 'own', bodyLimit: 0, handle: async () => ({ status: 200 }) },
  {
    method: 'GET',
    path: '/v1/broken',
    auth: 'public',
    bodyLimit: 0,
    handle: async () => {
      throw new Error('secret detail of the database');
    },
  },
];

const servers: Server[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) await closeApiServer(server, 100);
});

async function serve(options: Partial<RouterOptions> = {}, headersTimeoutMs?: number): Promise<string> {
  const router = new Router(routes, {
    publicKey: PUBLIC_KEY,
    agentKey: async (token) => (keyHash(token) === keyHash(AGENT_KEY) ? KEY : undefined),
    publicLimiter: new RateLimiter(1000, 60),
    agentLimiter: new RateLimiter(1000, 60),
    logger: pino({ level: 'silent' }),
    ...options,
  });
  const server = await startApiServer(router, { host: '127.0.0.1', port: 0, ...(headersTimeoutMs ? { headersTimeoutMs } : {}) });
  servers.push(server);
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

const pub = { authorization: `Bearer ${PUBLIC_KEY}` };
const agent = { authorization: `Bearer ${AGENT_KEY}`, 'x-agent-id': 'agent-1' };

async function call(url: string, init: RequestInit = {}): Promise<{ status: number; body: unknown; headers: Headers }> {
  const response = await fetch(url, init);
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : undefined, headers: response.headers };
}

describe('router', () => {
  it('answers 404 for an unknown path and 405 with Allow for a known path with another method, in the error body', async () => {
    const base = await serve();
    const missing = await call(`${base}/v1/nothing`, { headers: pub });
    expect(missing.status).toBe(404);
    expect(missing.body).toEqual({ statusCode: 404, error: 'Not Found', message: 'no route GET /v1/nothing', attributes: {} });
    const wrong = await call(`${base}/v1/things/1`, { method: 'PUT', headers: pub });
    expect(wrong.status).toBe(405);
    expect(wrong.headers.get('allow')).toBe('GET, DELETE, HEAD');
    expect(wrong.body).toMatchObject({ statusCode: 405, error: 'Method Not Allowed', attributes: { allowed: ['GET', 'DELETE', 'HEAD'] } });
  });

  it('answers HEAD on a GET route with its status and headers, without a body', async () => {
    const base = await serve();
    const got = await fetch(`${base}/v1/things/7`, { headers: pub });
    const head = await fetch(`${base}/v1/things/7`, { method: 'HEAD', headers: pub });
    expect(head.status).toBe(got.status);
    expect(head.headers.get('content-type')).toBe(got.headers.get('content-type'));
    expect(head.headers.get('content-length')).toBe(got.headers.get('content-length'));
    expect(await head.text()).toBe('');
    expect((await fetch(`${base}/v1/things/7`, { method: 'HEAD' })).status).toBe(401);
  });

  it('reads a target starting with // as a path, and refuses one that is no URL with 400', async () => {
    const base = new URL(await serve());
    // //x/v1/things/1 is not /v1/things/1 on host x.
    expect((await call(`${base.origin}//x/v1/things/1`, { headers: pub })).status).toBe(404);
    const { connect } = await import('node:net');
    const raw = (target: string) =>
      new Promise<string>((resolve, reject) => {
        const socket = connect(Number(base.port), base.hostname);
        let text = '';
        socket.on('data', (chunk) => {
          text += chunk;
        });
        socket.on('end', () => resolve(text));
        socket.on('error', reject);
        socket.write(`GET ${target} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${PUBLIC_KEY}\r\nConnection: close\r\n\r\n`);
      });
    expect(await raw('//[')).toMatch(/^HTTP\/1\.1 404 /);
    expect(await raw('//x/v1/things/1')).toMatch(/^HTTP\/1\.1 404 /);
    expect(await raw('http://[/')).toMatch(/^HTTP\/1\.1 400 /);
  });

  it("refuses a missing or wrong key with the service's 401 'bad token' body, on public and agent routes", async () => {
    const base = await serve();
    const badToken = { statusCode: 401, error: 'Unauthorized', message: 'bad token', attributes: {} };
    for (const headers of [{} as Record<string, string>, { authorization: 'Bearer nope' }, { authorization: `Basic ${PUBLIC_KEY}` }, { authorization: `Bearer ${AGENT_KEY}` }]) {
      const answer = await call(`${base}/v1/things/1`, { headers });
      expect(answer.status).toBe(401);
      expect(answer.body).toEqual(badToken);
    }
    for (const headers of [{ 'x-agent-id': 'a' } as Record<string, string>, { authorization: 'Bearer nope', 'x-agent-id': 'a' }, { ...pub, 'x-agent-id': 'a' }]) {
      const answer = await call(`${base}/v1/agent/whoami`, { method: 'POST', headers });
      expect(answer.status).toBe(401);
      expect(answer.body).toEqual(badToken);
    }
  });

  it('compares the public key whole: a prefix, an extension or one changed character is refused', async () => {
    const base = await serve();
    const changed = `${PUBLIC_KEY.slice(0, -1)}X`;
    for (const token of [PUBLIC_KEY.slice(0, -1), `${PUBLIC_KEY}0`, changed, PUBLIC_KEY.toUpperCase()]) {
      expect((await call(`${base}/v1/things/1`, { headers: { authorization: `Bearer ${token}` } })).status).toBe(401);
    }
    // The scheme is case-insensitive, the token is not.
    expect((await call(`${base}/v1/things/1`, { headers: { authorization: `bearer ${PUBLIC_KEY}` } })).status).toBe(200);
  });

  it('accepts the public key and hands the route its params (decoded) and query', async () => {
    const base = await serve();
    const answer = await call(`${base}/v1/things/a%20b%2Fc?q=x%26y`, { headers: pub });
    expect(answer.status).toBe(200);
    expect(answer.body).toEqual({ id: 'a b/c', q: 'x&y', principal: 'public' });
    expect((await call(`${base}/v1/things/%E0%A4%A`, { headers: pub })).status).toBe(400);
    // An empty segment matches no :param.
    expect((await call(`${base}/v1/things/`, { headers: pub })).status).toBe(404);
  });

  it('accepts an agent key with x-agent-id, and gives the route the key record and agent id', async () => {
    const base = await serve();
    const answer = await call(`${base}/v1/agent/whoami`, { method: 'POST', headers: agent });
    expect(answer.status).toBe(200);
    expect(answer.body).toEqual({ kind: 'agent', key: KEY, agentId: 'agent-1' });
  });

  it('accepts the x-service-account header alongside a valid key', async () => {
    const base = await serve();
    const answer = await call(`${base}/v1/things/7`, { headers: { ...pub, 'x-service-account': 'acct-1' } });
    expect(answer.status).toBe(200);
    const agentAnswer = await call(`${base}/v1/agent/whoami`, { method: 'POST', headers: { ...agent, 'x-service-account': 'acct-1' } });
    expect(agentAnswer.status).toBe(200);
  });

  it('requires a well-formed x-agent-id on agent routes (400 naming the header)', async () => {
    const base = await serve();
    for (const id of [undefined, '', 'has space', 'x'.repeat(65), 'slash/no']) {
      const headers: Record<string, string> = { authorization: `Bearer ${AGENT_KEY}` };
      if (id !== undefined) headers['x-agent-id'] = id;
      const answer = await call(`${base}/v1/agent/whoami`, { method: 'POST', headers });
      expect(answer.status, String(id)).toBe(400);
      expect(answer.body).toMatchObject({ statusCode: 400, error: 'Bad Request', attributes: { header: 'x-agent-id' } });
    }
  });

  it('answers 429 with Retry-After and the error body once a key is over its limit, per key', async () => {
    const base = await serve({ publicLimiter: new RateLimiter(3, 60), agentLimiter: new RateLimiter(2, 60) });
    for (let i = 0; i < 3; i++) expect((await call(`${base}/v1/things/1`, { headers: pub })).status).toBe(200);
    const over = await call(`${base}/v1/things/1`, { headers: pub });
    expect(over.status).toBe(429);
    expect(Number(over.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(Number(over.headers.get('retry-after'))).toBeLessThanOrEqual(60);
    expect(over.body).toEqual({ statusCode: 429, error: 'Too Many Requests', message: 'Too Many Requests', attributes: {} });
    // The agent key has its own budget.
    for (let i = 0; i < 2; i++) expect((await call(`${base}/v1/agent/whoami`, { method: 'POST', headers: agent })).status).toBe(200);
    expect((await call(`${base}/v1/agent/whoami`, { method: 'POST', headers: agent })).status).toBe(429);
    // A bad key is refused before it counts.
    expect((await call(`${base}/v1/things/1`, { headers: { authorization: 'Bearer nope' } })).status).toBe(401);
  });

  it('limits wrong keys per client address on public and agent routes: then 429 even for a right key, and a window later 401 again', async () => {
    let nowMs = Date.UTC(2026, 10, 25);
    const base = await serve({ failedAuthLimiter: new RateLimiter(3, 60), now: () => nowMs });
    const wrong = { authorization: 'Bearer nope', 'x-agent-id': 'a' };
    expect((await call(`${base}/v1/things/1`, { headers: wrong })).status).toBe(401);
    expect((await call(`${base}/v1/agent/whoami`, { method: 'POST', headers: wrong })).status).toBe(401);
    expect((await call(`${base}/v1/things/1`, { headers: {} })).status).toBe(401);
    // One budget for both kinds of route: the fourth wrong key is refused with 429.
    const over = await call(`${base}/v1/agent/whoami`, { method: 'POST', headers: wrong });
    expect(over.status).toBe(429);
    expect(Number(over.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    // While limited no key is compared: a right one gets the same 429, so the limit tells nothing.
    expect((await call(`${base}/v1/things/1`, { headers: pub })).status).toBe(429);
    expect((await call(`${base}/v1/agent/whoami`, { method: 'POST', headers: agent })).status).toBe(429);
    nowMs += 61_000;
    expect((await call(`${base}/v1/things/1`, { headers: pub })).status).toBe(200);
    expect((await call(`${base}/v1/things/1`, { headers: wrong })).status).toBe(401);
  });

  it('counts no failed key where the public routes are open (no public key set)', async () => {
    const base = await serve({ publicKey: undefined, failedAuthLimiter: new RateLimiter(1, 60) });
    for (let i = 0; i < 3; i++) expect((await call(`${base}/v1/things/1`, { headers: { authorization: 'Bearer nope' } })).status).toBe(200);
  });

  it('refuses a body over the route limit with 413 and invalid JSON with 400', async () => {
    const base = await serve();
    const json = { ...pub, 'content-type': 'application/json' };
    const ok = await call(`${base}/v1/echo`, { method: 'POST', headers: json, body: JSON.stringify({ a: 1 }) });
    expect(ok.status).toBe(200);
    expect(ok.body).toEqual({ got: { a: 1 } });
    expect(ok.headers.get('x-echo')).toBe('yes');
    const big = await call(`${base}/v1/echo`, { method: 'POST', headers: json, body: JSON.stringify({ a: 'x'.repeat(100) }) });
    expect(big.status).toBe(413);
    expect(big.body).toMatchObject({ statusCode: 413, error: 'Payload Too Large', attributes: { limit: 64 } });
    // Without Content-Length (chunked), the limit still holds while reading.
    const chunked = new ReadableStream({
      start(controller) {
        controller.enqueue(new TextEncoder().encode(`"${'y'.repeat(100)}"`));
        controller.close();
      },
    });
    const streamed = await call(`${base}/v1/echo`, { method: 'POST', headers: json, body: chunked, duplex: 'half' } as RequestInit);
    expect(streamed.status).toBe(413);
    const bad = await call(`${base}/v1/echo`, { method: 'POST', headers: json, body: '{"a":' });
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({ statusCode: 400, error: 'Bad Request' });
    expect((bad.body as { message: string }).message).toMatch(/not valid JSON/);
  });

  it("turns a handler's NotFoundError into 404 and an unexpected throw into 500 without its message", async () => {
    const base = await serve();
    const missing = await call(`${base}/v1/missing/abc`, { headers: pub });
    expect(missing.status).toBe(404);
    expect(missing.body).toEqual({ statusCode: 404, error: 'Not Found', message: 'thing abc does not exist', attributes: { id: 'abc' } });
    const broken = await call(`${base}/v1/broken`, { headers: pub });
    expect(broken.status).toBe(500);
    expect(broken.body).toEqual({ statusCode: 500, error: 'Internal Server Error', message: 'internal error', attributes: {} });
    expect(JSON.stringify(broken.body)).not.toContain('secret');
    // The server keeps serving.
    expect((await call(`${base}/v1/things/1`, { headers: pub })).status).toBe(200);
  });

  it('leaves public routes open when no public key is set, and agent routes still closed', async () => {
    const base = await serve({ publicKey: undefined });
    expect((await call(`${base}/v1/things/1`)).status).toBe(200);
    expect((await call(`${base}/v1/things/1`, { headers: { authorization: 'Bearer anything' } })).status).toBe(200);
    expect((await call(`${base}/v1/agent/whoami`, { method: 'POST', headers: { 'x-agent-id': 'a' } })).status).toBe(401);
  });

  it('serves routes without credentials to anyone, any token ignored, limited per client address', async () => {
    const url = await serve({ anonymousLimiter: new RateLimiter(2, 60) });
    expect(await call(`${url}/ping/abc`)).toMatchObject({ status: 200, body: { token: 'abc', principal: 'anonymous' } });
    expect((await call(`${url}/ping/abc`, { headers: { authorization: 'Bearer wrong' } })).status).toBe(200);
    const limited = await call(`${url}/ping/abc`);
    expect(limited.status).toBe(429);
    expect(limited.headers.get('retry-after')).toMatch(/^\d+$/);
    // The limit of anonymous routes is their own: the public key's budget is untouched.
    expect((await call(`${url}/v1/things/1`, { headers: pub })).status).toBe(200);
    // Routes without a budget of their own share the address's; one that names a budget spends only that.
    expect((await call(`${url}/badge/1`)).status).toBe(429);
    expect((await call(`${url}/own-budget/1`)).status).toBe(200);
    expect((await call(`${url}/own-budget/1`)).status).toBe(200);
    expect((await call(`${url}/own-budget/1`)).status).toBe(429);
  });

  it('closes a connection that sends no byte, or a head a byte at a time, once the head deadline passes', async () => {
    const url = new URL(await serve({}, 1_000));
    const { connect } = await import('node:net');
    const open = (drip: boolean) => {
      const socket = connect(Number(url.port), url.hostname);
      socket.on('error', () => undefined);
      // Read what comes (node:http may answer 408 before closing): unread data would hold the 'close' back.
      socket.resume();
      if (drip) socket.write('GET /v1/echo HTTP/1.1\r\nHost: x\r\nX-Drip: ');
      const timer = drip ? setInterval(() => socket.write('a'), 200) : undefined;
      const started = Date.now();
      return new Promise<number>((resolve) =>
        socket.on('close', () => {
          clearInterval(timer);
          resolve(Date.now() - started);
        }),
      );
    };
    const [silent, dripping] = await Promise.all([open(false), open(true)]);
    // The deadline is 1 s, checked every second: cut after 1-2 s, with room for a busy machine; never held for good.
    for (const heldMs of [silent, dripping]) {
      expect(heldMs).toBeGreaterThanOrEqual(900);
      expect(heldMs).toBeLessThan(8_000);
    }
    expect((await call(`${url.origin}/v1/echo`, { method: 'POST', headers: { ...pub, 'content-type': 'application/json' }, body: '{"a":1}' })).status).toBe(200);
  });

  it('cuts a client whose JSON body trickles in past the deadline, and serves the next one', async () => {
    const url = new URL(await serve({ bodyDeadlineMs: 300 }));
    const { connect } = await import('node:net');
    const socket = connect(Number(url.port), url.hostname);
    const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
    socket.on('error', () => undefined);
    socket.write(`POST /v1/echo HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${PUBLIC_KEY}\r\nContent-Type: application/json\r\nContent-Length: 40\r\n\r\n{"a":`);
    const started = Date.now();
    await closed;
    expect(Date.now() - started).toBeLessThan(10_000);
    expect((await call(`${url.origin}/v1/echo`, { method: 'POST', headers: { ...pub, 'content-type': 'application/json' }, body: '{"a":1}' })).status).toBe(200);
  });

  it('gives a body that keeps coming at a slow link\'s rate its time past the deadline', async () => {
    // 480 KiB in 30 pieces, one every 100 ms: about 3 s, against a deadline of 1 s plus 1 s per 32 KiB received.
    const url = new URL(await serve({ bodyDeadlineMs: 1_000 }));
    const pad = 'x'.repeat(30 * 16 * 1024 - 10);
    const body = Buffer.from(JSON.stringify({ pad }));
    const { connect } = await import('node:net');
    const socket = connect(Number(url.port), url.hostname);
    socket.on('error', () => undefined);
    let answer = '';
    socket.on('data', (data: Buffer) => {
      answer += data.toString('latin1');
    });
    const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
    socket.write(`POST /v1/big-echo HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${PUBLIC_KEY}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n`);
    const started = Date.now();
    for (let at = 0; at < body.length; at += 16 * 1024) {
      socket.write(body.subarray(at, at + 16 * 1024));
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    await closed;
    expect(Date.now() - started).toBeGreaterThan(1_000);
    expect(answer).toMatch(/^HTTP\/1\.1 200 /);
    expect(answer).toContain(`{"length":${pad.length}}`);
  });
});
