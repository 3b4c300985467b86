// `npm run bench`: the built `outpost server` on PostgreSQL with one and with
// three replicas, beside the same server on SQLite measured in the same run
// (the peer: each PostgreSQL figure is printed as a ratio to it).
//
//   write: results accepted per second through POST /v1/agent/results, in
//          batches of 500 FINAL results, from four concurrent senders (one
//          agent key and location each); with three replicas the senders go
//          to the replicas in turn, as a load balancer would spread them.
//   read:  p50 and p99 latency of GET /v2/check-results/{checkId}?limit=100
//          (the first page, and location=c: 1 % of the rows) with N stored
//          results; with three replicas the requests go to each in turn.
//
// Every configuration starts from the same data: seeded once through the
// SQLite store in-process, then copied for each PostgreSQL configuration
// with `outpost migrate`'s copier (its time is printed too). PostgreSQL runs
// with fsync on, as SQLite runs with synchronous=FULL: an accepted result is
// on disk in both. Rounds in the order SQLite, PostgreSQL ×1, PostgreSQL ×3,
// SQLite again, so the spread between the two SQLite rounds shows the
// machine's noise. It asserts only that the runs did what they should.
// BENCH_PG_RESULTS overrides N (default 100,000), BENCH_PG_WRITE_RESULTS the
// results of one write round (default 10,000; a multiple of 2,000).

import { copyFileSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { Pool } from 'undici';
import { expect, test } from 'vitest';
import { parseServerChecksFile } from '../../src/checks/checks-file.js';
import { definitionRegistry } from '../../src/checks/registry.js';
import { MAX_RESULTS_PER_BATCH, PROTOCOL_ROUTES, type ResultEnvelope } from '../../src/core/protocol.js';
import type { CheckResultEntry } from '../../src/core/result-entry.js';
import { storedChecks } from '../../src/server-mode.js';
import { migrateSqliteToPostgres } from '../../src/store/migrate-sqlite-to-postgres.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import type { SessionRecord, StoredCheck } from '../../src/store/store.js';
import { type AgentProcess, cleanEnv, startAgent, tempDir } from '../support/agent-process.js';
import { READY_DEADLINE_MS } from '../support/daemon.js';
import { type PostgresServer, startPostgres } from '../support/postgres.js';

function positiveInteger(name: string, fallback: number, max: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 1 || value > max) throw new Error(`${name}=${raw}: must be an integer from 1 to ${max}`);
  return value;
}

const READ_SESSION_JOBS = { a: 990, b: 990, c: 20 } as const;
const READ_SESSION_SIZE = 2_000;
const READ_N = Math.ceil(positiveInteger('BENCH_PG_RESULTS', 100_000, 2_000_000) / READ_SESSION_SIZE) * READ_SESSION_SIZE;
const WRITE_LOCATIONS = ['w1', 'w2', 'w3', 'w4'] as const;
const SENDERS = WRITE_LOCATIONS.length;
const BATCH = MAX_RESULTS_PER_BATCH;
const WRITE_N = positiveInteger('BENCH_PG_WRITE_RESULTS', 10_000, 200_000);
if (WRITE_N % (SENDERS * BATCH) !== 0) throw new Error(`BENCH_PG_WRITE_RESULTS=${WRITE_N}: must be a multiple of ${SENDERS * BATCH}`);
const ROUNDS = [
  { name: 'SQLite, 1 server', kind: 'sqlite', replicas: 1 },
  { name: 'PostgreSQL, 1 replica', kind: 'postgres', replicas: 1 },
  { name: 'PostgreSQL, 3 replicas', kind: 'postgres', replicas: 3 },
  { name: 'SQLite, 1 server (again)', kind: 'sqlite', replicas: 1 },
] as const;
/** Per query; two queries stay under the public API's 600 requests a minute per replica. */
const SAMPLES = 200;
const WARM_UP = 5;
const API_KEY = 'bench-public-api-key-0123456789';
const HOUR_MS = 3_600_000;

const log = (line: string) => process.stdout.write(`[bench postgres] ${line}\n`);
const fmt = (n: number, digits = 0) => n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] as number;
}

