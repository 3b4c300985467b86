// The analytics store on a real SQLite file (src/store/sqlite/analytics-store.ts,
// analytics-schema.ts): the triggers keep result_metrics in step with the
// FINAL results that acceptResults, the heartbeat store and pruning write
// and delete; a window comes back as columns equal to what the agents sent;
// migration 7 backfills results stored before it; the reported IPv6
// addresses are kept, refreshed and forgotten.

import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FLAG_DEGRADED, FLAG_FAILED, type LocationColumns, WindowTooLargeError } from '../../src/store/analytics.js';
import { parseIntegerList } from '../../src/store/integer-list.js';
import { SqliteAnalyticsStore } from '../../src/store/sqlite/analytics-store.js';
import { ADDRESS_RETENTION_MS, AgentAddressBook, REFRESH_MS } from '../../src/server/agent-addresses.js';
import { SqliteHeartbeatStore } from '../../src/store/sqlite/heartbeats-store.js';
import { MIGRATIONS, migrate } from '../../src/store/sqlite/migrations.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { mulberry32 } from '../support/random.js';
import { runSessions, storedCheck } from '../support/server-store.js';

let dir: string;
let store: SqliteStore;
let analytics: SqliteAnalyticsStore;
const T0 = Date.parse('2026-11-20T00:00:00.000Z');
const MINUTE = 60_000;

beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'outpost-analytics-store-'));
  store = await SqliteStore.open(path.join(dir, 'outpost.db'));
  analytics = new SqliteAnalyticsStore(store.access);
  await store.syncLocations([
    { id: 'lab', name: 'Lab' },
    { id: 'dmz', name: 'DMZ' },
  ]);
});

afterEach(async () => {
  await store.close();
  await rm(dir, { recursive: true, force: true });
});

/** Columns as plain rows sorted by time, for comparison. */
function rowsOf(columns: readonly LocationColumns[]): Array<[string, number, number, number, number]> {
  return columns
    .flatMap((c) => Array.from(c.startedAt, (t, i) => [c.location, t, c.responseTime[i], c.flags[i], c.attempts[i]] as [string, number, number, number, number]))
    .sort((a, b) => a[1] - b[1] || a[0].localeCompare(b[0]));
}

describe('result_metrics', () => {
  it('holds every FINAL result acceptResults stored, as the agent sent it; ATTEMPT results stay out', async () => {
    const check = storedCheck({ id: 'web', locations: ['lab', 'dmz'] });
    await store.syncChecks([check], new Date(T0));
    const random = mulberry32(7);
    const expected: Array<[string, number, number, number, number]> = [];
    await runSessions(store, check, ['lab', 'dmz'], 40, (job, index) => {
      const startedAt = T0 + index * MINUTE + Math.floor(random() * 1000);
      const failed = random() < 0.3;
      const degraded = !failed && random() < 0.3;
      const responseTime = Math.floor(random() * 5000);
      const attempts = failed ? 2 : 1;
      expected.push([job.runLocation ?? '', startedAt, responseTime, (failed ? FLAG_FAILED : 0) | (degraded ? FLAG_DEGRADED : 0), attempts]);
      const final = { startedAt: new Date(startedAt), hasFailures: failed, isDegraded: degraded, responseTime, attempts };
      return failed ? [{ ...final, resultType: 'ATTEMPT' as const, responseTime: 99_999 }, final] : [final];
    });
    const columns = await analytics.window('web', T0, T0 + 24 * 60 * MINUTE, 1000);
    expect(columns.map((c) => c.location)).toEqual(['dmz', 'lab']);
    expect(rowsOf(columns)).toEqual(expected.sort((a, b) => a[1] - b[1] || a[0].localeCompare(b[0])));
  });

  it('a window is [from, to); other checks are not in it; too many results is an error, not a read', async () => {
    const web = storedCheck({ id: 'web', locations: ['lab'] });
    const other = storedCheck({ id: 'other', locations: ['lab'] });
    await store.syncChecks([web, other], new Date(T0));
    await runSessions(store, web, ['lab'], 10, (_job, i) => [{ startedAt: new Date(T0 + i * MINUTE), responseTime: i }]);
    await runSessions(store, other, ['lab'], 5, (_job, i) => [{ startedAt: new Date(T0 + i * MINUTE), responseTime: 1000 + i }]);
    const columns = await analytics.window('web', T0 + 2 * MINUTE, T0 + 5 * MINUTE, 100);
    expect(rowsOf(columns).map((r) => r[2])).toEqual([2, 3, 4]);
    expect(await analytics.window('web', T0 + 20 * MINUTE, T0 + 30 * MINUTE, 100)).toEqual([]);
    expect(await analytics.window('nope', T0, T0 + 30 * MINUTE, 100)).toEqual([]);
    await expect(analytics.window('web', T0, T0 + 30 * MINUTE, 9)).rejects.toBeInstanceOf(WindowTooLargeError);
  });

  it('pruning a result removes its row; a heartbeat result has one too', async () => {
    const web = storedCheck({ id: 'web', locations: ['lab'] });
    const beat = storedCheck({ id: 'beat', locations: [], checkType: 'HEARTBEAT' });
    await store.syncChecks([web, beat], new Date(T0));
    await runSessions(store, web, ['lab'], 3, (_job, i) => [{ startedAt: new Date(T0 + i * MINUTE) }], new Date(T0));
    const heartbeats = new SqliteHeartbeatStore(store.access);
    await heartbeats.sync([{ checkId: 'beat', tokenHash: 'h', periodMs: 60_000, graceMs: 0 }], new Date(T0));
    await heartbeats.ping('h', { source: 'GET 127.0.0.1', userAgent: 'test' }, new Date(T0 + 5 * MINUTE));
    const beatColumns = await analytics.window('beat', T0, T0 + 10 * MINUTE, 100);
    expect(rowsOf(beatColumns)).toEqual([['heartbeat', T0 + 5 * MINUTE, 0, 0, 1]]);
    while ((await store.pruneBefore(new Date(T0 + 365 * 24 * 60 * MINUTE), 2)).results > 0) {}
    expect(await analytics.window('web', T0, T0 + 10 * MINUTE, 100)).toEqual([]);
    expect(await analytics.window('beat', T0, T0 + 10 * MINUTE, 100)).toEqual([]);
  });
});

