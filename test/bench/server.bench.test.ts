// `npm run bench`: `outpost server` (the built dist/main.js) under load, each
// figure beside a peer measured in the same run: the same store (SqliteStore)
// called in-process on the same database file, so the ratio is what the HTTP
// front costs (routing, auth, rate limits, JSON both ways, the socket).
//
//   write: results accepted per second through POST /v1/agent/results, in
//          batches of 500 FINAL results shaped like a real URL result (one the
//          built agent produced against a local target at the bench's start),
//          from four concurrent senders, each an agent of its own private
//          location (its own key, made through the keys route), for jobs of
//          four-location sessions they claimed over HTTP first (the claims
//          are timed apart). Peer: acceptResults in-process with batches built
//          the same way, for jobs of sessions made the same way and claimed
//          with claimJobs. Four rounds, store, server, server, store, so that
//          the spread between a side's rounds shows the machine's noise.
//   read:  p50 and p99 latency of GET /v2/check-results/{checkId} (limit 100)
//          with N stored results of one check: the first page, a page half
//          way down the cursor chain, location=a (half the results) and
//          location=c (1 % of them, so a page reads about 10,000 rows). Peer:
//          listResults in-process with the query the route parses from the
//          same parameters, timed right after each HTTP request.
//
// Sessions, jobs and the stored results are seeded through the store API in
// this process before the server starts (seeding is timed and printed). The
// server's peak RSS is VmHWM from /proc/<pid>/status after each phase. The
// public API allows 600 requests a minute per key, so the read phase makes
// fewer than that. It asserts only that the runs did what they should (every
// result accepted, every page full), never a speed.
//
// N is 1,000,000: seeding them takes 40–70 s on the shared 2-core machine
// (4–7 s per 100k, printed with the figures) and makes a 2 GB database, removed
// at the end. BENCH_SERVER_RESULTS overrides N for a quick try,
// BENCH_SERVER_WRITE_RESULTS the results of one write round (default 10,000;
// a multiple of 2,000), BENCH_SERVER_SAMPLES the timed requests per read query
// (default 120, at most 130).

import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { Pool } from 'undici';
import { expect, test } from 'vitest';
import { parseServerChecksFile } from '../../src/checks/checks-file.js';
import { definitionRegistry } from '../../src/checks/registry.js';
import { type Job, MAX_RESULTS_PER_BATCH, PROTOCOL_ROUTES, type ResultEnvelope } from '../../src/core/protocol.js';
import type { CheckResultEntry } from '../../src/core/result-entry.js';
import { parseResultQuery } from '../../src/server/read-api.js';
import { storedChecks } from '../../src/server-mode.js';
import { encodeCursor, SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import type { SessionRecord, StoredCheck } from '../../src/store/store.js';
import { type AgentProcess, cleanEnv, startAgent, tempDir } from '../support/agent-process.js';
import { READY_DEADLINE_MS } from '../support/daemon.js';
import { FakeControlPlane } from '../support/fake-control-plane.js';

function positiveInteger(name: string, fallback: number, max: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 1 || value > max) throw new Error(`${name}=${raw}: must be an integer from 1 to ${max}`);
  return value;
}

/** Jobs per read-side session: 990 in location a, 990 in b, 20 in c; its results are stored one location at a time. */
const READ_SESSION_JOBS = { a: 990, b: 990, c: 20 } as const;
const READ_SESSION_SIZE = READ_SESSION_JOBS.a + READ_SESSION_JOBS.b + READ_SESSION_JOBS.c;
const READ_N = Math.ceil(positiveInteger('BENCH_SERVER_RESULTS', 1_000_000, 5_000_000) / READ_SESSION_SIZE) * READ_SESSION_SIZE;
const WRITE_LOCATIONS = ['w1', 'w2', 'w3', 'w4'] as const;
const SENDERS = WRITE_LOCATIONS.length;
const BATCH = MAX_RESULTS_PER_BATCH;
const WRITE_N = positiveInteger('BENCH_SERVER_WRITE_RESULTS', 10_000, 400_000);
/** Write rounds, in the order they run: the store in-process, the server twice, the store again (A B B A shows the noise). */
const WRITE_ROUNDS = ['store1', 'server1', 'server2', 'store2'] as const;
if (WRITE_N % (SENDERS * BATCH) !== 0) throw new Error(`BENCH_SERVER_WRITE_RESULTS=${WRITE_N}: must be a multiple of ${SENDERS * BATCH}`);
/** 4 queries × (warm-up + samples) + the 4 key requests stay under the public API's 600 a minute. */
const SAMPLES = positiveInteger('BENCH_SERVER_SAMPLES', 120, 130);
const WARM_UP = 5;
const API_KEY = 'bench-public-api-key-0123456789';
const READ_CHECK = 'bench-read';
const WRITE_CHECK = 'bench-write';
const HOUR_MS = 3_600_000;