function entry(check: StoredCheck, id: string, location: string, sequenceId: string, runId: number, startedMs: number): CheckResultEntry {
  const at = new Date(startedMs).toISOString();
  return {
    resultType: 'FINAL',
    id,
    name: check.name,
    checkId: check.id,
    checkType: 'URL',
    hasFailures: false,
    hasErrors: false,
    isDegraded: false,
    overMaxResponseTime: false,
    runLocation: location,
    startedAt: at,
    stoppedAt: at,
    created_at: at,
    responseTime: 12,
    checkRunId: runId,
    attempts: 1,
    sequenceId,
    apiCheckResult: { response: { status: 200, statusText: 'OK', body: '{"status":"ok","items":[1,2,3]}', headers: { 'content-type': 'application/json' } }, timingPhases: { dns: 0, tcp: 1, firstByte: 10 } },
  };
}

function session(check: StoredCheck, id: string, locations: readonly string[], startedMs: number): SessionRecord {
  return { id, checkId: check.id, checkType: check.checkType, name: check.name, status: 'STARTED', runLocations: [...locations], triggerSource: 'SCHEDULER', startedAt: new Date(startedMs).toISOString(), stoppedAt: null, durationMs: null };
}

interface Row {
  name: string;
  writePerSecond: number;
  read: Record<string, { p50: number; p99: number }>;
  copyMs?: number;
}

