// ICMP end to end: the built agent in `once` mode, run inside network
// namespaces as uid/gid 65534 with no capabilities at all (empty bounding
// set), pinging with a copy of iputils ping that carries no file capabilities.
// It works only because the namespace allows ICMP datagram sockets
// (net.ipv4.ping_group_range); where it does not, the result says what to set.
//
// Topology (all addresses made here, in 10.213.N.0/24):
//   agent ns A  (ping_group_range wide)  .1 ── veth ── .2 .3 .4  target ns B (nftables)
//     .2 drops every echo request; .3 and .4 drop every other one (50 % loss)
//   fallback ns F (IPv6 disabled, own /etc/hosts), forbidden ns X (range "1 0").

import { chmodSync, copyFileSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CheckResultEntry } from '../../src/core/result-entry.js';
import { MAIN, REPO, tempDir } from '../support/agent-process.js';
import { type NetLab, type Netns, netnsUnavailable } from '../support/netns.js';
import { findExecutable } from '../support/nginx.js';

const NOBODY = { uid: 65534, gid: 65534 };
const WIDE = { 'net.ipv4.ping_group_range': '0 2147483647' };
const unavailable = netnsUnavailable(['ip', 'nft', 'setpriv', 'ping']);

let lab: NetLab;
let dir: string;
let bin: string;
let prefix: string;
const runs: Record<string, { code: number | null; results: Map<string, CheckResultEntry>; stderr: string }> = {};

interface IcmpDetail {
  assertions: Array<{ actual: unknown; passed: boolean; error?: string }>;
  request: Record<string, unknown>;
  response: {
    address: string;
    family: string;
    packetsSent: number;
    packetsReceived: number;
    packetLoss: number;
    latency: { min: number; avg: number; max: number; stdDev: number } | null;
    packets: Array<{ seq: number; ttl: number | null; rtt: number }>;
  } | null;
  packetLossVerdict: string | null;
  requestError: string | null;
  jobLog: string[];
}

/** Runs `outpost once` with `checks` in `ns` as nobody without capabilities; collects one result per check. */
async function once(name: string, ns: Netns, checks: unknown[], env: Record<string, string>): Promise<void> {
  const file = path.join(dir, `${name}.json`);
  writeFileSync(file, JSON.stringify({ checks }), { mode: 0o644 });
  const out = await ns.run([process.execPath, MAIN, 'once', file], {
    as: NOBODY,
    cwd: dir,
    timeoutMs: 60_000,
    env: { PATH: `${bin}:/usr/bin:/bin`, HOME: dir, LOG_LEVEL: 'info', JOB_CONCURRENCY: '8', STATE_DIR: path.join(dir, 'state'), ...env },
  });
  const results = new Map<string, CheckResultEntry>();
  for (const line of out.stdout.split('\n').filter(Boolean)) {
    const entry = JSON.parse(line) as CheckResultEntry;
    results.set(entry.checkId as string, entry);
  }
  runs[name] = { code: out.code, results, stderr: out.stderr };
}

const icmp = (run: string, id: string) => {
  const entry = runs[run]?.results.get(id);
  if (!entry) throw new Error(`no result for ${run}/${id}; stderr: ${runs[run]?.stderr.slice(-2000)}`);
  return { entry, detail: entry.icmpCheckResult as unknown as IcmpDetail };
};

