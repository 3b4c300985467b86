// `npm run bench`: the real agent process against Debian's
// prometheus-blackbox-exporter, side by side, on the same nginx on loopback.
//
//   agent:    N URL jobs through the fake control plane, JOB_CONCURRENCY=256;
//             checks/s from the first claim to the last result the fake
//             control plane accepted (the spool's fsync and the results
//             linger included: that is what "delivered" costs).
//   blackbox: N `GET /probe?target=…&module=http_2xx`, 256 at a time; probes/s
//             from the first request to the last answer.
//
// Then TCP and DNS rows, each side the same way, same concurrency:
//
//   TCP:      N connect-only TCP checks ({hostname: 127.0.0.1, port}) to the same
//             nginx's port, vs `module=tcp_connect` (prober tcp) probes.
//   DNS:      N A queries over UDP for www.outpost.test to BIND (`named`, from
//             test/support/dns-server.ts, no response-rate-limit), vs
//             `module=dns` (prober dns, valid_rcodes NOERROR) probes. Both sides
//             ask the same named, so if named saturates (its CPU close to the wall
//             time) it caps both and the ratio only says so much: the report says
//             when that happens.
//
// Peak RSS is VmHWM from /proc/<pid>/status, read just before each process is
// stopped. Each side runs twice (alternating order: A B, B A) to show the
// machine's noise; a second round is skipped if it would overrun the budget.
// It is a benchmark, not a timed test: it asserts that every job was delivered
// and every probe answered, never a speed.
//
// BENCH_JOBS and BENCH_ROUNDS override N and the rounds for a quick local try
// (BENCH_TCP_JOBS and BENCH_DNS_JOBS the TCP and DNS rows' N, default 10,000);
// BENCH_AGENT_NODE_OPTIONS is passed to the agent as NODE_OPTIONS (Node 20 refuses
// --cpu-prof and --trace-gc there: use BENCH_AGENT_CPU_PROFILE=<dir>, which preloads
// test/bench/cpu-profile.mjs, then `node test/bench/cpu-profile.mjs <dir>/*.cpuprofile`);
// BENCH_AGENT_OUTPUT_DIR keeps the agent's stdout and stderr there.

import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { Pool } from 'undici';
import { expect, test } from 'vitest';
import { PROTOCOL_ROUTES } from '../../src/core/protocol.js';
import { cleanEnv, REPO, startAgent, tempDir } from '../support/agent-process.js';
import { RECOMMENDED_NODE_OPTIONS } from '../../src/node-options.js';
import { type DnsServer, startNamed, TEST_ZONE } from '../support/dns-server.js';
import { FakeControlPlane } from '../support/fake-control-plane.js';
import { startNginx } from '../support/nginx.js';
import { startBlackbox } from './blackbox.js';
import { ensureDebianTools } from './install.js';

function positiveInteger(name: string, fallback: number, max: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 1 || value > max) throw new Error(`${name}=${raw}: must be an integer from 1 to ${max}`);
  return value;
}

const N = positiveInteger('BENCH_JOBS', 20_000, 1_000_000);
const TCP_N = positiveInteger('BENCH_TCP_JOBS', 10_000, 1_000_000);
const DNS_N = positiveInteger('BENCH_DNS_JOBS', 10_000, 1_000_000);
const ROUNDS = positiveInteger('BENCH_ROUNDS', 2, 3);
const CONCURRENCY = 256;
/** One side of one round may take at most this long. */
const SIDE_LIMIT_MS = 120_000;
/** A further URL round starts only if, going by the rounds so far, it ends within this budget (from the bench's start). */
const TOTAL_BUDGET_MS = 150_000;
/** The same for the TCP rounds, and for the DNS rounds, counted from each one's first round. */
const EXTRA_BUDGET_MS = 45_000;
/** The name the DNS rows ask for (two A records). */
const DNS_QUERY = `www.${TEST_ZONE}`;
/** The performance targets each row is printed against: URL ≥ 1.5× the exporter's rate, TCP and DNS ≥ 2×, peak RSS ≤ 100 MB. */
const TARGET_RATIO = 1.5;
const TARGET_RATIO_TCP_DNS = 2;
const TARGET_RSS_MB = 100;

const EXPORTER = 'prometheus-blackbox-exporter';

