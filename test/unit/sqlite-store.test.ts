// What only the SQLite store (src/store/sqlite/sqlite-store.ts) has, on real
// database files in a temporary folder: its migrations, query plans, two
// processes on one file, the file's mode, throughput. The Store contract
// both stores keep is store-conformance.test.ts.

import { mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { ResultEnvelope } from '../../src/core/protocol.js';
import { MIGRATIONS, migrate, NewerSchemaError, SCHEMA_VERSION } from '../../src/store/sqlite/migrations.js';
import { claimSql, encodeCursor, listSql, SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
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
      for (const q of [
        { resultType: 'ALL' as const },
        { resultType: 'FINAL' as const, nextId: encodeCursor(99) },
        { resultType: 'ALL' as const, location: 'loc-a', hasFailures: true, from: T0, to: at(1000), checkType: 'API' },
      ]) {
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