beforeAll(async () => {
  if (unavailable) return;
  const { NetLab } = await import('../support/netns.js');
  lab = new NetLab();
  // Everything the unprivileged agent reads must be readable by uid 65534.
  dir = tempDir('outpost-icmp-');
  chmodSync(dir, 0o755);
  mkdirSync(path.join(dir, 'state'), { mode: 0o777 });
  chmodSync(path.join(dir, 'state'), 0o777);
  bin = path.join(dir, 'bin');
  mkdirSync(bin, { mode: 0o755 });
  // A copy carries no file capabilities (Debian's /usr/bin/ping has cap_net_raw=ep,
  // which cannot be exec'd with an empty bounding set).
  copyFileSync(findExecutable('ping') as string, path.join(bin, 'ping'));
  chmodSync(path.join(bin, 'ping'), 0o755);

  prefix = lab.subnet();
  const a = lab.namespace({ sysctls: WIDE });
  const b = lab.namespace();
  lab.link(a, `${prefix}.1/24`, b, `${prefix}.2/24`);
  for (const host of [3, 4]) b.addAddress('lo', `${prefix}.${host}/32`);
  b.nft(`table inet outpost {
  chain input {
    type filter hook input priority 0; policy accept;
    ip daddr ${prefix}.2 icmp type echo-request drop
    ip daddr ${prefix}.3 icmp type echo-request numgen inc mod 2 == 1 drop
    ip daddr ${prefix}.4 icmp type echo-request numgen inc mod 2 == 1 drop
  }
}
`);
  const f = lab.namespace({
    sysctls: WIDE,
    disableIPv6: true,
    hosts: '127.0.0.1 localhost\n127.0.0.1 dual.outpost.test\n::1 dual.outpost.test\n',
  });
  const x = lab.namespace({ sysctls: { 'net.ipv4.ping_group_range': '1 0' } });

  const base = { checkType: 'ICMP', frequency: 60 };
  await Promise.all([
    once(
      'main',
      a,
      [
        {
          ...base,
          id: 'loopback',
          request: { hostname: '127.0.0.1', pingCount: 3 },
          assertions: [
            { source: 'LATENCY', property: 'avg', comparison: 'LESS_THAN', target: '1000' },
            { source: 'JSON_RESPONSE', property: '$.packets[*].ttl', comparison: 'EQUALS', target: '64' },
            { source: 'JSON_RESPONSE', property: '$.packetLoss', comparison: 'EQUALS', target: '0' },
          ],
        },
        {
          ...base,
          id: 'failing-assertion',
          request: { hostname: '127.0.0.1', pingCount: 2 },
          assertions: [{ source: 'JSON_RESPONSE', property: '$.packets[*].ttl', comparison: 'GREATER_THAN', target: '64' }],
        },
        { ...base, id: 'neighbour', request: { hostname: `${prefix}.2`.replace(/\.2$/, '.1'), pingCount: 3 } },
        { ...base, id: 'ipv6', request: { hostname: '::1', ipFamily: 'IPv6', pingCount: 2 } },
        { ...base, id: 'dropped', request: { hostname: `${prefix}.2`, pingCount: 3 } },
        { ...base, id: 'half-default', request: { hostname: `${prefix}.3`, pingCount: 10 } },
        {
          ...base,
          id: 'half-degraded',
          request: { hostname: `${prefix}.4`, pingCount: 10, degradedPacketLossThreshold: 40, maxPacketLossThreshold: 60 },
        },
      ],
      {},
    ),
    once('fallback', f, [{ ...base, id: 'fallback', request: { hostname: 'dual.outpost.test', ipFamily: 'IPv6', pingCount: 2 } }], {}),
    once('forbidden', x, [{ ...base, id: 'forbidden', request: { hostname: '127.0.0.1', pingCount: 1 } }], {
      PING_PATH: path.join(bin, 'ping'),
    }),
    once('file-caps', a, [{ ...base, id: 'file-caps', request: { hostname: '127.0.0.1', pingCount: 1 } }], {
      PING_PATH: findExecutable('ping') as string,
    }),
  ]);
}, 90_000);

afterAll(() => {
  lab?.destroy();
});