interface Side {
  rate: number;
  elapsedMs: number;
  done: number;
  failures: number;
  peakRssMb: number;
  cpuSeconds: number;
  /** CPU the bench process itself spent driving this side (fake control plane, or load generator). */
  driverCpuSeconds: number;
  /** CPU of the target meanwhile: nginx (URL, TCP) or named (DNS). */
  targetCpuSeconds: number;
  /** Machine CPU (user + system) used meanwhile by anything else: the machine's noise. */
  otherCpuSeconds: number;
  /** otherCpuSeconds as a share of all cores over the same window. */
  otherCpuShare: number;
  notes: string[];
}

const log = (line: string) => process.stdout.write(`[bench] ${line}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const mb = (kb: number) => kb / 1024;

let clockTicks: number | undefined;
function ticksPerSecond(): number {
  if (clockTicks === undefined) {
    try {
      clockTicks = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      clockTicks = 100;
    }
  }
  return clockTicks;
}

/** VmHWM (peak resident set) of a live process, in kB. */
function peakRssKb(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const match = /^VmHWM:\s+(\d+)\s+kB/m.exec(status);
  if (!match) throw new Error(`no VmHWM in /proc/${pid}/status`);
  return Number(match[1]);
}

/** User + system CPU time a live process has used, in seconds. */
function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / ticksPerSecond();
}

/** User + system CPU the whole machine has used since boot, in seconds (/proc/stat). */
function machineCpuSeconds(): number {
  const [, user, nice, system] = (readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '').trim().split(/\s+/).map(Number);
  return ((user ?? 0) + (nice ?? 0) + (system ?? 0)) / ticksPerSecond();
}

/** CPU of the target: a process and its children (nginx's master and workers; named alone, with its threads). */
function targetCpuSeconds(master: number | undefined): number {
  if (!master) return 0;
  let pids = [master];
  try {
    pids = [master, ...readFileSync(`/proc/${master}/task/${master}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number)];
  } catch {
    // No children file on this kernel: the master alone.
  }
  let total = 0;
  for (const pid of pids) {
    try {
      total += cpuSeconds(pid);
    } catch {
      // A worker that just went away.
    }
  }
  return total;
}

interface CpuMark {
  at: number;
  machine: number;
  target: number;
  driver: NodeJS.CpuUsage;
}

function markCpu(targetPid: number | undefined): CpuMark {
  return { at: performance.now(), machine: machineCpuSeconds(), target: targetCpuSeconds(targetPid), driver: process.cpuUsage() };
}

/** Splits the machine's CPU since `mark` into driver, target and everything else besides `subjectCpu` (the measured process). */
function cpuSince(mark: CpuMark, targetPid: number | undefined, subjectCpu: number): Pick<Side, 'driverCpuSeconds' | 'targetCpuSeconds' | 'otherCpuSeconds' | 'otherCpuShare'> {
  const used = process.cpuUsage(mark.driver);
  const driver = (used.user + used.system) / 1e6;
  const targetCpu = targetCpuSeconds(targetPid) - mark.target;
  const other = Math.max(0, machineCpuSeconds() - mark.machine - subjectCpu - driver - targetCpu);
  const capacity = (os.cpus().length * (performance.now() - mark.at)) / 1000;
  return { driverCpuSeconds: driver, targetCpuSeconds: targetCpu, otherCpuSeconds: other, otherCpuShare: capacity > 0 ? other / capacity : 0 };
}

/** One kind of check measured on both sides. */
interface Kind {
  name: 'URL' | 'TCP' | 'DNS';
  /** Jobs (agent) and probes (blackbox) per side per round. */
  n: number;
  /** The check every agent job runs. */
  check: Record<string, unknown>;
  /** The result's member holding the check's detail (apiCheckResult…). */
  member: string;
  /** The exporter's probe path (target and module). */
  probePath: string;
  /** Which process the target is (nginx, named), and its pid for the CPU rows. */
  targetName: string;
  targetPid: number | undefined;
}

/**
 * NODE_OPTIONS for the agent: what the product ships with (RECOMMENDED_NODE_OPTIONS), or
 * BENCH_AGENT_NODE_OPTIONS instead when set ("" measures Node's defaults), plus the CPU-profile
 * preload if BENCH_AGENT_CPU_PROFILE is set.
 */
function agentNodeOptions(): Record<string, string> {
  const options = [process.env.BENCH_AGENT_NODE_OPTIONS ?? RECOMMENDED_NODE_OPTIONS];
  const profileDir = process.env.BENCH_AGENT_CPU_PROFILE;
  if (profileDir) options.push(`--import ${path.join(REPO, 'test/bench/cpu-profile.mjs')}`);
  const joined = options.join(' ').trim();
  return {
    ...(joined ? { NODE_OPTIONS: joined } : {}),
    ...(profileDir ? { OUTPOST_BENCH_CPU_PROFILE_DIR: path.resolve(profileDir) } : {}),
  };
}

