// The filtering proxy scripts use under a network policy (src/net/filtering-proxy.ts),
// against real peers on loopback: a listener on 127.0.0.2 (blocked by `default`)
// that counts connections, an HTTP server on 127.0.0.3 (allowed), and
// tinyproxy as the upstream proxy it chains to.

import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FilteringProxy, POLICY_HEADER, startFilteringProxy } from '../../src/net/filtering-proxy.js';
import { parseNetworkPolicy } from '../../src/net/network-policy.js';
import { startTinyproxy, type Tinyproxy } from '../support/tinyproxy.js';

let blockedPort = 0;
let blockedAccepted = 0;
let allowedPort = 0;
const closers: Array<() => unknown> = [];
let direct: FilteringProxy;
let chained: FilteringProxy;
let tinyproxy: Tinyproxy;

beforeAll(async () => {
  const blocked = net.createServer((socket) => {
    blockedAccepted++;
    socket.on('error', () => undefined);
    socket.end('HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok');
  });
  await new Promise<void>((resolve) => blocked.listen(0, '127.0.0.2', resolve));
  blockedPort = (blocked.address() as AddressInfo).port;
  closers.push(() => blocked.close());
  const allowed = http.createServer((req, res) => {
    if (req.url === '/to-blocked') return void res.writeHead(302, { location: `http://127.0.0.2:${blockedPort}/` }).end();
    res.writeHead(200, { 'content-type': 'text/plain' }).end(`allowed ${req.method} ${req.url} host=${req.headers.host}`);
  });
  await new Promise<void>((resolve) => allowed.listen(0, '127.0.0.3', resolve));
  allowedPort = (allowed.address() as AddressInfo).port;
  closers.push(() => allowed.close());
  tinyproxy = await startTinyproxy();
  const upstreamPort = new URL(tinyproxy.url).port;
  const policy = parseNetworkPolicy('default', `127.0.0.3, 127.0.0.1:${upstreamPort}`, []);
  if (!policy) throw new Error('no policy');
  direct = await startFilteringProxy({ policy });
  chained = await startFilteringProxy({ policy, upstream: tinyproxy.url });
});

afterAll(async () => {
  await direct?.close();
  await chained?.close();
  await tinyproxy?.stop();
  for (const close of closers) close();
});

/** Sends CONNECT and, when it succeeds, one HTTP request through the tunnel; returns what came back. */
function connectThrough(proxy: FilteringProxy, authority: string): Promise<string> {
  const { port } = new URL(proxy.url);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), '127.0.0.1');
    let text = '';
    let tunnelled = false;
    socket.on('data', (chunk) => {
      text += chunk.toString('latin1');
      if (!tunnelled && text.startsWith('HTTP/1.1 200') && text.includes('\r\n\r\n')) {
        tunnelled = true;
        socket.write(`GET /through HTTP/1.1\r\nhost: ${authority}\r\nconnection: close\r\n\r\n`);
      }
    });
    socket.once('error', reject);
    socket.once('close', () => resolve(text));
    socket.write(`CONNECT ${authority} HTTP/1.1\r\nhost: ${authority}\r\n\r\n`);
    socket.setTimeout(20_000, () => socket.destroy());
  });
}

function getThrough(proxy: FilteringProxy, url: string): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }> {
  const { port } = new URL(proxy.url);
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port: Number(port), path: url, headers: { host: new URL(url).host } }, (res) => {
      let body = '';
      res.on('data', (chunk) => {
        body += chunk;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.once('error', reject);
    req.setTimeout(20_000, () => req.destroy());
    req.end();
  });
}

const reason = () => `blocked by network policy: 127.0.0.2:${blockedPort} is in BLOCKED_NETWORKS 127.0.0.0/8 (default: loopback)`;

describe.each([
  ['direct', () => direct],
  ['chained to tinyproxy', () => chained],
])('the filtering proxy, %s', (_name, proxyOf) => {
  it('tunnels CONNECT to an allowed address', async () => {
    const text = await connectThrough(proxyOf(), `127.0.0.3:${allowedPort}`);
    expect(text).toMatch(/^HTTP\/1\.1 200 Connection Established\r\n\r\nHTTP\/1\.1 200 OK/);
    expect(text).toContain('allowed GET /through');
  });

  it('refuses CONNECT to a blocked address, by address and by name, with the reason', async () => {
    for (const authority of [`127.0.0.2:${blockedPort}`, `localhost:${blockedPort}`, `[::ffff:127.0.0.2]:${blockedPort}`]) {
      const text = await connectThrough(proxyOf(), authority);
      expect(text, authority).toMatch(/^HTTP\/1\.1 403 Forbidden\r\n/);
      expect(text, authority).toContain('blocked by network policy: 127.0.0.');
    }
    expect(await connectThrough(proxyOf(), `127.0.0.2:${blockedPort}`)).toContain(`${POLICY_HEADER}: ${reason()}`);
  });

  it('forwards absolute-form HTTP to an allowed address, keeping the Host, and refuses a blocked one', async () => {
    const ok = await getThrough(proxyOf(), `http://127.0.0.3:${allowedPort}/page?x=1`);
    expect(ok.status).toBe(200);
    expect(ok.body).toBe(`allowed GET /page?x=1 host=127.0.0.3:${allowedPort}`);
    const refused = await getThrough(proxyOf(), `http://127.0.0.2:${blockedPort}/`);
    expect(refused.status).toBe(403);
    expect(refused.headers[POLICY_HEADER]).toBe(reason());
    expect(refused.body).toBe(`${reason()}\n`);
    // https:// in absolute form (as axios sends it through an HTTP proxy) is judged the same way.
    const refusedTls = await getThrough(proxyOf(), `https://127.0.0.2:${blockedPort}/`);
    expect(refusedTls.status).toBe(403);
    expect(refusedTls.headers[POLICY_HEADER]).toBe(reason());
    // A redirect is the client's to follow: its next request is judged like the first.
    const redirect = await getThrough(proxyOf(), `http://127.0.0.3:${allowedPort}/to-blocked`);
    expect(redirect.status).toBe(302);
  });

  it('refuses the proxy itself as a target (loopback), so it cannot be looped through', async () => {
    const text = await connectThrough(proxyOf(), `127.0.0.1:${new URL(proxyOf().url).port}`);
    expect(text).toMatch(/^HTTP\/1\.1 403 Forbidden/);
  });
});

describe('what reached the peers', () => {
  it('the blocked listener accepted nothing; tinyproxy saw only allowed targets, by address', () => {
    expect(blockedAccepted).toBe(0);
    const log = tinyproxy.log();
    expect(log).toContain(`127.0.0.3:${allowedPort}`);
    expect(log).not.toContain(`127.0.0.2:${blockedPort}`);
    expect(direct.refused).toBeGreaterThanOrEqual(5);
    expect(chained.refused).toBeGreaterThanOrEqual(5);
  });

  it('refuses an upstream proxy the policy blocks', async () => {
    const policy = parseNetworkPolicy('default', '127.0.0.3', []);
    if (!policy) throw new Error('no policy');
    const strict = await startFilteringProxy({ policy, upstream: tinyproxy.url });
    try {
      const text = await connectThrough(strict, `127.0.0.3:${allowedPort}`);
      expect(text).toMatch(/^HTTP\/1\.1 403 Forbidden/);
      expect(text).toContain(`blocked by network policy: 127.0.0.1:${new URL(tinyproxy.url).port} is in BLOCKED_NETWORKS 127.0.0.0/8`);
    } finally {
      await strict.close();
    }
  });
});
