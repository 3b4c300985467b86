// `npm run bench`: one check worker against N (CHECK_WORKERS), the real
// agent process running URL checks against nginx on loopback through the
// fake control plane, JOB_CONCURRENCY=256. CHECK_WORKERS=1 runs checks on
// the main thread (as before workers existed); N is the cores available
// (BENCH_WORKERS overrides). Rounds alternate (1, N, N, 1…) so a drift in
// the machine's load touches both sides alike; each row prints checks/s
// from the jobs' arrival to the last result delivered, the agent's CPU, and
// how it splits between the main thread and the workers, and the other
// processes' CPU share meanwhile (test/bench/cpu-share.ts), so a
// noisy round is visible. The jobs are added once the agent is ready,
// i.e. once its workers are up. It asserts every result was delivered,
// never a speed.
//
// BENCH_WORKERS_JOBS (default 10,000) and BENCH_WORKERS_ROUNDS (default 4,
// at most 6) for a quick try.

import { rmSync } from 'node:fs';
import { expect, test } from 'vitest';
import { availableCores } from '../../src/jobs/workers/cores.js';
import { RECOMMENDED_NODE_OPTIONS } from '../../src/node-options.js';
import { cleanEnv, probe, startAgent, tempDir } from '../support/agent-process.js';
import { FakeControlPlane } from '../support/fake-control-plane.js';
import { startNginx } from '../support/nginx.js';
import { markOthers, othersSince, processCpuSeconds, threadCpuSeconds } from './cpu-share.js';

function positiveInteger(name: string, fallback: number, max: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 1 || value > max) throw new Error(`${name}=${raw}: must be an integer from 1 to ${max}`);
  return value;
}

const N = positiveInteger('BENCH_WORKERS_JOBS', 10_000, 1_000_000);
const ROUNDS = positiveInteger('BENCH_WORKERS_ROUNDS', 4, 6);
const WORKERS = positiveInteger('BENCH_WORKERS', Math.max(2, availableCores()), 64);
const CONCURRENCY = 256;
/** One round may take at most this long. */
const ROUND_LIMIT_MS = 120_000;
const READY_LIMIT_MS = 30_000;