test(`server on PostgreSQL with 1 and 3 replicas beside SQLite: ${fmt(WRITE_N)} results written, reads with ${fmt(READ_N)} stored`, async () => {
  const dir = tempDir('outpost-bench-pg-');
  const checksFile = path.join(dir, 'checks.json');
  const seedFile = path.join(dir, 'seed.db');
  let postgres: PostgresServer | undefined;
  const servers: AgentProcess[] = [];
  const pools: Pool[] = [];
  try {
    writeFileSync(
      checksFile,
      JSON.stringify({
        privateLocations: ['a', 'b', 'c', ...WRITE_LOCATIONS].map((id) => ({ id, name: `Location ${id}` })),
        checks: [
          { id: 'bench-read', name: 'bench read', checkType: 'URL', frequency: 86_400, request: { url: 'http://127.0.0.1:9/' }, locations: ['a', 'b', 'c'] },
          { id: 'bench-write', name: 'bench write', checkType: 'URL', frequency: 86_400, request: { url: 'http://127.0.0.1:9/' }, locations: [...WRITE_LOCATIONS] },
        ],
      }),
    );
    const { checks, privateLocations } = parseServerChecksFile(readFileSync(checksFile, 'utf8'), checksFile, definitionRegistry());
    const stored = storedChecks(checks);
    const readCheck = stored.find((c) => c.id === 'bench-read') as StoredCheck;
    const writeCheck = stored.find((c) => c.id === 'bench-write') as StoredCheck;

    // The data every round starts from: the read check's results, and one write session per result each round sends, per round.
    let t = performance.now();
    const seed = await SqliteStore.open(seedFile);
    await seed.syncLocations(privateLocations);
    await seed.syncChecks(stored, new Date());
    const firstMs = Date.now() - (READ_N / READ_SESSION_SIZE) * 60_000;
    let runId = 0;
    for (let s = 0; s < READ_N / READ_SESSION_SIZE; s++) {
      const id = `read-s${s}`;
      const startedMs = firstMs + s * 60_000;
      const jobs = Object.entries(READ_SESSION_JOBS).flatMap(([location, count]) =>
        Array.from({ length: count }, (_, j) => ({ id: `${id}-${location}${j}`, location, deadlineAt: new Date(startedMs + HOUR_MS).toISOString() })),
      );
      await seed.createSession(session(readCheck, id, Object.keys(READ_SESSION_JOBS), startedMs), jobs, readCheck);
      for (const location of ['c', 'a', 'b'] as const) {
        const envelopes = jobs
          .filter((job) => job.location === location)
          .map((job, j): ResultEnvelope => ({ jobId: job.id, resultId: `r-${job.id}`, result: entry(readCheck, `r-${job.id}`, location, id, ++runId, startedMs + j) }));
        expect((await seed.acceptResults(`seed-${location}`, location, envelopes, new Date())).rejected).toEqual([]);
      }
    }
    const writeSessions = WRITE_N / SENDERS;
    for (let i = 0; i < writeSessions; i++) {
      const id = `write-s${i}`;
      const deadlineAt = new Date(Date.now() + 24 * HOUR_MS).toISOString();
      await seed.createSession(session(writeCheck, id, WRITE_LOCATIONS, Date.now()), WRITE_LOCATIONS.map((location) => ({ id: `${id}-${location}`, location, deadlineAt })), writeCheck);
    }
    await seed.close();
    log(`seeded ${fmt(READ_N)} results and ${fmt(writeSessions)} write sessions in SQLite in ${((performance.now() - t) / 1000).toFixed(1)} s`);
    postgres = await startPostgres({ fsync: true });

    const rows: Row[] = [];
    for (const [r, round] of ROUNDS.entries()) {
      const env: Record<string, string> = { OUTPOST_API_KEY: API_KEY, API_PORT: '0', API_HOST: '127.0.0.1', LOG_LEVEL: 'info', LEADER_LEASE_SECONDS: '15' };
      let copyMs: number | undefined;
      const stateRoot = path.join(dir, `round-${r}`);
      mkdirSync(stateRoot);
      if (round.kind === 'sqlite') {
        mkdirSync(path.join(stateRoot, 'state-0'));
        copyFileSync(seedFile, path.join(stateRoot, 'state-0', 'outpost.db'));
      } else {
        const url = await postgres.createDatabase(`bench${r}`);
        t = performance.now();
        await migrateSqliteToPostgres({ sqliteFile: seedFile, postgres: { url }, where: 'bench', replace: false });
        copyMs = performance.now() - t;
        env.DATABASE_URL = url;
        env.DATABASE_POOL_SIZE = '10';
      }
      const started: AgentProcess[] = [];
      for (let i = 0; i < round.replicas; i++) {
        const state = path.join(stateRoot, `state-${i}`);
        mkdirSync(state, { recursive: true });
        started.push(startAgent(['server', checksFile], cleanEnv({ ...env, STATE_DIR: state })));
      }
      servers.push(...started);
      const origins: string[] = [];
      for (const proc of started) {
        const line = await proc.waitForLog((l) => l.msg === 'outpost server started', READY_DEADLINE_MS, 'the server to start');
        origins.push(`http://127.0.0.1:${Number(line.apiPort)}`);
      }
      const roundPools = origins.map((origin) => new Pool(origin, { connections: SENDERS, pipelining: 1, bodyTimeout: 60_000, headersTimeout: 60_000 }));
      pools.push(...roundPools);
      const call = async (pool: Pool, method: 'GET' | 'POST', urlPath: string, token: string, body?: unknown, agentId?: string) => {
        const { statusCode, body: stream } = await pool.request({
          path: urlPath,
          method,
          headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...(agentId ? { 'x-agent-id': agentId } : {}) },
          ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        });
        const text = await stream.text();
        return { status: statusCode, json: text ? (JSON.parse(text) as unknown) : undefined };
      };
      const keys: string[] = [];
      for (const location of WRITE_LOCATIONS) {
        const made = await call(roundPools[0] as Pool, 'POST', `/v1/private-locations/${location}/keys`, API_KEY);
        expect(made.status, JSON.stringify(made.json)).toBe(201);
        keys.push((made.json as { rawKey: string }).rawKey);
      }
      // Write: each sender's results for its location's jobs (queued by the seed), to a replica of its own in turn.
      const batches = WRITE_LOCATIONS.map((location) => {
        const envelopes = Array.from({ length: writeSessions }, (_, i): ResultEnvelope => {
          const jobId = `write-s${i}-${location}`;
          const resultId = `r${r}-${jobId}`;
          return { jobId, resultId, result: entry(writeCheck, resultId, location, `write-s${i}`, i, Date.now()) };
        });
        return Array.from({ length: envelopes.length / BATCH }, (_, b) => envelopes.slice(b * BATCH, (b + 1) * BATCH));
      });
      let accepted = 0;
      const writeStart = performance.now();
      await Promise.all(
        WRITE_LOCATIONS.map(async (location, i) => {
          const pool = roundPools[i % roundPools.length] as Pool;
          for (const batch of batches[i] ?? []) {
            const answer = await call(pool, 'POST', PROTOCOL_ROUTES.results, keys[i] as string, { results: batch }, `sender-${location}`);
            expect(answer.status, JSON.stringify(answer.json).slice(0, 300)).toBe(200);
            const outcome = answer.json as { accepted: string[]; rejected: unknown[] };
            expect(outcome.rejected).toEqual([]);
            accepted += outcome.accepted.length;
          }
        }),
      );
      const writeMs = performance.now() - writeStart;
      expect(accepted).toBe(WRITE_N);
      // Read: one request at a time, the replicas in turn.
      const read: Row['read'] = {};
      for (const [name, qs] of [
        ['first page', 'limit=100'],
        ['location=c (1 %)', 'limit=100&location=c'],
      ] as const) {
        const samples: number[] = [];
        for (let k = 0; k < WARM_UP + SAMPLES; k++) {
          const pool = roundPools[k % roundPools.length] as Pool;
          const start = performance.now();
          const answer = await call(pool, 'GET', `/v2/check-results/bench-read?${qs}`, API_KEY);
          const ms = performance.now() - start;
          expect(answer.status).toBe(200);
          expect((answer.json as { length: number }).length).toBe(100);
          if (k >= WARM_UP) samples.push(ms);
        }
        read[name] = { p50: percentile(samples, 50), p99: percentile(samples, 99) };
      }
      rows.push({ name: round.name, writePerSecond: (WRITE_N / writeMs) * 1000, read, ...(copyMs !== undefined ? { copyMs } : {}) });
      log(`${round.name}: ${fmt((WRITE_N / writeMs) * 1000)} results/s; first page p99 ${read['first page']?.p99.toFixed(2)} ms`);
      for (const proc of started) proc.kill('SIGTERM');
      await Promise.all(started.map((p) => p.exit));
      for (const pool of roundPools) await pool.close();
    }

    const peer = rows.filter((row) => row.name.startsWith('SQLite'));
    const sqliteWrite = Math.max(...peer.map((row) => row.writePerSecond));
    const sqliteP99 = (name: string) => Math.min(...peer.map((row) => row.read[name]?.p99 ?? Number.NaN));
    const out: string[] = [''];
    out.push(`Outpost server on PostgreSQL (${postgres ? 'Debian PostgreSQL, fsync on' : ''}) beside SQLite (synchronous=FULL), node ${process.version}, ${os.cpus().length} × ${os.cpus()[0]?.model ?? '?'}, load ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}`);
    out.push(`write: ${fmt(WRITE_N)} FINAL results in batches of ${BATCH} from ${SENDERS} senders; read: ${SAMPLES} requests per query, one at a time, with ${fmt(READ_N)} stored results`);
    out.push(`  ${'configuration'.padEnd(26)} ${'results/s'.padStart(10)} ${'× SQLite'.padStart(9)} ${'first page p50/p99'.padStart(20)} ${'location=c p50/p99'.padStart(20)} ${'p99 × SQLite'.padStart(13)}`);
    for (const row of rows) {
      const first = row.read['first page'] as { p50: number; p99: number };
      const c = row.read['location=c (1 %)'] as { p50: number; p99: number };
      out.push(
        `  ${row.name.padEnd(26)} ${fmt(row.writePerSecond).padStart(10)} ${(row.writePerSecond / sqliteWrite).toFixed(2).padStart(9)} ${`${first.p50.toFixed(2)}/${first.p99.toFixed(2)} ms`.padStart(20)} ${`${c.p50.toFixed(2)}/${c.p99.toFixed(2)} ms`.padStart(20)} ${(first.p99 / sqliteP99('first page')).toFixed(2).padStart(13)}` +
          (row.copyMs !== undefined ? `  (outpost migrate copied the seed in ${(row.copyMs / 1000).toFixed(1)} s)` : ''),
      );
    }
    out.push(`  spread between the two SQLite rounds (the machine's noise): write ${(((Math.max(...peer.map((p) => p.writePerSecond)) - Math.min(...peer.map((p) => p.writePerSecond))) / sqliteWrite) * 100).toFixed(0)} %`);
    out.push('');
    process.stdout.write(out.join('\n'));
  } finally {
    for (const pool of pools) await pool.close().catch(() => undefined);
    for (const proc of servers) proc.kill('SIGKILL');
    await Promise.all(servers.map((p) => p.exit));
    await postgres?.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});
