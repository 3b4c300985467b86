// TCP end to end: the built agent in `once` mode against real peers.
// Run "loopback": in this namespace, against node:net peers and nginx.
// Run "netns": inside a network namespace with IPv6 disabled and its own
// /etc/hosts, linked to this namespace by a veth pair (10.213.N.0/24, made
// here); nftables there drops SYNs to one port (a filtered port).

import { writeFileSync } from 'node:fs';
import net, { type AddressInfo } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CheckResultEntry } from '../../src/core/result-entry.js';
import { cleanEnv, MAIN, startAgent, tempDir } from '../support/agent-process.js';
import { HOST, type NetLab, netnsUnavailable } from '../support/netns.js';
import { freePort, type Nginx, startNginx } from '../support/nginx.js';
import type { TcpDetail } from '../support/tcp-detail.js';

const unavailable = netnsUnavailable(['ip', 'nft']);
const FILTERED_PORT = 7777;
const BANNER = '220 outpost-test ESMTP ready\r\n';

let nginx: Nginx;
let lab: NetLab | undefined;
let prefix = '';
const servers: net.Server[] = [];
const runs: Record<string, { code: number | null; results: Map<string, CheckResultEntry>; stderr: string }> = {};

function listen(host: string, onConnection: (socket: net.Socket) => void): Promise<number> {
  const server = net.createServer((socket) => {
    socket.on('error', () => undefined);
    onConnection(socket);
  });
  servers.push(server);
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host, () => resolve((server.address() as AddressInfo).port));
  });
}

function collect(stdout: string): Map<string, CheckResultEntry> {
  const results = new Map<string, CheckResultEntry>();
  for (const line of stdout.split('\n').filter(Boolean)) {
    const entry = JSON.parse(line) as CheckResultEntry;
    results.set(entry.checkId as string, entry);
  }
  return results;
}

const tcp = (run: string, id: string) => {
  const entry = runs[run]?.results.get(id);
  if (!entry) throw new Error(`no result for ${run}/${id}; stderr: ${runs[run]?.stderr.slice(-2000)}`);
  return { entry, detail: entry.tcpCheckResult as unknown as TcpDetail };
};

beforeAll(async () => {
  nginx = await startNginx();
  const echo = await listen('127.0.0.1', (s) => s.on('data', (chunk) => s.write(chunk)));
  const banner = await listen('127.0.0.1', (s) => s.write(BANNER));
  const silent = await listen('127.0.0.1', () => undefined);
  const big = await listen('127.0.0.1', (s) => s.write(Buffer.alloc(100_000, 'y')));
  const closed = await freePort();
  const dir = tempDir('outpost-tcp-');
  const base = { checkType: 'TCP' };
  const loopbackChecks = [
    {
      ...base,
      id: 'echo',
      request: { hostname: '127.0.0.1', port: echo, data: 'hello outpost\n', idleTimeoutMs: 200 },
      assertions: [{ source: 'RESPONSE_DATA', comparison: 'EQUALS', target: 'hello outpost\n' }],
    },
    {
      ...base,
      id: 'banner-regex',
      request: { hostname: 'localhost', port: banner },
      assertions: [
        { source: 'RESPONSE_DATA', comparison: 'EQUALS', target: '220', regex: '^(\\d{3})\\s' },
        { source: 'RESPONSE_DATA', comparison: 'CONTAINS', target: 'ESMTP' },
      ],
    },
    {
      ...base,
      id: 'nginx-http',
      request: { hostname: '127.0.0.1', port: nginx.port, data: 'GET / HTTP/1.0\r\n\r\n' },
      assertions: [
        { source: 'RESPONSE_DATA', comparison: 'CONTAINS', target: '200' },
        { source: 'RESPONSE_TIME', comparison: 'LESS_THAN', target: '60000' },
      ],
    },
    { ...base, id: 'nginx-connect', request: { hostname: '127.0.0.1', port: nginx.port } },
    { ...base, id: 'refused', request: { hostname: '127.0.0.1', port: closed } },
    { ...base, id: 'silent', request: { hostname: '127.0.0.1', port: silent, data: 'anyone?\n' } },
    {
      ...base,
      id: 'truncated',
      request: { hostname: '127.0.0.1', port: big, readLimitBytes: 100 },
      assertions: [{ source: 'RESPONSE_DATA', comparison: 'NOT_EMPTY', target: '' }],
    },
  ];
  const loopbackFile = path.join(dir, 'loopback.json');
  writeFileSync(loopbackFile, JSON.stringify({ checks: loopbackChecks }));
  const loopback = (async () => {
    const proc = startAgent(['once', loopbackFile], cleanEnv({ JOB_CONCURRENCY: '8' }));
    const { code } = await proc.exit;
    runs.loopback = { code, results: collect(proc.stdout()), stderr: proc.stderr() };
  })();

  let inNamespace: Promise<void> = Promise.resolve();
  if (!unavailable) {
    const { NetLab } = await import('../support/netns.js');
    lab = new NetLab();
    prefix = lab.subnet();
    const ns = lab.namespace({
      disableIPv6: true,
      // dual.outpost.test has both families; only IPv4 is usable in the namespace.
      hosts: `127.0.0.1 localhost\n${prefix}.1 dual.outpost.test\nfd00:213::1 dual.outpost.test\n`,
      nftables: `table inet outpost {
  chain input {
    type filter hook input priority 0; policy accept;
    tcp dport ${FILTERED_PORT} drop
  }
}
`,
    });
    lab.link(HOST, `${prefix}.1/24`, ns, `${prefix}.2/24`, { disableIPv6: true });
    const hostEcho = await listen(`${prefix}.1`, (s) => s.on('data', (chunk) => s.write(chunk)));
    const nsChecks = [
      { ...base, id: 'filtered', request: { hostname: '127.0.0.1', port: FILTERED_PORT, data: 'x' } },
      {
        ...base,
        id: 'fallback',
        request: { hostname: 'dual.outpost.test', port: hostEcho, ipFamily: 'IPv6', data: 'v4?' },
        assertions: [{ source: 'RESPONSE_DATA', comparison: 'EQUALS', target: 'v4?' }],
      },
      // No route to TEST-NET-2 in the namespace: nothing is sent, the connect fails at once.
      { ...base, id: 'unreachable', request: { hostname: '198.51.100.1', port: 80 } },
    ];
    const nsFile = path.join(dir, 'netns.json');
    writeFileSync(nsFile, JSON.stringify({ checks: nsChecks }));
    inNamespace = (async () => {
      const out = await ns.run([process.execPath, MAIN, 'once', nsFile], {
        env: cleanEnv({ JOB_CONCURRENCY: '4' }),
        timeoutMs: 60_000,
      });
      runs.netns = { code: out.code, results: collect(out.stdout), stderr: out.stderr };
    })();
  }
  await Promise.all([loopback, inNamespace]);
}, 90_000);

