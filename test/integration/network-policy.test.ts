// The network policy end to end (docs/network-policy.md): the built agent in
// `once` mode inside a network namespace whose own /etc/hosts names the
// blocked and the allowed peers, linked to this namespace by a veth pair
// (10.213.N.0/24, made here). BLOCKED_NETWORKS covers the whole /24 and
// `default`; ALLOWED_NETWORKS excepts one address of it. Peers listen in this
// namespace and count what reaches them: a blocked one must see nothing. The
// namespace's resolv.conf names a rebinding name server (first answer allowed,
// later ones blocked): each name must be looked up once and connected to as judged.
// Then: /health and the startup log show the policy (local mode), and a
// server webhook to a blocked address is not sent, its reason recorded; a URL
// check through tinyproxy has the proxy's address and the target judged.

import { createServer as createHttpServer, type Server as HttpServer } from 'node:http';
import dgram from 'node:dgram';
import { writeFileSync } from 'node:fs';
import { decode, encode } from 'dns-packet';
import net, { type AddressInfo } from 'node:net';
import path from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CheckResultEntry } from '../../src/core/result-entry.js';
import { parseNetworkPolicy } from '../../src/net/network-policy.js';
import { AlertDeliverer } from '../../src/server/alert-delivery.js';
import { SqliteAlertStore } from '../../src/store/sqlite/alerts-store.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { cleanEnv, MAIN, probe, startAgent, tempDir } from '../support/agent-process.js';
import { HOST, type NetLab, netnsUnavailable, sh } from '../support/netns.js';

const unavailable = netnsUnavailable(['ip', 'ping']);

interface Detail {
  requestError: string | null;
  response?: { statusCode?: number } | null;
  jobLog?: string[];
}

let lab: NetLab | undefined;
let prefix = '';
const closers: Array<() => void> = [];
/** What reached each peer: connections accepted, datagrams received. */
const seen = { blocked: 0, blockedUdp: 0, allowed: 0 };
/** A queries for each rebinding name: the first is answered with the allowed address, every later one with the blocked. */
const rebindQueries = new Map<string, number>();
let run: { code: number | null; results: Map<string, CheckResultEntry>; stderr: string } | undefined;
const ports = { blocked: 0, allowed: 0, dns: 0 };

function collect(stdout: string): Map<string, CheckResultEntry> {
  const results = new Map<string, CheckResultEntry>();
  for (const line of stdout.split('\n').filter(Boolean)) {
    const entry = JSON.parse(line) as CheckResultEntry;
    if (entry.resultType === 'FINAL' || !results.has(entry.checkId as string)) results.set(entry.checkId as string, entry);
  }
  return results;
}

function detail(id: string): Detail {
  const entry = run?.results.get(id);
  if (!entry) throw new Error(`no result for ${id}; stderr: ${run?.stderr.slice(-2000)}`);
  const member = entry.apiCheckResult ?? entry.tcpCheckResult ?? entry.dnsCheckResult ?? entry.icmpCheckResult;
  return member as unknown as Detail;
}

function listenTcp(host: string, onConnection: (socket: net.Socket) => void): Promise<number> {
  const server = net.createServer((socket) => {
    socket.on('error', () => undefined);
    onConnection(socket);
  });
  closers.push(() => server.close());
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host, () => resolve((server.address() as AddressInfo).port));
  });
}

/** The decimal notation of an IPv4 address (what `http://2130706433/` uses for 127.0.0.1). */
const decimal = (ip: string) => ip.split('.').reduce((n, part) => n * 256 + Number(part), 0);

