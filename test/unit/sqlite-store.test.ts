// What only the SQLite store (src/store/sqlite/sqlite-store.ts) has, on real
// database files in a temporary folder: its migrations, query plans, two
// processes on one file, the file's mode, throughput. The Store contract
// both stores keep is store-conformance.test.ts.

import { mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { SQLInputValue } from 'node:sqlite';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { ResultEnvelope } from '../../src/core/protocol.js';
import type { ResultQuery } from '../../src/store/store.js';
import { MIGRATIONS, migrate, NewerSchemaError, SCHEMA_VERSION } from '../../src/store/sqlite/migrations.js';
import { ENTRIES_SQL, KIND_IN_WINDOW_SQL, KIND_SQL, KIND_STOP_SQL, kindStepSql, WINDOW_SIZE_SQL, windowPageSql } from '../../src/store/sqlite/results-reader.js';
import { claimSql, encodeCursor, listSql, SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { BIG_CHECK, FILTER_CASES, insertResultRows, resultRows } from '../support/result-rows.js';
import { at, check, envelope, startSession, T0 } from '../support/store-fixtures.js';

const dirs: string[] = [];
const stores: SqliteStore[] = [];

afterEach(async () => {
  for (const store of stores.splice(0)) await store.close();
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function tempFile(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'outpost-store-'));
  dirs.push(dir);
  return path.join(dir, 'outpost.db');
}

async function openStore(file = tempFile()): Promise<SqliteStore> {
  const store = await SqliteStore.open(file);
  stores.push(store);
  return store;
}

describe('opening and migrations', () => {
  it('creates the schema once; reopening applies nothing and keeps the data', async () => {
    const file = tempFile();
    const first = await SqliteStore.open(file);
    await first.syncLocations([{ id: 'loc-a', name: 'A' }]);
    await first.close();
    const again = await openStore(file);
    expect(await again.locations()).toEqual([{ id: 'loc-a', name: 'A' }]);
    expect(await again.integrityCheck()).toEqual(['ok']);
    const { DatabaseSync } = await import('node:sqlite');
    const db = new DatabaseSync(file);
    try {
      expect(migrate(db, file)).toEqual([]);
      expect(db.prepare('SELECT version FROM schema_version ORDER BY version').all().map((r) => r.version)).toEqual(MIGRATIONS.map((m) => m.version));
      expect(db.prepare('PRAGMA journal_mode').get()?.journal_mode).toBe('wal');
    } finally {
      db.close();
    }
  });

  it('migration 12 deletes the keys an earlier release kept for locations no longer in the store', async () => {
    const file = tempFile();
    const { DatabaseSync } = await import('node:sqlite');
    const db = new DatabaseSync(file);
    try {
      migrate(db, file, MIGRATIONS.filter((step) => step.version <= 11));
      db.exec("INSERT INTO locations (id, name) VALUES ('loc-a', 'A')");
      db.exec("INSERT INTO keys (id, location_id, hash, masked_key, created_at, updated_at) VALUES ('k1', 'loc-a', 'h1', 'm', 't', 't'), ('k2', 'gone', 'h2', 'm', 't', 't')");
    } finally {
      db.close();
    }
    const store = await openStore(file);
    await store.syncLocations([{ id: 'loc-a', name: 'A' }, { id: 'gone', name: 'Back' }]);
    expect((await store.keyByHash('h1'))?.id).toBe('k1');
    expect(await store.keyByHash('h2')).toBeUndefined();
  });

  it('applies a later step on reopen, each step once', async () => {
    const file = tempFile();
    await (await SqliteStore.open(file)).close();
    const { DatabaseSync } = await import('node:sqlite');
    const db = new DatabaseSync(file);
    try {
      const next = [...MIGRATIONS, { version: SCHEMA_VERSION + 1, description: 'test', sql: 'CREATE TABLE extra (x INTEGER)' }];
      expect(migrate(db, file, next)).toEqual([SCHEMA_VERSION + 1]);
      expect(migrate(db, file, next)).toEqual([]);
    } finally {
      db.close();
    }
  });

  it('a failing step leaves the database at the previous version', async () => {
    const file = tempFile();
    await (await SqliteStore.open(file)).close();
    const { DatabaseSync } = await import('node:sqlite');
    const db = new DatabaseSync(file);
    try {
      const broken = [...MIGRATIONS, { version: SCHEMA_VERSION + 1, description: 'broken', sql: 'CREATE TABLE half (x INTEGER); SELECT * FROM nowhere' }];
      expect(() => migrate(db, file, broken)).toThrow();
      expect(db.prepare("SELECT name FROM sqlite_master WHERE name = 'half'").get()).toBeUndefined();
      expect(db.prepare('SELECT MAX(version) AS v FROM schema_version').get()?.v).toBe(SCHEMA_VERSION);
    } finally {
      db.close();
    }
  });

  it('step 11 builds the results list indexes over the results stored before it', async () => {
    const file = tempFile();
    const { DatabaseSync } = await import('node:sqlite');
    const db = new DatabaseSync(file);
    try {
      migrate(db, file, MIGRATIONS.filter((step) => step.version <= 10));
      for (const i of [1, 2, 3]) {
        db.prepare(
          `INSERT INTO results (id, check_id, job_id, session_id, location, result_type, has_failures, started_at, check_type, received_at, body)
           VALUES (?, 'c1', 'j', 's', 'loc-a', 'FINAL', ?, ?, 'API', 0, ?)`,
        ).run(`r${i}`, i === 2 ? 1 : 0, T0.getTime() + i, JSON.stringify({ id: `r${i}` }));
      }
    } finally {
      db.close();
    }
    const store = await openStore(file);
    const indexes = store.access.all("SELECT name, sql FROM sqlite_master WHERE name IN ('results_by_kind', 'results_by_check_time') ORDER BY name");
    expect(indexes.map((row) => row.name)).toEqual(['results_by_check_time', 'results_by_kind']);
    expect(String(indexes[0]?.sql)).toContain('(check_id, result_type, started_at, has_failures, location, check_type)');
    const ids = async (q: Partial<ResultQuery>) => (await store.listResults({ checkId: 'c1', limit: 10, resultType: 'FINAL', ...q })).entries.map((e) => e.id);
    expect(await ids({ hasFailures: true })).toEqual(['r2']);
    expect(await ids({ checkType: 'API', to: at(3) })).toEqual(['r2', 'r1']);
  });

  it('refuses a database of a newer schema with a clear error', async () => {
    const file = tempFile();
    await (await SqliteStore.open(file)).close();
    const { DatabaseSync } = await import('node:sqlite');
    const db = new DatabaseSync(file);
    db.prepare('INSERT INTO schema_version (version, applied_at) VALUES (?, ?)').run(SCHEMA_VERSION + 5, T0.toISOString());
    db.close();
    const error = await SqliteStore.open(file).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(NewerSchemaError);
    expect((error as Error).message).toContain(`schema version ${SCHEMA_VERSION + 5}, newer than this Outpost knows (${SCHEMA_VERSION})`);
  });
});

describe('throughput', () => {
  it('accepts results in batches of 500 (figure logged, not asserted)', async () => {
    const store = await openStore();
    const c = check('c1', { locations: ['loc-a'] });
    await store.syncChecks([c], T0);
    const batches = 6;
    const envelopes: ResultEnvelope[][] = [];
    for (let b = 0; b < batches; b++) {
      const batch: ResultEnvelope[] = [];
      for (let i = 0; i < 50; i++) {
        const s = await startSession(store, c, b * 100 + i);
        const job = s.jobs['loc-a'] as string;
        for (let k = 0; k < 9; k++) batch.push(envelope(job, { resultType: 'ATTEMPT', apiCheckResult: { response: { status: 200, body: 'x'.repeat(500) } } }));
        batch.push(envelope(job, { apiCheckResult: { response: { status: 200, body: 'x'.repeat(500) } } }));
      }
      envelopes.push(batch);
    }
    const started = performance.now();
    for (const batch of envelopes) {
      const outcome = await store.acceptResults('x', 'loc-a', batch, at(10_000));
      expect(outcome.accepted).toHaveLength(500);
    }
    const seconds = (performance.now() - started) / 1000;
    console.log(`sqlite store: ${Math.round((batches * 500) / seconds)} results/s accepted in batches of 500 (${batches} batches, ${seconds.toFixed(2)} s, ${process.version})`);
  });
});

describe('hardening', () => {
  it('the claim and list queries use their indexes: no table scan, no sort', async () => {
    const file = tempFile();
    await (await openStore(file)).close();
    const { DatabaseSync } = await import('node:sqlite');
    const db = new DatabaseSync(file, { readOnly: true });
    try {
      const plan = (sql: string, params: Array<string | number>) =>
        db
          .prepare(`EXPLAIN QUERY PLAN ${sql}`)
          .all(...params)
          .map((row) => String(row.detail))
          .join('\n');
      const claim = plan(claimSql(2, 1), ['loc-a', 'API', 'TCP', '2025.04', 10]);
      expect(claim).toContain('jobs_claim');
      expect(claim).not.toMatch(/TEMP B-TREE|SCAN jobs(?! USING)/);
      // Queries with other filters are read otherwise: 'reads every filter of the results list …' below.
      for (const q of [{ resultType: 'ALL' as const }, { resultType: 'FINAL' as const, nextId: encodeCursor(99) }]) {
        const { sql, params } = listSql({ checkId: 'c1', limit: 10, ...q });
        const detail = plan(sql, params as Array<string | number>);
        expect(detail).toMatch(/results_list/);
        expect(detail).not.toMatch(/TEMP B-TREE|SCAN results(?! USING)/);
      }
    } finally {
      db.close();
    }
  });

  it("a location's newest FINAL (badges, dashboards' status) is one lookup in results_by_location, also for a location without results", async () => {
    const store = await openStore();
    const c = check('c1', { locations: ['lab', 'dmz'] });
    await store.syncChecks([c], T0);
    for (const location of ['lab', 'dmz']) {
      const { jobs } = await startSession(store, c, 0, [location]);
      await store.acceptResults('x', location, [envelope(jobs[location] as string, { checkId: 'c1', runLocation: location })], at(200));
    }
    const { DatabaseSync } = await import('node:sqlite');
    const db = new DatabaseSync(store.file, { readOnly: true });
    try {
      const { sql, params } = listSql({ checkId: 'c1', limit: 1, resultType: 'FINAL', location: 'edge' });
      const detail = db
        .prepare(`EXPLAIN QUERY PLAN ${sql}`)
        .all(...(params as Array<string | number>))
        .map((row) => String(row.detail))
        .join('\n');
      // Through results_list_by_type the planner would walk every FINAL of the check looking for 'edge'.
      expect(detail).toMatch(/SEARCH results USING INDEX results_by_location \(check_id=\? AND location=\? AND result_type=\?\)/);
      expect(detail).not.toMatch(/TEMP B-TREE/);
    } finally {
      db.close();
    }
    expect((await store.listResults({ checkId: 'c1', limit: 1, resultType: 'FINAL', location: 'edge' })).entries).toEqual([]);
    expect((await store.listResults({ checkId: 'c1', limit: 1, resultType: 'FINAL', location: 'dmz' })).entries.map((e) => e.runLocation)).toEqual(['dmz']);
  });

  it("reads every filter of the results list from an index holding all it tests: never a scan, nor a result row but the page's own", async () => {
    const store = await openStore();
    await insertResultRows(store, resultRows());
    // Every statement listResults may run, with the only plan it may have.
    const KIND = 'SEARCH results USING COVERING INDEX results_by_kind (check_id=? AND location=? AND check_type=? AND result_type=? AND has_failures=? AND seq<?)';
    const WINDOW = 'SEARCH results USING COVERING INDEX results_by_check_time (check_id=? AND result_type=? AND started_at>? AND started_at<?)';
    const plans = new Map<string, string>([
      ['SELECT COALESCE(MAX(seq), 0) + 1 AS next FROM results', 'SEARCH results'],
      [KIND_SQL, KIND],
      [KIND_STOP_SQL, KIND],
      // The subquery reads at most the budget's entries of the kind (result-list.ts SCAN_BUDGET).
      [KIND_IN_WINDOW_SQL, `CO-ROUTINE (subquery-1) | ${KIND} | SCAN (subquery-1)`],
      [WINDOW_SIZE_SQL, `CO-ROUTINE (subquery-1) | ${WINDOW} | SCAN (subquery-1)`],
      [ENTRIES_SQL, 'SCAN j VIRTUAL TABLE INDEX 1: | SEARCH r USING INTEGER PRIMARY KEY (rowid=?)'],
    ]);
    const columns = ['location', 'check_type', 'result_type', 'has_failures'];
    for (const [depth, column] of columns.entries()) {
      for (const after of [false, true]) {
        const constraints = ['check_id=?', ...columns.slice(0, depth).map((c) => `${c}=?`), ...(after ? [`${column}>?`] : [])];
        plans.set(kindStepSql(depth, after), `SEARCH results USING COVERING INDEX results_by_kind (${constraints.join(' AND ')})`);
      }
    }
    for (const location of [undefined, 'a']) {
      for (const checkType of [undefined, 'API']) {
        for (const failedOnly of [false, true]) {
          const filter = { checkId: BIG_CHECK, resultTypes: ['FINAL'], failedOnly, ...(location ? { location } : {}), ...(checkType ? { checkType } : {}) };
          // The sort is of the window's at most SCAN_BUDGET + 1 entries: a larger window is read by kinds.
          plans.set(windowPageSql(filter), `CO-ROUTINE (subquery-1) | ${WINDOW} | SCAN (subquery-1) | USE TEMP B-TREE FOR ORDER BY`);
        }
      }
    }
    const planOf = (sql: string, params: readonly unknown[]) =>
      store.access
        .all(`EXPLAIN QUERY PLAN ${sql}`, ...(params as SQLInputValue[]))
        .map((row) => String(row.detail))
        .join(' | ');
    const ways = new Set<string>();
    for (const { name, checkId, query } of FILTER_CASES) {
      let nextId: string | undefined;
      // The first page and the one after it: a cursor changes only the bound on seq.
      for (let page = 0; page < 2; page++) {
        const all = vi.spyOn(store.access, 'all');
        const get = vi.spyOn(store.access, 'get');
        const listed = await store.listResults({ checkId: checkId ?? BIG_CHECK, limit: 100, ...query, ...(nextId ? { nextId } : {}) });
        const ran = [...all.mock.calls, ...get.mock.calls].map(([sql, ...params]) => ({ sql, params }));
        all.mockRestore();
        get.mockRestore();
        for (const { sql, params } of ran) {
          const plan = planOf(sql, params);
          if (/^SELECT seq, body FROM results INDEXED BY /.test(sql)) {
            // The direct way (listSql): one index answers the whole query in order.
            expect(plan, `${name}: ${sql}`).toMatch(/^SEARCH results USING INDEX (results_list|results_list_by_type|results_by_location) \(check_id=\?[^)]*\)$/);
            ways.add('direct');
          } else {
            expect(plans.has(sql), `${name}: a statement the test does not know: ${sql}`).toBe(true);
            expect(plan, `${name}: ${sql}`).toBe(plans.get(sql));
            ways.add(sql === KIND_IN_WINDOW_SQL ? 'budgeted kinds' : sql === KIND_SQL ? 'kinds' : sql === WINDOW_SIZE_SQL ? 'window' : 'other');
          }
        }
        nextId = listed.nextId ?? undefined;
        if (!nextId) break;
      }
    }
    expect([...ways].sort()).toEqual(['budgeted kinds', 'direct', 'kinds', 'other', 'window']);
  });

  it('two stores on one file (as two server processes) write in turn without losing anything', async () => {
    const file = tempFile();
    const one = await openStore(file);
    const two = await openStore(file);
    const c = check('c1', { locations: ['loc-a'] });
    await one.syncChecks([c], T0);
    const accepted: string[] = [];
    for (let i = 0; i < 20; i++) {
      const store = i % 2 === 0 ? one : two;
      const s = await startSession(store, c, i);
      const e = envelope(s.jobs['loc-a'] as string);
      accepted.push(...(await store.acceptResults('x', 'loc-a', [e], at(i))).accepted);
    }
    expect(accepted).toHaveLength(20);
    const page = await two.listResults({ checkId: 'c1', limit: 100, resultType: 'ALL' });
    expect(page.entries.map((e) => e.id)).toEqual([...accepted].reverse());
  });

  it('names the file when it is not a database', async () => {
    const file = tempFile();
    writeFileSync(file, 'this is not a database, just text that is long enough to have a header '.repeat(20));
    await expect(SqliteStore.open(file)).rejects.toThrow(`cannot open the database ${file}`);
  });

  it('prunes an old artifact whose job is gone; keeps one of a running job', async () => {
    const file = tempFile();
    const store = await openStore(file);
    const c = check('c1', { locations: ['loc-a'] });
    await store.syncChecks([c], T0);
    const s = await startSession(store, c);
    const gone = await startSession(store, c);
    const base = { location: 'loc-a', name: 'n', contentType: 'text/plain', size: 1, created_at: T0.toISOString() };
    await store.createArtifact({ ...base, id: 'orphan', jobId: gone.jobs['loc-a'] as string });
    // createArtifact takes only an existing job: its job goes afterwards, behind the store's back.
    const { DatabaseSync } = await import('node:sqlite');
    const db = new DatabaseSync(file);
    db.prepare('DELETE FROM jobs WHERE id = ?').run(gone.jobs['loc-a'] as string);
    db.close();
    await store.createArtifact({ ...base, id: 'running', jobId: s.jobs['loc-a'] as string });
    expect(await store.pruneBefore(at(1000), 10)).toEqual({ results: 0, artifactIds: ['orphan'] });
    expect(await store.artifact('running')).toBeDefined();
  });
});

describe('the database file', () => {
  it('is made readable by its owner only, and so are its WAL files', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'outpost-store-mode-'));
    const store = await SqliteStore.open(path.join(dir, 'outpost.db'));
    await store.syncLocations([{ id: 'lab', name: 'Lab' }]);
    for (const name of readdirSync(dir)) expect(statSync(path.join(dir, name)).mode & 0o777, name).toBe(0o600);
    await store.close();
  });
});