async function runAgent(kind: Kind): Promise<Side> {
  const n = kind.n;
  const cp = await FakeControlPlane.start();
  const stateDir = tempDir('outpost-bench-');
  for (let i = 0; i < n; i++) cp.addJob({ id: `bench-${i}`, name: `bench ${i}`, ...kind.check });
  const cpuBefore = markCpu(kind.targetPid);
  const agent = startAgent(
    ['agent'],
    cleanEnv({
      API_URL: cp.url,
      API_KEY: cp.apiKey,
      JOB_CONCURRENCY: String(CONCURRENCY),
      STATE_DIR: stateDir,
      LOG_LEVEL: 'warn',
      CLAIM_WAIT_SECONDS: '1',
      // Stopped only once every result is in; if the bench is interrupted, the agent must not linger draining.
      SHUTDOWN_GRACE_SECONDS: '5',
      ...agentNodeOptions(),
    }),
  );
  let exited = false;
  agent.exit.then(() => {
    exited = true;
  });
  try {
    const deadline = Date.now() + SIDE_LIMIT_MS;
    while (cp.results.size < n) {
      if (exited) throw new Error(`the agent exited after ${cp.results.size} of ${n} results; stderr: ${agent.stderr().slice(-2000)}`);
      if (Date.now() > deadline) {
        throw new Error(`agent side: only ${cp.results.size} of ${n} results after ${SIDE_LIMIT_MS} ms (violations: ${cp.violations.slice(0, 3).join('; ')})`);
      }
      await sleep(25);
    }
    const pid = agent.proc.pid as number;
    const peakRssMb = mb(peakRssKb(pid));
    const cpu = cpuSeconds(pid);
    const shares = cpuSince(cpuBefore, kind.targetPid, cpu);

    const firstClaim = cp.requests.find((r) => r.route === PROTOCOL_ROUTES.claim && r.status === 200);
    let lastResult = 0;
    let failures = 0;
    let unanswered = 0;
    const detailOf = (result: unknown) => (result as Record<string, unknown>)[kind.member] as { requestError?: string; response?: { status?: number; answer?: unknown[] } } | undefined;
    for (const stored of cp.results.values()) {
      lastResult = Math.max(lastResult, stored.receivedAt);
      if (stored.result.hasFailures || stored.result.hasErrors) failures++;
      // DNS: NOERROR with an empty answer would pass too; count the answers that came back without the A records.
      if (kind.name === 'DNS' && !(detailOf(stored.result)?.response?.answer?.length ?? 0)) unanswered++;
    }
    const elapsedMs = lastResult - (firstClaim?.at ?? lastResult);
    const notDone = [...cp.jobs.values()].filter((s) => s.state !== 'done').length;
    const notes: string[] = [];
    const calls = (route: string) => cp.requests.filter((r) => r.route === route).length;
    notes.push(
      `calls: ${calls(PROTOCOL_ROUTES.claim)} claim, ${calls(PROTOCOL_ROUTES.results)} results, ${calls(PROTOCOL_ROUTES.leases)} leases; ` +
        `largest claim ${Math.max(0, ...cp.claims.map((c) => c.given))}; most jobs leased at once (running or awaiting delivery) ${cp.maxOutstanding}; ` +
        `re-sent ${cp.resentResults}, conflicting ${cp.conflictingResults}, protocol violations ${cp.violations.length}`,
    );
    const warnings = agent.logs.filter((l) => l.level >= 40);
    if (warnings.length > 0) {
      const kinds = new Map<string, number>();
      for (const w of warnings) kinds.set(w.msg, (kinds.get(w.msg) ?? 0) + 1);
      notes.push(`agent warnings: ${[...kinds].map(([msg, count]) => `${count}× "${msg}"`).join(', ')}`);
    }
    if (failures > 0) {
      const sample = [...cp.results.values()].find((s) => s.result.hasFailures || s.result.hasErrors);
      const detail = detailOf(sample?.result);
      notes.push(`first failed check: ${detail?.requestError ?? (kind.name === 'URL' ? `status ${detail?.response?.status}` : JSON.stringify(detail).slice(0, 300))}`);
    }
    if (unanswered > 0) notes.push(`${unanswered} DNS results without an answer record`);
    expect(notDone, 'every job has its result').toBe(0);
    expect(cp.results.size).toBe(n);
    return { rate: (n / elapsedMs) * 1000, elapsedMs, done: cp.results.size, failures, peakRssMb, cpuSeconds: cpu, ...shares, notes };
  } finally {
    agent.kill('SIGTERM');
    const stopped = await Promise.race([agent.exit.then(() => true), sleep(30_000).then(() => false)]);
    if (!stopped) {
      agent.kill('SIGKILL');
      await agent.exit;
    }
    if (process.env.BENCH_AGENT_OUTPUT_DIR) {
      const base = path.join(process.env.BENCH_AGENT_OUTPUT_DIR, `agent-${process.pid}-${Date.now()}`);
      writeFileSync(`${base}.stdout`, agent.stdout());
      writeFileSync(`${base}.stderr`, agent.stderr());
    }
    await cp.close();
    rmSync(stateDir, { recursive: true, force: true });
  }
}

