// `npm run bench`: what one page of GET /v2/check-results/{checkId} costs the
// store for every kind of filter the route accepts, with N stored results of
// one check (default 300,000; BENCH_FILTER_RESULTS overrides). Each query is
// the one the route parses (parseResultQuery) from its parameters, with
// limit=100, answered by listResults in-process: on SQLite that is the
// server's own thread, blocked for as long as the query runs
// (src/store/sqlite/sqlite-store.ts). SQLite twice: as the file is after
// seeding (no planner statistics), and reopened, with the statistics PRAGMA
// optimize leaves at a clean close, as a server that was restarted once has
// them. Then on PostgreSQL (started as the tests start it,
// test/support/postgres.ts) after the file is copied there with `outpost
// migrate`'s copier and vacuumed and analysed, as autovacuum leaves a table
// that has been written for a while; BENCH_FILTER_POSTGRES=0 leaves it out.
//
// The check's results: sessions of 1,000 jobs a minute apart, 495 in
// location a, 495 in b, 10 in c (1 %), every one a passing FINAL of an API
// check, except that the 5 oldest jobs of a failed an ATTEMPT and then their
// FINAL: filters that match nothing, or only the oldest results, are the ones
// that used to read every row. Median of 5 timed calls after one warm-up,
// with the page's entries and whether it had a nextId. It asserts only that
// every query answered, never a speed.

import { rmSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { expect, test } from 'vitest';
import type { ResultEnvelope } from '../../src/core/protocol.js';
import type { CheckResultEntry } from '../../src/core/result-entry.js';
import { parseResultQuery } from '../../src/server/read-api.js';
import { migrateSqliteToPostgres } from '../../src/store/migrate-sqlite-to-postgres.js';
import { PgStore } from '../../src/store/postgres/pg-store.js';
import { openServerStores } from '../../src/store/server-stores.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import type { SessionRecord, Store, StoredCheck } from '../../src/store/store.js';
import { tempDir } from '../support/agent-process.js';
import { postgresBinDir, startPostgres } from '../support/postgres.js';

const SESSION_JOBS = { a: 495, b: 495, c: 10 } as const;
const SESSION_SIZE = 1_000;
const N = Math.ceil(Number(process.env.BENCH_FILTER_RESULTS || 300_000) / SESSION_SIZE) * SESSION_SIZE;
const FAILING = 5;
const SAMPLES = 5;
const MINUTE_MS = 60_000;
const CHECK: StoredCheck = {
  id: 'filters',
  name: 'filters',
  checkType: 'API',
  frequencySeconds: 60,
  locations: Object.keys(SESSION_JOBS),
  definition: { id: 'filters', checkType: 'API', request: { method: 'GET', url: 'https://example.com' } },
  environmentVariables: [],
  runtimeId: null,
  capMs: 30_000,
};

const log = (line: string) => process.stdout.write(`[bench filters] ${line}\n`);
const fmt = (n: number) => n.toLocaleString('en-US', { maximumFractionDigits: n < 10 ? 2 : n < 100 ? 1 : 0 });

function entry(id: string, location: string, resultType: 'FINAL' | 'ATTEMPT', hasFailures: boolean, startedMs: number): CheckResultEntry {
  const at = new Date(startedMs).toISOString();
  return {
    resultType,
    id,
    name: CHECK.name,
    checkId: CHECK.id,
    checkType: 'API',
    hasFailures,
    hasErrors: false,
    isDegraded: false,
    overMaxResponseTime: false,
    runLocation: location,
    startedAt: at,
    stoppedAt: at,
    created_at: at,
    responseTime: 12,
    checkRunId: null,
    attempts: resultType === 'FINAL' && hasFailures ? 2 : 1,
    sequenceId: null,
    apiCheckResult: { response: { status: hasFailures ? 500 : 200, statusText: 'OK', body: 'x'.repeat(800), headers: { 'content-type': 'text/plain' } } },
  };
}

/** N results, oldest first: one session a minute ending now, so that startedAt grows with the row sequence as in production. */
async function seed(store: Store, firstMs: number): Promise<void> {
  await store.syncLocations(Object.keys(SESSION_JOBS).map((id) => ({ id, name: id })));
  await store.syncChecks([CHECK], new Date());
  for (let s = 0; s < N / SESSION_SIZE; s++) {
    const id = `s${s}`;
    const startedMs = firstMs + s * MINUTE_MS;
    const jobs = Object.entries(SESSION_JOBS).flatMap(([location, count]) =>
      Array.from({ length: count }, (_, j) => ({ id: `${id}-${location}${j}`, location, deadlineAt: new Date(startedMs + 3_600_000).toISOString() })),
    );
    const session: SessionRecord = {
      id,
      checkId: CHECK.id,
      checkType: CHECK.checkType,
      name: CHECK.name,
      status: 'STARTED',
      runLocations: Object.keys(SESSION_JOBS),
      triggerSource: 'SCHEDULER',
      startedAt: new Date(startedMs).toISOString(),
      stoppedAt: null,
      durationMs: null,
    };
    await store.createSession(session, jobs, CHECK);
    for (const location of ['c', 'a', 'b'] as const) {
      const envelopes = jobs
        .filter((job) => job.location === location)
        .flatMap((job, j): ResultEnvelope[] => {
          const failing = s === 0 && location === 'a' && j < FAILING;
          const final: ResultEnvelope = { jobId: job.id, resultId: `r-${job.id}`, result: entry(`r-${job.id}`, location, 'FINAL', failing, startedMs + j) };
          return failing ? [{ jobId: job.id, resultId: `a-${job.id}`, result: entry(`a-${job.id}`, location, 'ATTEMPT', true, startedMs + j) }, final] : [final];
        });
      const outcome = await store.acceptResults(`seed-${location}`, location, envelopes, new Date());
      expect(outcome.rejected).toEqual([]);
    }
  }
}

function queries(firstMs: number): Array<{ name: string; qs: string }> {
  const lastMs = firstMs + (N / SESSION_SIZE) * MINUTE_MS;
  const seconds = (fraction: number) => Math.floor((firstMs + (lastMs - firstMs) * fraction) / 1000);
  return [
    { name: 'no filter (FINAL)', qs: '' },
    { name: 'resultType=ALL', qs: 'resultType=ALL' },
    { name: 'resultType=ATTEMPT (5 oldest)', qs: 'resultType=ATTEMPT' },
    { name: "checkType=API (the check's)", qs: 'checkType=API' },
    { name: 'checkType=TCP (none)', qs: 'checkType=TCP' },
    { name: 'hasFailures=true (5 oldest)', qs: 'hasFailures=true' },
    { name: 'hasFailures=true&resultType=ALL', qs: 'hasFailures=true&resultType=ALL' },
    { name: 'location=c (1 %)', qs: 'location=c' },
    { name: 'location=c&resultType=ALL', qs: 'location=c&resultType=ALL' },
    { name: 'location=a&hasFailures=true', qs: 'location=a&hasFailures=true' },
    { name: 'from=last 1 %', qs: `from=${seconds(0.99)}` },
    { name: 'from&to=a narrow window at 10 %', qs: `from=${seconds(0.1)}&to=${seconds(0.103)}` },
    { name: 'to=half way (older half)', qs: `to=${seconds(0.5)}` },
    { name: 'from=the future (none)', qs: `from=${seconds(2)}` },
    { name: 'from=first&hasFailures=true', qs: `from=${seconds(0)}&hasFailures=true` },
    { name: 'from=last 1 %&checkType=TCP', qs: `from=${seconds(0.99)}&checkType=TCP` },
    { name: 'from=10 %&location=c', qs: `from=${seconds(0.1)}&location=c` },
  ];
}

interface Timing {
  ms: number;
  entries: number;
  more: boolean;
}

async function time(store: Store, qs: string): Promise<Timing> {
  const query = parseResultQuery(CHECK.id, new URLSearchParams(`limit=100${qs ? `&${qs}` : ''}`));
  await store.listResults(query);
  const samples: number[] = [];
  let page = await store.listResults(query);
  for (let i = 0; i < SAMPLES; i++) {
    const started = performance.now();
    page = await store.listResults(query);
    samples.push(performance.now() - started);
  }
  samples.sort((a, b) => a - b);
  return { ms: samples[Math.floor(SAMPLES / 2)] as number, entries: page.entries.length, more: page.nextId !== null };
}

test(`one page of GET /v2/check-results with every kind of filter, ${fmt(N)} results of one check, SQLite and PostgreSQL`, async () => {
  const dir = tempDir('outpost-bench-filters-');
  const file = path.join(dir, 'outpost.db');
  const firstMs = Date.now() - (N / SESSION_SIZE) * MINUTE_MS;
  const postgres = process.env.BENCH_FILTER_POSTGRES !== '0' && postgresBinDir() ? await startPostgres() : undefined;
  try {
    let started = performance.now();
    const sqlite = await SqliteStore.open(file);
    await seed(sqlite, firstMs);
    log(`seeded ${fmt(N)} results in SQLite in ${((performance.now() - started) / 1000).toFixed(1)} s`);
    const list = queries(firstMs);
    const onSqlite: Timing[] = [];
    for (const q of list) onSqlite.push(await time(sqlite, q.qs));
    await sqlite.close();
    const restarted = await SqliteStore.open(file);
    const onSqliteRestarted: Timing[] = [];
    for (const q of list) onSqliteRestarted.push(await time(restarted, q.qs));
    await restarted.close();

    const onPostgres: Timing[] = [];
    if (postgres) {
      const url = await postgres.createDatabase('filters');
      started = performance.now();
      await migrateSqliteToPostgres({ sqliteFile: file, postgres: { url }, where: 'bench', replace: false });
      const stores = await openServerStores({ kind: 'postgres', url, poolSize: 2, shown: { kind: 'postgres', location: 'bench' } });
      try {
        if (!(stores.store instanceof PgStore)) throw new Error('not the PostgreSQL store');
        await stores.store.db.run('VACUUM ANALYZE');
        log(`copied to PostgreSQL, vacuumed and analysed in ${((performance.now() - started) / 1000).toFixed(1)} s`);
        for (const q of list) onPostgres.push(await time(stores.store, q.qs));
      } finally {
        await stores.close();
      }
    }

    const out = [`listResults, limit=100, ${fmt(N)} results of one check; median of ${SAMPLES} after a warm-up (ms; entries on the page, + when it has a nextId)`];
    out.push('| query | SQLite | SQLite, restarted | PostgreSQL |', '|---|---|---|---|');
    for (const [i, q] of list.entries()) {
      const cell = (t: Timing | undefined) => (t ? `${fmt(t.ms)} ms (${t.entries}${t.more ? '+' : ''})` : 'not run');
      out.push(`| ${q.name} | ${cell(onSqlite[i])} | ${cell(onSqliteRestarted[i])} | ${cell(onPostgres[i])} |`);
    }
    process.stdout.write(`\n${out.join('\n')}\n\n`);
    expect(onSqlite).toHaveLength(list.length);
  } finally {
    await postgres?.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});