describe('migration 7', () => {
  it('backfills the FINAL results stored before it, across several batches', async () => {
    const file = path.join(dir, 'old.db');
    const db = new DatabaseSync(file);
    try {
      migrate(
        db,
        file,
        MIGRATIONS.filter((m) => m.version < 7),
      );
      const insert = db.prepare(
        `INSERT INTO results (id, check_id, job_id, session_id, location, result_type, has_failures, started_at, check_type, received_at, body)
         VALUES (?, 'old', 'j', 's', ?, ?, ?, ?, 'API', 0, ?)`,
      );
      db.exec('BEGIN');
      const n = 25_000;
      for (let i = 0; i < n; i++) {
        const final = i % 5 !== 0;
        const body = i % 1000 === 3 ? { attempts: 'x' } : { responseTime: i % 1000 === 1 ? 12.6 : i % 300, isDegraded: i % 4 === 0, attempts: 1 + (i % 3) };
        insert.run(`r${i}`, i % 2 ? 'lab' : 'dmz', final ? 'FINAL' : 'ATTEMPT', i % 7 === 0 ? 1 : 0, T0 + i * 1000, JSON.stringify(body));
      }
      db.exec('COMMIT');
      expect(migrate(db, file)).toEqual(MIGRATIONS.filter((m) => m.version >= 7).map((m) => m.version));
      expect(db.prepare('SELECT COUNT(*) AS n FROM result_metrics').get()?.n).toBe(n - n / 5);
      const row = (i: number) => db.prepare("SELECT response_time, flags, attempts FROM result_metrics WHERE check_id = 'old' AND started_at = ?").get(T0 + i * 1000);
      expect(row(1)).toEqual({ response_time: 13, flags: 0, attempts: 2 });
      expect(row(3)).toEqual({ response_time: -1, flags: 0, attempts: 1 });
      expect(row(7)).toEqual({ response_time: 7, flags: FLAG_FAILED, attempts: 2 });
      expect(row(24_998)).toEqual({ response_time: 24_998 % 300, flags: 0, attempts: 1 + (24_998 % 3) });
      expect(row(24_996)).toEqual({ response_time: 24_996 % 300, flags: FLAG_DEGRADED, attempts: 1 });
      expect(row(10)).toBeUndefined();
    } finally {
      db.close();
    }
  });
});

