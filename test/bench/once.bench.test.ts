// `npm run bench`: `outpost once` on a checks file of N URL checks (default
// 10,000) against a loopback nginx, beside blackbox_exporter probing the same
// URL N times — no control plane in the path, no spool: the agent's own cost
// per check, start-up and exit included (Node's start and module loading,
// about half a second, are part of `once`'s wall time and say so).
//
//   once:     `node dist/main.js once checks.json` with JOB_CONCURRENCY=256 and
//             RECOMMENDED_NODE_OPTIONS, stdout to a file; wall time, user+system
//             CPU and peak RSS from /usr/bin/time; every line must be a passed result.
//   blackbox: N `GET /probe?module=http_2xx` for the same URL, 256 at a time.
//
// Alternating rounds (once, blackbox; blackbox, once) with the other
// processes' share of the machine's CPU for each side. It asserts that every
// check passed and every probe answered, never a speed. BENCH_ONCE_JOBS
// overrides N, BENCH_ROUNDS the rounds.

import { spawn } from 'node:child_process';
import { closeSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { Pool } from 'undici';
import { expect, test } from 'vitest';
import { RECOMMENDED_NODE_OPTIONS } from '../../src/node-options.js';
import { cleanEnv, MAIN, tempDir } from '../support/agent-process.js';
import { startNginx } from '../support/nginx.js';
import { startBlackbox } from './blackbox.js';
import { cpuShareWindow } from './cpu-share.js';
import { ensureDebianTools } from './install.js';

const N = Number(process.env.BENCH_ONCE_JOBS ?? 10_000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2);
const CONCURRENCY = 256;
const EXPORTER = 'prometheus-blackbox-exporter';
/** One side of one round may take at most this long. */
const SIDE_LIMIT_MS = 180_000;

interface Side {
  rate: number;
  wallS: number;
  cpuS: number;
  peakRssMb: number;
  otherShare: number;
}

const log = (line: string) => process.stdout.write(`[bench once] ${line}\n`);

async function runOnce(checksFile: string, dir: string): Promise<Side> {
  const out = path.join(dir, 'results.jsonl');
  const timing = path.join(dir, 'time.txt');
  const fd = openSync(out, 'w');
  const share = cpuShareWindow();
  const start = performance.now();
  const child = spawn('/usr/bin/time', ['-o', timing, '-f', '%e %U %S %M', process.execPath, MAIN, 'once', checksFile], {
    env: cleanEnv({ JOB_CONCURRENCY: String(CONCURRENCY), LOG_LEVEL: 'warn', STATE_DIR: dir, NODE_OPTIONS: RECOMMENDED_NODE_OPTIONS }),
    stdio: ['ignore', fd, 'pipe'],
  });
  closeSync(fd);
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    if (stderr.length < 20_000) stderr += chunk.toString();
  });
  const killer = setTimeout(() => child.kill('SIGKILL'), SIDE_LIMIT_MS);
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
  clearTimeout(killer);
  const wall = performance.now() - start;
  const otherShare = share();
  const lines = readFileSync(out, 'utf8').split('\n').filter(Boolean);
  const passed = lines.filter((l) => {
    const r = JSON.parse(l) as { hasFailures: boolean; hasErrors: boolean };
    return !r.hasFailures && !r.hasErrors;
  }).length;
  if (code !== 0 || passed !== N) throw new Error(`once exited ${code} with ${passed} of ${N} passed; stderr: ${stderr.slice(-2000)}`);
  const [, user, system, maxRssKb] = readFileSync(timing, 'utf8').trim().split('\n').at(-1)?.split(' ').map(Number) ?? [];
  // The time's own CPU is the child's: /proc/stat counts it, so it is not "other".
  return { rate: (N / wall) * 1000, wallS: wall / 1000, cpuS: (user ?? 0) + (system ?? 0), peakRssMb: (maxRssKb ?? 0) / 1024, otherShare: Math.max(0, otherShare - ((user ?? 0) + (system ?? 0)) / ((os.cpus().length * wall) / 1000)) };
}