describe.skipIf(unavailable !== undefined)(`ICMP as uid 65534 without capabilities${unavailable ? ` (skipped: ${unavailable})` : ''}`, () => {
  it('the repository and node are readable by the unprivileged user (sanity)', () => {
    expect(REPO).toBeTruthy();
    expect(runs.main?.stderr).not.toMatch(/EACCES|Cannot find module/);
    expect(runs.main?.results.size).toBe(7);
  });

  it('pings loopback with 0 % loss, per-packet RTT and TTL, and passing assertions', () => {
    const { entry, detail } = icmp('main', 'loopback');
    expect(entry).toMatchObject({ hasFailures: false, hasErrors: false, isDegraded: false, checkType: 'ICMP' });
    expect(detail.response).toMatchObject({ address: '127.0.0.1', family: 'IPv4', packetsSent: 3, packetsReceived: 3, packetLoss: 0 });
    expect(detail.response?.packets.map((p) => p.seq)).toEqual([1, 2, 3]);
    for (const packet of detail.response?.packets ?? []) {
      expect(packet.ttl).toBe(64);
      expect(packet.rtt).toBeGreaterThanOrEqual(0);
    }
    const l = detail.response?.latency;
    expect(l && l.min <= l.avg && l.avg <= l.max && l.stdDev >= 0).toBe(true);
    expect(entry.responseTime).toBe(Math.round(l?.avg ?? -1));
    expect(detail.assertions.map((a) => a.passed)).toEqual([true, true, true]);
    expect(detail.assertions[1]?.actual).toEqual([64, 64, 64]);
    expect(detail.jobLog.some((line) => /^Running \S+\/ping -n -c 3 -i 0\.2 -W 2 -4 127\.0\.0\.1$/.test(line))).toBe(true);
  });

  it('a JSONPath selecting several values must hold for each', () => {
    const { entry, detail } = icmp('main', 'failing-assertion');
    expect(entry).toMatchObject({ hasFailures: true, hasErrors: false });
    expect(detail.assertions[0]).toMatchObject({ actual: [64, 64], passed: false });
  });

  it("pings the namespace's own veth address and IPv6 loopback", () => {
    expect(icmp('main', 'neighbour').entry).toMatchObject({ hasFailures: false, hasErrors: false });
    expect(icmp('main', 'neighbour').detail.response).toMatchObject({ address: `${prefix}.1`, packetLoss: 0 });
    expect(icmp('main', 'ipv6').entry).toMatchObject({ hasFailures: false, hasErrors: false });
    expect(icmp('main', 'ipv6').detail.response).toMatchObject({ address: '::1', family: 'IPv6', packetsReceived: 2 });
  });

  it('100 % loss to a host that drops ICMP is a failed run with a clear error', () => {
    const { entry, detail } = icmp('main', 'dropped');
    expect(entry).toMatchObject({ hasFailures: true, hasErrors: true });
    expect(detail.requestError).toBe(`No reply from ${prefix}.2: 3 of 3 packets lost (100 % packet loss)`);
    expect(detail.response).toMatchObject({ packetsSent: 3, packetsReceived: 0, packetLoss: 100, latency: null, packets: [] });
  });

  it('50 % loss fails with the default thresholds (20 %) and is only degraded with 40 % / 60 %', () => {
    const failed = icmp('main', 'half-default');
    expect(failed.detail.response).toMatchObject({ packetsSent: 10, packetsReceived: 5, packetLoss: 50 });
    expect(failed.entry).toMatchObject({ hasFailures: true, hasErrors: false });
    expect(failed.detail.packetLossVerdict).toBe('failed');
    expect(failed.detail.jobLog).toContain('Packet loss 50 % is over maxPacketLossThreshold 20 %: failed');

    // entry.isDegraded stays false until buildResult honours IcmpOutcome.degraded (a shared change, see
    // docs/checks/icmp.md); the loss verdict is in packetLossVerdict meanwhile.
    const degraded = icmp('main', 'half-degraded');
    expect(degraded.detail.response).toMatchObject({ packetLoss: 50 });
    expect(degraded.entry).toMatchObject({ hasFailures: false, hasErrors: false });
    expect(degraded.detail.packetLossVerdict).toBe('degraded');
    expect(degraded.detail.jobLog).toContain('Packet loss 50 % is over degradedPacketLossThreshold 40 %: degraded');
  });

  it('the run exits 1 because some checks failed', () => {
    expect(runs.main?.code).toBe(1);
  });

  it('falls back to IPv4 when IPv6 is disabled, and says so', () => {
    const { entry, detail } = icmp('fallback', 'fallback');
    expect(entry).toMatchObject({ hasFailures: false, hasErrors: false });
    expect(detail.response).toMatchObject({ address: '127.0.0.1', family: 'IPv4', packetLoss: 0 });
    expect(detail.jobLog.find((l) => l.includes('falling back to IPv4'))).toMatch(/^IPv6 is not usable on this host \(.+\): falling back to IPv4$/);
    expect(runs.fallback?.code).toBe(0);
  });

  it('says exactly what to configure when ICMP sockets are forbidden (ping_group_range "1 0")', () => {
    const { entry, detail } = icmp('forbidden', 'forbidden');
    expect(entry).toMatchObject({ hasFailures: true, hasErrors: true });
    expect(detail.requestError).toMatch(
      /^ICMP sockets are not permitted for this process \(uid 65534, groups 65534; net\.ipv4\.ping_group_range is "1 0"\): allow unprivileged ICMP sockets/,
    );
    expect(detail.requestError).toContain('sysctl -w net.ipv4.ping_group_range="0 2147483647"');
    expect(detail.requestError).toContain('--cap-add NET_RAW');
  });

  it("explains why Debian's ping (file capability cap_net_raw) cannot run without capabilities", () => {
    const { detail } = icmp('file-caps', 'file-caps');
    expect(detail.requestError).toMatch(/^PING_PATH=\S+\/ping cannot be executed \(EPERM\): the file carries capabilities/);
  });
});