async function runBlackbox(binary: string, kind: Kind): Promise<Side> {
  const n = kind.n;
  const cpuBefore = markCpu(kind.targetPid);
  const exporter = await startBlackbox(binary, { dnsQueryName: DNS_QUERY });
  const pool = new Pool(exporter.url, { connections: CONCURRENCY, pipelining: 1, headersTimeout: 30_000, bodyTimeout: 30_000 });
  try {
    const probePath = kind.probePath;
    let unanswered = 0;
    let started = 0;
    let succeeded = 0;
    let failed = 0;
    let errors = 0;
    let firstProblem: string | undefined;
    const deadline = Date.now() + SIDE_LIMIT_MS;
    const start = performance.now();
    const worker = async () => {
      while (started < n && Date.now() < deadline) {
        started++;
        try {
          const { statusCode, body } = await pool.request({ path: probePath, method: 'GET' });
          const text = await body.text();
          if (statusCode === 200 && /^probe_success 1$/m.test(text)) {
            succeeded++;
            if (kind.name === 'DNS' && !/^probe_dns_answer_rrs [1-9]/m.test(text)) unanswered++;
          } else if (statusCode === 200 && /^probe_success 0$/m.test(text)) {
            failed++;
            firstProblem ??= `probe_success 0: ${text.slice(0, 300)}`;
          } else {
            errors++;
            firstProblem ??= `exporter answered ${statusCode}: ${text.slice(0, 300)}`;
          }
        } catch (error) {
          errors++;
          firstProblem ??= `request failed: ${(error as Error).message}`;
        }
      }
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, worker));
    const elapsedMs = performance.now() - start;
    const exit = exporter.exited();
    if (exit) throw new Error(exit);
    const peakRssMb = mb(peakRssKb(exporter.pid));
    const cpu = cpuSeconds(exporter.pid);
    const shares = cpuSince(cpuBefore, kind.targetPid, cpu);
    const answered = succeeded + failed;
    const notes = firstProblem ? [`first blackbox problem: ${firstProblem}`] : [];
    if (unanswered > 0) notes.push(`${unanswered} successful DNS probes without an answer record`);
    if (answered < n) {
      throw new Error(`blackbox side: ${answered} of ${n} probes answered, ${errors} errors (${firstProblem ?? 'time limit'})`);
    }
    return { rate: (n / elapsedMs) * 1000, elapsedMs, done: answered, failures: failed, peakRssMb, cpuSeconds: cpu, ...shares, notes };
  } finally {
    await pool.close();
    await exporter.stop();
  }
}

function versionOf(command: string, args: string[]): string {
  // nginx -v prints to stderr, the exporter to stdout; named -v prints "BIND 9.x…" (no "version").
  const run = spawnSync(command, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 10_000 });
  const lines = `${run.stdout ?? ''}\n${run.stderr ?? ''}`.split('\n').map((l) => l.trim());
  return lines.find((l) => /version/i.test(l)) ?? lines.find((l) => /^BIND /.test(l)) ?? '?';
}

const fmt = (n: number, digits = 0) => n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
const spread = (values: number[]) => (values.length < 2 ? 0 : ((Math.max(...values) - Math.min(...values)) / Math.max(...values)) * 100);

interface Round {
  agent: Side;
  blackbox: Side;
}

