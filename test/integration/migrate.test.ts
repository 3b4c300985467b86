// `outpost migrate --from sqlite:PATH --to postgres://…` (docs/postgres.md),
// the built command on a SQLite database filled through every store (results,
// sessions, keys, channels, outbox, heartbeats, error groups, windows,
// dashboards with keys and incidents, agent addresses), into
// a PostgreSQL this file starts: every table's rows arrive and are counted
// (result_metrics rebuilt by PostgreSQL's triggers, not copied),
// the data reads back the same through the PostgreSQL stores, new rows take
// ids after the copied ones, a non-empty target is refused unless --replace,
// a re-run with --replace gives the same target, and no output has the
// password.

import { execFile } from 'node:child_process';
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DashboardDefinition, IncidentDefinition } from '../../src/core/dashboard.js';
import { COPIED_TABLES, REBUILT_TABLES } from '../../src/store/migrate-sqlite-to-postgres.js';
import { openServerStores } from '../../src/store/server-stores.js';
import { MAIN } from '../support/agent-process.js';
import { type PostgresServer, startPostgres } from '../support/postgres.js';
import { queueSessions, runSessions, storedCheck } from '../support/server-store.js';
import { dashboard } from '../support/store-fixtures.js';

const INCIDENT: IncidentDefinition = {
  id: '7a0c1b52-2f4e-4a53-9d0e-0c7f4f6a1e21',
  name: 'Slow',
  impact: 'MINOR',
  dashboard: 'wall',
  startedAt: null,
  stoppedAt: null,
  incidentUpdates: [
    { id: 'u1', status: 'INVESTIGATING', description: 'looking', created_at: '2026-11-24T01:00:00.000Z' },
    { id: 'u2', status: 'RESOLVED', description: 'done', created_at: '2026-11-24T02:00:00.000Z' },
  ],
};

function dashboardDefinition(dashboardId: string, customUrl: string | null): DashboardDefinition {
  return dashboard(dashboardId, { customUrl, header: dashboardId, isPrivate: dashboardId === 'wall' });
}

let postgres: PostgresServer;
let dir: string;
let file: string;
const T0 = new Date();