describe('parseIntegerList', () => {
  it('reads group_concat text into typed arrays, and refuses anything else', () => {
    expect(Array.from(parseIntegerList('3,-1,0,42', 4, new Float64Array(4), 10))).toEqual([13, 9, 10, 52]);
    expect(Array.from(parseIntegerList(null, 0, new Uint8Array(0)))).toEqual([]);
    for (const [text, count] of [
      ['1,2', 3],
      ['1,2,3', 2],
      ['1,,2', 3],
      ['1.5', 1],
      ['--1', 1],
      ['1-', 1],
    ] as const) {
      expect(() => parseIntegerList(text, count, new Float64Array(count)), text).toThrow();
    }
    expect(() => parseIntegerList(null, 1, new Float64Array(1))).toThrow();
  });
});

describe('agent addresses', () => {
  it('keeps the last report of each address and forgets those not seen since the bound', async () => {
    await analytics.reportAddresses('lab', 'a1', ['2001:db8::1', 'fd00::5'], new Date(T0), new Date(T0 - 7 * 86_400_000));
    await analytics.reportAddresses('dmz', 'a2', ['2001:db8::2'], new Date(T0 + 86_400_000), new Date(T0 - 6 * 86_400_000));
    await analytics.reportAddresses('dmz', 'a3', ['fd00::5'], new Date(T0 + 2 * 86_400_000), new Date(T0 - 5 * 86_400_000));
    expect((await analytics.addressesSince(new Date(T0))).map((a) => [a.address, a.location, a.agentId])).toEqual([
      ['2001:db8::1', 'lab', 'a1'],
      ['2001:db8::2', 'dmz', 'a2'],
      ['fd00::5', 'dmz', 'a3'],
    ]);
    expect((await analytics.addressesSince(new Date(T0 + 1))).map((a) => a.address)).toEqual(['2001:db8::2', 'fd00::5']);
    // A report eight days on forgets what was last seen more than seven days before it.
    await analytics.reportAddresses('lab', 'a1', ['2001:db8::9'], new Date(T0 + 8 * 86_400_000), new Date(T0 + 86_400_000));
    expect((await analytics.addressesSince(new Date(0))).map((a) => a.address)).toEqual(['2001:db8::2', '2001:db8::9', 'fd00::5']);
  });

  it('the address book writes an unchanged list again only after an hour, a changed one at once; the route lists the last 7 days', async () => {
    let now = T0;
    const book = new AgentAddressBook(analytics, () => new Date(now));
    const seen = async () => (await analytics.addressesSince(new Date(0))).map((a) => [a.address, a.lastSeen.getTime() - T0]);
    await book.report('lab', 'a1', ['2001:db8::1']);
    now = T0 + REFRESH_MS - 1;
    await book.report('lab', 'a1', ['2001:db8::1']);
    expect(await seen()).toEqual([['2001:db8::1', 0]]);
    now = T0 + REFRESH_MS;
    await book.report('lab', 'a1', ['2001:db8::1']);
    expect(await seen()).toEqual([['2001:db8::1', REFRESH_MS]]);
    now = T0 + REFRESH_MS + 5;
    await book.report('lab', 'a1', ['2001:db8::1', 'fd00::1']);
    expect(await seen()).toEqual([
      ['2001:db8::1', REFRESH_MS + 5],
      ['fd00::1', REFRESH_MS + 5],
    ]);
    expect(await book.text()).toBe('2001:db8::1\nfd00::1\n');
    now = T0 + REFRESH_MS + 5 + ADDRESS_RETENTION_MS;
    expect(await book.text()).toBe('2001:db8::1\nfd00::1\n');
    now += 1;
    expect(await book.text()).toBe('');
  });

  it('the address book tells of a full location at most once an hour, however often its agents report', async () => {
    let now = T0;
    // A store whose every location is full: each address reported is one it could not keep.
    const full = { reportAddresses: async (_l: string, _a: string, addresses: readonly string[]) => addresses.length, addressesSince: async () => [] };
    const book = new AgentAddressBook(full, () => new Date(now));
    expect(await book.report('lab', 'a1', ['2001:db8::1', '2001:db8::2'])).toBe(2);
    now += 1_000;
    expect(await book.report('lab', 'a1', ['2001:db8::3'])).toBe(0);
    expect(await book.report('dmz', 'a2', ['2001:db8::4'])).toBe(1);
    now = T0 + REFRESH_MS;
    expect(await book.report('lab', 'a1', ['2001:db8::5'])).toBe(1);
  });
});
