// The Store contract (src/store/store.ts, session-status.ts) run against
// both stores: SQLite on a file in a temporary folder, and PostgreSQL on a
// database of its own per test, in a cluster this file starts
// (test/support/postgres.ts). Every Store method and rule: locations and
// keys, checks, claims and leases, results (idempotent by resultId, the
// first FINAL wins), the results cursor while results keep arriving,
// deadlines, artifacts, pruning; dashboards and incidents; the analytics
// window, pruned with its results, and agent addresses (and both stores
// giving the same window for the same results). What only one store has is in
// sqlite-store.test.ts and postgres-store.test.ts.

import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { IncidentDefinition } from '../../src/core/dashboard.js';
import type { CheckResultEntry } from '../../src/core/result-entry.js';
import { resultOutcome } from '../../src/results/result.js';
import { checkFigures } from '../../src/server/dashboard-stats.js';
import { FLAG_DEGRADED, FLAG_FAILED, type LocationColumns, MAX_ADDRESSES_PER_LOCATION, WindowTooLargeError } from '../../src/store/analytics.js';
import { openServerStores, type ServerStores } from '../../src/store/server-stores.js';
import { finalOutcome } from '../../src/store/session-status.js';
import { SCAN_BUDGET } from '../../src/store/result-list.js';
import { PgStore } from '../../src/store/postgres/pg-store.js';
import { decodeCursor, encodeCursor, SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { InvalidQueryError, MAX_EVENTS_PER_LOCATION, NotFoundError, type ResultPage, type Store, type StoredCheck } from '../../src/store/store.js';
import { type PostgresServer, startPostgres } from '../support/postgres.js';
import { BIG_CHECK, BIG_N, expectedRows, FILTER_CASES, insertResultRows, resultRows } from '../support/result-rows.js';
import { at, check, dashboard, entry, envelope, LEASE, startSession, T0 } from '../support/store-fixtures.js';

export const BACKENDS = ['sqlite', 'postgres'] as const;
type Backend = (typeof BACKENDS)[number];

let postgres: PostgresServer | undefined;
const dirs: string[] = [];
const opened: ServerStores[] = [];

beforeAll(async () => {
  postgres = await startPostgres();
}, 120_000);

afterAll(async () => {
  await postgres?.stop();
});

afterEach(async () => {
  for (const stores of opened.splice(0)) await stores.close();
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

let backend: Backend = 'sqlite';

async function openStores(on: Backend = backend): Promise<ServerStores> {
  if (on === 'sqlite') {
    const dir = mkdtempSync(path.join(tmpdir(), 'outpost-store-'));
    dirs.push(dir);
    const stores = await openServerStores({ kind: 'sqlite', file: path.join(dir, 'outpost.db') });
    opened.push(stores);
    return stores;
  }
  if (!postgres) throw new Error('PostgreSQL did not start');
  const url = await postgres.createDatabase('conformance');
  const stores = await openServerStores({ kind: 'postgres', url, poolSize: 4, shown: { kind: 'postgres', location: 'test' } });
  opened.push(stores);
  return stores;
}

async function openStore(): Promise<Store> {
  return (await openStores()).store;
}


const claimAll = (
  store: Store,
  location: string,
  agentId: string,
  now = T0,
  extra: { checkTypes?: string[]; runtimes?: string[]; max?: number; claimId?: string } = {},
) =>
  store.claimJobs({
    location,
    agentId,
    checkTypes: extra.checkTypes ?? ['API', 'URL', 'TCP', 'DNS', 'ICMP', 'MULTI_STEP', 'BROWSER', 'PLAYWRIGHT'],
    runtimes: extra.runtimes ?? [],
    max: extra.max ?? 100,
    leaseMs: LEASE,
    now,
    claimId: extra.claimId,
  });


function incident(id: string, dashboardId: string, startedAt = '2026-11-23T10:00:00.000Z'): IncidentDefinition {
  return {
    id,
    name: `incident ${id}`,
    impact: 'MAJOR',
    dashboard: dashboardId,
    startedAt,
    stoppedAt: null,
    incidentUpdates: [
      { id: 'u2', status: 'IDENTIFIED', description: 'second', created_at: '2026-11-23T11:00:00.000Z' },
      { id: 'u1', status: 'INVESTIGATING', description: 'first', created_at: '2026-11-23T10:00:00.000Z' },
      { id: 'u3', status: 'RESOLVED', description: 'third', created_at: '2026-11-23T12:00:00.000Z' },
    ],
  };
}

type MetricRow = [location: string, startedAt: number, responseTime: number, flags: number, attempts: number];

/** Every result of the columns as one row, sorted by location then start. */
function rowsOf(columns: LocationColumns[]): MetricRow[] {
  const rows: MetricRow[] = [];
  for (const c of columns) {
    for (let i = 0; i < c.startedAt.length; i++) rows.push([c.location, c.startedAt[i] as number, c.responseTime[i] as number, c.flags[i] as number, c.attempts[i] as number]);
  }
  return rows.sort((a, b) => a[0].localeCompare(b[0]) || a[1] - b[1]);
}

/**
 * `sessions` sessions of `c`, a FINAL per location a minute apart (an
 * ATTEMPT before a failed one); `odd` adds bodies the store must read as
 * SQLite does: fractional and missing response times, attempts past 1000.
 * Returns the rows a window must answer.
 */
async function sendSpread(store: Store, c: StoredCheck, sessions: number, odd = false): Promise<MetricRow[]> {
  const rows: MetricRow[] = [];
  for (let i = 0; i < sessions; i++) {
    const s = await startSession(store, c, i * 60_000);
    for (const location of c.locations) {
      const job = s.jobs[location] as string;
      const startedAt = at(i * 60_000 + (location === 'loc-b' ? 7 : 0));
      const failed = i % 3 === 1;
      const degraded = i % 4 === 2;
      const attempts = odd && i % 5 === 4 ? 5000 : failed ? 2 : 1;
      const responseTime = odd && i % 6 === 5 ? 12.5 + i : 20 * i + (location === 'loc-b' ? 1 : 0);
      const final = envelope(job, { startedAt: startedAt.toISOString(), hasFailures: failed, isDegraded: degraded, responseTime, attempts, runLocation: location });
      if (odd && i % 7 === 6) delete (final.result as Partial<CheckResultEntry>).responseTime;
      const sent = failed ? [envelope(job, { resultType: 'ATTEMPT', startedAt: startedAt.toISOString(), responseTime: 99_999, runLocation: location }), final] : [final];
      expect((await store.acceptResults('x', location, sent, at(i * 60_000 + 100))).rejected).toEqual([]);
      const storedTime = 'responseTime' in final.result ? Math.round(responseTime) : -1;
      rows.push([location, startedAt.getTime(), storedTime, (failed ? FLAG_FAILED : 0) | (degraded ? FLAG_DEGRADED : 0), Math.min(1000, attempts)]);
    }
  }
  return rows.sort((a, b) => a[0].localeCompare(b[0]) || a[1] - b[1]);
}

describe.each(BACKENDS)('the %s store', (which) => {
  beforeAll(() => {
    backend = which;
  });

  describe('locations and keys', () => {
    it('replaces the locations; a key works only while its location exists', async () => {
      const store = await openStore();
      await store.syncLocations([
        { id: 'loc-a', name: 'A' },
        { id: 'loc-b', name: 'B' },
      ]);
      const key = { id: 'k1', locationId: 'loc-b', maskedKey: 'op_…abcd', created_at: T0.toISOString(), updated_at: T0.toISOString() };
      expect(await store.createKey({ ...key, hash: 'h1' })).toEqual(key);
      expect(await store.keyByHash('h1')).toEqual(key);
      expect(await store.keyByHash('h2')).toBeUndefined();
      await expect(store.createKey({ ...key, id: 'k2', hash: 'h1' })).rejects.toThrow(/UNIQUE|unique constraint/);

      await store.syncLocations([{ id: 'loc-a', name: 'A renamed' }]);
      expect(await store.locations()).toEqual([{ id: 'loc-a', name: 'A renamed' }]);
      expect(await store.location('loc-b')).toBeUndefined();
      expect(await store.keyByHash('h1')).toBeUndefined();
      // Added back, the location starts without keys: its removal revoked them.
      await store.syncLocations([{ id: 'loc-b', name: 'B' }]);
      expect(await store.keyByHash('h1')).toBeUndefined();
      expect(await store.keys('loc-b')).toEqual([]);
    });

    it('lists a location’s keys oldest first and revokes one at once', async () => {
      const store = await openStore();
      await store.syncLocations([
        { id: 'loc-a', name: 'A' },
        { id: 'loc-b', name: 'B' },
      ]);
      const key = (id: string, locationId: string, ms: number) => ({ id, locationId, maskedKey: `op_…${id}`, created_at: at(ms).toISOString(), updated_at: at(ms).toISOString() });
      await store.createKey({ ...key('k2', 'loc-a', 2000), hash: 'h2' });
      await store.createKey({ ...key('k1', 'loc-a', 1000), hash: 'h1' });
      await store.createKey({ ...key('k3', 'loc-b', 0), hash: 'h3' });
      expect(await store.keys('loc-a')).toEqual([key('k1', 'loc-a', 1000), key('k2', 'loc-a', 2000)]);
      // Another location's key is not this one's to revoke.
      expect(await store.deleteKey('loc-a', 'k3')).toBe(false);
      expect(await store.deleteKey('loc-a', 'k1')).toBe(true);
      expect(await store.deleteKey('loc-a', 'k1')).toBe(false);
      expect(await store.keyByHash('h1')).toBeUndefined();
      expect(await store.keyByHash('h2')).toEqual(key('k2', 'loc-a', 2000));
      expect(await store.keys('loc-b')).toEqual([key('k3', 'loc-b', 0)]);
    });
  });

  describe('checks', () => {
    it('syncChecks adds, updates, removes the missing and restores a deleted one', async () => {
      const store = await openStore();
      await store.syncChecks([check('c1'), check('c2')], T0);
      expect((await store.activeChecks()).map((c) => c.id)).toEqual(['c1', 'c2']);
      expect(await store.check('c1')).toEqual({ ...check('c1'), removedAt: null });

      const { session, jobs } = await startSession(store, check('c2'));
      await store.syncChecks([check('c1', { name: 'renamed', runtimeId: null, frequencySeconds: 300 })], at(1000));
      expect(await store.activeChecks()).toEqual([check('c1', { name: 'renamed', frequencySeconds: 300 })]);
      expect((await store.check('c2'))?.removedAt).toBe(at(1000).toISOString());
      // Removed from the file = deleted: its running session and open jobs are cancelled.
      expect((await store.session(session.id))?.status).toBe('CANCELLED');
      expect(await store.hasOpenJob('c2', 'loc-a')).toBe(false);
      expect(jobs['loc-a']).toBeDefined();

      expect(await store.deleteCheck('c1', at(2000))).toBe(true);
      await store.syncChecks([check('c1'), check('c2')], at(3000));
      expect((await store.activeChecks()).map((c) => c.id)).toEqual(['c1', 'c2']);
      expect((await store.check('c1'))?.removedAt).toBeNull();
    });

    it('deleteCheck cancels open jobs and running sessions; finished ones stay; false when unknown or removed', async () => {
      const store = await openStore();
      const c = check('c1');
      await store.syncChecks([c], T0);
      const done = await startSession(store, c, 0, ['loc-a']);
      await claimAll(store, 'loc-a', 'agent-1');
      await store.acceptResults('agent-1', 'loc-a', [envelope(done.jobs['loc-a'] as string)], at(10));
      expect((await store.session(done.session.id))?.status).toBe('PASSED');

      const running = await startSession(store, c, 1000);
      const [leased] = await claimAll(store, 'loc-a', 'agent-1', at(1000));
      expect(leased?.id).toBe(running.jobs['loc-a']);
      expect(await store.hasOpenJob('c1', 'loc-a')).toBe(true);
      expect(await store.hasOpenJob('c1', 'loc-b')).toBe(true);

      expect(await store.deleteCheck('c1', at(5000))).toBe(true);
      const cancelled = await store.session(running.session.id);
      expect(cancelled).toMatchObject({ status: 'CANCELLED', stoppedAt: at(5000).toISOString(), durationMs: 4000 });
      expect((await store.session(done.session.id))?.status).toBe('PASSED');
      expect(await store.hasOpenJob('c1', 'loc-a')).toBe(false);
      expect(await store.hasOpenJob('c1', 'loc-b')).toBe(false);
      expect(await claimAll(store, 'loc-b', 'agent-2', at(5000))).toEqual([]);
      // A result for a cancelled job is refused; the lease is gone too.
      const late = envelope(running.jobs['loc-a'] as string);
      expect((await store.acceptResults('agent-1', 'loc-a', [late], at(6000))).rejected).toEqual([{ resultId: late.resultId, statusCode: 409, message: expect.stringContaining('cancelled') }]);
      expect(await store.extendLeases('agent-1', 'loc-a', [running.jobs['loc-a'] as string], LEASE, at(6000))).toEqual({ extended: [], lost: [running.jobs['loc-a']] });

      expect(await store.deleteCheck('c1', at(7000))).toBe(false);
      expect(await store.deleteCheck('nope', at(7000))).toBe(false);
      expect(await store.activeChecks()).toEqual([]);
    });
  });

  describe('claiming and leases', () => {
    it('claims QUEUED jobs of the location, oldest first, up to max, as protocol Jobs with increasing checkRunIds', async () => {
      const store = await openStore();
      const c = check('c1');
      await store.syncChecks([c], T0);
      const s1 = await startSession(store, c, 0);
      const s2 = await startSession(store, c, 1000);
      const s3 = await startSession(store, c, 2000);
      const first = await claimAll(store, 'loc-a', 'agent-1', at(3000), { max: 2 });
      expect(first.map((j) => j.id)).toEqual([s1.jobs['loc-a'], s2.jobs['loc-a']]);
      expect(first[0]).toEqual({
        id: s1.jobs['loc-a'],
        leaseExpiresAt: at(3000 + LEASE).toISOString(),
        checkRunId: expect.any(Number),
        sequenceId: s1.session.id,
        triggerSource: 'SCHEDULER',
        runLocation: 'loc-a',
        check: c.definition,
        environmentVariables: c.environmentVariables,
      });
      const rest = await claimAll(store, 'loc-a', 'agent-2', at(3000));
      expect(rest.map((j) => j.id)).toEqual([s3.jobs['loc-a']]);
      const ids = [...first, ...rest].map((j) => j.checkRunId as number);
      expect(ids).toEqual([...ids].sort((a, b) => a - b));
      expect(new Set(ids).size).toBe(3);
      expect(await claimAll(store, 'loc-a', 'agent-2', at(3000))).toEqual([]);
      expect((await claimAll(store, 'loc-b', 'agent-3', at(3000))).map((j) => j.id)).toEqual([s1.jobs['loc-b'], s2.jobs['loc-b'], s3.jobs['loc-b']]);
      expect(await claimAll(store, 'loc-c', 'agent-3', at(3000))).toEqual([]);
    });

    it('claimedAgain answers the jobs a claimId leased, with a new lease, while the agent holds them', async () => {
      const store = await openStore();
      const c = check('c1', { locations: ['loc-a'] });
      await store.syncChecks([c], T0);
      const s1 = await startSession(store, c, 0);
      const s2 = await startSession(store, c, 1);
      const s3 = await startSession(store, c, 2);
      const j1 = s1.jobs['loc-a'] as string;
      const j2 = s2.jobs['loc-a'] as string;
      const j3 = s3.jobs['loc-a'] as string;
      const again = (agentId: string, claimId: string, now: Date, location = 'loc-a') => store.claimedAgain({ location, agentId, claimId, leaseMs: LEASE, now });
      expect(await again('agent-1', 'claim-1', at(500))).toEqual([]);
      const first = await claimAll(store, 'loc-a', 'agent-1', at(1_000), { max: 2, claimId: 'claim-1' });
      expect(first.map((j) => j.id)).toEqual([j1, j2]);
      // The answer was lost; the agent asks again under the same claimId: the same two, leased anew.
      expect(await again('agent-1', 'claim-1', at(40_000))).toEqual(first.map((j) => ({ ...j, leaseExpiresAt: at(40_000 + LEASE).toISOString() })));
      expect(await store.requeueExpiredLeases(at(1_000 + LEASE))).toBe(0);
      // Another claimId, another agent, or another location does not get them; a claim without one leases others.
      expect(await again('agent-1', 'claim-2', at(40_000))).toEqual([]);
      expect(await again('agent-2', 'claim-1', at(40_000))).toEqual([]);
      expect(await again('agent-1', 'claim-1', at(40_000), 'loc-b')).toEqual([]);
      expect((await claimAll(store, 'loc-a', 'agent-1', at(40_000))).map((j) => j.id)).toEqual([j3]);
      // A result of another agent whose run began after the first lease, before the lease was renewed: taken,
      // since the job was handed to agent-1 at the first claim (leased_at is not moved by claimedAgain).
      expect((await store.acceptResults('agent-2', 'loc-a', [envelope(j2, { startedAt: at(20_000).toISOString() })], at(41_000))).rejected).toEqual([]);
      // A job that left the agent (a FINAL, a release) is not answered again.
      expect((await store.acceptResults('agent-1', 'loc-a', [envelope(j1, { startedAt: at(21_000).toISOString() })], at(42_000))).rejected).toEqual([]);
      await store.releaseJobs('agent-1', [j3]);
      expect(await again('agent-1', 'claim-1', at(43_000))).toEqual([]);
    });

    it('leaves jobs of check types and runtimes the agent lacks', async () => {
      const store = await openStore();
      const api = check('api');
      const tcp = check('tcp', { checkType: 'TCP', definition: { checkType: 'TCP' } });
      const scripted = check('ms', { checkType: 'MULTI_STEP', runtimeId: '2025.04', definition: { checkType: 'MULTI_STEP' } });
      await store.syncChecks([api, tcp, scripted], T0);
      const a = await startSession(store, api, 0, ['loc-a']);
      const t = await startSession(store, tcp, 1, ['loc-a']);
      const m = await startSession(store, scripted, 2, ['loc-a']);
      expect(await claimAll(store, 'loc-a', 'agent-1', T0, { checkTypes: [] })).toEqual([]);
      expect((await claimAll(store, 'loc-a', 'agent-1', T0, { checkTypes: ['TCP', 'MULTI_STEP'], runtimes: ['2024.09'] })).map((j) => j.id)).toEqual([t.jobs['loc-a']]);
      expect((await claimAll(store, 'loc-a', 'agent-2', T0, { checkTypes: ['MULTI_STEP'], runtimes: ['2024.09', '2025.04'] })).map((j) => j.id)).toEqual([m.jobs['loc-a']]);
      expect((await claimAll(store, 'loc-a', 'agent-3', T0, { checkTypes: ['API'] })).map((j) => j.id)).toEqual([a.jobs['loc-a']]);
    });

    it('extends only the caller’s live leases; releases; requeues expired leases for another agent', async () => {
      const store = await openStore();
      const c = check('c1', { locations: ['loc-a'] });
      await store.syncChecks([c], T0);
      const s1 = await startSession(store, c, 0);
      const s2 = await startSession(store, c, 1);
      const j1 = s1.jobs['loc-a'] as string;
      const j2 = s2.jobs['loc-a'] as string;
      await claimAll(store, 'loc-a', 'agent-1');

      expect(await store.extendLeases('agent-1', 'loc-a', [j1, 'unknown'], LEASE, at(30_000))).toEqual({
        extended: [{ jobId: j1, leaseExpiresAt: at(90_000).toISOString() }],
        lost: ['unknown'],
      });
      expect((await store.extendLeases('agent-2', 'loc-a', [j1], LEASE, at(30_000))).lost).toEqual([j1]);
      expect((await store.extendLeases('agent-1', 'loc-b', [j1], LEASE, at(30_000))).lost).toEqual([j1]);

      // j2 keeps its first lease (ends at 60 s); j1 was extended to 90 s.
      expect(await store.requeueExpiredLeases(at(59_999))).toBe(0);
      expect(await store.requeueExpiredLeases(at(60_000))).toBe(1);
      expect((await store.extendLeases('agent-1', 'loc-a', [j2], LEASE, at(60_001))).lost).toEqual([j2]);
      expect((await claimAll(store, 'loc-a', 'agent-2', at(60_001))).map((j) => j.id)).toEqual([j2]);
      // A late result of the first agent, from a run that began before the job went to agent-2: rejected,
      // the job is agent-2's now.
      const late = envelope(j2, { startedAt: at(1_000).toISOString() });
      expect(await store.acceptResults('agent-1', 'loc-a', [late], at(61_000))).toEqual({
        accepted: [],
        stored: [],
        rejected: [{ resultId: late.resultId, statusCode: 409, message: `job ${j2} was handed to another agent after this result's run began` }],
      });
      expect((await store.extendLeases('agent-2', 'loc-a', [j2], LEASE, at(61_001))).extended.map((e) => e.jobId)).toEqual([j2]);

      await store.releaseJobs('agent-2', [j1]); // not agent-2's: nothing happens
      expect(await store.hasOpenJob('c1', 'loc-a')).toBe(true);
      await store.releaseJobs('agent-1', [j1]);
      expect((await claimAll(store, 'loc-a', 'agent-3', at(62_000))).map((j) => j.id)).toEqual([j1]);
    });

    it("takes a result re-sent by a crashed agent's successor (a new agent id) while the crashed agent's lease runs", async () => {
      const store = await openStore();
      const c = check('c1', { locations: ['loc-a'] });
      await store.syncChecks([c], T0);
      const s = await startSession(store, c);
      await claimAll(store, 'loc-a', 'agent-1');
      // Its run began after agent-1 got the job (by the agent's clock, up to 10 s behind the server's):
      // it is agent-1's run, whichever process sends it.
      const spooled = envelope(s.jobs['loc-a'] as string, { startedAt: at(-9_000).toISOString() });
      expect((await store.acceptResults('agent-1-restarted', 'loc-a', [spooled], at(5_000))).accepted).toEqual([spooled.resultId]);
    });

    it('an expired lease that is not requeued yet still lets another agent report', async () => {
      const store = await openStore();
      const c = check('c1', { locations: ['loc-a'] });
      await store.syncChecks([c], T0);
      const s = await startSession(store, c);
      await claimAll(store, 'loc-a', 'agent-1');
      const late = envelope(s.jobs['loc-a'] as string);
      expect((await store.acceptResults('agent-2', 'loc-a', [late], at(LEASE + 1))).accepted).toEqual([late.resultId]);
    });
  });

  describe('results', () => {
    it('idempotent by resultId; a different FINAL is 409; unknown job or other location 404; ATTEMPTs stored', async () => {
      const store = await openStore();
      const c = check('c1');
      await store.syncChecks([c], T0);
      const s = await startSession(store, c);
      const ja = s.jobs['loc-a'] as string;
      await claimAll(store, 'loc-a', 'agent-1');

      const attempt = envelope(ja, { resultType: 'ATTEMPT', hasFailures: true });
      const final = envelope(ja, { hasFailures: true });
      // `stored` names what this call stored, under its job's check: the FINAL once, however often it came.
      expect(await store.acceptResults('agent-1', 'loc-a', [attempt, final, final], at(100))).toEqual({
        accepted: [attempt.resultId, final.resultId, final.resultId],
        rejected: [],
        stored: [
          { resultId: attempt.resultId, checkId: 'c1' },
          { resultId: final.resultId, checkId: 'c1' },
        ],
      });
      expect(await store.acceptResults('agent-1', 'loc-a', [final], at(200))).toEqual({ accepted: [final.resultId], rejected: [], stored: [] });
      const other = envelope(ja);
      const unknown = envelope('no-such-job');
      const elsewhere = envelope(s.jobs['loc-b'] as string);
      expect(await store.acceptResults('agent-1', 'loc-a', [other, unknown, elsewhere], at(300))).toEqual({
        accepted: [],
        stored: [],
        rejected: [
          { resultId: other.resultId, statusCode: 409, message: expect.stringContaining('another FINAL') },
          { resultId: unknown.resultId, statusCode: 404, message: expect.stringContaining('does not exist') },
          { resultId: elsewhere.resultId, statusCode: 404, message: expect.stringContaining('does not exist') },
        ],
      });
      const session = await store.session(s.session.id);
      expect(session?.results.map((r) => r.id)).toEqual([attempt.resultId, final.resultId]);
      expect(session?.status).toBe('PROGRESS_FAILED');
      expect(await store.result('c1', final.resultId)).toEqual({ ...final.result, errorGroupIds: [expect.any(String)] });
      expect(await store.result('other-check', final.resultId)).toBeUndefined();
      expect(await store.hasOpenJob('c1', 'loc-a')).toBe(false);
      expect(await store.hasOpenJob('c1', 'loc-b')).toBe(true);
    });

    it('the first FINAL wins whichever agent sends it: a successor re-sending a crashed agent\'s spool while the lease is still valid', async () => {
      const store = await openStore();
      const c = check('c1', { locations: ['loc-a'] });
      await store.syncChecks([c], T0);
      const s = await startSession(store, c);
      await claimAll(store, 'loc-a', 'agent-1');
      const spooled = envelope(s.jobs['loc-a'] as string);
      expect(await store.acceptResults('agent-2', 'loc-a', [spooled], at(1000))).toEqual({ accepted: [spooled.resultId], rejected: [], stored: [{ resultId: spooled.resultId, checkId: 'c1' }] });
      // The lease holder's own, later and different FINAL is the second one.
      const late = envelope(s.jobs['loc-a'] as string);
      expect((await store.acceptResults('agent-1', 'loc-a', [late], at(2000))).rejected).toEqual([
        { resultId: late.resultId, statusCode: 409, message: expect.stringContaining('another FINAL') },
      ]);
      expect((await store.extendLeases('agent-1', 'loc-a', [s.jobs['loc-a'] as string], LEASE, at(2000))).lost).toEqual([s.jobs['loc-a']]);
    });

    it('session status follows the FINAL verdicts; stoppedAt and duration when finished', async () => {
      const store = await openStore();
      const c = check('c1', { locations: ['loc-a', 'loc-b', 'loc-c'] });
      await store.syncChecks([c], T0);
      const s = await startSession(store, c);
      const status = async () => (await store.session(s.session.id))?.status;
      expect(await status()).toBe('STARTED');
      await store.acceptResults('x', 'loc-a', [envelope(s.jobs['loc-a'] as string, { resultType: 'ATTEMPT', hasFailures: true })], at(10));
      expect(await status()).toBe('PROGRESS');
      await store.acceptResults('x', 'loc-a', [envelope(s.jobs['loc-a'] as string, { isDegraded: true })], at(20));
      expect(await status()).toBe('PROGRESS_DEGRADED');
      await store.acceptResults('x', 'loc-b', [envelope(s.jobs['loc-b'] as string, { hasErrors: true })], at(30));
      expect(await status()).toBe('PROGRESS_FAILED');
      expect((await store.session(s.session.id))?.stoppedAt).toBeNull();
      await store.acceptResults('x', 'loc-c', [envelope(s.jobs['loc-c'] as string)], at(4000));
      expect(await store.session(s.session.id)).toMatchObject({ status: 'FAILED', stoppedAt: at(4000).toISOString(), durationMs: 4000 });

      const p = await startSession(store, c, 5000);
      await store.acceptResults('x', 'loc-a', [envelope(p.jobs['loc-a'] as string)], at(6000));
      await store.acceptResults('x', 'loc-b', [envelope(p.jobs['loc-b'] as string), envelope(p.jobs['loc-b'] as string)].slice(0, 1), at(6000));
      await store.acceptResults('x', 'loc-c', [envelope(p.jobs['loc-c'] as string, { isDegraded: true })], at(7000));
      expect(await store.session(p.session.id)).toMatchObject({ status: 'DEGRADED', durationMs: 2000 });
    });

    it('finalOutcome agrees with resultOutcome of src/results/result.ts', () => {
      for (const hasErrors of [false, true])
        for (const hasFailures of [false, true])
          for (const isDegraded of [false, true]) {
            const e = entry({ hasErrors, hasFailures, isDegraded });
            expect(finalOutcome(e)).toBe(resultOutcome(e));
          }
    });

    it('lists newest first with filters; limit and cursor are checked', async () => {
      const store = await openStore();
      const c = check('c1', { locations: ['loc-a', 'loc-b'] });
      await store.syncChecks([c, check('c2')], T0);
      const s = await startSession(store, c);
      const other = await startSession(store, check('c2'));
      const a1 = envelope(s.jobs['loc-a'] as string, { resultType: 'ATTEMPT', hasFailures: true, startedAt: at(1000).toISOString() });
      const a2 = envelope(s.jobs['loc-a'] as string, { startedAt: at(2000).toISOString() });
      const b1 = envelope(s.jobs['loc-b'] as string, { hasFailures: true, startedAt: at(3000).toISOString() });
      await store.acceptResults('x', 'loc-a', [a1, a2], at(3000));
      await store.acceptResults('x', 'loc-b', [b1], at(3000));
      await store.acceptResults('x', 'loc-a', [envelope(other.jobs['loc-a'] as string)], at(3000));
      const ids = async (q: Partial<Parameters<Store['listResults']>[0]>) =>
        (await store.listResults({ checkId: 'c1', limit: 100, resultType: 'ALL', ...q })).entries.map((e) => e.id);
      expect(await ids({})).toEqual([b1.resultId, a2.resultId, a1.resultId]);
      expect(await ids({ resultType: 'FINAL' })).toEqual([b1.resultId, a2.resultId]);
      expect(await ids({ resultType: 'ATTEMPT' })).toEqual([a1.resultId]);
      expect(await ids({ hasFailures: true })).toEqual([b1.resultId, a1.resultId]);
      expect(await ids({ hasFailures: false })).toEqual([b1.resultId, a2.resultId, a1.resultId]);
      expect(await ids({ location: 'loc-a' })).toEqual([a2.resultId, a1.resultId]);
      expect(await ids({ checkType: 'API' })).toHaveLength(3);
      expect(await ids({ checkType: 'TCP' })).toEqual([]);
      expect(await ids({ from: at(2000) })).toEqual([b1.resultId, a2.resultId]);
      expect(await ids({ to: at(2000) })).toEqual([a1.resultId]);
      expect(await ids({ from: at(1500), to: at(3000) })).toEqual([a2.resultId]);
      expect(await ids({ checkId: 'nope' })).toEqual([]);

      for (const limit of [0, 101, 1.5]) {
        await expect(store.listResults({ checkId: 'c1', limit, resultType: 'ALL' })).rejects.toMatchObject({ name: 'InvalidQueryError', parameter: 'limit' });
      }
      for (const nextId of ['', 'abc', encodeCursor(0), Buffer.from('12x').toString('base64url'), `${encodeCursor(5)}=`]) {
        const error = await store.listResults({ checkId: 'c1', limit: 10, resultType: 'ALL', nextId }).catch((e: unknown) => e);
        expect(error).toBeInstanceOf(InvalidQueryError);
        expect(error).toMatchObject({ parameter: 'nextId' });
      }
      expect(decodeCursor(encodeCursor(123456))).toBe(123456);
    });

    it('the cursor pages through every result exactly once while new ones arrive between pages', async () => {
      const store = await openStore();
      const c = check('c1', { locations: ['loc-a'] });
      await store.syncChecks([c], T0);
      const jobs: string[] = [];
      for (let i = 0; i < 40; i++) jobs.push((await startSession(store, c, i)).jobs['loc-a'] as string);
      const before: string[] = [];
      for (let i = 0; i < 95; i++) {
        const e = envelope(jobs[i % 40] as string, { resultType: 'ATTEMPT' });
        before.push(e.resultId);
        await store.acceptResults('x', 'loc-a', [e], at(i));
      }
      const seen: string[] = [];
      let nextId: string | undefined;
      let pages = 0;
      do {
        const page = await store.listResults({ checkId: 'c1', limit: 10, resultType: 'ALL', ...(nextId ? { nextId } : {}) });
        seen.push(...page.entries.map((e) => e.id));
        nextId = page.nextId ?? undefined;
        pages++;
        // New results between pages come before the cursor and do not shift it.
        await store.acceptResults('x', 'loc-a', [envelope(jobs[pages % 40] as string, { resultType: 'ATTEMPT' }), envelope(jobs[(pages + 1) % 40] as string, { resultType: 'ATTEMPT' })], at(1000 + pages));
      } while (nextId);
      expect(pages).toBe(10);
      expect(seen).toEqual([...before].reverse());
      expect(new Set(seen).size).toBe(95);
    });

    it('an exact last page has no nextId', async () => {
      const store = await openStore();
      const c = check('c1', { locations: ['loc-a'] });
      await store.syncChecks([c], T0);
      const s = await startSession(store, c);
      for (let i = 0; i < 4; i++) await store.acceptResults('x', 'loc-a', [envelope(s.jobs['loc-a'] as string, { resultType: 'ATTEMPT' })], T0);
      const first = await store.listResults({ checkId: 'c1', limit: 2, resultType: 'ALL' });
      expect(first.nextId).not.toBeNull();
      const second = await store.listResults({ checkId: 'c1', limit: 2, resultType: 'ALL', nextId: first.nextId as string });
      expect(second.entries).toHaveLength(2);
      expect(second.nextId).toBeNull();
    });

    it('pages through every filter of the list: each match once, newest first; a page is full unless a large window far back ran out of budget', async () => {
      expect(BIG_N, 'a window of more results than a page may read, with as many newer').toBeGreaterThanOrEqual(2.5 * SCAN_BUDGET);
      const store = await openStore();
      const rows = resultRows();
      await insertResultRows(store, rows);
      const PAGES = 40;
      for (const { name, checkId, query, budgeted } of FILTER_CASES) {
        const full = { checkId: checkId ?? BIG_CHECK, ...query };
        const expected = expectedRows(rows, full).map((r) => r.id);
        const seen: string[] = [];
        const lengths: number[] = [];
        let nextId: string | null = null;
        do {
          const page: ResultPage = await store.listResults({ ...full, limit: 100, ...(nextId === null ? {} : { nextId }) });
          seen.push(...page.entries.map((e) => e.id));
          lengths.push(page.entries.length);
          nextId = page.nextId;
        } while (nextId !== null && lengths.length < PAGES);
        // What the pages held is the start of the answer, in order; all of it once nextId is null.
        expect(seen, name).toEqual(nextId === null ? expected : expected.slice(0, seen.length));
        if (budgeted) {
          expect(lengths[0], `${name}: the first page stops at the budget`).toBeLessThan(100);
          expect(seen.length, `${name}: later pages go on`).toBeGreaterThan(100);
        } else {
          // Exact: every page but the last is full.
          expect(lengths.slice(0, -1).every((n) => n === 100), `${name}: ${lengths.join(' ')}`).toBe(true);
        }
      }
    });
  });

  describe('deadlines', () => {
    it('open jobs past their deadline time out; the session once nothing else is open', async () => {
      const store = await openStore();
      const c = check('c1', { locations: ['loc-a', 'loc-b'], capMs: 10_000 });
      const short = check('c2', { locations: ['loc-a'], capMs: 10_000 });
      await store.syncChecks([c, short], T0);
      const s = await startSession(store, c);
      const deadline = 10_000 + 2 * LEASE;
      await claimAll(store, 'loc-a', 'agent-1');
      await store.acceptResults('agent-1', 'loc-a', [envelope(s.jobs['loc-a'] as string)], at(5000));
      expect(await store.timeOutJobs(at(deadline - 1))).toEqual([]);
      expect(await store.timeOutJobs(at(deadline))).toEqual([s.session.id]);
      expect(await store.session(s.session.id)).toMatchObject({ status: 'TIMED_OUT', stoppedAt: at(deadline).toISOString(), durationMs: deadline });
      const late = envelope(s.jobs['loc-b'] as string);
      expect((await store.acceptResults('agent-2', 'loc-b', [late], at(deadline + 1))).rejected[0]).toMatchObject({ statusCode: 409, message: expect.stringContaining('timed out') });
      expect(await store.timeOutJobs(at(deadline + 1))).toEqual([]);

      // One location times out while another is still running: the session times out when the other's FINAL comes.
      const m = { id: randomUUID(), ja: randomUUID(), jb: randomUUID() };
      await store.createSession(
        { ...s.session, id: m.id, startedAt: at(300_000).toISOString() },
        [
          { id: m.ja, location: 'loc-a', deadlineAt: at(400_000).toISOString() },
          { id: m.jb, location: 'loc-b', deadlineAt: at(310_000).toISOString() },
        ],
        c,
      );
      await store.acceptResults('agent-1', 'loc-a', [envelope(m.ja, { resultType: 'ATTEMPT' })], at(300_001));
      expect(await store.timeOutJobs(at(310_000))).toEqual([m.id]);
      expect((await store.session(m.id))?.status).toBe('PROGRESS');
      await store.acceptResults('agent-1', 'loc-a', [envelope(m.ja)], at(320_000));
      expect(await store.session(m.id)).toMatchObject({ status: 'TIMED_OUT', stoppedAt: at(320_000).toISOString(), durationMs: 20_000 });

      // A leased job times out too, and the session is not left on a later result.
      const t = await startSession(store, short, 200_000);
      await claimAll(store, 'loc-a', 'agent-1', at(200_000));
      expect(await store.timeOutJobs(at(200_000 + deadline))).toEqual([t.session.id]);
      expect((await store.session(t.session.id))?.status).toBe('TIMED_OUT');
      expect((await store.extendLeases('agent-1', 'loc-a', [t.jobs['loc-a'] as string], LEASE, at(200_000 + deadline))).lost).toHaveLength(1);
    });
  });

  describe('ATTEMPTs per job', () => {
    const attempts = (jobId: string, n: number) => Array.from({ length: n }, () => envelope(jobId, { resultType: 'ATTEMPT', hasFailures: true }));

    it("keeps what the job's runs can send: its check's retries a claim, one more run's after a lease ran out; refuses more with 409 naming why", async () => {
      const store = await openStore();
      const c = check('c1', { locations: ['loc-a'] });
      await store.syncChecks([c], T0);
      const { jobs } = await startSession(store, c, 0, c.locations, 2);
      const job = jobs['loc-a'] as string;
      expect(await claimAll(store, 'loc-a', 'agent-1')).toHaveLength(1);
      // An honest run of maxRetries 2, sent as one batch: every ATTEMPT is kept; a third is not.
      const run1 = attempts(job, 3);
      const first = await store.acceptResults('agent-1', 'loc-a', run1, at(10));
      expect(first.accepted).toEqual(run1.slice(0, 2).map((e) => e.resultId));
      expect(first.rejected).toEqual([
        {
          resultId: run1[2]?.resultId,
          statusCode: 409,
          message: `job ${job} has 2 ATTEMPT results already, as many as its one run can send (its check's retryStrategy allows 2 retries a run): no more are kept`,
        },
      ]);
      // A re-send of a kept one is still taken.
      expect((await store.acceptResults('agent-1', 'loc-a', run1.slice(0, 1), at(11))).accepted).toEqual([run1[0]?.resultId]);
      // The lease ran out and another agent claimed the job: its run may send its own.
      expect(await store.requeueExpiredLeases(at(LEASE + 1_000))).toBe(1);
      expect(await claimAll(store, 'loc-a', 'agent-2', at(LEASE + 2_000))).toHaveLength(1);
      const run2 = attempts(job, 3).map((e) => ({ ...e, result: { ...e.result, startedAt: at(LEASE + 3_000).toISOString() } }));
      const second = await store.acceptResults('agent-2', 'loc-a', run2, at(LEASE + 4_000));
      expect(second.accepted).toEqual(run2.slice(0, 2).map((e) => e.resultId));
      expect(second.rejected[0]?.message).toContain('as many as its 2 runs can send');
      const final = envelope(job);
      expect((await store.acceptResults('agent-2', 'loc-a', [final], at(LEASE + 5_000))).accepted).toEqual([final.resultId]);
    });

    it('refuses every ATTEMPT of a check without retries; a job queued without the figure (an older server) keeps the protocol maximum, 10', async () => {
      const store = await openStore();
      const c = check('c1', { locations: ['loc-a'] });
      await store.syncChecks([c], T0);
      const none = (await startSession(store, c, 0, c.locations, 0)).jobs['loc-a'] as string;
      const refused = await store.acceptResults('agent-1', 'loc-a', attempts(none, 1), at(10));
      expect(refused.accepted).toEqual([]);
      expect(refused.rejected[0]).toMatchObject({ statusCode: 409, message: expect.stringContaining("retryStrategy allows 0 retries a run") });
      expect((await store.acceptResults('agent-1', 'loc-a', [envelope(none)], at(11))).rejected).toEqual([]);
      // Not claimed yet (a spool from before a restart may come first) counts as one run.
      const older = (await startSession(store, c, 1)).jobs['loc-a'] as string;
      const eleven = attempts(older, 11);
      const outcome = await store.acceptResults('agent-1', 'loc-a', eleven, at(20));
      expect(outcome.accepted).toHaveLength(10);
      expect(outcome.rejected.map((r) => r.resultId)).toEqual([eleven[10]?.resultId]);
    });
  });

  describe('artifacts and events', () => {
    it('creates, reads and marks artifacts stored; an unknown one is NotFound', async () => {
      const store = await openStore();
      const c = check('c1', { locations: ['loc-a'] });
      await store.syncChecks([c], T0);
      const { jobs } = await startSession(store, c);
      const record = { id: 'a1', jobId: jobs['loc-a'] as string, location: 'loc-a', name: 'trace.zip', contentType: 'application/zip', size: 1234, created_at: T0.toISOString() };
      await store.createArtifact(record);
      // Only for a job of the artifact's location.
      await expect(store.createArtifact({ ...record, id: 'a3', location: 'loc-b' })).rejects.toBeInstanceOf(NotFoundError);
      await expect(store.createArtifact({ ...record, id: 'a4', jobId: 'no-such-job' })).rejects.toBeInstanceOf(NotFoundError);
      expect(await store.artifact('a1')).toEqual({ ...record, storedAt: null });
      await store.markArtifactStored('a1', at(10));
      expect((await store.artifact('a1'))?.storedAt).toBe(at(10).toISOString());
      await expect(store.markArtifactStored('a2', at(10))).rejects.toBeInstanceOf(NotFoundError);
      expect(await store.artifact('a2')).toBeUndefined();
      await store.addEvents('loc-a', 'agent-1', [{ level: 'error', name: 'TypeError', message: 'boom', agentVersion: '1.0.0' }], T0);
      await store.addEvents('loc-a', 'agent-1', [], T0);
    });
  });

  describe('events kept', () => {
    async function eventCounts(store: Store): Promise<Record<string, number>> {
      const sql = 'SELECT location, count(*) AS n FROM events GROUP BY location ORDER BY location';
      const rows = store instanceof SqliteStore ? store.access.all(sql) : store instanceof PgStore ? await store.db.rows(sql) : [];
      return Object.fromEntries(rows.map((row) => [String(row.location), Number(row.n)]));
    }

    it('keeps the newest MAX_EVENTS_PER_LOCATION of each location: a flood of one never removes another location’s', async () => {
      const store = await openStore();
      const event = (i: number) => ({ level: 'error' as const, name: `E${i}`, message: 'boom', agentVersion: '1.0.0' });
      await store.addEvents('loc-b', 'quiet', [event(0), event(1)], T0);
      const batches = MAX_EVENTS_PER_LOCATION / 100 + 2;
      for (let b = 0; b < batches; b++) {
        await store.addEvents('loc-a', 'flood', Array.from({ length: 100 }, (_, i) => event(b * 100 + i)), at(b));
      }
      expect(await eventCounts(store)).toEqual({ 'loc-a': MAX_EVENTS_PER_LOCATION, 'loc-b': 2 });
      // The oldest went: the first kept is the 201st sent.
      const sql = "SELECT name FROM events WHERE location = 'loc-a' ORDER BY seq LIMIT 1";
      const first = store instanceof SqliteStore ? store.access.get(sql) : store instanceof PgStore ? await store.db.row(sql) : undefined;
      expect(first?.name).toBe('E200');
    });
  });

  describe('pruning', () => {
    it('removes old results, finished sessions, their jobs and artifacts in batches; keeps newer and running ones', async () => {
      const store = await openStore();
      const c = check('c1', { locations: ['loc-a'] });
      await store.syncChecks([c], T0);
      const old: Array<{ session: string; job: string; results: string[] }> = [];
      for (let i = 0; i < 5; i++) {
        const s = await startSession(store, c, i);
        const job = s.jobs['loc-a'] as string;
        const attempt = envelope(job, { resultType: 'ATTEMPT' });
        const final = envelope(job);
        await store.acceptResults('x', 'loc-a', [attempt, final], at(1000 + i));
        await store.createArtifact({ id: `old-${i}`, jobId: job, location: 'loc-a', name: 'n', contentType: 'text/plain', size: 1, created_at: at(1000).toISOString() });
        old.push({ session: s.session.id, job, results: [attempt.resultId, final.resultId] });
      }
      const running = await startSession(store, c, 500); // old but unfinished: stays
      const fresh = await startSession(store, c, 100_000);
      const freshResult = envelope(fresh.jobs['loc-a'] as string);
      await store.acceptResults('x', 'loc-a', [freshResult], at(100_500));
      await store.createArtifact({ id: 'fresh', jobId: fresh.jobs['loc-a'] as string, location: 'loc-a', name: 'n', contentType: 'text/plain', size: 1, created_at: at(100_000).toISOString() });
      await store.addEvents('loc-a', 'a', [{ level: 'warn', name: 'X', message: 'm', agentVersion: '1' }], at(10));

      const cutoff = at(50_000);
      let removed = 0;
      const artifactIds: string[] = [];
      for (let calls = 0; calls < 20; calls++) {
        const step = await store.pruneBefore(cutoff, 3);
        expect(step.results).toBeLessThanOrEqual(3);
        removed += step.results;
        artifactIds.push(...step.artifactIds);
        if (step.results === 0 && step.artifactIds.length === 0) break;
      }
      expect(removed).toBe(10);
      expect(artifactIds.sort()).toEqual(['old-0', 'old-1', 'old-2', 'old-3', 'old-4']);
      for (const o of old) {
        expect(await store.session(o.session)).toBeUndefined();
        for (const id of o.results) expect(await store.result('c1', id)).toBeUndefined();
      }
      expect((await store.session(running.session.id))?.status).toBe('STARTED');
      expect(await store.hasOpenJob('c1', 'loc-a')).toBe(true);
      expect((await store.session(fresh.session.id))?.results.map((r) => r.id)).toEqual([freshResult.resultId]);
      expect(await store.artifact('fresh')).toBeDefined();
      expect(await store.integrityCheck()).toEqual(['ok']);
    });
  });

  describe('hardening', () => {
    it('refuses bad times, an unknown resultType; takes an ATTEMPT after the FINAL', async () => {
      const store = await openStore();
      const c = check('c1', { locations: ['loc-a'] });
      await store.syncChecks([c], T0);
      await expect(store.listResults({ checkId: 'c1', limit: 10, resultType: 'ALL', from: new Date('nope') })).rejects.toMatchObject({ parameter: 'from' });
      await expect(store.listResults({ checkId: 'c1', limit: 10, resultType: 'ALL', to: new Date(Number.NaN) })).rejects.toMatchObject({ parameter: 'to' });
      const s = await startSession(store, c);
      const job = s.jobs['loc-a'] as string;
      const odd = envelope(job, { resultType: 'SOMETHING' as 'FINAL' });
      const final = envelope(job);
      const attempt = envelope(job, { resultType: 'ATTEMPT' });
      expect(await store.acceptResults('x', 'loc-a', [odd, final, attempt], at(10))).toEqual({
        accepted: [final.resultId, attempt.resultId],
        stored: [
          { resultId: final.resultId, checkId: 'c1' },
          { resultId: attempt.resultId, checkId: 'c1' },
        ],
        rejected: [{ resultId: odd.resultId, statusCode: 400, message: expect.stringContaining('resultType') }],
      });
      expect((await store.session(s.session.id))?.status).toBe('PASSED');
    });

    it('stores U+0000 and lone surrogates of a result as U+FFFD (PostgreSQL cannot read them as json); pairs stay; the session and window follow', async () => {
      const { store, analytics } = await openStores();
      const c = check('c1', { locations: ['loc-a'] });
      await store.syncChecks([c], T0);
      const s = await startSession(store, c);
      // What an agent reads from a target answering {"name":"caf\ud800"} and asserts on (src/core/nul.ts).
      const odd = { name: 'caf\ud800', low: '\udc00x', high: 'x\ud83d', nul: 'a\u0000b', pair: '🔑', text: 'a\\ud800 \\u0000' };
      const failed = { source: 'JSON_BODY', property: '$.name', comparison: 'EQUALS', target: 'cafe', actual: odd.name, passed: false };
      const final = envelope(s.jobs['loc-a'] as string, { hasFailures: true, responseTime: 12, [odd.high]: odd, apiCheckResult: { assertions: [failed] } } as Partial<CheckResultEntry>);
      expect(await store.acceptResults('x', 'loc-a', [final], at(10))).toMatchObject({ accepted: [final.resultId], rejected: [] });
      const stored = await store.result('c1', final.resultId);
      expect(stored?.['x\ufffd' as keyof CheckResultEntry]).toEqual({ name: 'caf\ufffd', low: '\ufffdx', high: 'x\ufffd', nul: 'a\ufffdb', pair: '🔑', text: 'a\\ud800 \\u0000' });
      expect(stored?.apiCheckResult).toEqual({ assertions: [{ ...failed, actual: 'caf\ufffd' }] });
      expect((await store.session(s.session.id))?.status).toBe('FAILED');
      expect(rowsOf(await analytics.window('c1', T0.getTime(), at(60_000).getTime(), 10))).toEqual([['loc-a', T0.getTime(), 12, FLAG_FAILED, 1]]);
    });
  });


  describe('alerts', () => {
    const CHANNEL = { type: 'WEBHOOK', subscriptions: ['c1'], autoSubscribe: false, sendFailure: true, sendRecovery: true, sendDegraded: false, sslExpiry: false, sslExpiryThreshold: 30 };

    it("a checks-file channel taking an API channel's id cancels its pending notifications; one it keeps does not", async () => {
      const { alerts } = await openStores();
      const api = await alerts.createChannel({ ...CHANNEL, config: { url: 'http://127.0.0.1:9/api' } }, T0);
      const file = api.id + 1;
      await alerts.syncFileChannels([{ ...CHANNEL, id: file, config: { url: 'http://127.0.0.1:9/file' } }], T0);
      const queued = (channelId: number) => ({ channelId, kind: 'FAILURE' as const, checkId: 'c1', location: 'loc-a', resultId: null, body: { event: 'FAILURE' } });
      expect(await alerts.commitEvaluation('alerts', 1, [], [queued(api.id), queued(file)], T0)).toBe(2);
      // The file now names both ids: the API channel's id is taken over, the file channel changes its URL.
      await alerts.syncFileChannels(
        [
          { ...CHANNEL, id: api.id, subscriptions: ['other'], config: { url: 'http://127.0.0.1:9/taken-over' } },
          { ...CHANNEL, id: file, config: { url: 'http://127.0.0.1:9/file-moved' } },
        ],
        at(1),
      );
      const [takenOver] = await alerts.notifications(api.id, 10);
      expect(takenOver).toMatchObject({ state: 'CANCELLED', lastError: expect.stringContaining("replaced by the checks file's channel") });
      expect((await alerts.notifications(file, 10))[0]?.state).toBe('PENDING');
      expect((await alerts.dueNotifications(at(2), 10)).map((n) => n.channelId)).toEqual([file]);
    });

    it('answers no notification of a busy channel, and claims none of them (PostgreSQL claims what it answers)', async () => {
      const { alerts } = await openStores();
      const ids: number[] = [];
      for (const name of ['a', 'b', 'c']) ids.push((await alerts.createChannel({ ...CHANNEL, config: { url: `http://127.0.0.1:9/${name}` } }, T0)).id);
      const queued = (channelId: number) => ({ channelId, kind: 'FAILURE' as const, checkId: 'c1', location: 'loc-a', resultId: null, body: { event: 'FAILURE' } });
      await alerts.commitEvaluation('alerts', 1, [], ids.map(queued), T0);
      const [a, b, c] = ids as [number, number, number];
      expect((await alerts.dueNotifications(at(1), 10, [a, c])).map((n) => n.channelId)).toEqual([b]);
      // Channels a and c were neither answered nor claimed: they are due to the next caller at once.
      expect((await alerts.dueNotifications(at(2), 10, [b])).map((n) => n.channelId).sort()).toEqual([a, c].sort());
    });

    it('keeps the status the channels were last told of beside the status', async () => {
      const { alerts } = await openStores();
      const status = { checkId: 'c1', location: 'loc-a', status: 'FAILING' as const, since: 1, candidate: null, streak: 0, updatedAt: 1, announced: 'PASSING' as const };
      await alerts.commitEvaluation('alerts', 1, [status], [], T0);
      expect(await alerts.statuses('c1')).toEqual([status]);
      await alerts.commitEvaluation('alerts', 2, [{ ...status, announced: 'FAILING' }], [], T0);
      expect((await alerts.statuses('c1'))[0]?.announced).toBe('FAILING');
    });
  });

  describe('dashboards and incidents', () => {
    it('sync from the file: creates, changes keeping the numeric id, deletes the missing; keys by digest; incidents with updates newest first', async () => {
      const { dashboards } = await openStores();
      const keys = [{ id: 'k1', hash: 'h1', maskedKey: 'ab…1' }];
      await dashboards.sync([{ definition: dashboard('wall', { customUrl: 'status' }), keys }, { definition: dashboard('gone'), keys: [] }], [incident('i1', 'wall')], T0);
      const wall = await dashboards.dashboard('wall');
      expect(wall).toMatchObject({ source: 'file', definition: dashboard('wall', { customUrl: 'status' }), created_at: T0.toISOString(), updated_at: null });
      expect(wall?.keys).toEqual([{ id: 'k1', hash: 'h1', maskedKey: 'ab…1', created_at: T0.toISOString(), updated_at: null }]);
      const id = wall?.id as number;
      expect((await dashboards.incident('i1'))?.incidentUpdates.map((u) => u.id)).toEqual(['u3', 'u2', 'u1']);
      expect(await dashboards.incident('i1')).toMatchObject({ name: 'incident i1', impact: 'MAJOR', dashboardId: id, startedAt: '2026-11-23T10:00:00.000Z' });

      await dashboards.sync(
        [{ definition: dashboard('wall', { customUrl: 'status', header: 'new' }), keys: [{ id: 'k1', hash: 'h2', maskedKey: 'cd…2' }, { id: 'k2', hash: 'h3', maskedKey: 'ef…3' }] }],
        [{ ...incident('i1', 'wall'), incidentUpdates: incident('i1', 'wall').incidentUpdates.slice(0, 2) }, incident('i2', 'wall', '2026-11-23T12:00:00.000Z')],
        at(1000),
      );
      const changed = await dashboards.dashboard('wall');
      expect(changed).toMatchObject({ id, definition: { header: 'new' }, created_at: T0.toISOString(), updated_at: at(1000).toISOString() });
      expect(changed?.keys.map((k) => [k.id, k.hash, k.updated_at])).toEqual([
        ['k1', 'h2', at(1000).toISOString()],
        ['k2', 'h3', null],
      ]);
      expect(await dashboards.dashboard('gone')).toBeUndefined();
      expect((await dashboards.incidentsOf(id)).map((i) => [i.id, i.incidentUpdates.length])).toEqual([
        ['i2', 3],
        ['i1', 2],
      ]);
      expect((await dashboards.dashboardByRef('status'))?.id).toBe(id);
      expect((await dashboards.dashboardByRef(String(id)))?.definition.dashboardId).toBe('wall');
      await dashboards.sync([], [], at(2000));
      expect(await dashboards.dashboard('wall')).toBeUndefined();
      expect(await dashboards.incident('i1')).toBeUndefined();
    });

    it('PUT creates, replaces and conflicts; keys kept, changed and dropped; DELETE only API dashboards; the file wins a customUrl', async () => {
      const { dashboards } = await openStores();
      await dashboards.sync([{ definition: dashboard('filed', { customUrl: 'shared' }), keys: [] }], [], T0);
      expect(await dashboards.put(dashboard('filed'), [], T0)).toMatchObject({ kind: 'conflict', message: expect.stringContaining('checks file') });
      expect(await dashboards.put(dashboard('team', { customUrl: 'shared' }), [], T0)).toMatchObject({ kind: 'conflict', message: expect.stringContaining('filed') });
      const created = await dashboards.put(dashboard('team', { customUrl: 'team' }), [{ id: 'k1', hash: 'h1', maskedKey: 'm1' }, { id: 'k2', hash: 'h2', maskedKey: 'm2' }], T0);
      expect(created).toMatchObject({ kind: 'created', record: { source: 'api', definition: { dashboardId: 'team' } } });
      const id = created.kind === 'created' ? created.record.id : -1;
      const updated = await dashboards.put(dashboard('team', { customUrl: 'team', header: 'h' }), [{ id: 'k1', keep: true }, { id: 'k3', hash: 'h3', maskedKey: 'm3' }], at(10));
      expect(updated).toMatchObject({ kind: 'updated', record: { id, updated_at: at(10).toISOString(), definition: { header: 'h' } } });
      expect(updated.kind === 'updated' ? updated.record.keys.map((k) => [k.id, k.hash]) : []).toEqual([
        ['k1', 'h1'],
        ['k3', 'h3'],
      ]);
      expect((await dashboards.dashboardByRef('team'))?.id).toBe(id);
      // The file takes the API dashboard's customUrl: the API one loses it.
      await dashboards.sync([{ definition: dashboard('filed', { customUrl: 'team' }), keys: [] }], [], at(20));
      expect((await dashboards.dashboard('team'))?.definition.customUrl).toBeNull();
      expect((await dashboards.dashboardByRef('team'))?.definition.dashboardId).toBe('filed');
      expect(await dashboards.deleteDashboard('filed')).toBe('file');
      expect(await dashboards.deleteDashboard('team')).toBe(true);
      expect(await dashboards.deleteDashboard('team')).toBe(false);
      expect(await dashboards.dashboard('team')).toBeUndefined();
    });

    it('samples and availability read the FINAL results of the window', async () => {
      const { store, dashboards } = await openStores();
      const c = check('c1', { locations: ['loc-a'] });
      await store.syncChecks([c], T0);
      for (let i = 0; i < 4; i++) {
        const s = await startSession(store, c, i * 60_000);
        const job = s.jobs['loc-a'] as string;
        const startedAt = at(i * 60_000).toISOString();
        await store.acceptResults('x', 'loc-a', [envelope(job, { resultType: 'ATTEMPT', startedAt, responseTime: 9 }), envelope(job, { startedAt, responseTime: 10 + i, hasFailures: i === 1 })], at(i * 60_000 + 1));
      }
      expect(await dashboards.samples('c1', at(60_000), at(240_000))).toEqual([
        { at: at(60_000).getTime(), responseTime: 11, up: false, location: 'loc-a' },
        { at: at(120_000).getTime(), responseTime: 12, up: true, location: 'loc-a' },
        { at: at(180_000).getTime(), responseTime: 13, up: true, location: 'loc-a' },
      ]);
      expect(await dashboards.availability('c1', at(240_000), [60_000, 180_000, 600_000])).toEqual([
        { total: 1, up: 1 },
        { total: 3, up: 2 },
        { total: 4, up: 3 },
      ]);
      expect(await dashboards.availability('c1', at(240_000), [])).toEqual([]);
    });

    it("samples' response times are the analytics routes': rounded, at least 0, none when not a number; the figures leave those out", async () => {
      const { store, dashboards, analytics } = await openStores();
      const c = check('c1', { locations: ['loc-a'] });
      await store.syncChecks([c], T0);
      const odd: unknown[] = [-5000, 12.7, '12345', undefined, null, 102];
      for (const [i, responseTime] of odd.entries()) {
        const s = await startSession(store, c, i * 60_000);
        const result = envelope(s.jobs['loc-a'] as string, { startedAt: at(i * 60_000).toISOString() });
        const body: Record<string, unknown> = { ...result.result, responseTime };
        if (responseTime === undefined) delete body.responseTime;
        await store.acceptResults('x', 'loc-a', [{ ...result, result: body as unknown as CheckResultEntry }], at(i * 60_000 + 1));
      }
      const now = at(3_600_000).getTime();
      const samples = await dashboards.samples('c1', new Date(now - 86_400_000), new Date(now));
      expect(samples.map((sample) => sample.responseTime)).toEqual([0, 13, null, null, null, 102]);
      // The analytics routes' own values for the same results.
      const [columns] = await analytics.window('c1', now - 86_400_000, now, 100);
      expect([...(columns?.responseTime ?? [])]).toEqual([0, 13, -1, -1, -1, 102]);
      const figures = checkFigures(samples, now, '24h', await dashboards.availability('c1', new Date(now), [86_400_000, 7 * 86_400_000, 30 * 86_400_000]));
      // percentile_cont over 0, 13, 102: 13 + 0.9 × 89 (before, "12345", missing and null counted as 0 and −5000 stayed: 79.675).
      expect(figures.p95).toBeCloseTo(93.1, 9);
      expect(figures.samples).toBe(3);
      expect(figures.counts['24h']).toBe(6);
      const bucket = figures.buckets.find((b) => b.count > 0);
      expect(bucket?.count).toBe(3);
      expect(bucket?.mean).toBeCloseTo(115 / 3, 9);
    });
  });

  describe('analytics', () => {
    it('a window is columns per location of the FINAL results as sent (heartbeat results too), [from, to); too many is an error; pruning empties it', async () => {
      const { store, analytics, heartbeats } = await openStores();
      const c = check('c1', { locations: ['loc-b', 'loc-a'] });
      await store.syncChecks([c, check('beat', { locations: [], checkType: 'HEARTBEAT' })], T0);
      const sent = await sendSpread(store, c, 6);
      // The heartbeat monitor's own results are in windows too.
      await heartbeats.sync([{ checkId: 'beat', tokenHash: 'beat-hash', periodMs: 60_000, graceMs: 0 }], T0);
      await heartbeats.ping('beat-hash', { source: 'GET 127.0.0.1', userAgent: 'test' }, at(5 * 60_000));
      expect(rowsOf(await analytics.window('beat', T0.getTime(), at(6 * 60_000).getTime(), 100))).toEqual([['heartbeat', at(5 * 60_000).getTime(), 0, 0, 1]]);
      const columns = await analytics.window('c1', T0.getTime(), at(6 * 60_000).getTime(), 100);
      expect(columns.map((l) => l.location)).toEqual(['loc-a', 'loc-b']);
      expect(rowsOf(columns)).toEqual(sent);
      expect(rowsOf(await analytics.window('c1', at(60_000).getTime(), at(3 * 60_000).getTime(), 100))).toEqual(sent.filter((r) => r[1] >= at(60_000).getTime() && r[1] < at(3 * 60_000).getTime()));
      expect(await analytics.window('other', T0.getTime(), at(6 * 60_000).getTime(), 100)).toEqual([]);
      await expect(analytics.window('c1', T0.getTime(), at(6 * 60_000).getTime(), 11)).rejects.toBeInstanceOf(WindowTooLargeError);
      for (let calls = 0; calls < 50 && (await store.pruneBefore(at(10 * 86_400_000), 5)).results > 0; calls++) {}
      expect(await analytics.window('c1', T0.getTime(), at(6 * 60_000).getTime(), 100)).toEqual([]);
      expect(await analytics.window('beat', T0.getTime(), at(6 * 60_000).getTime(), 100)).toEqual([]);
    });

    it('keeps the last report of each address, sorted, and forgets those not seen since the bound', async () => {
      const { analytics } = await openStores();
      const day = 86_400_000;
      await analytics.reportAddresses('lab', 'a1', ['2001:db8::1', 'fd00::5'], T0, at(-7 * day));
      await analytics.reportAddresses('dmz', 'a2', ['2001:db8::2'], at(day), at(-6 * day));
      await analytics.reportAddresses('dmz', 'a3', ['fd00::5'], at(2 * day), at(-5 * day));
      expect((await analytics.addressesSince(T0)).map((a) => [a.address, a.location, a.agentId, a.lastSeen.getTime()])).toEqual([
        ['2001:db8::1', 'lab', 'a1', T0.getTime()],
        ['2001:db8::2', 'dmz', 'a2', at(day).getTime()],
        ['fd00::5', 'dmz', 'a3', at(2 * day).getTime()],
      ]);
      await analytics.reportAddresses('lab', 'a1', ['2001:db8::9'], at(8 * day), at(day));
      expect((await analytics.addressesSince(new Date(0))).map((a) => a.address)).toEqual(['2001:db8::2', '2001:db8::9', 'fd00::5']);
    });

    it('keeps at most MAX_ADDRESSES_PER_LOCATION addresses per location: known ones are refreshed, new ones past it are counted, not kept', async () => {
      const { analytics } = await openStores();
      const day = 86_400_000;
      const address = (i: number) => `2001:db8::${i.toString(16)}`;
      const max = MAX_ADDRESSES_PER_LOCATION;
      // One agent reporting 32 new addresses at every claim, as a hostile one may.
      let dropped = 0;
      for (let first = 0; first < max + 64; first += 32) {
        dropped += await analytics.reportAddresses('lab', 'a1', Array.from({ length: 32 }, (_, i) => address(first + i)), T0, at(-7 * day));
      }
      expect(dropped).toBe(64);
      expect(await analytics.reportAddresses('dmz', 'a2', ['fd00::1'], T0, at(-7 * day))).toBe(0);
      // A known address is refreshed even while the list is full; a new one still is not kept.
      expect(await analytics.reportAddresses('lab', 'a1', [address(0), address(max + 100)], at(day), at(-6 * day))).toBe(1);
      const listed = await analytics.addressesSince(T0);
      expect(listed.filter((a) => a.location === 'lab')).toHaveLength(max);
      expect(listed.find((a) => a.address === address(0))?.lastSeen.getTime()).toBe(at(day).getTime());
      expect(listed.some((a) => a.address === address(max + 100))).toBe(false);
      expect(listed.some((a) => a.address === 'fd00::1')).toBe(true);
      // Once the old ones go unseen past the bound, new ones are kept again.
      expect(await analytics.reportAddresses('lab', 'a1', [address(max + 100)], at(8 * day), at(day))).toBe(0);
      expect((await analytics.addressesSince(at(day))).filter((a) => a.location === 'lab').map((a) => a.address)).toEqual([address(0), address(max + 100)].sort());
    });
  });

});

describe('both stores', () => {
  it('answer the same analytics window for the same results, odd bodies included', async () => {
    const answers: MetricRow[][] = [];
    let sent: MetricRow[] = [];
    for (const on of BACKENDS) {
      const { store, analytics } = await openStores(on);
      const c = check('c1', { locations: ['loc-a', 'loc-b'] });
      await store.syncChecks([c], T0);
      sent = await sendSpread(store, c, 25, true);
      answers.push(rowsOf(await analytics.window('c1', T0.getTime(), at(86_400_000).getTime(), 1000)));
    }
    expect(answers[0]).toEqual(sent);
    expect(answers[1]).toEqual(answers[0]);
  });
});