function migrate(args: string[], env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [MAIN, 'migrate', ...args], { env: { PATH: process.env.PATH ?? '', ...env }, timeout: 120_000 }, (error, stdout, stderr) => {
      resolve({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

async function counts(url: string): Promise<Record<string, number>> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const out: Record<string, number> = {};
    for (const table of [...COPIED_TABLES, ...REBUILT_TABLES]) out[table] = Number((await client.query<{ n: string }>(`SELECT count(*) AS n FROM ${table}`)).rows[0]?.n);
    return out;
  } finally {
    await client.end();
  }
}

async function sqliteCounts(): Promise<Record<string, number>> {
  const { DatabaseSync } = await import('node:sqlite');
  const db = new DatabaseSync(file, { readOnly: true });
  try {
    return Object.fromEntries([...COPIED_TABLES, ...REBUILT_TABLES].map((table) => [table, Number(db.prepare(`SELECT count(*) AS n FROM ${table}`).get()?.n)]));
  } finally {
    db.close();
  }
}

beforeAll(async () => {
  postgres = await startPostgres();
  dir = mkdtempSync(path.join(tmpdir(), 'outpost-migrate-'));
  file = path.join(dir, 'outpost.db');
  const source = await openServerStores({ kind: 'sqlite', file });
  try {
    const check = storedCheck({ id: 'api', locations: ['loc-a', 'loc-b'] });
    const beat = storedCheck({ id: 'beat', locations: [], checkType: 'HEARTBEAT' });
    await source.store.syncLocations([
      { id: 'loc-a', name: 'A' },
      { id: 'loc-b', name: 'B' },
    ]);
    await source.store.syncChecks([check, beat], T0);
    await source.store.createKey({ id: 'k1', locationId: 'loc-a', hash: 'hash-1', maskedKey: 'op_…1', created_at: T0.toISOString(), updated_at: T0.toISOString() });
    // Passing and failing runs (error groups), ATTEMPTs, and jobs still queued.
    await runSessions(source.store, check, ['loc-a', 'loc-b'], 30, (_job, i) => (i % 3 === 0 ? [{ resultType: 'ATTEMPT', hasFailures: true }, { hasFailures: true }] : [{}]), T0);
    await queueSessions(source.store, check, ['loc-a'], 2, T0);
    await source.store.addEvents('loc-a', 'agent-a', [{ level: 'ERROR', name: 'spool-full', timestamp: T0.toISOString() } as never], T0);
    await source.alerts.syncFileChannels(
      [{ id: 3, type: 'WEBHOOK', config: { url: 'http://127.0.0.1:9/' }, subscriptions: [], autoSubscribe: true, sendRecovery: true, sendFailure: true, sendDegraded: false, sslExpiry: false, sslExpiryThreshold: 30 }],
      T0,
    );
    await source.alerts.commitEvaluation(
      'alerts',
      5,
      [{ checkId: 'api', location: 'loc-a', status: 'FAILING', since: T0.getTime(), candidate: null, streak: 0, updatedAt: T0.getTime(), announced: 'PASSING' }],
      [
        { channelId: 3, kind: 'FAILURE', checkId: 'api', location: 'loc-a', resultId: null, body: { a: 1 } },
        { channelId: 3, kind: 'SSL_EXPIRY', checkId: 'api', location: null, resultId: null, body: {}, sslNotice: { certificate: 'c', day: '2026-11-24' } },
      ],
      T0,
    );
    const [due] = await source.alerts.dueNotifications(T0, 1);
    await source.alerts.recordAttempt(due?.id as number, { at: T0.toISOString(), status: 503, error: 'HTTP 503', durationMs: 3 }, { kind: 'retry', nextAt: T0 });
    await source.heartbeats.sync([{ checkId: 'beat', tokenHash: 'beat-hash', periodMs: 60_000, graceMs: 0 }], T0);
    await source.heartbeats.ping('beat-hash', { source: 'GET 127.0.0.1', userAgent: 'curl' }, T0);
    await source.dashboards.sync([{ definition: dashboardDefinition('wall', 'status'), keys: [{ id: 'k', hash: 'key-hash', maskedKey: 'ke…y' }] }], [INCIDENT], T0);
    await source.dashboards.put(dashboardDefinition('team', null), [], T0);
    await source.analytics.reportAddresses('loc-a', 'agent-a', ['2001:db8::1'], T0, new Date(T0.getTime() - 86_400_000));
    await source.windows.sync([{ id: 1, name: 'Nightly', tags: [], startsAt: T0.toISOString(), endsAt: new Date(T0.getTime() + 3_600_000).toISOString(), repeatUnit: null, repeatEndsAt: null, repeatInterval: null }], T0);
  } finally {
    await source.close();
  }
  // A FINAL stored before the server replaced lone surrogates (src/core/nul.ts): PostgreSQL's trigger cannot read it as json.
  const { DatabaseSync } = await import('node:sqlite');
  const db = new DatabaseSync(file);
  try {
    db.prepare(`UPDATE results SET body = '{"old":"caf\\ud800",' || substr(body, 2) WHERE rowid = (SELECT min(rowid) FROM results WHERE result_type = 'FINAL')`).run();
  } finally {
    db.close();
  }
}, 120_000);

afterAll(async () => {
  await postgres?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe('outpost migrate', () => {
  it('copies every table, verifies the counts, and the data reads back the same on PostgreSQL', { timeout: 120_000 }, async () => {
    const url = await postgres.createDatabase('migrate');
    const run = await migrate(['--from', `sqlite:${file}`, '--to', url]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toMatch(/every count verified/);
    expect(`${run.stdout}${run.stderr}`).not.toContain(postgres.password);
    const expected = await sqliteCounts();
    for (const table of ['results', 'sessions', 'jobs', 'keys', 'alert_channels', 'notifications', 'notification_attempts', 'heartbeat_events', 'error_groups', 'events', 'dashboards', 'dashboard_keys', 'incidents', 'incident_updates', 'agent_addresses', 'result_metrics']) {
      expect(expected[table], `${table} has rows to copy`).toBeGreaterThan(0);
    }
    expect(await counts(url)).toEqual(expected);

    const source = await openServerStores({ kind: 'sqlite', file });
    const target = await openServerStores({ kind: 'postgres', url, poolSize: 2, shown: { kind: 'postgres', location: 'test' } });
    try {
      const query = { checkId: 'api', limit: 100, resultType: 'ALL' as const };
      const before = await source.store.listResults(query);
      const after = await target.store.listResults(query);
      // The old body's lone surrogate arrives as U+FFFD (docs/postgres.md); every other result as it was.
      const oldBody = (entry: object) => 'old' in entry;
      expect(before.entries.filter(oldBody).map((entry) => Reflect.get(entry, 'old'))).toEqual(['caf\ud800']);
      expect(after.entries).toEqual(before.entries.map((entry) => (oldBody(entry) ? { ...entry, old: 'caf\ufffd' } : entry)));
      expect(after.nextId).toBe(before.nextId);
      expect(await target.store.keyByHash('hash-1')).toEqual(await source.store.keyByHash('hash-1'));
      expect(await target.alerts.channels()).toEqual(await source.alerts.channels());
      expect(await target.alerts.notifications(3, 10)).toEqual(await source.alerts.notifications(3, 10));
      expect(await target.errorGroups.groupsOf('api')).toEqual(await source.errorGroups.groupsOf('api'));
      expect(await target.heartbeats.state('beat')).toEqual(await source.heartbeats.state('beat'));
      expect(await target.windows.all()).toEqual(await source.windows.all());
      expect(await target.alerts.cursor('alerts')).toBe(5);
      for (const id of ['wall', 'team']) expect(await target.dashboards.dashboard(id)).toEqual(await source.dashboards.dashboard(id));
      expect(await target.dashboards.incident(INCIDENT.id)).toEqual(await source.dashboards.incident(INCIDENT.id));
      expect(await target.analytics.addressesSince(new Date(0))).toEqual(await source.analytics.addressesSince(new Date(0)));
      const window = [T0.getTime() - 86_400_000, T0.getTime() + 86_400_000, 10_000] as const;
      expect(await target.analytics.window('api', ...window)).toEqual(await source.analytics.window('api', ...window));
      expect((await target.analytics.window('api', ...window)).length).toBe(2);
      // A new API dashboard takes a numeric id after the copied ones.
      const team2 = await target.dashboards.put(dashboardDefinition('team2', null), [], T0);
      expect(team2.kind === 'created' ? team2.record.id : 0).toBe(3);
      // New rows come after the copied ones: a new result lists first, a new channel takes the next id.
      const check = storedCheck({ id: 'api', locations: ['loc-a', 'loc-b'] });
      const [fresh] = await runSessions(target.store, check, ['loc-a'], 1, () => [{}], new Date());
      expect((await target.store.listResults({ ...query, limit: 1 })).entries[0]?.id).toBe(fresh);
      expect((await target.alerts.createChannel({ type: 'WEBHOOK', config: {}, subscriptions: [], autoSubscribe: false, sendRecovery: true, sendFailure: true, sendDegraded: false, sslExpiry: false, sslExpiryThreshold: 30 }, T0)).id).toBe(4);
    } finally {
      await source.close();
      await target.close();
    }
  });

  it('refuses a target that holds data unless --replace; a re-run with --replace gives the same target', { timeout: 120_000 }, async () => {
    const url = await postgres.createDatabase('rerun');
    expect((await migrate(['--from', `sqlite:${file}`], { DATABASE_URL: url })).code).toBe(0);
    const again = await migrate(['--from', `sqlite:${file}`], { DATABASE_URL: url });
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/already holds data \(locations, keys, .*\): copy into an empty database, or pass --replace/);
    expect(again.stderr).not.toContain(postgres.password);
    const replaced = await migrate(['--from', `sqlite:${file}`, '--replace'], { DATABASE_URL: url });
    expect(replaced.code, replaced.stderr).toBe(0);
    expect(replaced.stdout).toContain('its previous data replaced');
    expect(await counts(url)).toEqual(await sqliteCounts());
  });

  it('says what is wrong with its arguments, exit 64, and with a target it cannot reach, exit 1, never printing the password', { timeout: 120_000 }, async () => {
    expect((await migrate([])).code).toBe(64);
    expect((await migrate(['--from', file])).stderr).toContain('must be sqlite:PATH');
    expect((await migrate(['--from', `sqlite:${file}`])).stderr).toContain('migrate needs the target');
    const bad = await migrate(['--from', `sqlite:${file}`, '--to', 'mysql://u:pw-not-shown@h/db']);
    expect(bad.code).toBe(78);
    expect(bad.stderr).not.toContain('pw-not-shown');
    // A table of the file that PostgreSQL's schema lacks (a newer feature's) stops the copy before anything is written.
    const newer = path.join(dir, 'newer.db');
    copyFileSync(file, newer);
    const { DatabaseSync } = await import('node:sqlite');
    const db = new DatabaseSync(newer);
    db.exec('CREATE TABLE status_widgets (id TEXT PRIMARY KEY)');
    db.close();
    const lacking = await postgres.createDatabase('lacking');
    const refused = await migrate(['--from', `sqlite:${newer}`, '--to', lacking]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('has no table status_widgets of');
    expect((await counts(lacking)).results).toBe(0);
    const unreachable = await migrate(['--from', `sqlite:${file}`, '--to', 'postgres://u:pw-not-shown@127.0.0.1:1/db']);
    expect(unreachable.code).toBe(1);
    expect(unreachable.stderr).toMatch(/^outpost: the migration failed, nothing was committed: .*ECONNREFUSED/);
    expect(unreachable.stderr).not.toContain('pw-not-shown');
  });
});
