// `npm run bench`: the analytics route of `outpost server` (the built
// dist/main.js) over N stored FINAL results of one check in four locations,
// spread over the last 30 days, asked for every metric over last30Days:
// one bucket, hourly buckets (720), and daily buckets grouped by location.
// Each is timed over HTTP (median of SAMPLES requests after one warm-up; and
// the server's CPU per request, from /proc, which a loaded machine inflates
// far less than wall time) and printed beside two peers measured in the same
// run on the same database file, in this process (wall and CPU):
//   count:  SELECT COUNT(*) of the same rows in the results table, a plain
//           index scan that computes nothing;
//   naive:  the same figures for one bucket computed without the side table:
//           json_extract of each result's responseTime, hasFailures and
//           attempts from the results table, then a sort and the
//           percentiles in JS (what the route would cost without migration 7).
// It asserts only that the route did what it should (every result counted,
// its p95 equal to the naive one), never a speed.
//
// Seeding goes straight into the results table through the store's
// connection (SqliteStore.access), 20,000 rows a transaction; the triggers of
// migration 7 fill result_metrics as for any result. BENCH_ANALYTICS_RESULTS
// overrides N (default 1,000,000), BENCH_ANALYTICS_SAMPLES the timed
// requests per query (default 7, at most 19).

import { readFileSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { DatabaseSync } from 'node:sqlite';
import { expect, test } from 'vitest';
import { parseServerChecksFile } from '../../src/checks/checks-file.js';
import { definitionRegistry } from '../../src/checks/registry.js';
import { METRICS } from '../../src/server/analytics/metrics.js';
import { percentileCont } from '../../src/server/stats/percentile.js';
import { storedChecks } from '../../src/server-mode.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { type AgentProcess, cleanEnv, startAgent, tempDir } from '../support/agent-process.js';
import { READY_DEADLINE_MS } from '../support/daemon.js';
import { mulberry32 } from '../support/random.js';

function positiveInteger(name: string, fallback: number, max: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 1 || value > max) throw new Error(`${name}=${raw}: must be an integer from 1 to ${max}`);
  return value;
}

const N = positiveInteger('BENCH_ANALYTICS_RESULTS', 1_000_000, 5_000_000);
/** Three queries × (warm-up + samples) stay within the reports' 60 a minute (REPORTS_PER_MINUTE). */
const SAMPLES = positiveInteger('BENCH_ANALYTICS_SAMPLES', 7, 19);
const CHECK = 'bench-analytics';
const LOCATIONS = ['a', 'b', 'c', 'd'];
const API_KEY = 'bench-analytics-api-key-0123456789';
const DAY_MS = 86_400_000;
const SEED_BATCH = 20_000;

const log = (line: string) => process.stdout.write(`[bench analytics] ${line}\n`);
const fmt = (n: number, digits = 0) => n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] as number;

const TICKS = 100;
/** User + system CPU of a live process, in ms (clock ticks of 1/100 s on Linux). */
function cpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(fields[11]) + Number(fields[12])) / TICKS) * 1000;
}
const selfCpuMs = () => {
  const used = process.cpuUsage();
  return (used.user + used.system) / 1000;
};

async function timed<T>(work: () => Promise<T> | T): Promise<{ ms: number; value: T }> {
  const t = performance.now();
  const value = await work();
  return { ms: performance.now() - t, value };
}

