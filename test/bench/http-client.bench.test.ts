// `npm run bench`: HTTP/1.1 clients for a fresh-connection URL check, side by
// side in one process against the same loopback nginx: a GET of a small
// page on a new connection, the body read whole, the connection closed —
// what every URL check does. Each client does N requests, 256 in flight, in
// alternating rounds (the order rotates so no client always runs first).
//
//   undici Client + timed connector   what src/checks/http/exchange.ts does today
//   undici Client, keep-alive, own close  the same, but undici never closes the connection
//                                      itself (no error object per request): the check does
//   undici Client                      as today, with undici's own connector
//   node:http, agent: false            one socket per request, Node's llhttp parser
//   net, hand-written (floor)          writes the request and reads to Content-Length:
//                                      no real parsing, no redirects or chunking; the
//                                      floor any client on net/tls would sit above
//
// Figures: requests/s (wall), and requests per CPU second of this process
// (the fairer one on a shared machine), with the other processes' share of
// the machine's CPU meanwhile. It asserts that every request got its 200,
// never a speed. BENCH_HTTP_CLIENT_N overrides N (default 5,000).

import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import { Client, request } from 'undici';
import { expect, test } from 'vitest';
import { timedConnector } from '../../src/net/timed-connector.js';
import { startNginx } from '../support/nginx.js';
import { cpuShareWindow, treeCpuSeconds } from './cpu-share.js';

const N = Number(process.env.BENCH_HTTP_CLIENT_N ?? 5000);
const CONCURRENCY = 256;
const ROUNDS = 2;
const DONE = Object.assign(new Error('done'), { stack: '' });

type Get = (url: URL) => Promise<number>;

async function readAll(stream: AsyncIterable<unknown>): Promise<number> {
  let bytes = 0;
  for await (const chunk of stream) bytes += (chunk as Buffer).length;
  return bytes;
}

const never = new AbortController().signal;

const clients: Record<string, Get> = {
  'undici Client + timed connector': async (url) => {
    const client = new Client(url.origin, {
      headersTimeout: 0,
      bodyTimeout: 0,
      keepAliveTimeout: 1,
      pipelining: 0,
      connect: timedConnector({ ipFamily: 'IPv4', rejectUnauthorized: true, signal: never, onConnection: () => undefined }),
    });
    try {
      const response = await request(url, { dispatcher: client });
      await readAll(response.body);
      return response.statusCode;
    } finally {
      client.destroy(DONE).catch(() => undefined);
    }
  },
  'undici Client, keep-alive, own close': async (url) => {
    // pipelining 1: undici sends `connection: keep-alive` and never closes on its own (no InformationalError per
    // request); the check closes the connection itself once the body is read, with a shared reason.
    const client = new Client(url.origin, {
      headersTimeout: 0,
      bodyTimeout: 0,
      keepAliveTimeout: 60_000,
      pipelining: 1,
      connect: timedConnector({ ipFamily: 'IPv4', rejectUnauthorized: true, signal: never, onConnection: () => undefined }),
    });
    try {
      const response = await request(url, { dispatcher: client });
      await readAll(response.body);
      return response.statusCode;
    } finally {
      client.destroy(DONE).catch(() => undefined);
    }
  },
  'undici Client': async (url) => {
    const client = new Client(url.origin, { headersTimeout: 0, bodyTimeout: 0, keepAliveTimeout: 1, pipelining: 0 });
    try {
      const response = await request(url, { dispatcher: client });
      await readAll(response.body);
      return response.statusCode;
    } finally {
      client.destroy(DONE).catch(() => undefined);
    }
  },
  'node:http, agent: false': (url) =>
    new Promise<number>((resolve, reject) => {
      const req = http.get({ host: url.hostname, port: url.port, path: url.pathname, agent: false }, (res) => {
        readAll(res).then(() => {
          res.socket.destroy();
          resolve(res.statusCode ?? 0);
        }, reject);
      });
      req.on('error', reject);
    }),
  'net, hand-written (floor)': (url) =>
    new Promise<number>((resolve, reject) => {
      const socket = net.connect({ host: url.hostname, port: Number(url.port), noDelay: true });
      let head = '';
      let need = -1;
      let got = 0;
      socket.on('error', reject);
      socket.on('connect', () => socket.write(`GET ${url.pathname} HTTP/1.1\r\nHost: ${url.host}\r\n\r\n`));
      socket.on('data', (chunk: Buffer) => {
        if (need < 0) {
          head += chunk.toString('latin1');
          const end = head.indexOf('\r\n\r\n');
          if (end === -1) return;
          need = Number(/content-length:\s*(\d+)/i.exec(head.slice(0, end))?.[1] ?? 0);
          got = head.length - end - 4;
        } else got += chunk.length;
        if (got >= need) {
          socket.destroy();
          resolve(Number(head.slice(9, 12)));
        }
      });
    }),
};

interface Row {
  rate: number;
  perCpuSecond: number;
  otherShare: number;
}


async function measure(get: Get, url: URL, nginxPid: number): Promise<Row> {
  let started = 0;
  let ok = 0;
  const share = cpuShareWindow(() => (nginxPid ? treeCpuSeconds(nginxPid) : 0));
  const cpu = process.cpuUsage();
  const start = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (started < N) {
        started++;
        if ((await get(url)) === 200) ok++;
      }
    }),
  );
  const ms = performance.now() - start;
  const used = process.cpuUsage(cpu);
  expect(ok).toBe(N);
  return { rate: (N / ms) * 1000, perCpuSecond: N / ((used.user + used.system) / 1e6), otherShare: share() };
}

test(`HTTP clients for a fresh-connection GET: ${N} requests each, ${CONCURRENCY} in flight`, async () => {
  const nginx = await startNginx({ accessLog: false });
  try {
    const url = new URL(`${nginx.url}/health`);
    const names = Object.keys(clients);
    const rows = new Map<string, Row[]>(names.map((n) => [n, []]));
    // Warm-up: JIT and nginx's workers.
    for (const name of names) await (clients[name] as Get)(url);
    for (let round = 0; round < ROUNDS; round++) {
      const order = round % 2 === 0 ? names : [...names].reverse();
      for (const name of order) rows.get(name)?.push(await measure(clients[name] as Get, url, nginx.pid as number));
    }
    const out = ['', `HTTP client comparison: ${N} fresh-connection GETs of ${url.pathname} per client per round, ${CONCURRENCY} in flight, ${ROUNDS} rounds (order reversed every other round)`];
    out.push(`machine: ${os.cpus().length} × ${os.cpus()[0]?.model ?? '?'}, node ${process.version}, load average ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}`);
    out.push(`  ${'client'.padEnd(40)} ${'req/s (per round)'.padStart(22)} ${'req per CPU s'.padStart(22)}  other processes' CPU share`);
    for (const name of names) {
      const r = rows.get(name) ?? [];
      const list = (f: (x: Row) => number) => r.map((x) => Math.round(f(x)).toLocaleString('en-US')).join(' / ');
      out.push(`  ${name.padEnd(40)} ${list((x) => x.rate).padStart(22)} ${list((x) => x.perCpuSecond).padStart(22)}  ${r.map((x) => `${(x.otherShare * 100).toFixed(0)} %`).join(' / ')}`);
    }
    out.push('');
    process.stdout.write(out.join('\n'));
  } finally {
    await nginx.stop();
  }
});
