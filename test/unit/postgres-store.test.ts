// What only the PostgreSQL store (src/store/postgres/) has, against a
// cluster this file starts (test/support/postgres.ts), with several stores
// on one database standing for several server replicas: migrations applied
// once however many open together; claims that hand each job to exactly
// one of many concurrent claimers (SKIP LOCKED); a result sent to several
// replicas at once stored once; a slot made once; the leader lease; the
// outbox claimed by one deliverer; the alert store's ids and notices;
// migration 7's backfill of result_metrics; the results list's reads for a
// location's newest FINAL and for every filter, counted by EXPLAIN ANALYZE;
// a customUrl PUT on several replicas at once kept on one dashboard.
// The Store contract both stores keep is store-conformance.test.ts.

import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import type { ResultEnvelope } from '../../src/core/protocol.js';
import { CLAIM_MS } from '../../src/store/postgres/alerts-store.js';
import { migratePg, PG_MIGRATIONS, PG_SCHEMA_VERSION } from '../../src/store/postgres/migrations.js';
import { PgStore } from '../../src/store/postgres/pg-store.js';
import { SCAN_BUDGET } from '../../src/store/result-list.js';
import { openServerStores, type ServerStores } from '../../src/store/server-stores.js';
import type { ResultQuery, SessionRecord, StoredCheck } from '../../src/store/store.js';
import { retryUntil } from '../support/daemon.js';
import { type PostgresServer, startPostgres } from '../support/postgres.js';
import { BIG_CHECK, FILTER_CASES, insertResultRows, resultRows } from '../support/result-rows.js';
import { dashboard } from '../support/store-fixtures.js';

let postgres: PostgresServer;
const opened: ServerStores[] = [];

beforeAll(async () => {
  postgres = await startPostgres();
}, 120_000);

afterAll(async () => {
  await postgres?.stop();
});

afterEach(async () => {
  for (const stores of opened.splice(0)) await stores.close();
});

async function open(url: string, poolSize = 4): Promise<ServerStores> {
  const stores = await openServerStores({ kind: 'postgres', url, poolSize, shown: { kind: 'postgres', location: 'test' } });
  opened.push(stores);
  return stores;
}

/** `n` stores (replicas) on one new database. */
async function replicas(n: number): Promise<ServerStores[]> {
  const url = await postgres.createDatabase('pgstore');
  return Promise.all(Array.from({ length: n }, () => open(url)));
}

/** A node of EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)'s plan, the fields resultsRead looks at. */
interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Actual Rows': number;
  'Actual Loops': number;
  'Rows Removed by Filter'?: number;
  'Rows Removed by Index Recheck'?: number;
  /** Pages the node and the nodes under it touched. */
  'Shared Hit Blocks': number;
  'Shared Read Blocks': number;
  Plans?: PlanNode[];
}

/**
 * Rows of `results` a plan read: what each scan of it returned and what its
 * filter threw away, per loop (EXPLAIN shows both per loop), over the loops.
 * A sequential scan of the table fails the test outright.
 */
function resultsRead(node: PlanNode, what: string): number {
  let read = 0;
  if (node['Relation Name'] === 'results' && node['Node Type'] !== 'Bitmap Index Scan') {
    expect(node['Node Type'], what).not.toBe('Seq Scan');
    read += (node['Actual Rows'] + (node['Rows Removed by Filter'] ?? 0) + (node['Rows Removed by Index Recheck'] ?? 0)) * node['Actual Loops'];
  }
  for (const child of node.Plans ?? []) read += resultsRead(child, what);
  return read;
}

/**
 * Rows of `results` the statements `work` runs on the store's pool read,
 * each run again under EXPLAIN ANALYZE on `client` (resultsRead). The index
 * entries a scan steps over without returning them (an index condition that
 * does not bound the range) show in no row count, only in the pages it
 * touches: each statement may touch a root-to-leaf path (4 pages here) for
 * each row it reads and a few more, no more.
 */