beforeAll(async () => {
  if (unavailable) return;
  const { NetLab } = await import('../support/netns.js');
  lab = new NetLab();
  prefix = lab.subnet();
  const blockedIp = `${prefix}.1`;
  const allowedIp = `${prefix}.3`;
  const nsIp = `${prefix}.2`;
  const ns = lab.namespace({
    hosts: `127.0.0.1 localhost\n${blockedIp} blocked.outpost.test\n${allowedIp} allowed.outpost.test\n`,
  });
  const link = lab.link(HOST, `${blockedIp}/24`, ns, `${nsIp}/24`);
  sh('ip', ['addr', 'add', `${allowedIp}/24`, 'dev', link.a]);
  // A name server for the namespace (its own resolv.conf, bind-mounted by `ip netns exec` like its hosts file)
  // that rebinds: a second lookup of a name would get the blocked address.
  writeFileSync(`/etc/netns/${ns.name}/resolv.conf`, `nameserver ${blockedIp}\noptions attempts:1\n`);
  const resolver = dgram.createSocket('udp4');
  resolver.on('message', (raw, from) => {
    const query = decode(raw);
    const question = query.questions?.[0];
    if (!question) return;
    const asked = (rebindQueries.get(question.name) ?? 0) + 1;
    rebindQueries.set(question.name, asked);
    const answers =
      question.type === 'A' && question.name.startsWith('rebind')
        ? [{ type: 'A' as const, name: question.name, ttl: 0, data: asked === 1 ? allowedIp : blockedIp }]
        : [];
    const reply = encode({ type: 'response', id: query.id ?? 0, flags: 0x8180, questions: [question], answers });
    resolver.send(reply, from.port, from.address);
  });
  await new Promise<void>((resolve) => resolver.bind(53, blockedIp, resolve));
  closers.push(() => resolver.close());

  // The blocked peer: counts every connection and answers HTTP, so a request that got through would pass.
  ports.blocked = await listenTcp(blockedIp, (socket) => {
    seen.blocked++;
    socket.end('HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok');
  });
  const udp = dgram.createSocket('udp4');
  udp.on('message', () => {
    seen.blockedUdp++;
  });
  await new Promise<void>((resolve) => udp.bind(0, blockedIp, resolve));
  ports.dns = udp.address().port;
  closers.push(() => udp.close());
  // The allowed peer: a page, and a redirect into the blocked one.
  const allowed: HttpServer = createHttpServer((req, res) => {
    if (req.url === '/into-blocked') {
      res.writeHead(302, { location: `http://blocked.outpost.test:${ports.blocked}/` });
      return res.end();
    }
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.end('allowed');
  });
  allowed.on('connection', () => {
    seen.allowed++;
  });
  await new Promise<void>((resolve) => allowed.listen(0, allowedIp, resolve));
  ports.allowed = (allowed.address() as AddressInfo).port;
  closers.push(() => allowed.close());

  const url = (id: string, target: string) => ({ id, checkType: 'URL', request: { url: target, followRedirects: true } });
  const checks = [
    url('url-blocked-address', `http://${blockedIp}:${ports.blocked}/`),
    url('url-blocked-name', `http://blocked.outpost.test:${ports.blocked}/`),
    url('url-decimal', `http://${decimal(blockedIp)}:${ports.blocked}/`),
    url('url-mapped', `http://[::ffff:${blockedIp}]:${ports.blocked}/`),
    url('url-loopback', `http://0x7f.1:${ports.blocked}/`),
    url('url-redirect', `http://allowed.outpost.test:${ports.allowed}/into-blocked`),
    url('url-allowed', `http://allowed.outpost.test:${ports.allowed}/`),
    { id: 'tcp-blocked', checkType: 'TCP', request: { hostname: 'blocked.outpost.test', port: ports.blocked } },
    // Resolved once: the connection goes to the address judged, never to a second answer.
    url('url-rebind', `http://rebind-url.outpost.test:${ports.allowed}/`),
    { id: 'tcp-rebind', checkType: 'TCP', request: { hostname: 'rebind-tcp.outpost.test', port: ports.allowed } },
    { id: 'tcp-allowed', checkType: 'TCP', request: { hostname: allowedIp, port: ports.allowed } },
    {
      id: 'dns-blocked',
      checkType: 'DNS',
      request: { query: 'example.com', recordType: 'A', nameServer: blockedIp, port: ports.dns, protocol: 'UDP' },
    },
    {
      id: 'dns-blocked-name',
      checkType: 'DNS',
      request: { query: 'example.com', recordType: 'A', nameServer: 'blocked.outpost.test', port: ports.dns, protocol: 'TCP' },
    },
    { id: 'icmp-blocked', checkType: 'ICMP', request: { hostname: 'blocked.outpost.test', pingCount: 1 } },
    // The namespace's own address is allowed below, but not on the agent's health port.
    url('url-own-health-port', `http://${nsIp}:9181/health`),
  ];
  const dir = tempDir('outpost-netpol-');
  const file = path.join(dir, 'checks.json');
  writeFileSync(file, JSON.stringify({ checks }));
  const out = await ns.run([process.execPath, MAIN, 'once', file], {
    env: cleanEnv({
      JOB_CONCURRENCY: '4',
      AGENT_HEALTH_PORT: '9181',
      DIAGNOSTICS: 'off',
      BLOCKED_NETWORKS: `default, ${prefix}.0/24`,
      ALLOWED_NETWORKS: `${allowedIp},${nsIp}`,
    }),
    timeoutMs: 60_000,
  });
  run = { code: out.code, results: collect(out.stdout), stderr: out.stderr };
}, 90_000);

