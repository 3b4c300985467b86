// When the network fails, show why (docs/diagnostics.md), across real hops: a client
// namespace, a router namespace (ip_forward) and a target namespace whose
// port 8080 drops SYNs (nftables) and whose port 9090 refuses them. The agent
// runs `once` in the client namespace, as root (tcpdump may capture) and as
// uid 65534 without any capability (it may not: one jobLog line says so, and
// tracepath still traces, unprivileged). Artifacts stay in the folder beside
// the results file; tshark reads the pcaps, tar lists the traceroute bundles.

import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CheckResultEntry } from '../../src/core/result-entry.js';
import { findExecutable } from '../support/nginx.js';
import { MAIN, tempDir } from '../support/agent-process.js';
import { NetLab, type Netns, netnsUnavailable } from '../support/netns.js';

const NOBODY = { uid: 65534, gid: 65534 };
const unavailable = netnsUnavailable(['ip', 'nft', 'setpriv', 'tcpdump', 'tshark', 'tracepath', 'traceroute']);

interface Detail {
  requestError: string | null;
  jobLog: string[];
  jobAssets: Array<{ name: string; url: string; size: number; contentType: string }>;
  pcapDataUrl: string | null;
}

interface Run {
  results: Map<string, Detail>;
  stderr: string;
  dir: string;
}

let lab: NetLab;
let client: Netns;
let routerAddress: string;
let targetAddress: string;
let asRoot: Promise<Run>;
let asNobody: Promise<Run>;

function checksFile(dir: string): string {
  const file = path.join(dir, 'checks.json');
  writeFileSync(
    file,
    JSON.stringify({
      checks: [
        { id: 'dropped', checkType: 'URL', request: { url: `http://${targetAddress}:8080/` } },
        { id: 'refused', checkType: 'API', request: { method: 'POST', url: `http://${targetAddress}:9090/orders`, bodyType: 'RAW', body: 'hi' } },
      ],
    }),
  );
  return file;
}

async function runOnce(as?: typeof NOBODY): Promise<Run> {
  const dir = tempDir('outpost-diag-');
  chmodSync(dir, 0o777);
  const state = path.join(dir, 'state');
  mkdirSync(state, { mode: 0o777 });
  chmodSync(state, 0o777);
  const file = checksFile(dir);
  const run = await client.run([process.execPath, MAIN, 'once', file, '--results', path.join(dir, 'results.jsonl')], {
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: dir, STATE_DIR: state, JOB_CONCURRENCY: '2', LOG_LEVEL: 'warn' },
    cwd: dir,
    timeoutMs: 90_000,
    ...(as ? { as } : {}),
  });
  const results = new Map<string, Detail>();
  for (const line of run.stdout.split('\n').filter(Boolean)) {
    const entry = JSON.parse(line) as CheckResultEntry;
    results.set(entry.checkId as string, entry.apiCheckResult as unknown as Detail);
  }
  return { results, stderr: run.stderr, dir };
}