async function resultsReadBy(store: PgStore, client: pg.Client, what: string, work: () => Promise<unknown>): Promise<number> {
  const rows = vi.spyOn(store.db, 'rows');
  const row = vi.spyOn(store.db, 'row');
  let ran: Array<[string, (readonly unknown[])?]>;
  try {
    await work();
  } finally {
    // Restoring forgets the calls.
    ran = [...rows.mock.calls, ...row.mock.calls];
    rows.mockRestore();
    row.mockRestore();
  }
  expect(ran.length, `${what}: statements seen`).toBeGreaterThan(0);
  let read = 0;
  for (const [sql, params] of ran) {
    const explained = await client.query<{ 'QUERY PLAN': Array<{ Plan: PlanNode }> }>(
      `EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, TIMING OFF, SUMMARY OFF, FORMAT JSON) ${sql}`,
      params as unknown[],
    );
    const plan = explained.rows[0]?.['QUERY PLAN'][0]?.Plan;
    if (!plan) throw new Error(`no plan for ${sql}`);
    const rowsRead = resultsRead(plan, `${what}: ${sql}`);
    expect(plan['Shared Hit Blocks'] + plan['Shared Read Blocks'], `${what}: pages its ${rowsRead} rows do not account for: ${sql}`).toBeLessThanOrEqual(4 * (rowsRead + 4));
    read += rowsRead;
  }
  return read;
}

const T0 = new Date('2026-11-24T00:00:00.000Z');
const check: StoredCheck = {
  id: 'c1',
  name: 'c1',
  checkType: 'API',
  frequencySeconds: 60,
  locations: ['loc-a'],
  definition: { id: 'c1' },
  environmentVariables: [],
  runtimeId: null,
  capMs: 30_000,
};

function session(): SessionRecord {
  return {
    id: randomUUID(),
    checkId: 'c1',
    checkType: 'API',
    name: 'c1',
    status: 'STARTED',
    runLocations: ['loc-a'],
    triggerSource: 'SCHEDULER',
    startedAt: T0.toISOString(),
    stoppedAt: null,
    durationMs: null,
  };
}

const DASHBOARD = dashboard('d', { enableIncidents: false });

const job = () => ({ id: randomUUID(), location: 'loc-a', deadlineAt: new Date(T0.getTime() + 600_000).toISOString() });