afterAll(() => {
  for (const close of closers) close();
  lab?.destroy();
});

describe.skipIf(unavailable)('checks under BLOCKED_NETWORKS and ALLOWED_NETWORKS (in a network namespace)', () => {
  const reason = (ip: () => string, port: () => number, rule: () => string) =>
    `blocked by network policy: ${ip()}:${port()} is in BLOCKED_NETWORKS ${rule()}`;
  const blocked = () => `${prefix}.1`;
  const subnet = () => `${prefix}.0/24`;

  it('runs every check and exits 1 (the refused ones fail)', () => {
    expect(run?.code).toBe(1);
    expect(run?.results.size).toBe(15);
  });

  it('refuses a URL at a blocked address, by name, in decimal, IPv4-mapped or hex notation, with the rule', () => {
    for (const id of ['url-blocked-address', 'url-blocked-name', 'url-decimal', 'url-mapped']) {
      const entry = run?.results.get(id);
      expect(entry, id).toMatchObject({ hasFailures: true, hasErrors: true });
      expect(detail(id).requestError, id).toContain(reason(blocked, () => ports.blocked, subnet));
    }
    expect(detail('url-loopback').requestError).toContain(`blocked by network policy: 127.0.0.1:${ports.blocked} is in BLOCKED_NETWORKS 127.0.0.0/8 (default: loopback)`);
  });

  it('refuses a redirect from an allowed peer into a blocked one', () => {
    const d = detail('url-redirect');
    expect(d.requestError).toContain(reason(blocked, () => ports.blocked, subnet));
    expect(d.jobLog?.join('\n')).toContain('Redirect 302');
  });

  it('refuses a TCP check, a DNS name server (by address and by name) and an ICMP target in a blocked range', () => {
    expect(detail('tcp-blocked').requestError).toContain(reason(blocked, () => ports.blocked, subnet));
    expect(detail('dns-blocked').requestError).toBe(reason(blocked, () => ports.dns, subnet));
    expect(detail('dns-blocked-name').requestError).toBe(reason(blocked, () => ports.dns, subnet));
    expect(detail('icmp-blocked').requestError).toContain(`blocked by network policy: ${prefix}.1 is in BLOCKED_NETWORKS ${prefix}.0/24`);
    // Refused before ping was started: no echo request left.
    expect(detail('icmp-blocked').jobLog).toEqual(expect.any(Array));
    expect(detail('icmp-blocked').jobLog?.join('\n')).not.toMatch(/Running .*ping/);
  });

  it('refuses the agent own health port on an allowed address of its own', () => {
    expect(detail('url-own-health-port').requestError).toContain(
      `blocked by network policy: ${prefix}.2:9181 is in BLOCKED_NETWORKS own addresses:9181 (default: the agent's own health port (AGENT_HEALTH_PORT))`,
    );
  });

  it('sends nothing to a blocked peer: its listener accepted no connection and got no datagram', () => {
    expect(seen.blocked).toBe(0);
    expect(seen.blockedUdp).toBe(0);
  });

  it('lets the allowed exception through: URL and TCP pass', () => {
    expect(run?.results.get('url-allowed')).toMatchObject({ hasFailures: false, hasErrors: false });
    expect(run?.results.get('tcp-allowed')).toMatchObject({ hasFailures: false, hasErrors: false });
    expect(seen.allowed).toBeGreaterThanOrEqual(4);
  });

  it('resolves a name once and connects to the address it judged: a rebinding name server gains nothing', () => {
    expect(run?.results.get('url-rebind')).toMatchObject({ hasFailures: false, hasErrors: false });
    expect(run?.results.get('tcp-rebind')).toMatchObject({ hasFailures: false, hasErrors: false });
    expect(rebindQueries.get('rebind-url.outpost.test')).toBe(1);
    expect(rebindQueries.get('rebind-tcp.outpost.test')).toBe(1);
    expect(seen.blocked).toBe(0);
  });

  it('logs the policy once at startup', () => {
    const line = run?.stderr.split('\n').find((l) => l.includes('network policy:'));
    expect(line).toBeDefined();
    const log = JSON.parse(line as string) as { msg: string; networkPolicy: { blocked: string[]; allowed: string[] } };
    expect(log.msg).toBe('network policy: 9 blocked and 2 allowed rules (BLOCKED_NETWORKS, ALLOWED_NETWORKS)');
    expect(log.networkPolicy.blocked).toContain(`${prefix}.0/24`);
    expect(log.networkPolicy.allowed).toEqual([`${prefix}.3`, `${prefix}.2`]);
  });
});