const log = (line: string) => process.stdout.write(`[bench server] ${line}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const fmt = (n: number, digits = 0) => n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });

/** VmHWM (peak resident set) of a live process, in MB. */
function peakRssMb(pid: number): number {
  const match = /^VmHWM:\s+(\d+)\s+kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!match) throw new Error(`no VmHWM in /proc/${pid}/status`);
  return Number(match[1]) / 1024;
}

const TICKS = 100;
/** User + system CPU of a live process, in seconds (clock ticks of 1/100 s on Linux). */
function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / TICKS;
}
/** User + nice + system CPU of the whole machine since boot, in seconds. */
function machineCpuSeconds(): number {
  const [, user, nice, system] = (readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '').trim().split(/\s+/).map(Number);
  return ((user ?? 0) + (nice ?? 0) + (system ?? 0)) / TICKS;
}

/** Share of the machine's CPU taken by processes other than this one and `pid` since `mark`: the noise. */
interface Mark {
  at: number;
  machine: number;
  self: NodeJS.CpuUsage;
  server: number;
}
function mark(pid: number | undefined): Mark {
  return { at: performance.now(), machine: machineCpuSeconds(), self: process.cpuUsage(), server: pid ? cpuSeconds(pid) : 0 };
}
function since(m: Mark, pid: number | undefined): { benchCpu: number; serverCpu: number; otherShare: number } {
  const used = process.cpuUsage(m.self);
  const benchCpu = (used.user + used.system) / 1e6;
  const serverCpu = pid ? cpuSeconds(pid) - m.server : 0;
  const other = Math.max(0, machineCpuSeconds() - m.machine - benchCpu - serverCpu);
  const capacity = (os.cpus().length * (performance.now() - m.at)) / 1000;
  return { benchCpu, serverCpu, otherShare: capacity > 0 ? other / capacity : 0 };
}

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] as number;
}

/** One URL result as the built agent reports it: a real check against a local target, through the fake control plane. */
async function realUrlResult(): Promise<CheckResultEntry> {
  const target: Server = createServer((_req, res) => res.end('{"status":"ok","items":[1,2,3]}'));
  await new Promise<void>((resolve) => target.listen(0, '127.0.0.1', resolve));
  const cp = await FakeControlPlane.start();
  const stateDir = tempDir('outpost-bench-shape-');
  cp.addJob({ id: 'shape', name: 'shape', checkType: 'URL', request: { url: `http://127.0.0.1:${(target.address() as AddressInfo).port}/health` } });
  const agent = startAgent(['agent'], cleanEnv({ API_URL: cp.url, API_KEY: cp.apiKey, STATE_DIR: stateDir, LOG_LEVEL: 'warn', CLAIM_WAIT_SECONDS: '1' }));
  try {
    const deadline = Date.now() + READY_DEADLINE_MS;
    while (cp.results.size === 0) {
      if (Date.now() > deadline) throw new Error(`no result from the agent; stderr: ${agent.stderr().slice(-2000)}`);
      await sleep(25);
    }
    const stored = [...cp.results.values()][0]?.result as CheckResultEntry;
    expect(stored.resultType).toBe('FINAL');
    expect(stored.apiCheckResult).toBeDefined();
    return stored;
  } finally {
    agent.kill('SIGKILL');
    await agent.exit;
    await cp.close();
    await new Promise((resolve) => target.close(resolve));
    rmSync(stateDir, { recursive: true, force: true });
  }
}