test(`analytics: every metric over last30Days with ${N} stored results, beside a count and a naive computation`, async () => {
  const dir = tempDir('outpost-bench-analytics-');
  const stateDir = path.join(dir, 'state');
  const checksFile = path.join(dir, 'checks.json');
  let server: AgentProcess | undefined;
  try {
    writeFileSync(
      checksFile,
      JSON.stringify({
        privateLocations: LOCATIONS.map((id) => ({ id, name: `Location ${id}` })),
        // Once a day: the scheduler's own session (jobs nobody claims) does not get in the way.
        checks: [{ id: CHECK, name: 'bench analytics', checkType: 'URL', frequency: 86_400, request: { url: 'http://127.0.0.1:9/' } }],
      }),
    );
    const { checks, privateLocations } = parseServerChecksFile(readFileSync(checksFile, 'utf8'), checksFile, definitionRegistry());
    mkdirSync(stateDir);
    const file = path.join(stateDir, 'outpost.db');
    const store = await SqliteStore.open(file);
    await store.syncLocations(privateLocations);
    await store.syncChecks(storedChecks(checks), new Date());

    // Results of the last 30 days, ending a minute ago (the window ends when the route is asked).
    const end = Date.now() - 60_000;
    const start = end - 30 * DAY_MS + 3_600_000;
    const random = mulberry32(1_000_000);
    const seeded = await timed(() => {
      for (let done = 0; done < N; done += SEED_BATCH) {
        store.access.tx(() => {
          for (let i = done; i < Math.min(N, done + SEED_BATCH); i++) {
            const failed = random() < 0.1;
            const body = JSON.stringify({ responseTime: Math.floor(20 + random() * random() * 2000), hasFailures: failed, isDegraded: false, attempts: failed ? 2 : 1 });
            store.access.run(
              `INSERT INTO results (id, check_id, job_id, session_id, location, result_type, has_failures, started_at, check_type, received_at, body)
               VALUES (?, ?, 'seed', 'seed', ?, 'FINAL', ?, ?, 'URL', ?, ?)`,
              `r${i}`,
              CHECK,
              LOCATIONS[i % LOCATIONS.length] as string,
              failed ? 1 : 0,
              Math.floor(start + ((end - start) * i) / N),
              end,
              body,
            );
          }
        });
      }
    });
    await store.close();
    log(`seeded ${fmt(N)} results in ${(seeded.ms / 1000).toFixed(1)} s (${fmt(N / (seeded.ms / 1000))}/s, triggers included)`);

    server = startAgent(['server', checksFile], cleanEnv({ OUTPOST_API_KEY: API_KEY, API_PORT: '0', API_HOST: '127.0.0.1', STATE_DIR: stateDir, LOG_LEVEL: 'info' }));
    const started = await server.waitForLog((l) => l.msg === 'outpost server started', READY_DEADLINE_MS, 'the server to start');
    const origin = `http://127.0.0.1:${Number(started.apiPort)}`;
    const ask = async (query: string) => {
      const response = await fetch(`${origin}/v1/analytics/checks/${CHECK}?metrics=${METRICS.join(',')}&quickRange=last30Days${query}`, {
        headers: { authorization: `Bearer ${API_KEY}` },
      });
      const text = await response.text();
      if (response.status !== 200) throw new Error(`${response.status}: ${text.slice(0, 500)}`);
      return JSON.parse(text) as { from: string; to: string; series: Array<{ data: Array<Record<string, number | string | null>> }> };
    };

    const queries = [
      ['one bucket', ''],
      ['hourly buckets (720)', '&aggregationInterval=60'],
      ['daily buckets by location', '&aggregationInterval=1440&groupBy=runLocation'],
    ] as const;
    const pid = server.proc.pid as number;
    const routeMs = new Map<string, { ms: number; cpu: number }>();
    let oneBucket: Awaited<ReturnType<typeof ask>> | undefined;
    for (const [name, query] of queries) {
      const answer = await ask(query);
      if (query === '') oneBucket = answer;
      const counted = answer.series.reduce((sum, s) => sum + s.data.reduce((acc, p) => acc + Number(p.results), 0), 0);
      expect(counted).toBe(N);
      const samples: number[] = [];
      const cpuBefore = cpuMs(pid);
      for (let i = 0; i < SAMPLES; i++) samples.push((await timed(() => ask(query))).ms);
      routeMs.set(name, { ms: median(samples), cpu: (cpuMs(pid) - cpuBefore) / SAMPLES });
    }

    // The peers, on the same file, in this process.
    const fromMs = Date.parse(oneBucket?.from ?? '');
    const toMs = Date.parse(oneBucket?.to ?? '');
    const db = new DatabaseSync(file, { readOnly: true });
    const countSamples: number[] = [];
    const naiveSamples: number[] = [];
    const peerCpu = { count: 0, naive: 0 };
    let naiveP95 = Number.NaN;
    try {
      const count = db.prepare('SELECT COUNT(*) AS n FROM results WHERE check_id = ? AND started_at >= ? AND started_at < ?');
      const naive = db.prepare(
        `SELECT json_extract(body, '$.responseTime') AS rt, has_failures AS f, json_extract(body, '$.attempts') AS a
         FROM results WHERE check_id = ? AND result_type = 'FINAL' AND started_at >= ? AND started_at < ?`,
      );
      for (let i = 0; i < Math.min(SAMPLES, 3); i++) {
        let cpu = selfCpuMs();
        countSamples.push((await timed(() => expect(count.get(CHECK, fromMs, toMs)?.n).toBe(N))).ms);
        peerCpu.count += selfCpuMs() - cpu;
        cpu = selfCpuMs();
        naiveSamples.push(
          (
            await timed(() => {
              const times = new Float64Array(N);
              let k = 0;
              let failures = 0;
              let retries = 0;
              for (const row of naive.iterate(CHECK, fromMs, toMs)) {
                times[k++] = Number(row.rt);
                failures += Number(row.f);
                retries += Number(row.a) - 1;
              }
              const sorted = times.subarray(0, k).sort();
              naiveP95 = percentileCont(sorted, 0.95);
              return [failures, retries, percentileCont(sorted, 0.5), percentileCont(sorted, 0.99)];
            })
          ).ms,
        );
        peerCpu.naive += selfCpuMs() - cpu;
      }
    } finally {
      db.close();
    }
    expect(oneBucket?.series[0]?.data[0]?.responseTime_p95).toBe(naiveP95);

    const countMs = median(countSamples);
    const naiveMs = median(naiveSamples);
    const countCpu = peerCpu.count / countSamples.length;
    const naiveCpu = peerCpu.naive / naiveSamples.length;
    log(`${fmt(N)} FINAL results of one check in ${LOCATIONS.length} locations over 30 days, every metric (${METRICS.length}); wall: median of ${SAMPLES} requests; CPU: the server's (the peer's) per request:`);
    for (const [name, r] of routeMs) {
      log(
        `  GET /v1/analytics/checks/{id} ${name.padEnd(27)} wall ${fmt(r.ms).padStart(6)} ms (${(r.ms / countMs).toFixed(1)}× the count, ${(r.ms / naiveMs).toFixed(2)}× naive)` +
          `   CPU ${fmt(r.cpu).padStart(6)} ms (${(r.cpu / countCpu).toFixed(1)}× the count, ${(r.cpu / naiveCpu).toFixed(2)}× naive)`,
      );
    }
    log(`  peer: SELECT COUNT(*) of the same rows                     wall ${fmt(countMs).padStart(6)} ms   CPU ${fmt(countCpu).padStart(6)} ms`);
    log(`  peer: naive (json_extract per row, sort in JS)             wall ${fmt(naiveMs).padStart(6)} ms   CPU ${fmt(naiveCpu).padStart(6)} ms`);
    log(`  machine: ${os.cpus().length} cores, load average ${os.loadavg().map((l) => l.toFixed(1)).join(' ')}, ${process.version}`);
  } finally {
    if (server) {
      server.kill('SIGTERM');
      await server.exit;
    }
    rmSync(dir, { recursive: true, force: true });
  }
});
