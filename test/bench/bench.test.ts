// `npm run bench` (issue #2 item 11): the real agent process against Debian's
// prometheus-blackbox-exporter, side by side, on the same nginx on loopback.
//
//   agent:    N URL jobs through the fake control plane, JOB_CONCURRENCY=256;
//             checks/s from the first claim to the last result the fake
//             control plane accepted (the spool's fsync and the results
//             linger included: that is what "delivered" costs).
//   blackbox: N `GET /probe?target=…&module=http_2xx`, 256 at a time; probes/s
//             from the first request to the last answer.
//
// Peak RSS is VmHWM from /proc/<pid>/status, read just before each process is
// stopped. Each side runs twice (alternating order: A B, B A) to show the
// machine's noise; a second round is skipped if it would overrun the budget.
// It is a benchmark, not a timed test: it asserts that every job was delivered
// and every probe answered, never a speed.
//
// BENCH_JOBS and BENCH_ROUNDS override N and the rounds for a quick local try;
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
import { PROTOCOL_ROUTES } from '../../src/control-plane/protocol.js';
import { cleanEnv, REPO, startAgent, tempDir } from '../support/agent-process.js';
import { RECOMMENDED_NODE_OPTIONS } from '../../src/node-options.js';
import { FakeControlPlane } from '../support/fake-control-plane.js';
import { type Nginx, startNginx } from '../support/nginx.js';
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
const ROUNDS = positiveInteger('BENCH_ROUNDS', 2, 3);
const CONCURRENCY = 256;
/** One side of one round may take at most this long. */
const SIDE_LIMIT_MS = 120_000;
/** A further round starts only if, going by the rounds so far, it ends within this budget. */
const TOTAL_BUDGET_MS = 150_000;
const TARGET_RATIO = 0.5;
const TARGET_RSS_MB = 200;

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
  nginxCpuSeconds: number;
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

/** CPU of nginx's master and its workers. */
function nginxCpuSeconds(nginx: Nginx): number {
  const master = nginx.pid;
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
  nginx: number;
  driver: NodeJS.CpuUsage;
}

function markCpu(nginx: Nginx): CpuMark {
  return { at: performance.now(), machine: machineCpuSeconds(), nginx: nginxCpuSeconds(nginx), driver: process.cpuUsage() };
}