/** The real result with another identity: everything else (timings, response, jobLog) as the agent reported it. */
function shaped(template: CheckResultEntry, check: StoredCheck, job: { runLocation: string; checkRunId: number; sequenceId: string }, id: string, startedMs: number): CheckResultEntry {
  const stopped = new Date(startedMs + template.responseTime).toISOString();
  return {
    ...template,
    resultType: 'FINAL',
    id,
    name: check.name,
    checkId: check.id,
    runLocation: job.runLocation,
    startedAt: new Date(startedMs).toISOString(),
    stoppedAt: stopped,
    created_at: stopped,
    checkRunId: job.checkRunId,
    sequenceId: job.sequenceId,
  };
}

function session(check: StoredCheck, id: string, locations: readonly string[], startedMs: number): SessionRecord {
  return {
    id,
    checkId: check.id,
    checkType: check.checkType,
    name: check.name,
    status: 'STARTED',
    runLocations: [...locations],
    triggerSource: 'SCHEDULER',
    startedAt: new Date(startedMs).toISOString(),
    stoppedAt: null,
    durationMs: null,
  };
}

/** Four-location sessions of the write check (one job per location each), as the scheduler makes them; `prefix` keeps the two sides' ids apart. */
async function seedWriteSessions(store: SqliteStore, check: StoredCheck, prefix: string, count: number): Promise<void> {
  const now = Date.now();
  for (let i = 0; i < count; i++) {
    const id = `${prefix}-s${i}`;
    const deadlineAt = new Date(now + HOUR_MS).toISOString();
    await store.createSession(
      session(check, id, WRITE_LOCATIONS, now),
      WRITE_LOCATIONS.map((location) => ({ id: `${id}-${location}`, location, deadlineAt })),
      check,
    );
  }
}

/** Batches of FINAL results for claimed jobs, in claim order. */
function batchesFor(template: CheckResultEntry, check: StoredCheck, jobs: readonly Job[]): ResultEnvelope[][] {
  const started = Date.now();
  const envelopes = jobs.map((job, i): ResultEnvelope => {
    const resultId = `r-${job.id}`;
    const result = shaped(
      template,
      check,
      { runLocation: job.runLocation ?? '', checkRunId: job.checkRunId ?? 0, sequenceId: job.sequenceId ?? '' },
      resultId,
      started + i,
    );
    return { jobId: job.id, resultId, result };
  });
  const batches: ResultEnvelope[][] = [];
  for (let i = 0; i < envelopes.length; i += BATCH) batches.push(envelopes.slice(i, i + BATCH));
  return batches;
}

/** N results of the read check: sessions of 2,000 jobs (a, b, c), each location's results accepted in one call. */
async function seedReadResults(store: SqliteStore, check: StoredCheck, template: CheckResultEntry): Promise<{ ms: number; createMs: number; acceptMs: number }> {
  const sessions = READ_N / READ_SESSION_SIZE;
  const start = performance.now();
  let createMs = 0;
  let acceptMs = 0;
  // One session a minute, ending now: startedAt grows with the row sequence, as it does in production.
  const firstMs = Date.now() - sessions * 60_000;
  let runId = 0;
  for (let s = 0; s < sessions; s++) {
    const id = `read-s${s}`;
    const startedMs = firstMs + s * 60_000;
    const jobs = Object.entries(READ_SESSION_JOBS).flatMap(([location, count]) =>
      Array.from({ length: count }, (_, j) => ({ id: `${id}-${location}${j}`, location, deadlineAt: new Date(startedMs + HOUR_MS).toISOString() })),
    );
    let t = performance.now();
    await store.createSession(session(check, id, Object.keys(READ_SESSION_JOBS), startedMs), jobs, check);
    createMs += performance.now() - t;
    t = performance.now();
    // c first: its few results are the cheapest way through the session's recomputes (each reads the FINALs so far).
    for (const location of ['c', 'a', 'b'] as const) {
      const envelopes = jobs
        .filter((job) => job.location === location)
        .map((job, j): ResultEnvelope => {
          const resultId = `r-${job.id}`;
          return { jobId: job.id, resultId, result: shaped(template, check, { runLocation: location, checkRunId: ++runId, sequenceId: id }, resultId, startedMs + j) };
        });
      const outcome = await store.acceptResults(`seed-${location}`, location, envelopes, new Date());
      if (outcome.rejected.length > 0) throw new Error(`seeding: results rejected: ${JSON.stringify(outcome.rejected.slice(0, 3))}`);
    }
    acceptMs += performance.now() - t;
    if ((s + 1) % Math.max(1, Math.round(100_000 / READ_SESSION_SIZE)) === 0) {
      log(`seeded ${fmt((s + 1) * READ_SESSION_SIZE)} of ${fmt(READ_N)} results (${((performance.now() - start) / 1000).toFixed(1)} s)`);
    }
  }
  return { ms: performance.now() - start, createMs, acceptMs };
}