/** A table with a column per round, then min and max; its lines, framed by rules. */
function renderTable(rows: Array<[string, number[], number]>, roundCount: number): string[] {
  const header = ['', ...Array.from({ length: roundCount }, (_, i) => `round ${i + 1}`), 'min', 'max'];
  const table = rows.map(([name, values, digits]) => [name, ...values.map((v) => fmt(v, digits)), fmt(Math.min(...values), digits), fmt(Math.max(...values), digits)]);
  const widths = header.map((_, col) => Math.max(...[header, ...table].map((row) => (row[col] ?? '').length)));
  const line = (row: string[]) => row.map((cell, col) => (col === 0 ? cell.padEnd(widths[col] ?? 0) : cell.padStart(widths[col] ?? 0))).join('  ');
  const rule = '-'.repeat(line(header).length);
  return [rule, line(header), rule, ...table.map(line), rule];
}

function report(rounds: Round[], context: { nginx: string; blackbox: string; skipped: string | undefined; loadBefore: number[]; totalMs: number }): string {
  const agents = rounds.map((r) => r.agent);
  const boxes = rounds.map((r) => r.blackbox);
  const ratios = rounds.map((r) => r.agent.rate / r.blackbox.rate);
  const bestAgent = Math.max(...agents.map((s) => s.rate));
  const bestBox = Math.max(...boxes.map((s) => s.rate));
  const ratio = bestAgent / bestBox;
  const agentRss = Math.max(...agents.map((s) => s.peakRssMb));
  const boxRss = Math.max(...boxes.map((s) => s.peakRssMb));

  const rows: Array<[string, number[], number]> = [
    ['agent checks/s', agents.map((s) => s.rate), 0],
    ['blackbox probes/s', boxes.map((s) => s.rate), 0],
    ['ratio agent/blackbox', ratios, 2],
    ['agent wall time (s)', agents.map((s) => s.elapsedMs / 1000), 2],
    ['blackbox wall time (s)', boxes.map((s) => s.elapsedMs / 1000), 2],
    ['agent peak RSS (MB)', agents.map((s) => s.peakRssMb), 1],
    ['blackbox peak RSS (MB)', boxes.map((s) => s.peakRssMb), 1],
    ['agent CPU (s)', agents.map((s) => s.cpuSeconds), 2],
    ['blackbox CPU (s)', boxes.map((s) => s.cpuSeconds), 2],
    ['nginx CPU, agent side (s)', agents.map((s) => s.targetCpuSeconds), 2],
    ['nginx CPU, blackbox side (s)', boxes.map((s) => s.targetCpuSeconds), 2],
    ['driver CPU, agent side (s)', agents.map((s) => s.driverCpuSeconds), 2],
    ['driver CPU, blackbox side (s)', boxes.map((s) => s.driverCpuSeconds), 2],
    ['other CPU, agent side (s)', agents.map((s) => s.otherCpuSeconds), 2],
    ['other CPU, blackbox side (s)', boxes.map((s) => s.otherCpuSeconds), 2],
    ['agent failed checks', agents.map((s) => s.failures), 0],
    ['blackbox failed probes', boxes.map((s) => s.failures), 0],
  ];

  const out: string[] = [];
  out.push('');
  out.push(`Outpost bench: ${fmt(N)} URL checks, concurrency ${CONCURRENCY}, loopback nginx, ${rounds.length} round(s) (round 1: agent then blackbox; round 2: blackbox then agent)`);
  out.push(`machine: ${os.cpus().length} × ${os.cpus()[0]?.model ?? '?'}, node ${process.version}, load average before ${context.loadBefore.map((l) => l.toFixed(2)).join(' ')}, after ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}`);
  out.push(`peers: ${context.nginx}; ${context.blackbox}`);
  out.push(`agent NODE_OPTIONS: ${agentNodeOptions().NODE_OPTIONS ?? "(none: Node's defaults)"}`);
  out.push(...renderTable(rows, rounds.length));
  for (const [i, r] of rounds.entries()) {
    for (const note of [...r.agent.notes, ...r.blackbox.notes]) out.push(`round ${i + 1}: ${note}`);
  }
  if (context.skipped) out.push(context.skipped);
  out.push(`agent_checks_per_second: ${fmt(bestAgent)} (best of ${rounds.length}; worst ${fmt(Math.min(...agents.map((s) => s.rate)))})`);
  out.push(`blackbox_probes_per_second: ${fmt(bestBox)} (best of ${rounds.length}; worst ${fmt(Math.min(...boxes.map((s) => s.rate)))})`);
  out.push(`ratio_agent_over_blackbox: ${ratio.toFixed(2)} (best/best; per round ${ratios.map((r) => r.toFixed(2)).join(', ')}) target >= ${TARGET_RATIO}: ${ratio >= TARGET_RATIO ? 'met' : 'NOT met'}`);
  out.push(`agent_peak_rss_mb: ${agentRss.toFixed(1)} (max over rounds) target <= ${TARGET_RSS_MB}: ${agentRss <= TARGET_RSS_MB ? 'met' : 'NOT met'}`);
  out.push(`blackbox_peak_rss_mb: ${boxRss.toFixed(1)} (max over rounds)`);
  const share = (sides: Side[]) => `${(Math.max(...sides.map((s) => s.otherCpuShare)) * 100).toFixed(0)} %`;
  out.push(
    `noise: agent rate spread ${spread(agents.map((s) => s.rate)).toFixed(1)} %, blackbox rate spread ${spread(boxes.map((s) => s.rate)).toFixed(1)} % between rounds; ` +
      `other processes took up to ${share(agents)} of the machine's CPU during agent runs, ${share(boxes)} during blackbox runs`,
  );
  out.push(`total bench time: ${(context.totalMs / 1000).toFixed(1)} s`);
  out.push('');
  return out.join('\n');
}