describe('the PostgreSQL store', () => {
  it('applies the migrations once when several replicas open a new database together', async () => {
    const url = await postgres.createDatabase('migrate');
    await Promise.all(Array.from({ length: 5 }, () => open(url, 2)));
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      const { rows } = await client.query<{ version: number }>('SELECT version FROM schema_version ORDER BY version');
      expect(rows.map((r) => r.version)).toEqual(Array.from({ length: PG_SCHEMA_VERSION }, (_, i) => i + 1));
      // A database a newer release wrote is refused, naming where.
      await client.query("INSERT INTO schema_version (version, applied_at) VALUES (99, 'later')");
    } finally {
      await client.end();
    }
    await expect(openServerStores({ kind: 'postgres', url, poolSize: 1, shown: { kind: 'postgres', location: 'db.example:5432/x' } })).rejects.toThrow(
      new RegExp(`^cannot open the database db\\.example:5432/x: .*schema version 99, newer than this Outpost knows \\(${PG_SCHEMA_VERSION}\\)`),
    );
  });

  it('hands each job to exactly one of many concurrent claimers on three replicas', async () => {
    const [a, b, c] = await replicas(3);
    if (!a || !b || !c) throw new Error('three replicas');
    await a.store.syncChecks([check], T0);
    const jobs = 120;
    for (let i = 0; i < jobs; i++) await a.store.createSession(session(), [job()], check);
    const claimed: string[] = [];
    const claimer = async (stores: ServerStores, agent: string) => {
      for (let round = 0; round < 100; round++) {
        const got = await stores.store.claimJobs({ location: 'loc-a', agentId: agent, checkTypes: ['API'], runtimes: [], max: 3, leaseMs: 60_000, now: T0 });
        if (got.length === 0) return;
        claimed.push(...got.map((j) => j.id));
      }
    };
    await Promise.all([a, b, c].flatMap((stores, r) => [0, 1, 2].map((k) => claimer(stores, `agent-${r}-${k}`))));
    expect(claimed).toHaveLength(jobs);
    expect(new Set(claimed).size).toBe(jobs);
  });

  it('stores a result sent to several replicas at once once, and answers each accepted', async () => {
    const [a, b, c] = await replicas(3);
    if (!a || !b || !c) throw new Error('three replicas');
    await a.store.syncChecks([check], T0);
    const j = job();
    const s = session();
    await a.store.createSession(s, [j], check);
    await a.store.claimJobs({ location: 'loc-a', agentId: 'x', checkTypes: ['API'], runtimes: [], max: 1, leaseMs: 60_000, now: T0 });
    const result = {
      resultType: 'FINAL' as const,
      id: randomUUID(),
      name: 'c1',
      checkId: 'c1',
      checkType: 'API' as const,
      hasFailures: true,
      hasErrors: false,
      isDegraded: false,
      overMaxResponseTime: false,
      runLocation: 'loc-a',
      startedAt: T0.toISOString(),
      stoppedAt: T0.toISOString(),
      created_at: T0.toISOString(),
      responseTime: 1,
      checkRunId: 1,
      attempts: 1,
      sequenceId: s.id,
      apiCheckResult: { requestError: 'connect ECONNREFUSED 10.0.0.1:443' },
    };
    const envelope: ResultEnvelope = { jobId: j.id, resultId: result.id, result };
    const outcomes = await Promise.all([a, b, c, a, b, c].map((stores) => stores.store.acceptResults('x', 'loc-a', [envelope], T0)));
    for (const outcome of outcomes) expect(outcome).toMatchObject({ accepted: [result.id], rejected: [] });
    // Stored once: by exactly one replica.
    expect(outcomes.flatMap((o) => o.stored ?? [])).toHaveLength(1);
    const page = await b.store.listResults({ checkId: 'c1', limit: 10, resultType: 'ALL' });
    expect(page.entries.map((e) => e.id)).toEqual([result.id]);
    expect((await c.store.session(s.id))?.status).toBe('FAILED');
    // Its error group was made once.
    expect(await a.errorGroups.groupsOf('c1')).toHaveLength(1);
  });

  it('makes a slot of a check once, whichever replica asks', async () => {
    const [a, b] = await replicas(2);
    if (!a || !b) throw new Error('two replicas');
    await a.store.syncChecks([check], T0);
    const slot = T0.getTime();
    const made = await Promise.all([a, b, a, b].map((stores) => stores.store.createSession(session(), [job()], check, slot)));
    expect(made.filter(Boolean)).toHaveLength(1);
    expect(await a.store.createSession(session(), [job()], check, slot + 60_000)).toBe(true);
    const claimed = await b.store.claimJobs({ location: 'loc-a', agentId: 'x', checkTypes: ['API'], runtimes: [], max: 10, leaseMs: 60_000, now: T0 });
    expect(claimed).toHaveLength(2);
  });

  it("wakes another replica's claims: a queued or requeued job's location reaches every listener", async () => {
    const [a, b] = await replicas(2);
    if (!a || !b) throw new Error('two replicas');
    const heard: string[] = [];
    await b.listenForJobs?.((location) => heard.push(location), () => undefined);
    await a.store.syncChecks([check], T0);
    await a.store.createSession(session(), [job()], check);
    expect(await retryUntil(10_000, async () => heard.includes('loc-a'), 10)).toBe(true);
    heard.length = 0;
    await a.store.claimJobs({ location: 'loc-a', agentId: 'x', checkTypes: ['API'], runtimes: [], max: 1, leaseMs: 1, now: T0 });
    expect(await a.store.requeueExpiredLeases(new Date(T0.getTime() + 10))).toBe(1);
    expect(await retryUntil(10_000, async () => heard.includes('loc-a'), 10)).toBe(true);
  });

  it('gives the leader lease to one holder at a time, renewed by it, taken over once it runs out', async () => {
    const [a, b] = await replicas(2);
    if (!a || !b) throw new Error('two replicas');
    expect(await a.lease.acquire('scheduler', 'A', 60_000)).toBe(true);
    expect(await b.lease.acquire('scheduler', 'B', 60_000)).toBe(false);
    expect(await a.lease.acquire('scheduler', 'A', 1)).toBe(true);
    // A's lease of 1 ms runs out by the database's clock (a round trip may take less than that).
    expect(await retryUntil(5_000, () => b.lease.acquire('scheduler', 'B', 60_000), 5)).toBe(true);
    expect(await a.lease.acquire('scheduler', 'A', 60_000)).toBe(false);
    await b.lease.release('scheduler', 'B');
    expect(await a.lease.acquire('scheduler', 'A', 60_000)).toBe(true);
  });

  it('claims due notifications for one deliverer; the others skip them until the claim runs out', async () => {
    const [a, b] = await replicas(2);
    if (!a || !b) throw new Error('two replicas');
    const channel = { type: 'WEBHOOK', config: { url: 'http://127.0.0.1:9/' }, subscriptions: [], autoSubscribe: true, sendRecovery: true, sendFailure: true, sendDegraded: false, sslExpiry: false, sslExpiryThreshold: 30 };
    await a.alerts.syncFileChannels([{ ...channel, id: 7 }], T0);
    // An API channel takes an id past the file's.
    expect((await b.alerts.createChannel(channel, T0)).id).toBe(8);
    const notice = { channelId: 7, kind: 'SSL_EXPIRY' as const, checkId: 'c1', location: null, resultId: null, body: {}, sslNotice: { certificate: 'abc', day: '2026-11-24' } };
    expect(await a.alerts.commitEvaluation('alerts', 0, [], [notice, notice], T0)).toBe(1);
    expect(await b.alerts.commitEvaluation('alerts', 0, [], [notice], T0)).toBe(0);
    await a.alerts.commitEvaluation('alerts', 0, [], [{ ...notice, kind: 'FAILURE', sslNotice: undefined }], T0);
    const [first, second] = await Promise.all([a.alerts.dueNotifications(T0, 10), b.alerts.dueNotifications(T0, 10)]);
    // One per channel (its oldest), to one deliverer.
    expect([...(first ?? []), ...(second ?? [])].map((n) => n.kind)).toEqual(['SSL_EXPIRY']);
    expect(await a.alerts.dueNotifications(T0, 10)).toEqual([]);
    const id = [...(first ?? []), ...(second ?? [])][0]?.id as number;
    // A deliverer that died holding it: due again when the claim runs out.
    const later = new Date(T0.getTime() + CLAIM_MS);
    expect((await b.alerts.dueNotifications(later, 10)).map((n) => n.id)).toEqual([id]);
    await b.alerts.recordAttempt(id, { at: later.toISOString(), status: 200, error: null, durationMs: 5 }, { kind: 'delivered' });
    const next = await a.alerts.dueNotifications(new Date(later.getTime() + CLAIM_MS), 10);
    expect(next.map((n) => n.kind)).toEqual(['FAILURE']);
    expect((await a.alerts.notifications(7, 10)).map((n) => [n.kind, n.state, n.attemptLog.length])).toEqual([
      ['FAILURE', 'PENDING', 0],
      ['SSL_EXPIRY', 'DELIVERED', 1],
    ]);
  });

  it('migration 7 backfills result_metrics from the FINAL results stored before it, read as SQLite reads them', async () => {
    const url = await postgres.createDatabase('backfill');
    const pool = new pg.Pool({ connectionString: url, max: 1 });
    try {
      await migratePg(pool, 'test', PG_MIGRATIONS.filter((step) => step.version <= 6));
      const bodies = [
        { responseTime: 12.5, isDegraded: true, attempts: 3 },
        { isDegraded: false, attempts: 5000 },
        { responseTime: 7, attempts: 1.5 },
      ];
      for (const [i, body] of bodies.entries()) {
        await pool.query(
          `INSERT INTO results (id, check_id, job_id, session_id, location, result_type, has_failures, started_at, check_type, received_at, body)
           VALUES ($1, 'c1', 'j', 's', 'loc-a', $2, $3, $4, 'API', 0, $5)`,
          [`r${i}`, 'FINAL', i === 1 ? 1 : 0, T0.getTime() + i, JSON.stringify(body)],
        );
      }
      await pool.query(`INSERT INTO results (id, check_id, job_id, session_id, location, result_type, has_failures, started_at, check_type, received_at, body)
        VALUES ('attempt', 'c1', 'j', 's', 'loc-a', 'ATTEMPT', 1, ${T0.getTime()}, 'API', 0, '{}')`);
    } finally {
      await pool.end();
    }
    const stores = await open(url);
    const [columns] = await stores.analytics.window('c1', T0.getTime(), T0.getTime() + 10, 100);
    expect(columns?.location).toBe('loc-a');
    expect([...(columns?.startedAt ?? [])]).toEqual([T0.getTime(), T0.getTime() + 1, T0.getTime() + 2]);
    expect([...(columns?.responseTime ?? [])]).toEqual([13, -1, 7]);
    expect([...(columns?.flags ?? [])]).toEqual([2, 1, 0]);
    expect([...(columns?.attempts ?? [])]).toEqual([3, 1000, 1]);
  });

  it('migration 11 builds the results list indexes over the results stored before it', async () => {
    const url = await postgres.createDatabase('step11');
    const pool = new pg.Pool({ connectionString: url, max: 1 });
    try {
      await migratePg(pool, 'test', PG_MIGRATIONS.filter((step) => step.version <= 10));
      await pool.query(
        `INSERT INTO results (id, check_id, job_id, session_id, location, result_type, has_failures, started_at, check_type, received_at, body)
         SELECT 'r' || i, 'c1', 'j', 's', 'loc-a', 'FINAL', CASE WHEN i = 2 THEN 1 ELSE 0 END, $1::bigint + i, 'API', 0, '{"id":"r' || i || '"}'
         FROM generate_series(1, 3) AS i`,
        [T0.getTime()],
      );
    } finally {
      await pool.end();
    }
    const { store } = await open(url);
    if (!(store instanceof PgStore)) throw new Error('not the PostgreSQL store');
    const indexes = await store.db.rows("SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'results' AND indexname IN ('results_by_kind', 'results_by_check_time') ORDER BY indexname");
    expect(indexes.map((row) => row.indexname)).toEqual(['results_by_check_time', 'results_by_kind']);
    expect(String(indexes[0]?.indexdef)).toContain('INCLUDE (location, check_type, seq)');
    const ids = async (q: Partial<ResultQuery>) => (await store.listResults({ checkId: 'c1', limit: 10, resultType: 'FINAL', ...q })).entries.map((e) => e.id);
    expect(await ids({ hasFailures: true })).toEqual(['r2']);
    expect(await ids({ checkType: 'API', to: new Date(T0.getTime() + 3) })).toEqual(['r2', 'r1']);
  });

  it('migration 12 deletes the keys an earlier release kept for locations no longer in the store', async () => {
    const url = await postgres.createDatabase('step12');
    const pool = new pg.Pool({ connectionString: url, max: 1 });
    try {
      await migratePg(pool, 'test', PG_MIGRATIONS.filter((step) => step.version <= 11));
      await pool.query("INSERT INTO locations (id, name) VALUES ('loc-a', 'A')");
      await pool.query("INSERT INTO keys (id, location_id, hash, masked_key, created_at, updated_at) VALUES ('k1', 'loc-a', 'h1', 'm', 't', 't'), ('k2', 'gone', 'h2', 'm', 't', 't')");
    } finally {
      await pool.end();
    }
    const { store } = await open(url);
    await store.syncLocations([{ id: 'loc-a', name: 'A' }, { id: 'gone', name: 'Back' }]);
    expect((await store.keyByHash('h1'))?.id).toBe('k1');
    expect(await store.keyByHash('h2')).toBeUndefined();
  });

  it("looks a location's newest FINAL up in a few index entries (results_by_kind, migration 11), also for a location without results", async () => {
    const url = await postgres.createDatabase('latest');
    const { store } = await open(url);
    if (!(store instanceof PgStore)) throw new Error('not the PostgreSQL store');
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      // Enough rows in two locations that the planner weighs the indexes by their statistics.
      await client.query(
        `INSERT INTO results (id, check_id, job_id, session_id, location, result_type, has_failures, started_at, check_type, received_at, body)
         SELECT 'r' || i, 'web', 'j', 's', CASE WHEN i % 2 = 0 THEN 'lab' ELSE 'dmz' END, 'FINAL', 0, i, 'API', i, '{}'
         FROM generate_series(1, 20000) AS i`,
      );
      await client.query('ANALYZE results');
      for (const location of ['edge', 'lab']) {
        const read = await resultsReadBy(store, client, location, () => store.listResults({ checkId: 'web', limit: 1, resultType: 'FINAL', location }));
        // The newest seq, the location's kinds (one lookup each), the newest two of each, the page's entry.
        expect(read, location).toBeLessThanOrEqual(10);
      }
    } finally {
      await client.end();
    }
  });

  it('reads every filter of the results list over indexes: at most its page and a bounded scan of index entries (EXPLAIN ANALYZE)', async () => {
    const url = await postgres.createDatabase('filters');
    const { store } = await open(url);
    if (!(store instanceof PgStore)) throw new Error('not the PostgreSQL store');
    await insertResultRows(store, resultRows());
    // As autovacuum leaves a table written a while ago: index-only scans visit no heap page.
    await store.db.run('VACUUM ANALYZE results');
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      for (const { name, checkId, query } of FILTER_CASES) {
        const read = await resultsReadBy(store, client, name, () => store.listResults({ checkId: checkId ?? BIG_CHECK, limit: 100, ...query }));
        // Without a time filter: each of the query's kinds (a handful here) reads its limit + 1 at most. With one:
        // the window counted up to the budget for each result type, then read by it or the kinds read within it.
        const bound = query.from || query.to ? 4 * (SCAN_BUDGET + 1) + 2_000 : 2_000;
        expect(read, name).toBeLessThanOrEqual(bound);
      }
    } finally {
      await client.end();
    }
  });

  it('keeps a customUrl on one dashboard when replicas PUT it at once', async () => {
    const [a, b, c] = await replicas(3);
    if (!a || !b || !c) throw new Error('three replicas');
    const definition = (dashboardId: string) => ({ ...DASHBOARD, dashboardId, customUrl: 'contested' });
    const outcomes = await Promise.all([a, b, c].map((r, i) => r.dashboards.put(definition(`d${i}`), [], T0)));
    expect(outcomes.filter((o) => o.kind === 'created')).toHaveLength(1);
    expect(outcomes.filter((o) => o.kind === 'conflict')).toHaveLength(2);
  });

  it('knows when the database turns read-only (a demoted primary): writes fail with the reason, and a probe write brings it back', async () => {
    const url = await postgres.createDatabase('readonly');
    const server = await open(url, 2);
    const database = new URL(url).pathname.slice(1);
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    // New connections start read-only, as on a standby; the pool's open ones are ended so that it makes new ones.
    const readOnly = async (on: boolean) => {
      await admin.query(`ALTER DATABASE "${database}" SET default_transaction_read_only = ${on ? 'on' : 'off'}`);
      await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()', [database]);
    };
    try {
      expect(await server.probeWrite()).toBe(true);
      expect(server.writes.writable).toBe(true);
      await readOnly(true);
      // The first statement on a connection the server ended fails for that reason, not for the storage: tried again.
      expect(await retryUntil(10_000, async () => !(await server.probeWrite()) && !server.writes.writable)).toBe(true);
      expect(server.writes.current).toMatchObject({ reason: 'the database server is read-only (a standby?)', detail: expect.stringMatching(/read-only transaction/) });
      await expect(server.store.syncLocations([{ id: 'loc-a', name: 'A' }])).rejects.toMatchObject({ code: '25006' });
      // Reads go on.
      expect(await server.ping()).toBe(true);
      await readOnly(false);
      expect(await retryUntil(10_000, () => server.probeWrite())).toBe(true);
      expect(server.writes.writable).toBe(true);
      expect(server.writes.current).toBeUndefined();
    } finally {
      await admin.end();
    }
  });
});