function cpuOf(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

async function runBlackbox(binary: string, target: string): Promise<Side> {
  const exporter = await startBlackbox(binary);
  const pool = new Pool(exporter.url, { connections: CONCURRENCY, pipelining: 1, headersTimeout: 30_000, bodyTimeout: 30_000 });
  try {
    const share = cpuShareWindow(() => cpuOf(exporter.pid));
    const cpuBefore = cpuOf(exporter.pid);
    const probePath = `/probe?target=${encodeURIComponent(target)}&module=http_2xx`;
    let started = 0;
    let passed = 0;
    const start = performance.now();
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (started < N) {
          started++;
          const { statusCode, body } = await pool.request({ path: probePath, method: 'GET' });
          const text = await body.text();
          if (statusCode === 200 && /^probe_success 1$/m.test(text)) passed++;
        }
      }),
    );
    const wall = performance.now() - start;
    expect(passed).toBe(N);
    const status = readFileSync(`/proc/${exporter.pid}/status`, 'utf8');
    const peakKb = Number(/^VmHWM:\s+(\d+)/m.exec(status)?.[1] ?? 0);
    return { rate: (N / wall) * 1000, wallS: wall / 1000, cpuS: cpuOf(exporter.pid) - cpuBefore, peakRssMb: peakKb / 1024, otherShare: share() };
  } finally {
    await pool.close();
    await exporter.stop();
  }
}

test(`bench: outpost once on ${N} URL checks beside blackbox_exporter`, async () => {
  const tools = ensureDebianTools(
    [
      { binary: 'nginx', pkg: 'nginx-light' },
      { binary: EXPORTER, pkg: 'prometheus-blackbox-exporter' },
    ],
    log,
  );
  const nginx = await startNginx({ accessLog: false });
  const dir = tempDir('outpost-bench-once-');
  try {
    const url = `${nginx.url}/health`;
    const checksFile = path.join(dir, 'checks.json');
    const checks = Array.from({ length: N }, (_, i) => ({ id: `once-${i}`, name: `once ${i}`, checkType: 'URL', frequency: 60, request: { url } }));
    writeFileSync(checksFile, JSON.stringify({ checks }));
    const rounds: Array<{ once: Side; blackbox: Side }> = [];
    for (let round = 0; round < ROUNDS; round++) {
      let once: Side;
      let blackbox: Side;
      if (round % 2 === 0) {
        once = await runOnce(checksFile, dir);
        blackbox = await runBlackbox(tools[EXPORTER] as string, url);
      } else {
        blackbox = await runBlackbox(tools[EXPORTER] as string, url);
        once = await runOnce(checksFile, dir);
      }
      log(`round ${round + 1}: once ${Math.round(once.rate)} checks/s, blackbox ${Math.round(blackbox.rate)} probes/s`);
      rounds.push({ once, blackbox });
    }
    const row = (name: string, f: (s: Side) => number, digits = 0) =>
      `  ${name.padEnd(34)} ${rounds.map((r) => f(r.once).toFixed(digits).padStart(9)).join(' ')}   | blackbox ${rounds.map((r) => f(r.blackbox).toFixed(digits).padStart(9)).join(' ')}`;
    const out = [
      '',
      `outpost once: ${N} URL checks of ${url}, JOB_CONCURRENCY ${CONCURRENCY}, beside blackbox_exporter (${N} probes, ${CONCURRENCY} in flight); ${ROUNDS} round(s), alternating order`,
      `machine: ${os.cpus().length} × ${os.cpus()[0]?.model ?? '?'}, node ${process.version}, load average ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}`,
      row('checks (probes) per second', (s) => s.rate),
      row('wall time (s, once: start to exit)', (s) => s.wallS, 2),
      row('CPU (s)', (s) => s.cpuS, 2),
      row('CPU per 1,000 checks (s)', (s) => (s.cpuS / N) * 1000, 3),
      row('peak RSS (MB)', (s) => s.peakRssMb, 1),
      row("other processes' CPU share (%)", (s) => s.otherShare * 100),
      `once_ratio_over_blackbox: ${rounds.map((r) => (r.once.rate / r.blackbox.rate).toFixed(2)).join(', ')} (per round, checks/s over probes/s)`,
      '',
    ];
    process.stdout.write(out.join('\n'));
  } finally {
    await nginx.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});