/** named runs with one worker thread (-n 1): at this many cores' worth of its CPU over a run's wall time it is the bottleneck. */
const NAMED_SATURATED_CORES = 0.85;

/** The TCP or DNS rows: a table of their own, every row named after the kind. */
function kindReport(kind: Kind, rounds: Round[], context: { description: string; peer: string; skipped: string | undefined; ms: number }): string {
  const k = kind.name;
  const agents = rounds.map((r) => r.agent);
  const boxes = rounds.map((r) => r.blackbox);
  const ratios = rounds.map((r) => r.agent.rate / r.blackbox.rate);
  const bestAgent = Math.max(...agents.map((s) => s.rate));
  const bestBox = Math.max(...boxes.map((s) => s.rate));
  const agentRss = Math.max(...agents.map((s) => s.peakRssMb));
  const boxRss = Math.max(...boxes.map((s) => s.peakRssMb));
  const busy = (s: Side) => s.targetCpuSeconds / (s.elapsedMs / 1000);
  const rows: Array<[string, number[], number]> = [
    [`${k} agent checks/s`, agents.map((s) => s.rate), 0],
    [`${k} blackbox probes/s`, boxes.map((s) => s.rate), 0],
    [`${k} ratio agent/blackbox`, ratios, 2],
    [`${k} agent wall time (s)`, agents.map((s) => s.elapsedMs / 1000), 2],
    [`${k} blackbox wall time (s)`, boxes.map((s) => s.elapsedMs / 1000), 2],
    [`${k} agent peak RSS (MB)`, agents.map((s) => s.peakRssMb), 1],
    [`${k} blackbox peak RSS (MB)`, boxes.map((s) => s.peakRssMb), 1],
    [`${k} agent CPU (s)`, agents.map((s) => s.cpuSeconds), 2],
    [`${k} blackbox CPU (s)`, boxes.map((s) => s.cpuSeconds), 2],
    [`${k} ${kind.targetName} CPU, agent side (s)`, agents.map((s) => s.targetCpuSeconds), 2],
    [`${k} ${kind.targetName} CPU, blackbox side (s)`, boxes.map((s) => s.targetCpuSeconds), 2],
    [`${k} driver CPU, agent side (s)`, agents.map((s) => s.driverCpuSeconds), 2],
    [`${k} driver CPU, blackbox side (s)`, boxes.map((s) => s.driverCpuSeconds), 2],
    [`${k} other CPU, agent side (s)`, agents.map((s) => s.otherCpuSeconds), 2],
    [`${k} other CPU, blackbox side (s)`, boxes.map((s) => s.otherCpuSeconds), 2],
    [`${k} agent failed checks`, agents.map((s) => s.failures), 0],
    [`${k} blackbox failed probes`, boxes.map((s) => s.failures), 0],
  ];
  const out: string[] = [];
  out.push('');
  out.push(`${k} rows: N = ${fmt(kind.n)} ${context.description}, concurrency ${CONCURRENCY}, ${rounds.length} round(s) (round 1: agent then blackbox; round 2: blackbox then agent)`);
  out.push(`peer: ${context.peer}`);
  out.push(...renderTable(rows, rounds.length));
  for (const [i, r] of rounds.entries()) {
    for (const note of [...r.agent.notes, ...r.blackbox.notes]) out.push(`${k} round ${i + 1}: ${note}`);
  }
  if (context.skipped) out.push(context.skipped);
  const lower = k.toLowerCase();
  out.push(`${lower}_agent_checks_per_second: ${fmt(bestAgent)} (best of ${rounds.length}; worst ${fmt(Math.min(...agents.map((s) => s.rate)))})`);
  out.push(`${lower}_blackbox_probes_per_second: ${fmt(bestBox)} (best of ${rounds.length}; worst ${fmt(Math.min(...boxes.map((s) => s.rate)))})`);
  const ratio = bestAgent / bestBox;
  out.push(
    `${lower}_ratio_agent_over_blackbox: ${ratio.toFixed(2)} (best/best; per round ${ratios.map((r) => r.toFixed(2)).join(', ')}) ` +
      `target >= ${TARGET_RATIO_TCP_DNS}: ${ratio >= TARGET_RATIO_TCP_DNS ? 'met' : 'NOT met'}`,
  );
  out.push(
    `${lower}_agent_peak_rss_mb: ${agentRss.toFixed(1)} target <= ${TARGET_RSS_MB}: ${agentRss <= TARGET_RSS_MB ? 'met' : 'NOT met'}; ` +
      `${lower}_blackbox_peak_rss_mb: ${boxRss.toFixed(1)} (max over rounds)`,
  );
  const busiest = (sides: Side[]) => Math.max(...sides.map(busy));
  const share = (sides: Side[]) => `${(Math.max(...sides.map((s) => s.otherCpuShare)) * 100).toFixed(0)} %`;
  out.push(
    `${k} ${kind.targetName} busy: up to ${busiest(agents).toFixed(2)} cores during agent runs, ${busiest(boxes).toFixed(2)} during blackbox runs; ` +
      `rate spread between rounds: agent ${spread(agents.map((s) => s.rate)).toFixed(1)} %, blackbox ${spread(boxes.map((s) => s.rate)).toFixed(1)} %; ` +
      `other processes took up to ${share(agents)} of the machine's CPU during agent runs, ${share(boxes)} during blackbox runs`,
  );
  if (kind.name === 'DNS') {
    const saturated = [busiest(agents) >= NAMED_SATURATED_CORES ? 'agent' : '', busiest(boxes) >= NAMED_SATURATED_CORES ? 'blackbox' : ''].filter(Boolean);
    out.push(
      saturated.length === 0
        ? `DNS: named (one worker thread) was not the bottleneck (below ${NAMED_SATURATED_CORES} of its core on both sides)`
        : `DNS: named (one worker thread) was near saturation during the ${saturated.join(' and ')} runs: it caps ${saturated.length === 2 ? 'both sides; both are measured against the same server, so the ratio is fair but understates the faster side' : 'that side'}`,
    );
  }
  out.push(`${k} rows time: ${(context.ms / 1000).toFixed(1)} s`);
  out.push('');
  return out.join('\n');
}