describe('the policy in /health', () => {
  it('shows the rules in local mode, and null without a policy', async () => {
    const dir = tempDir('outpost-netpol-health-');
    const file = path.join(dir, 'checks.json');
    writeFileSync(file, JSON.stringify({ checks: [{ id: 'discard', checkType: 'TCP', frequency: 60, request: { hostname: '127.0.0.1', port: 9 } }] }));
    for (const [env, expected] of [
      [{ BLOCKED_NETWORKS: 'default,10.0.0.0/8', ALLOWED_NETWORKS: '10.1.0.0/16' }, { blocked: expect.arrayContaining(['127.0.0.0/8 (default: loopback)', '10.0.0.0/8']), allowed: ['10.1.0.0/16'] }],
      [{}, null],
    ] as const) {
      const agent = startAgent(['local', file], cleanEnv({ ...env, STATE_DIR: path.join(dir, Object.keys(env).length > 0 ? 'a' : 'b') }));
      try {
        const answer = await probe(await agent.healthPort(), '/health');
        expect((answer.body as { networkPolicy: unknown }).networkPolicy).toEqual(expected);
      } finally {
        agent.kill('SIGTERM');
        await agent.exit;
      }
    }
  });
});

describe('server webhooks under the policy', () => {
  it('does not send a webhook to a blocked address and records why; an allowed one is delivered', async () => {
    let accepted = 0;
    const receiver = createHttpServer((_req, res) => res.end('ok'));
    receiver.on('connection', () => {
      accepted++;
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    const port = (receiver.address() as AddressInfo).port;
    const store = await SqliteStore.open(`${tempDir('outpost-netpol-hooks-')}/outpost.db`);
    try {
      const alerts = new SqliteAlertStore(store.access);
      const now = new Date();
      const channel = (url: string) =>
        alerts.createChannel(
          { type: 'WEBHOOK', config: { url }, subscriptions: [], autoSubscribe: false, sendRecovery: true, sendFailure: true, sendDegraded: false, sslExpiry: false, sslExpiryThreshold: 30 },
          now,
        );
      const blockedChannel = await channel(`http://localhost:${port}/hook`);
      const allowedChannel = await channel(`http://127.0.0.2:${port}/hook`);
      const event = { kind: 'FAILURE', checkId: 'c' };
      await alerts.commitEvaluation(
        'netpol-test',
        1,
        [],
        [blockedChannel, allowedChannel].map((c) => ({ channelId: c.id, kind: 'FAILURE' as const, checkId: 'c', location: null, resultId: null, body: event })),
        now,
      );
      const policy = parseNetworkPolicy('default', '127.0.0.2', []);
      const deliverer = new AlertDeliverer({ alerts, logger: pino({ level: 'silent' }), timeoutMs: 5_000, ...(policy ? { networkPolicy: policy } : {}) });
      // The allowed address is 127.0.0.2: the receiver listens on 127.0.0.1 only, so nothing reaches it either way
      // unless it is delivered; listen there too.
      const second = createHttpServer((_req, res) => res.end('ok'));
      let acceptedAllowed = 0;
      second.on('connection', () => {
        acceptedAllowed++;
      });
      await new Promise<void>((resolve) => second.listen(port, '127.0.0.2', resolve));
      try {
        for (const notification of await alerts.dueNotifications(new Date(Date.now() + 1_000), 10)) await deliverer.deliver(notification);
        await deliverer.stop();
        const [refused] = await alerts.notifications(blockedChannel.id, 10);
        expect(refused).toMatchObject({ state: 'CANCELLED' });
        expect(refused?.lastError).toBe(`blocked by network policy: 127.0.0.1:${port} is in BLOCKED_NETWORKS 127.0.0.0/8 (default: loopback)`);
        expect(refused?.attemptLog[0]?.error).toBe(refused?.lastError);
        const [sent] = await alerts.notifications(allowedChannel.id, 10);
        expect(sent).toMatchObject({ state: 'DELIVERED' });
        expect(accepted).toBe(0);
        expect(acceptedAllowed).toBe(1);
      } finally {
        second.close();
      }
    } finally {
      receiver.close();
      await store.close();
    }
  });
});

describe('URL checks through a proxy under the policy', () => {
  it('judges the proxy address and the target, resolved by the agent, before anything is sent', async () => {
    const { startTinyproxy } = await import('../support/tinyproxy.js');
    const proxy = await startTinyproxy();
    let blockedAccepts = 0;
    const blockedPeer = net.createServer((socket) => {
      blockedAccepts++;
      socket.destroy();
    });
    const allowedPeer = createHttpServer((_req, res) => res.end('allowed'));
    try {
      await new Promise<void>((resolve) => blockedPeer.listen(0, '127.0.0.2', resolve));
      await new Promise<void>((resolve) => allowedPeer.listen(0, '127.0.0.3', resolve));
      const blockedAt = (blockedPeer.address() as AddressInfo).port;
      const allowedAt = (allowedPeer.address() as AddressInfo).port;
      const proxyPort = new URL(proxy.url).port;
      const dir = tempDir('outpost-netpol-proxy-');
      const file = path.join(dir, 'checks.json');
      writeFileSync(
        file,
        JSON.stringify({
          checks: [
            { id: 'via-proxy-blocked', checkType: 'URL', request: { url: `http://127.0.0.2:${blockedAt}/`, proxyUrl: proxy.url } },
            { id: 'via-proxy-allowed', checkType: 'URL', request: { url: `http://127.0.0.3:${allowedAt}/`, proxyUrl: proxy.url } },
            { id: 'via-blocked-proxy', checkType: 'URL', request: { url: `http://127.0.0.3:${allowedAt}/`, proxyUrl: `http://localhost:${blockedAt}` } },
          ],
        }),
      );
      const agent = startAgent(['once', file], cleanEnv({ BLOCKED_NETWORKS: 'default', ALLOWED_NETWORKS: `127.0.0.3,127.0.0.1:${proxyPort}` }));
      await agent.exit;
      const results = collect(agent.stdout());
      const error = (id: string) => (results.get(id)?.apiCheckResult as unknown as Detail | undefined)?.requestError;
      expect(error('via-proxy-blocked')).toContain(`blocked by network policy: 127.0.0.2:${blockedAt} is in BLOCKED_NETWORKS 127.0.0.0/8 (default: loopback)`);
      expect(results.get('via-proxy-allowed')).toMatchObject({ hasFailures: false, hasErrors: false });
      expect(error('via-blocked-proxy')).toContain(`blocked by network policy: 127.0.0.1:${blockedAt} is in BLOCKED_NETWORKS 127.0.0.0/8 (default: loopback)`);
      expect(blockedAccepts).toBe(0);
      expect(proxy.log()).toContain(`127.0.0.3:${allowedAt}`);
      expect(proxy.log()).not.toContain(`127.0.0.2:${blockedAt}`);
    } finally {
      blockedPeer.close();
      allowedPeer.close();
      await proxy.stop();
    }
  });
});
