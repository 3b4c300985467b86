// The heartbeat store on a real SQLite file (src/store/sqlite/heartbeats-store.ts)
// and on PostgreSQL (src/store/postgres/heartbeats-store.ts, a cluster this
// file starts): deadlines, the results a ping and a missed deadline leave,
// tokens swapped between two syncs, deadlines kept at a reload, a deleted
// check, pruning.

import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { HeartbeatStore } from '../../src/store/heartbeats.js';
import { openServerStores, type ServerStores } from '../../src/store/server-stores.js';
import type { Store, StoredCheck } from '../../src/store/store.js';
import { type PostgresServer, startPostgres } from '../support/postgres.js';

let dir: string;
let opened: ServerStores;
let store: Store;
let heartbeats: HeartbeatStore;
let postgres: PostgresServer | undefined;
let backend: 'sqlite' | 'postgres' = 'sqlite';

beforeAll(async () => {
  postgres = await startPostgres();
}, 120_000);

afterAll(async () => {
  await postgres?.stop();
});
const T0 = Date.parse('2026-11-24T00:00:00.000Z');
const at = (ms: number) => new Date(T0 + ms);
const check = (id: string): StoredCheck => ({
  id,
  name: `Heartbeat ${id}`,
  checkType: 'HEARTBEAT',
  frequencySeconds: 10,
  locations: [],
  definition: { id },
  environmentVariables: [],
  runtimeId: null,
  capMs: 0,
});
const ping = { source: 'GET 127.0.0.1', userAgent: 'test' };

beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'outpost-hb-store-'));
  opened =
    backend === 'sqlite'
      ? await openServerStores({ kind: 'sqlite', file: path.join(dir, 'outpost.db') })
      : await openServerStores({ kind: 'postgres', url: await (postgres as PostgresServer).createDatabase('heartbeats'), poolSize: 2, shown: { kind: 'postgres', location: 'test' } });
  store = opened.store;
  heartbeats = opened.heartbeats;
  await store.syncChecks([check('a'), check('b')], at(0));
  await heartbeats.sync(
    [
      { checkId: 'a', tokenHash: 'hash-a', periodMs: 10_000, graceMs: 5_000 },
      { checkId: 'b', tokenHash: 'hash-b', periodMs: 10_000, graceMs: 0 },
    ],
    at(0),
  );
});

afterEach(async () => {
  await opened.close();
  await rm(dir, { recursive: true, force: true });
});