/** Alternating rounds of one kind (A B, B A…); a further round starts only if it is expected to end within the budget. */
async function runRounds(kind: Kind, binary: string, budget: { start: number; ms: number }): Promise<{ rounds: Round[]; skipped: string | undefined }> {
  const prefix = kind.name === 'URL' ? '' : `${kind.name} `;
  const rounds: Round[] = [];
  const roundsStart = Date.now();
  for (let round = 1; round <= ROUNDS; round++) {
    const elapsed = Date.now() - roundsStart;
    if (round > 1 && Date.now() - budget.start + elapsed / (round - 1) > budget.ms) {
      return { rounds, skipped: `${prefix}rounds ${round}..${ROUNDS} skipped: they would overrun the ${budget.ms / 1000} s budget` };
    }
    let agent: Side;
    let blackbox: Side;
    if (round % 2 === 1) {
      log(`${prefix}round ${round}: agent…`);
      agent = await runAgent(kind);
      log(`${prefix}round ${round}: agent ${fmt(agent.rate)} checks/s; blackbox…`);
      blackbox = await runBlackbox(binary, kind);
      log(`${prefix}round ${round}: blackbox ${fmt(blackbox.rate)} probes/s`);
    } else {
      log(`${prefix}round ${round}: blackbox…`);
      blackbox = await runBlackbox(binary, kind);
      log(`${prefix}round ${round}: blackbox ${fmt(blackbox.rate)} probes/s; agent…`);
      agent = await runAgent(kind);
      log(`${prefix}round ${round}: agent ${fmt(agent.rate)} checks/s`);
    }
    rounds.push({ agent, blackbox });
  }
  return { rounds, skipped: undefined };
}