/** Splits the machine's CPU since `mark` into driver, nginx and everything else besides `subjectCpu` (the measured process). */
function cpuSince(mark: CpuMark, nginx: Nginx, subjectCpu: number): Pick<Side, 'driverCpuSeconds' | 'nginxCpuSeconds' | 'otherCpuSeconds' | 'otherCpuShare'> {
  const used = process.cpuUsage(mark.driver);
  const driver = (used.user + used.system) / 1e6;
  const nginxCpu = nginxCpuSeconds(nginx) - mark.nginx;
  const other = Math.max(0, machineCpuSeconds() - mark.machine - subjectCpu - driver - nginxCpu);
  const capacity = (os.cpus().length * (performance.now() - mark.at)) / 1000;
  return { driverCpuSeconds: driver, nginxCpuSeconds: nginxCpu, otherCpuSeconds: other, otherCpuShare: capacity > 0 ? other / capacity : 0 };
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

async function runAgent(nginx: Nginx): Promise<Side> {
  const cp = await FakeControlPlane.start();
  const stateDir = tempDir('outpost-bench-');
  const target = `${nginx.url}/health`;
  for (let i = 0; i < N; i++) cp.addJob({ id: `bench-${i}`, name: `bench ${i}`, checkType: 'URL', request: { url: target } });
  const cpuBefore = markCpu(nginx);
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
    while (cp.results.size < N) {
      if (exited) throw new Error(`the agent exited after ${cp.results.size} of ${N} results; stderr: ${agent.stderr().slice(-2000)}`);
      if (Date.now() > deadline) {
        throw new Error(`agent side: only ${cp.results.size} of ${N} results after ${SIDE_LIMIT_MS} ms (violations: ${cp.violations.slice(0, 3).join('; ')})`);
      }
      await sleep(25);
    }
    const pid = agent.proc.pid as number;
    const peakRssMb = mb(peakRssKb(pid));
    const cpu = cpuSeconds(pid);
    const shares = cpuSince(cpuBefore, nginx, cpu);

    const firstClaim = cp.requests.find((r) => r.route === PROTOCOL_ROUTES.claim && r.status === 200);
    let lastResult = 0;
    let failures = 0;
    for (const stored of cp.results.values()) {
      lastResult = Math.max(lastResult, stored.receivedAt);
      if (stored.result.hasFailures || stored.result.hasErrors) failures++;
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
      notes.push(`agent warnings: ${[...kinds].map(([msg, n]) => `${n}× "${msg}"`).join(', ')}`);
    }
    if (failures > 0) {
      const sample = [...cp.results.values()].find((s) => s.result.hasFailures || s.result.hasErrors);
      const detail = sample?.result.apiCheckResult as { requestError?: string; response?: { status?: number } } | undefined;
      notes.push(`first failed check: ${detail?.requestError ?? `status ${detail?.response?.status}`}`);
    }
    expect(notDone, 'every job has its result').toBe(0);
    expect(cp.results.size).toBe(N);
    return { rate: (N / elapsedMs) * 1000, elapsedMs, done: cp.results.size, failures, peakRssMb, cpuSeconds: cpu, ...shares, notes };
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

async function runBlackbox(binary: string, nginx: Nginx): Promise<Side> {
  const cpuBefore = markCpu(nginx);
  const exporter = await startBlackbox(binary);
  const pool = new Pool(exporter.url, { connections: CONCURRENCY, pipelining: 1, headersTimeout: 30_000, bodyTimeout: 30_000 });
  try {
    const probePath = `/probe?target=${encodeURIComponent(`${nginx.url}/health`)}&module=http_2xx`;
    let started = 0;
    let succeeded = 0;
    let failed = 0;
    let errors = 0;
    let firstProblem: string | undefined;
    const deadline = Date.now() + SIDE_LIMIT_MS;
    const start = performance.now();
    const worker = async () => {
      while (started < N && Date.now() < deadline) {
        started++;
        try {
          const { statusCode, body } = await pool.request({ path: probePath, method: 'GET' });
          const text = await body.text();
          if (statusCode === 200 && /^probe_success 1$/m.test(text)) {
            succeeded++;
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
    const shares = cpuSince(cpuBefore, nginx, cpu);
    const answered = succeeded + failed;
    const notes = firstProblem ? [`first blackbox problem: ${firstProblem}`] : [];
    if (answered < N) {
      throw new Error(`blackbox side: ${answered} of ${N} probes answered, ${errors} errors (${firstProblem ?? 'time limit'})`);
    }
    return { rate: (N / elapsedMs) * 1000, elapsedMs, done: answered, failures: failed, peakRssMb, cpuSeconds: cpu, ...shares, notes };
  } finally {
    await pool.close();
    await exporter.stop();
  }
}

function versionOf(command: string, args: string[]): string {
  // nginx -v prints to stderr, the exporter to stdout.
  const run = spawnSync(command, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 10_000 });
  const text = `${run.stdout ?? ''}\n${run.stderr ?? ''}`;
  return text.split('\n').find((l) => /version/i.test(l))?.trim() ?? '?';
}

const fmt = (n: number, digits = 0) => n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
const spread = (values: number[]) => (values.length < 2 ? 0 : ((Math.max(...values) - Math.min(...values)) / Math.max(...values)) * 100);

function report(rounds: Array<{ agent: Side; blackbox: Side }>, context: { nginx: string; blackbox: string; skipped: string | undefined; loadBefore: number[]; totalMs: number }): string {
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
    ['nginx CPU, agent side (s)', agents.map((s) => s.nginxCpuSeconds), 2],
    ['nginx CPU, blackbox side (s)', boxes.map((s) => s.nginxCpuSeconds), 2],
    ['driver CPU, agent side (s)', agents.map((s) => s.driverCpuSeconds), 2],
    ['driver CPU, blackbox side (s)', boxes.map((s) => s.driverCpuSeconds), 2],
    ['other CPU, agent side (s)', agents.map((s) => s.otherCpuSeconds), 2],
    ['other CPU, blackbox side (s)', boxes.map((s) => s.otherCpuSeconds), 2],
    ['agent failed checks', agents.map((s) => s.failures), 0],
    ['blackbox failed probes', boxes.map((s) => s.failures), 0],
  ];
  const header = ['', ...rounds.map((_, i) => `round ${i + 1}`), 'min', 'max'];
  const table = rows.map(([name, values, digits]) => [name, ...values.map((v) => fmt(v, digits)), fmt(Math.min(...values), digits), fmt(Math.max(...values), digits)]);
  const widths = header.map((_, col) => Math.max(...[header, ...table].map((row) => (row[col] ?? '').length)));
  const line = (row: string[]) => row.map((cell, col) => (col === 0 ? cell.padEnd(widths[col] ?? 0) : cell.padStart(widths[col] ?? 0))).join('  ');
  const rule = '-'.repeat(line(header).length);

  const out: string[] = [];
  out.push('');
  out.push(`Outpost bench: ${fmt(N)} URL checks, concurrency ${CONCURRENCY}, loopback nginx, ${rounds.length} round(s) (round 1: agent then blackbox; round 2: blackbox then agent)`);
  out.push(`machine: ${os.cpus().length} × ${os.cpus()[0]?.model ?? '?'}, node ${process.version}, load average before ${context.loadBefore.map((l) => l.toFixed(2)).join(' ')}, after ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}`);
  out.push(`peers: ${context.nginx}; ${context.blackbox}`);
  out.push(`agent NODE_OPTIONS: ${agentNodeOptions().NODE_OPTIONS ?? "(none: Node's defaults)"}`);
  out.push(rule);
  out.push(line(header));
  out.push(rule);
  for (const row of table) out.push(line(row));
  out.push(rule);
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

test(`bench: agent vs blackbox exporter, ${N} URL checks at concurrency ${CONCURRENCY}`, async () => {
  const benchStart = Date.now();
  const tools = ensureDebianTools(
    [
      { binary: 'nginx', pkg: 'nginx-light' },
      { binary: EXPORTER, pkg: 'prometheus-blackbox-exporter' },
    ],
    log,
  );
  const nginxVersion = versionOf(tools.nginx as string, ['-v']);
  const blackboxVersion = versionOf(tools[EXPORTER] as string, ['--version']);
  const loadBefore = os.loadavg();
  const nginx = await startNginx({ accessLog: false });
  const rounds: Array<{ agent: Side; blackbox: Side }> = [];
  let skipped: string | undefined;
  try {
    const roundsStart = Date.now();
    for (let round = 1; round <= ROUNDS; round++) {
      const elapsed = Date.now() - roundsStart;
      if (round > 1 && Date.now() - benchStart + elapsed / (round - 1) > TOTAL_BUDGET_MS) {
        skipped = `rounds ${round}..${ROUNDS} skipped: they would overrun the ${TOTAL_BUDGET_MS / 1000} s budget`;
        break;
      }
      let agent: Side;
      let blackbox: Side;
      if (round % 2 === 1) {
        log(`round ${round}: agent…`);
        agent = await runAgent(nginx);
        log(`round ${round}: agent ${fmt(agent.rate)} checks/s; blackbox…`);
        blackbox = await runBlackbox(tools[EXPORTER] as string, nginx);
        log(`round ${round}: blackbox ${fmt(blackbox.rate)} probes/s`);
      } else {
        log(`round ${round}: blackbox…`);
        blackbox = await runBlackbox(tools[EXPORTER] as string, nginx);
        log(`round ${round}: blackbox ${fmt(blackbox.rate)} probes/s; agent…`);
        agent = await runAgent(nginx);
        log(`round ${round}: agent ${fmt(agent.rate)} checks/s`);
      }
      rounds.push({ agent, blackbox });
    }
  } finally {
    await nginx.stop();
  }
  process.stdout.write(report(rounds, { nginx: nginxVersion, blackbox: blackboxVersion, skipped, loadBefore, totalMs: Date.now() - benchStart }));
  for (const { agent, blackbox } of rounds) {
    expect(agent.done).toBe(N);
    expect(blackbox.done).toBe(N);
  }
});