describe.each(['sqlite', 'postgres'] as const)('the %s heartbeat store', (which) => {
  beforeAll(() => {
    backend = which;
  });

  it('fails a check at period + grace after start, once a period after that, and passes it on the next ping', async () => {
    expect(await heartbeats.expire(at(9_999))).toEqual([]);
    expect((await heartbeats.expire(at(10_000))).map((f) => f.checkId)).toEqual(['b']);
    expect((await heartbeats.expire(at(15_000))).map((f) => f.checkId)).toEqual(['a']);
    expect(await heartbeats.expire(at(19_999))).toEqual([]);
    expect((await heartbeats.expire(at(20_000))).map((f) => f.checkId)).toEqual(['b']);
    expect((await heartbeats.state('a'))?.status).toBe('FAILING');

    const outcome = await heartbeats.ping('hash-a', ping, at(21_000));
    expect(outcome).toMatchObject({ checkId: 'a', previous: 'FAILING', event: { state: 'RECEIVED', source: 'GET 127.0.0.1', userAgent: 'test' } });
    expect((await heartbeats.state('a'))?.status).toBe('PASSING');
    // The next deadline is period + grace after the ping.
    expect((await heartbeats.expire(at(35_999))).map((f) => f.checkId)).toEqual(['b']);
    expect((await heartbeats.expire(at(36_000))).map((f) => f.checkId)).toEqual(['a']);

    const page = await store.listResults({ checkId: 'a', limit: 10, resultType: 'FINAL' });
    expect(page.entries.map((r) => r.hasFailures)).toEqual([true, false, true]);
    expect(page.entries[1]).toMatchObject({ checkType: 'HEARTBEAT', runLocation: 'heartbeat', name: 'Heartbeat a', resultType: 'FINAL' });
    const session = await store.session(page.entries[1]?.sequenceId as string);
    expect(session).toMatchObject({ checkId: 'a', status: 'PASSED', runLocations: ['heartbeat'] });
  });

  it('takes no ping for an unknown token or a deleted check, and no longer watches the deleted one', async () => {
    expect(await heartbeats.ping('no-such-hash', ping, at(1))).toBeUndefined();
    await store.deleteCheck('a', at(1));
    expect(await heartbeats.ping('hash-a', ping, at(2))).toBeUndefined();
    expect((await heartbeats.expire(at(60_000))).map((f) => f.checkId)).toEqual(['b']);
  });

  it('takes tokens swapped between two syncs, and restarts every deadline at the sync', async () => {
    await heartbeats.sync(
      [
        { checkId: 'a', tokenHash: 'hash-b', periodMs: 10_000, graceMs: 5_000 },
        { checkId: 'b', tokenHash: 'hash-a', periodMs: 10_000, graceMs: 0 },
      ],
      at(50_000),
    );
    expect((await heartbeats.ping('hash-a', ping, at(50_001)))?.checkId).toBe('b');
    // a: from the sync, period + grace; b: from its ping, period (no grace).
    expect(await heartbeats.expire(at(60_000))).toEqual([]);
    expect((await heartbeats.expire(at(60_001))).map((f) => f.checkId)).toEqual(['b']);
    expect((await heartbeats.expire(at(65_000))).map((f) => f.checkId)).toEqual(['a']);
  });

  it('at a reload, keeps the deadline of a check whose period and grace did not change, and restarts a re-timed one', async () => {
    await heartbeats.ping('hash-b', ping, at(4_000));
    // A reload at 9 s of the same file (b's token changed, which moves no deadline) and of a with a longer grace.
    await heartbeats.sync(
      [
        { checkId: 'a', tokenHash: 'hash-a', periodMs: 10_000, graceMs: 6_000 },
        { checkId: 'b', tokenHash: 'hash-b2', periodMs: 10_000, graceMs: 0 },
      ],
      at(9_000),
      'reload',
    );
    // b: still 10 s from its ping at 4 s, not from the reload; a: re-timed, so 16 s from the reload.
    expect(await heartbeats.expire(at(13_999))).toEqual([]);
    expect((await heartbeats.expire(at(14_000))).map((f) => f.checkId)).toEqual(['b']);
    expect((await heartbeats.expire(at(24_999))).map((f) => f.checkId)).toEqual(['b']);
    expect((await heartbeats.expire(at(25_000))).map((f) => f.checkId)).toEqual(['a']);
  });

  it('keeps events with explicit times, reads them back, and prunes old ones in batches', async () => {
    for (let i = 0; i < 5; i++) {
      await heartbeats.addEvent('a', { id: `e${i}`, state: 'RECEIVED', timestamp: at(i * 1_000).toISOString(), source: 'GET 192.0.2.1', userAgent: '' });
    }
    expect(await heartbeats.event('a', 'e2')).toEqual({ id: 'e2', state: 'RECEIVED', timestamp: at(2_000).toISOString(), source: 'GET 192.0.2.1', userAgent: '' });
    expect(await heartbeats.event('b', 'e2')).toBeUndefined();
    expect(await heartbeats.pingTimes('a', T0 + 1_000, T0 + 4_000)).toEqual([T0 + 1_000, T0 + 2_000, T0 + 3_000]);
    expect(await heartbeats.firstEventMs('a')).toBe(T0);
    expect(await heartbeats.prune(at(3_000), 2)).toBe(2);
    expect(await heartbeats.prune(at(3_000), 2)).toBe(1);
    expect(await heartbeats.firstEventMs('a')).toBe(T0 + 3_000);
  });
});