function tshark(file: string, filter: string): string[] {
  const out = execFileSync(findExecutable('tshark') ?? 'tshark', ['-r', file, '-Y', filter, '-T', 'fields', '-e', 'ip.dst', '-e', 'tcp.dstport'], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  return out.split('\n').filter(Boolean);
}

function traceJson(detail: Detail): { tool: string; hops: Array<{ hop: number; address: string | null }> } {
  const bundle = detail.jobAssets.find((a) => a.name === 'traceroute.tar.gz');
  expect(bundle, JSON.stringify(detail.jobLog)).toBeDefined();
  const file = fileURLToPath(bundle?.url as string);
  expect(execFileSync('tar', ['-tzf', file], { encoding: 'utf8' }).split('\n').filter(Boolean).sort()).toEqual(['traceroute.json', 'traceroute.txt']);
  return JSON.parse(execFileSync('tar', ['-xzOf', file, 'traceroute.json'], { encoding: 'utf8' }));
}

beforeAll(() => {
  if (unavailable) return;
  lab = new NetLab();
  const a = lab.subnet();
  let b = lab.subnet();
  for (let i = 0; i < 16 && b === a; i++) b = lab.subnet();
  client = lab.namespace();
  // The test's router answers every probe: a real one rate-limits ICMP, which would make hops flaky here.
  const router = lab.namespace({ sysctls: { 'net.ipv4.ip_forward': '1', 'net.ipv4.icmp_ratelimit': '0' } });
  const target = lab.namespace({
    nftables: 'table inet outpost_test {\n  chain input {\n    type filter hook input priority 0; policy accept;\n    tcp dport 8080 drop\n  }\n}\n',
  });
  lab.link(client, `${a}.2/24`, router, `${a}.1/24`);
  lab.link(router, `${b}.1/24`, target, `${b}.2/24`);
  client.exec('ip', ['route', 'add', 'default', 'via', `${a}.1`]);
  target.exec('ip', ['route', 'add', 'default', 'via', `${b}.1`]);
  routerAddress = `${a}.1`;
  targetAddress = `${b}.2`;
  // Both runs at once: each takes the dropped check's 30 s cap plus its diagnostics.
  asRoot = runOnce();
  asNobody = runOnce(NOBODY);
  asRoot.catch(() => undefined);
  asNobody.catch(() => undefined);
}, 30_000);

afterAll(() => lab?.destroy());

describe.skipIf(unavailable !== undefined)(`diagnostics across a router${unavailable ? ` (skipped: ${unavailable})` : ''}`, () => {
  it('with CAP_NET_RAW: a pcap with the SYNs to the target and a traceroute through the router, for a dropped and a refused port', async () => {
    const run = await asRoot;
    for (const [id, port] of [
      ['dropped', 8080],
      ['refused', 9090],
    ] as const) {
      const detail = run.results.get(id);
      expect(detail, run.stderr).toBeDefined();
      const d = detail as Detail;
      expect(d.requestError).toMatch(id === 'dropped' ? /Timed out after 30000 ms/ : /connection refused \(ECONNREFUSED\)/);
      // The pcap: readable by tshark, holding the repeated request's SYNs to the target's port.
      expect(d.pcapDataUrl, d.jobLog.join('\n')).toMatch(/^file:\/\/.*\/capture\.pcap$/);
      const pcap = fileURLToPath(d.pcapDataUrl as string);
      expect(pcap.startsWith(path.join(run.dir, 'results-artifacts'))).toBe(true);
      const syns = tshark(pcap, `tcp.flags.syn==1 && tcp.flags.ack==0 && ip.dst==${targetAddress}`);
      expect(syns.length).toBeGreaterThanOrEqual(1);
      expect(syns.every((s) => s === `${targetAddress}\t${port}`)).toBe(true);
      if (id === 'dropped') expect(syns.length, 'a SYN and its retransmissions within the repeat').toBeGreaterThanOrEqual(2);
      else expect(tshark(pcap, `tcp.flags.reset==1 && ip.src==${targetAddress}`).length).toBeGreaterThanOrEqual(1);
      expect(d.jobAssets.find((a) => a.name === 'capture.pcap')).toMatchObject({ url: d.pcapDataUrl, contentType: 'application/vnd.tcpdump.pcap' });
      expect(d.jobLog.some((l) => l.startsWith(`Packet capture (capture.pcap: `) && l.includes(`of the request repeated to ${targetAddress}:${port}`))).toBe(true);
      // The traceroute: TCP to the check's port (the agent holds CAP_NET_RAW), with the router as hop 1.
      const trace = traceJson(d);
      expect(trace.tool).toBe('traceroute -T');
      expect(trace.hops.find((h) => h.hop === 1)?.address).toBe(routerAddress);
      expect(d.jobLog).toContain(`Traceroute to ${targetAddress} (TCP port ${port}): ${id === 'refused' ? 'reached in 2 hops' : `not reached (last reply from hop 1, ${routerAddress})`}`);
      expect(d.jobLog.some((l) => /^ {2}1 {2}/.test(l) && l.includes(routerAddress))).toBe(true);
    }
  }, 120_000);

  it('as uid 65534 without capabilities: one jobLog line about the missing capture, a complete result, and a tracepath', async () => {
    const run = await asNobody;
    for (const id of ['dropped', 'refused']) {
      const d = run.results.get(id) as Detail;
      expect(d, run.stderr).toBeDefined();
      expect(d.requestError).not.toBeNull();
      expect(d.pcapDataUrl).toBeNull();
      const capture = d.jobLog.filter((l) => l.startsWith('Packet capture'));
      expect(capture).toHaveLength(1);
      expect(capture[0]).toMatch(/^Packet capture unavailable: \S*tcpdump may not capture without CAP_NET_RAW \(".*(permission|not permitted).*"\); to capture, run the container with --cap-add NET_RAW, or give tcpdump the capability: setcap cap_net_raw\+ep /);
      const trace = traceJson(d);
      expect(trace.tool).toBe('tracepath');
      expect(trace.hops.find((h) => h.hop === 1)?.address).toBe(routerAddress);
      expect(d.jobLog).toContain(`Traceroute to ${targetAddress} (UDP, tracepath): reached in 2 hops`);
      expect(d.jobAssets.map((a) => a.name)).toEqual(['traceroute.tar.gz']);
    }
    // The agent's own working directory for artifacts is not used in local mode; nothing was left in STATE_DIR.
    expect(existsSync(path.join(run.dir, 'state', 'artifacts'))).toBe(false);
  }, 120_000);
});