test(`bench: agent vs blackbox exporter at concurrency ${CONCURRENCY}: ${N} URL, ${TCP_N} TCP, ${DNS_N} DNS checks`, async () => {
  const benchStart = Date.now();
  const tools = ensureDebianTools(
    [
      { binary: 'nginx', pkg: 'nginx-light' },
      { binary: EXPORTER, pkg: 'prometheus-blackbox-exporter' },
      { binary: 'named', pkg: 'bind9' },
    ],
    log,
  );
  const exporter = tools[EXPORTER] as string;
  const nginxVersion = versionOf(tools.nginx as string, ['-v']);
  const blackboxVersion = versionOf(exporter, ['--version']);
  const namedVersion = versionOf(tools.named as string, ['-v']);
  const loadBefore = os.loadavg();
  const all: Array<{ kind: Kind; rounds: Round[] }> = [];
  const nginx = await startNginx({ accessLog: false });
  try {
    const url: Kind = {
      name: 'URL',
      n: N,
      check: { checkType: 'URL', request: { url: `${nginx.url}/health` } },
      member: 'apiCheckResult',
      probePath: `/probe?target=${encodeURIComponent(`${nginx.url}/health`)}&module=http_2xx`,
      targetName: 'nginx',
      targetPid: nginx.pid,
    };
    const urlRun = await runRounds(url, exporter, { start: benchStart, ms: TOTAL_BUDGET_MS });
    all.push({ kind: url, rounds: urlRun.rounds });
    process.stdout.write(report(urlRun.rounds, { nginx: nginxVersion, blackbox: blackboxVersion, skipped: urlRun.skipped, loadBefore, totalMs: Date.now() - benchStart }));

    const tcp: Kind = {
      name: 'TCP',
      n: TCP_N,
      check: { checkType: 'TCP', request: { hostname: '127.0.0.1', port: nginx.port } },
      member: 'tcpCheckResult',
      probePath: `/probe?target=${encodeURIComponent(`127.0.0.1:${nginx.port}`)}&module=tcp_connect`,
      targetName: 'nginx',
      targetPid: nginx.pid,
    };
    const tcpStart = Date.now();
    const tcpRun = await runRounds(tcp, exporter, { start: tcpStart, ms: EXTRA_BUDGET_MS });
    all.push({ kind: tcp, rounds: tcpRun.rounds });
    process.stdout.write(
      kindReport(tcp, tcpRun.rounds, { description: "connect-only TCP checks / tcp_connect probes to nginx's port", peer: nginxVersion, skipped: tcpRun.skipped, ms: Date.now() - tcpStart }),
    );
  } finally {
    await nginx.stop();
  }

  let named: DnsServer | undefined;
  try {
    named = await startNamed();
    const dns: Kind = {
      name: 'DNS',
      n: DNS_N,
      check: { checkType: 'DNS', request: { recordType: 'A', query: DNS_QUERY, nameServer: '127.0.0.1', port: named.port, protocol: 'UDP' } },
      member: 'dnsCheckResult',
      probePath: `/probe?target=${encodeURIComponent(`127.0.0.1:${named.port}`)}&module=dns`,
      targetName: 'named',
      targetPid: named.pid,
    };
    const dnsStart = Date.now();
    const dnsRun = await runRounds(dns, exporter, { start: dnsStart, ms: EXTRA_BUDGET_MS });
    all.push({ kind: dns, rounds: dnsRun.rounds });
    process.stdout.write(
      kindReport(dns, dnsRun.rounds, {
        description: `A queries over UDP for ${DNS_QUERY} (agent DNS checks / dns probes, NOERROR) to named, no response-rate-limit`,
        peer: namedVersion,
        skipped: dnsRun.skipped,
        ms: Date.now() - dnsStart,
      }),
    );
  } finally {
    await named?.stop();
  }
  process.stdout.write(`total bench time (URL, TCP, DNS): ${((Date.now() - benchStart) / 1000).toFixed(1)} s\n`);
  for (const { kind, rounds } of all) {
    for (const { agent, blackbox } of rounds) {
      expect(agent.done).toBe(kind.n);
      expect(blackbox.done).toBe(kind.n);
    }
  }
});