const log = (line: string) => process.stdout.write(`[bench workers] ${line}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Row {
  workers: number;
  rate: number;
  elapsedMs: number;
  agentCpuSeconds: number;
  /** The agent's main thread, and its check worker threads together. */
  mainCpuSeconds: number;
  workerCpuSeconds: number;
  otherShare: number;
  failures: number;
}

async function round(url: string, workers: number): Promise<Row> {
  const cp = await FakeControlPlane.start();
  const stateDir = tempDir('outpost-bench-workers-');
  const agent = startAgent(
    ['agent'],
    cleanEnv({
      API_URL: cp.url,
      API_KEY: cp.apiKey,
      JOB_CONCURRENCY: String(CONCURRENCY),
      CHECK_WORKERS: String(workers),
      STATE_DIR: stateDir,
      // info: the health server's start line says its port (healthPort()); no job logs at info.
      LOG_LEVEL: 'info',
      CLAIM_WAIT_SECONDS: '1',
      SHUTDOWN_GRACE_SECONDS: '5',
      // As the images run it.
      NODE_OPTIONS: RECOMMENDED_NODE_OPTIONS,
    }),
  );
  let exited = false;
  agent.exit.then(() => {
    exited = true;
  });
  try {
    const port = await agent.healthPort();
    const readyBy = Date.now() + READY_LIMIT_MS;
    while ((await probe(port, '/-/readiness').catch(() => ({ status: 0 }))).status !== 200) {
      if (exited || Date.now() > readyBy) throw new Error(`the agent with CHECK_WORKERS=${workers} did not become ready; stderr: ${agent.stderr().slice(-2000)}`);
      await sleep(50);
    }
    const pid = agent.proc.pid as number;
    const cpuBefore = processCpuSeconds(pid);
    const threadsBefore = threadCpuSeconds(pid);
    const mark = markOthers();
    // A claim waiting in its long poll is answered as soon as jobs are added (the fake control plane wakes it).
    const added = Date.now();
    for (let i = 0; i < N; i++) cp.addJob({ id: `bench-${i}`, name: `bench ${i}`, checkType: 'URL', request: { url: `${url}/health` } });
    const deadline = Date.now() + ROUND_LIMIT_MS;
    while (cp.results.size < N) {
      if (exited) throw new Error(`the agent exited after ${cp.results.size} of ${N} results; stderr: ${agent.stderr().slice(-2000)}`);
      if (Date.now() > deadline) throw new Error(`only ${cp.results.size} of ${N} results after ${ROUND_LIMIT_MS} ms`);
      await sleep(25);
    }
    const others = othersSince(mark);
    const agentCpuSeconds = processCpuSeconds(pid) - cpuBefore;
    const threads = threadCpuSeconds(pid);
    const threadSeconds = (name: string) => (threads.get(name) ?? 0) - (threadsBefore.get(name) ?? 0);
    // Worker threads are named after their Worker (src/jobs/workers/pool.ts); Linux keeps 15 characters.
    const workerSeconds = [...threads.keys()].filter((n) => n.startsWith('outpost-check')).reduce((sum, n) => sum + threadSeconds(n), 0);
    let last = 0;
    let failures = 0;
    for (const stored of cp.results.values()) {
      last = Math.max(last, stored.receivedAt);
      if (stored.result.hasFailures || stored.result.hasErrors) failures++;
    }
    const elapsedMs = Math.max(1, last - added);
    expect(cp.results.size).toBe(N);
    return { workers, rate: (N / elapsedMs) * 1000, elapsedMs, agentCpuSeconds, mainCpuSeconds: threadSeconds('MainThread'), workerCpuSeconds: workerSeconds, otherShare: others.otherShare, failures };
  } finally {
    agent.kill('SIGTERM');
    const stopped = await Promise.race([agent.exit.then(() => true), sleep(30_000).then(() => false)]);
    if (!stopped) {
      agent.kill('SIGKILL');
      await agent.exit;
    }
    await cp.close();
    rmSync(stateDir, { recursive: true, force: true });
  }
}

const mean = (values: number[]) => values.reduce((a, b) => a + b, 0) / Math.max(1, values.length);

test(`check workers: ${N} URL checks with CHECK_WORKERS=1 against CHECK_WORKERS=${WORKERS}`, async () => {
  const nginx = await startNginx({ accessLog: false });
  const rows: Row[] = [];
  try {
    // 1, N, N, 1, 1, N: each side goes first as often as the other.
    const order = Array.from({ length: ROUNDS }, (_, i) => ([0, 3, 4].includes(i) ? 1 : WORKERS));
    for (const [i, workers] of order.entries()) {
      const row = await round(nginx.url, workers);
      rows.push(row);
      log(
        `round ${i + 1}: CHECK_WORKERS=${row.workers}: ${row.rate.toFixed(0)} checks/s (${(row.elapsedMs / 1000).toFixed(2)} s), ` +
          `agent CPU ${row.agentCpuSeconds.toFixed(2)} s (main thread ${row.mainCpuSeconds.toFixed(2)}, check workers ${row.workerCpuSeconds.toFixed(2)}), other processes ${(row.otherShare * 100).toFixed(0)} % of the cores, ${row.failures} failed`,
      );
    }
  } finally {
    await nginx.stop();
  }
  const one = rows.filter((r) => r.workers === 1);
  const many = rows.filter((r) => r.workers === WORKERS);
  const ratio = mean(many.map((r) => r.rate)) / mean(one.map((r) => r.rate));
  log(
    `CHECK_WORKERS=${WORKERS} / CHECK_WORKERS=1: ${ratio.toFixed(2)}× the checks/s (means of ${many.length} and ${one.length} rounds; ` +
      `${availableCores()} cores available; other processes up to ${(Math.max(...rows.map((r) => r.otherShare)) * 100).toFixed(0)} % of the cores in a round)`,
  );
  expect(rows.every((r) => r.failures === 0)).toBe(true);
});