afterAll(async () => {
  for (const server of servers) server.close();
  lab?.destroy();
  await nginx?.stop();
});

describe('TCP monitor, loopback peers and nginx', () => {
  it('exits 1 (some checks fail) with one result per check', () => {
    expect(runs.loopback?.code).toBe(1);
    expect(runs.loopback?.results.size).toBe(7);
  });

  it('sends data and asserts the echo', () => {
    const { entry, detail } = tcp('loopback', 'echo');
    expect(entry).toMatchObject({ hasFailures: false, hasErrors: false, checkType: 'TCP' });
    expect(detail.response).toMatchObject({ data: 'hello outpost\n', bytes: 14, truncated: false, end: 'idle', family: 'IPv4' });
    const t = detail.response?.timings;
    for (const phase of ['dns', 'connect', 'firstByte', 'total'] as const) expect(t?.[phase]).toBeGreaterThanOrEqual(0);
    expect(entry.responseTime).toBe(Math.round(t?.total ?? -1));
  });

  it('reads a banner and applies a regex', () => {
    const { entry, detail } = tcp('loopback', 'banner-regex');
    expect(entry).toMatchObject({ hasFailures: false });
    expect(detail.assertions.map((a) => [a.actual, a.passed])).toEqual([
      ['220', true],
      [BANNER, true],
    ]);
  });

  it('speaks HTTP/1.0 to nginx and finds the 200', () => {
    const { entry, detail } = tcp('loopback', 'nginx-http');
    expect(entry).toMatchObject({ hasFailures: false, hasErrors: false });
    expect(detail.response?.data).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    expect(detail.response?.end).toBe('closed');
    expect(tcp('loopback', 'nginx-connect').entry).toMatchObject({ hasFailures: false });
    expect(tcp('loopback', 'nginx-connect').detail.response).toMatchObject({ end: 'connect-only', bytes: 0 });
  });

  it('a refused port is an error result', () => {
    const { entry, detail } = tcp('loopback', 'refused');
    expect(entry).toMatchObject({ hasFailures: true, hasErrors: true });
    expect(detail.requestError).toMatch(/^connection refused \(ECONNREFUSED\) at 127\.0\.0\.1:\d+$/);
  });

  it('a peer that accepts but never answers is "no reply" at the 5 s cap', () => {
    const { entry, detail } = tcp('loopback', 'silent');
    expect(entry).toMatchObject({ hasFailures: true, hasErrors: true });
    expect(detail.requestError).toMatch(/^No reply from 127\.0\.0\.1:\d+ within \d+ ms after sending 8 bytes$/);
    expect(detail.response).toMatchObject({ connected: true, bytes: 0 });
  });

  it('truncates at readLimitBytes', () => {
    const { entry, detail } = tcp('loopback', 'truncated');
    expect(entry).toMatchObject({ hasFailures: false });
    expect(detail.response).toMatchObject({ bytes: 100, truncated: true, end: 'limit', data: 'y'.repeat(100) });
  });
});

describe.skipIf(unavailable !== undefined)(`TCP monitor in a network namespace${unavailable ? ` (skipped: ${unavailable})` : ''}`, () => {
  it('a filtered port (SYN dropped) times out at the cap as a connect timeout', () => {
    const { entry, detail } = tcp('netns', 'filtered');
    expect(entry).toMatchObject({ hasFailures: true, hasErrors: true });
    expect(detail.requestError).toMatch(
      new RegExp(`^Connection to 127\\.0\\.0\\.1:${FILTERED_PORT} timed out after \\d+ ms: no answer to the TCP handshake`),
    );
    expect(detail.response).toMatchObject({ connected: false });
  });

  it('falls back to IPv4 when IPv6 is disabled, and says so', () => {
    const { entry, detail } = tcp('netns', 'fallback');
    expect(entry).toMatchObject({ hasFailures: false, hasErrors: false });
    expect(detail.response).toMatchObject({ address: `${prefix}.1`, family: 'IPv4', data: 'v4?' });
    expect(detail.jobLog[0]).toMatch(/^IPv6 is not usable on this host \(.+\): falling back to IPv4$/);
  });

  it('a network without a route is "network unreachable"', () => {
    const { entry, detail } = tcp('netns', 'unreachable');
    expect(entry).toMatchObject({ hasFailures: true, hasErrors: true });
    expect(detail.requestError).toBe('network unreachable (ENETUNREACH) at 198.51.100.1:80');
  });
});