interface WriteRound {
  side: 'server' | 'store';
  prefix: string;
  ms: number;
  /** The server's CPU (server rounds) or this process's (store rounds), in seconds. */
  cpu: number;
  otherShare: number;
  claimMs: number;
}

const spread = (values: number[]) => (values.length < 2 ? 0 : ((Math.max(...values) - Math.min(...values)) / Math.max(...values)) * 100);

interface ReadQuery {
  name: string;
  qs: string;
}

interface LatencyRow {
  name: string;
  http: number[];
  direct: number[];
  rows: number;
}

function startServer(checksFile: string, stateDir: string): AgentProcess {
  return startAgent(['server', checksFile], cleanEnv({ OUTPOST_API_KEY: API_KEY, API_PORT: '0', API_HOST: '127.0.0.1', STATE_DIR: stateDir, LOG_LEVEL: 'info' }));
}

test(`server: rounds of ${WRITE_N} results over POST /v1/agent/results, read latency with ${READ_N} stored results, each beside the store in-process`, async () => {
  const benchStart = Date.now();
  const loadBefore = os.loadavg();
  const dir = tempDir('outpost-bench-server-');
  const stateDir = path.join(dir, 'state');
  const checksFile = path.join(dir, 'checks.json');
  let server: AgentProcess | undefined;
  let store: SqliteStore | undefined;
  const pools: Pool[] = [];
  try {
    log('a real URL result from the built agent, for the results’ shape…');
    const template = await realUrlResult();
    const bodyBytes = Buffer.byteLength(JSON.stringify(template));

    writeFileSync(
      checksFile,
      JSON.stringify({
        privateLocations: ['a', 'b', 'c', ...WRITE_LOCATIONS].map((id) => ({ id, name: `Location ${id}` })),
        checks: [
          // Once a day: the scheduler's own sessions (a few jobs nobody claims) do not get in the way.
          { id: READ_CHECK, name: 'bench read', checkType: 'URL', frequency: 86_400, request: { url: 'http://127.0.0.1:9/' }, locations: ['a', 'b', 'c'] },
          { id: WRITE_CHECK, name: 'bench write', checkType: 'URL', frequency: 86_400, request: { url: 'http://127.0.0.1:9/' }, locations: [...WRITE_LOCATIONS] },
        ],
      }),
    );
    const { checks, privateLocations } = parseServerChecksFile(readFileSync(checksFile, 'utf8'), checksFile, definitionRegistry());
    const stored = storedChecks(checks);
    const readCheck = stored.find((c) => c.id === READ_CHECK) as StoredCheck;
    const writeCheck = stored.find((c) => c.id === WRITE_CHECK) as StoredCheck;

    // Seeding, through the store API, on the file the server will open.
    mkdirSync(stateDir);
    store = await SqliteStore.open(path.join(stateDir, 'outpost.db'));
    await store.syncLocations(privateLocations);
    await store.syncChecks(stored, new Date());
    const writeSessions = WRITE_N / SENDERS;
    const t = performance.now();
    // In the order the rounds claim them: claims take the oldest jobs of a location, so each round takes exactly its own.
    for (const prefix of WRITE_ROUNDS) await seedWriteSessions(store, writeCheck, prefix, writeSessions);
    const writeSeedMs = performance.now() - t;
    log(`seeded ${fmt(WRITE_ROUNDS.length * writeSessions)} four-location sessions for the write rounds in ${(writeSeedMs / 1000).toFixed(1)} s`);
    const seed = await seedReadResults(store, readCheck, template);
    const dbBytes = ['outpost.db', 'outpost.db-wal'].reduce((sum, f) => {
      try {
        return sum + statSync(path.join(stateDir, f)).size;
      } catch {
        return sum;
      }
    }, 0);
    log(`seeded ${fmt(READ_N)} results in ${(seed.ms / 1000).toFixed(1)} s (${((seed.ms / READ_N) * 100).toFixed(1)} s per 100k)`);
    const opened = store;

    /** The write peer: acceptResults in-process, the same batches, one after another (the store is synchronous: concurrency buys nothing in-process). */
    const peerRound = async (prefix: string, pid: number | undefined): Promise<WriteRound> => {
      const jobs: Job[][] = [];
      for (const location of WRITE_LOCATIONS) {
        const claimed = await opened.claimJobs({ location, agentId: `${prefix}-${location}`, checkTypes: ['URL'], runtimes: [], max: writeSessions, leaseMs: HOUR_MS, now: new Date() });
        expect(claimed.every((job) => job.sequenceId?.startsWith(`${prefix}-`))).toBe(true);
        jobs.push(claimed);
      }
      const batches = jobs.map((list) => batchesFor(template, writeCheck, list));
      let accepted = 0;
      const before = mark(pid);
      const start = performance.now();
      for (let b = 0; b < (batches[0]?.length ?? 0); b++) {
        for (const [i, location] of WRITE_LOCATIONS.entries()) {
          const outcome = await opened.acceptResults(`${prefix}-${location}`, location, batches[i]?.[b] ?? [], new Date());
          expect(outcome.rejected).toEqual([]);
          accepted += outcome.accepted.length;
        }
      }
      const ms = performance.now() - start;
      const cpu = since(before, pid);
      expect(accepted).toBe(WRITE_N);
      log(`${prefix}: ${fmt((WRITE_N / ms) * 1000)} results/s in-process`);
      return { side: 'store', prefix, ms, cpu: cpu.benchCpu, otherShare: cpu.otherShare, claimMs: 0 };
    };

    // Round 1 of the peer before the server starts; round 2 after the server's two (A B B A).
    const writeRounds: WriteRound[] = [await peerRound(WRITE_ROUNDS[0], undefined)];

    // The server, on the same file (the bench keeps its connection for the read peer: WAL lets both read).
    server = startServer(checksFile, stateDir);
    const started = await server.waitForLog((l) => l.msg === 'outpost server started', READY_DEADLINE_MS, 'the server to start');
    const pid = server.proc.pid as number;
    const origin = `http://127.0.0.1:${Number(started.apiPort)}`;
    const rssAtStart = peakRssMb(pid);
    const publicPool = new Pool(origin, { connections: 1, pipelining: 1 });
    const agentPool = new Pool(origin, { connections: SENDERS, pipelining: 1, bodyTimeout: 60_000, headersTimeout: 60_000 });
    pools.push(publicPool, agentPool);
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
      const made = await call(publicPool, 'POST', `/v1/private-locations/${location}/keys`, API_KEY);
      expect(made.status, JSON.stringify(made.json)).toBe(201);
      keys.push((made.json as { rawKey: string }).rawKey);
    }

    /** A server round: each sender claims its location's jobs over HTTP, then all send their batches at once. */
    const httpRound = async (prefix: string): Promise<WriteRound> => {
      const claimStart = performance.now();
      const senderJobs = await Promise.all(
        WRITE_LOCATIONS.map(async (location, i) => {
          const jobs: Job[] = [];
          while (jobs.length < writeSessions) {
            const claimed = await call(
              agentPool,
              'POST',
              PROTOCOL_ROUTES.claim,
              keys[i] as string,
              { max: 100, waitSeconds: 0, agent: { id: `sender-${location}`, version: 'bench', checkTypes: ['URL'], runtimes: [] } },
              `sender-${location}`,
            );
            expect(claimed.status, JSON.stringify(claimed.json)).toBe(200);
            const got = (claimed.json as { jobs: Job[] }).jobs;
            expect(got.length, `${location}: claimed ${jobs.length} of ${writeSessions}, then nothing`).toBeGreaterThan(0);
            jobs.push(...got);
          }
          return jobs;
        }),
      );
      const claimMs = performance.now() - claimStart;
      for (const jobs of senderJobs) expect(jobs.every((job) => job.sequenceId?.startsWith(`${prefix}-`))).toBe(true);
      const senderBatches = senderJobs.map((jobs) => batchesFor(template, writeCheck, jobs));
      let accepted = 0;
      let rejected = 0;
      const before = mark(pid);
      const start = performance.now();
      await Promise.all(
        WRITE_LOCATIONS.map(async (location, i) => {
          for (const batch of senderBatches[i] ?? []) {
            const answer = await call(agentPool, 'POST', PROTOCOL_ROUTES.results, keys[i] as string, { results: batch }, `sender-${location}`);
            expect(answer.status, JSON.stringify(answer.json).slice(0, 500)).toBe(200);
            const outcome = answer.json as { accepted: string[]; rejected: unknown[] };
            accepted += outcome.accepted.length;
            rejected += outcome.rejected.length;
          }
        }),
      );
      const ms = performance.now() - start;
      const cpu = since(before, pid);
      expect(rejected).toBe(0);
      expect(accepted).toBe(WRITE_N);
      log(`${prefix}: ${fmt((WRITE_N / ms) * 1000)} results/s over HTTP`);
      return { side: 'server', prefix, ms, cpu: cpu.serverCpu, otherShare: cpu.otherShare, claimMs };
    };

    writeRounds.push(await httpRound(WRITE_ROUNDS[1]), await httpRound(WRITE_ROUNDS[2]));
    // The server is up but idle meanwhile (its sweeper wakes every 5 s).
    writeRounds.push(await peerRound(WRITE_ROUNDS[3], pid));
    const rssAfterWrite = peakRssMb(pid);

    // Read phase: each query over HTTP, then the same query in-process, in turn.
    const deepCursor = encodeCursor(Math.floor(READ_N / 2));
    const queries: ReadQuery[] = [
      { name: 'first page', qs: 'limit=100' },
      { name: 'page half way down the cursor chain', qs: `limit=100&nextId=${deepCursor}` },
      { name: 'location=a (50 % of the results)', qs: 'limit=100&location=a' },
      { name: 'location=c (1 % of the results)', qs: 'limit=100&location=c' },
    ];
    const rows: LatencyRow[] = queries.map((q) => ({ name: q.name, http: [], direct: [], rows: 0 }));
    const readMark = mark(pid);
    for (let round = 0; round < WARM_UP + SAMPLES; round++) {
      for (const [i, q] of queries.entries()) {
        const row = rows[i] as LatencyRow;
        let start = performance.now();
        const answer = await call(publicPool, 'GET', `/v2/check-results/${READ_CHECK}?${q.qs}`, API_KEY);
        const httpMs = performance.now() - start;
        expect(answer.status, JSON.stringify(answer.json).slice(0, 500)).toBe(200);
        const page = answer.json as { length: number; entries: CheckResultEntry[]; nextId: string | null };
        expect(page.length, `${q.name}: a full page`).toBe(100);
        expect(page.nextId).not.toBeNull();
        start = performance.now();
        const direct = await store.listResults(parseResultQuery(READ_CHECK, new URLSearchParams(q.qs)));
        const directMs = performance.now() - start;
        expect(direct.entries.map((e) => e.id)).toEqual(page.entries.map((e) => e.id));
        if (round >= WARM_UP) {
          row.http.push(httpMs);
          row.direct.push(directMs);
        }
        row.rows = page.length;
      }
    }
    const readCpu = since(readMark, pid);
    const rssAfterRead = peakRssMb(pid);

    const out: string[] = [''];
    out.push(`Outpost server bench: the built server (node ${process.version}) on SQLite in a temp STATE_DIR, beside the same store in-process`);
    out.push(
      `machine: ${os.cpus().length} × ${os.cpus()[0]?.model ?? '?'}, load average before ${loadBefore.map((l) => l.toFixed(2)).join(' ')}, after ${os
        .loadavg()
        .map((l) => l.toFixed(2))
        .join(' ')}`,
    );
    out.push(`result entry: a real URL result, ${fmt(bodyBytes)} bytes of JSON`);
    out.push(
      `seeding through the store API: ${fmt(READ_N)} results in ${(seed.ms / 1000).toFixed(1)} s = ${((seed.ms / READ_N) * 100).toFixed(1)} s per 100k ` +
        `(createSession ${(seed.createMs / 1000).toFixed(1)} s, acceptResults ${(seed.acceptMs / 1000).toFixed(1)} s); database ${fmt(dbBytes / 1e6)} MB` +
        `; ${fmt(WRITE_ROUNDS.length * writeSessions)} write sessions in ${(writeSeedMs / 1000).toFixed(1)} s`,
    );
    out.push('');
    const rate = (r: WriteRound) => (WRITE_N / r.ms) * 1000;
    const servers = writeRounds.filter((r) => r.side === 'server');
    const peers = writeRounds.filter((r) => r.side === 'store');
    const best = (rounds: WriteRound[]) => Math.max(...rounds.map(rate));
    out.push(`write: ${fmt(WRITE_N)} FINAL results a round in batches of ${BATCH}, ${SENDERS} senders (one agent key and location each); rounds in the order store, server, server, store`);
    for (const r of writeRounds) {
      out.push(
        `  ${(r.side === 'server' ? 'server, POST /v1/agent/results' : 'store, acceptResults in-process').padEnd(33)} ${fmt(rate(r)).padStart(7)} results/s  (${(r.ms / 1000).toFixed(2)} s; ` +
          `${r.side === 'server' ? `server CPU ${r.cpu.toFixed(2)} s, claims over HTTP before it ${(r.claimMs / 1000).toFixed(2)} s` : `CPU ${r.cpu.toFixed(2)} s`}; other processes ${(r.otherShare * 100).toFixed(0)} % of the machine)`,
      );
    }
    out.push(
      `  ratio server/in-process: ${(best(servers) / best(peers)).toFixed(2)} (best/best; worst/worst ${(Math.min(...servers.map(rate)) / Math.min(...peers.map(rate))).toFixed(2)}); ` +
        `spread between rounds: server ${spread(servers.map(rate)).toFixed(0)} %, store ${spread(peers.map(rate)).toFixed(0)} %`,
    );
    // CPU per result barely moves with the machine's noise, unlike the wall time (fsync waits, other processes).
    const cpuPerResult = (rounds: WriteRound[]) => (Math.min(...rounds.map((r) => r.cpu)) / WRITE_N) * 1e6;
    out.push(
      `  CPU per result (least of the rounds): server ${cpuPerResult(servers).toFixed(0)} µs, store in-process ${cpuPerResult(peers).toFixed(0)} µs: ` +
        `the server spends ${(cpuPerResult(servers) / cpuPerResult(peers)).toFixed(2)}× the store's CPU per result`,
    );
    out.push('');
    out.push(`read: GET /v2/check-results/${READ_CHECK}, limit 100, with ${fmt(READ_N)} stored results; ${SAMPLES} requests per query after ${WARM_UP} warm-up, one at a time`);
    const header = `  ${'query'.padEnd(38)} ${'HTTP p50'.padStart(9)} ${'HTTP p99'.padStart(9)} ${'store p50'.padStart(10)} ${'store p99'.padStart(10)} ${'ratio p50'.padStart(10)}`;
    out.push(header);
    for (const row of rows) {
      const hp50 = percentile(row.http, 50);
      const dp50 = percentile(row.direct, 50);
      out.push(
        `  ${row.name.padEnd(38)} ${`${hp50.toFixed(2)} ms`.padStart(9)} ${`${percentile(row.http, 99).toFixed(2)} ms`.padStart(9)} ${`${dp50.toFixed(2)} ms`.padStart(10)} ${`${percentile(row.direct, 99).toFixed(2)} ms`.padStart(10)} ${`${(hp50 / dp50).toFixed(2)}×`.padStart(10)}`,
      );
    }
    out.push(`  (store: listResults in-process on the same file, the query the route parses; other processes took ${(readCpu.otherShare * 100).toFixed(0)} % of the machine's CPU meanwhile)`);
    out.push('');
    out.push(`server peak RSS (VmHWM): ${rssAtStart.toFixed(1)} MB after start, ${rssAfterWrite.toFixed(1)} MB after the write phase, ${rssAfterRead.toFixed(1)} MB after the read phase`);
    out.push(`total server bench time: ${((Date.now() - benchStart) / 1000).toFixed(1)} s`);
    out.push('');
    process.stdout.write(out.join('\n'));
  } finally {
    for (const pool of pools) await pool.close();
    if (server) {
      server.kill('SIGTERM');
      const stopped = await Promise.race([server.exit.then(() => true), sleep(30_000).then(() => false)]);
      if (!stopped) {
        server.kill('SIGKILL');
        await server.exit;
      }
    }
    await store?.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
