// Dashboards, their keys and incidents on PostgreSQL: the same rules as
// ../sqlite/dashboards-store.ts (the model is ../dashboards.ts), statement
// for statement. Every write (file sync, PUT, DELETE) holds
// DASHBOARDS_LOCK_KEY, so replicas applying the same file or answering PUTs
// at once keep a customUrl and a dashboardId on one dashboard.

import type { DashboardDefinition, IncidentDefinition, } from '../../core/dashboard.js';
import type { DashboardKeyChange, DashboardRecord, DashboardStore, FileDashboard, IncidentRecord, PutOutcome, ResultSample, StoredDashboardKey } from '../dashboards.js';
import { json, num, type PgDatabase, type Row, type Sql, str, strOrNull } from './db.js';
import { DASHBOARDS_LOCK_KEY } from './locks.js';
import { incidentRecordOf } from '../feature-rows.js';

/** A chart reads at most this many results of one check: the newest ones (docs/dashboards.md), as on SQLite. */
export const MAX_SAMPLES = 200_000;

async function keysOf(sql: Sql, dashboard: number): Promise<StoredDashboardKey[]> {
  return (await sql.rows('SELECT * FROM dashboard_keys WHERE dashboard = $1 ORDER BY created_at, id', [dashboard])).map((row) => ({
    id: str(row, 'id'),
    hash: str(row, 'hash'),
    maskedKey: str(row, 'masked_key'),
    created_at: str(row, 'created_at'),
    updated_at: strOrNull(row, 'updated_at'),
  }));
}

async function recordOf(sql: Sql, row: Row): Promise<DashboardRecord> {
  const id = num(row, 'id');
  return {
    id,
    definition: json<DashboardDefinition>(row, 'definition'),
    source: str(row, 'source') === 'file' ? 'file' : 'api',
    keys: await keysOf(sql, id),
    created_at: str(row, 'created_at'),
    updated_at: strOrNull(row, 'updated_at'),
  };
}

/** Writes the dashboard row (a new one, or the one with this dashboardId); returns its numeric id. */
async function write(sql: Sql, definition: DashboardDefinition, source: 'file' | 'api', at: string): Promise<{ id: number; created: boolean }> {
  const text = JSON.stringify(definition);
  const row = await sql.row('SELECT id, definition, source FROM dashboards WHERE dashboard_id = $1', [definition.dashboardId]);
  if (!row) {
    const inserted = await sql.row('INSERT INTO dashboards (dashboard_id, custom_url, source, definition, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, NULL) RETURNING id', [
      definition.dashboardId,
      definition.customUrl,
      source,
      text,
      at,
    ]);
    return { id: num(inserted as Row, 'id'), created: true };
  }
  const id = num(row, 'id');
  if (str(row, 'definition') !== text || str(row, 'source') !== source) {
    await sql.run('UPDATE dashboards SET custom_url = $1, source = $2, definition = $3, updated_at = $4 WHERE id = $5', [definition.customUrl, source, text, at, id]);
  }
  return { id, created: false };
}

/** Makes `keys` the dashboard's keys: a key whose id and digest stay keeps its times. */
async function writeKeys(sql: Sql, dashboard: number, keys: readonly DashboardKeyChange[], at: string): Promise<void> {
  const stored = new Map((await keysOf(sql, dashboard)).map((k) => [k.id, k]));
  const wanted = new Set(keys.map((k) => k.id));
  for (const id of stored.keys()) if (!wanted.has(id)) await sql.run('DELETE FROM dashboard_keys WHERE dashboard = $1 AND id = $2', [dashboard, id]);
  for (const key of keys) {
    if ('keep' in key) continue;
    const old = stored.get(key.id);
    if (!old) {
      await sql.run('INSERT INTO dashboard_keys (dashboard, id, hash, masked_key, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, NULL)', [dashboard, key.id, key.hash, key.maskedKey, at]);
    } else if (old.hash !== key.hash) {
      await sql.run('UPDATE dashboard_keys SET hash = $1, masked_key = $2, updated_at = $3 WHERE dashboard = $4 AND id = $5', [key.hash, key.maskedKey, at, dashboard, key.id]);
    }
  }
}

async function syncIncidents(sql: Sql, incidents: readonly IncidentDefinition[], dashboards: ReadonlyMap<string, number>, at: string): Promise<void> {
  await sql.run('DELETE FROM incidents WHERE NOT (id = ANY($1::text[]))', [incidents.map((i) => i.id)]);
  for (const incident of incidents) {
    const dashboard = dashboards.get(incident.dashboard);
    if (dashboard === undefined) continue;
    const row = await sql.row('SELECT * FROM incidents WHERE id = $1', [incident.id]);
    if (!row) {
      await sql.run('INSERT INTO incidents (id, dashboard, name, impact, started_at, stopped_at, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, NULL)', [
        incident.id,
        dashboard,
        incident.name,
        incident.impact,
        incident.startedAt,
        incident.stoppedAt,
        at,
      ]);
    } else if (
      num(row, 'dashboard') !== dashboard ||
      str(row, 'name') !== incident.name ||
      str(row, 'impact') !== incident.impact ||
      strOrNull(row, 'started_at') !== incident.startedAt ||
      strOrNull(row, 'stopped_at') !== incident.stoppedAt
    ) {
      await sql.run('UPDATE incidents SET dashboard = $1, name = $2, impact = $3, started_at = $4, stopped_at = $5, updated_at = $6 WHERE id = $7', [
        dashboard,
        incident.name,
        incident.impact,
        incident.startedAt,
        incident.stoppedAt,
        at,
        incident.id,
      ]);
    }
    await sql.run('DELETE FROM incident_updates WHERE incident_id = $1 AND NOT (id = ANY($2::text[]))', [incident.id, incident.incidentUpdates.map((u) => u.id)]);
    for (const update of incident.incidentUpdates) {
      const old = await sql.row('SELECT status, description, created_at FROM incident_updates WHERE incident_id = $1 AND id = $2', [incident.id, update.id]);
      if (!old) {
        await sql.run('INSERT INTO incident_updates (incident_id, id, status, description, created_at, created_ms, updated_at) VALUES ($1, $2, $3, $4, $5, $6, NULL)', [
          incident.id,
          update.id,
          update.status,
          update.description,
          update.created_at,
          Date.parse(update.created_at),
        ]);
      } else if (str(old, 'status') !== update.status || str(old, 'description') !== update.description || str(old, 'created_at') !== update.created_at) {
        await sql.run('UPDATE incident_updates SET status = $1, description = $2, created_at = $3, created_ms = $4, updated_at = $5 WHERE incident_id = $6 AND id = $7', [
          update.status,
          update.description,
          update.created_at,
          Date.parse(update.created_at),
          at,
          incident.id,
          update.id,
        ]);
      }
    }
  }
}

async function incidentOf(sql: Sql, row: Row): Promise<IncidentRecord> {
  return incidentRecordOf(row, await sql.rows('SELECT * FROM incident_updates WHERE incident_id = $1 ORDER BY created_ms DESC, id DESC', [str(row, 'id')]));
}

export class PgDashboardStore implements DashboardStore {
  constructor(private readonly db: PgDatabase) {}

  async sync(dashboards: readonly FileDashboard[], incidents: readonly IncidentDefinition[], now: Date): Promise<void> {
    const at = now.toISOString();
    await this.db.tx(async (sql) => {
      await sql.run('SELECT pg_advisory_xact_lock($1)', [DASHBOARDS_LOCK_KEY]);
      const keep = new Set(dashboards.map((d) => d.definition.dashboardId));
      await sql.run("DELETE FROM dashboards WHERE source = 'file' AND NOT (dashboard_id = ANY($1::text[]))", [[...keep]]);
      // The file wins a customUrl: an API dashboard that has it loses it.
      const urls = new Set(dashboards.map((d) => d.definition.customUrl).filter((u): u is string => u !== null));
      for (const row of await sql.rows("SELECT id, dashboard_id, custom_url, definition FROM dashboards WHERE source = 'api' AND custom_url IS NOT NULL")) {
        if (!urls.has(str(row, 'custom_url')) || keep.has(str(row, 'dashboard_id'))) continue;
        const definition = {
          ...json<DashboardDefinition>(row, 'definition'),
          customUrl: null,
        };
        await sql.run('UPDATE dashboards SET custom_url = NULL, definition = $1, updated_at = $2 WHERE id = $3', [JSON.stringify(definition), at, num(row, 'id')]);
      }
      const ids = new Map<string, number>();
      for (const dashboard of dashboards) {
        const { id } = await write(sql, dashboard.definition, 'file', at);
        await writeKeys(sql, id, dashboard.keys, at);
        ids.set(dashboard.definition.dashboardId, id);
      }
      await syncIncidents(sql, incidents, ids, at);
    });
  }

  async put(definition: DashboardDefinition, keys: readonly DashboardKeyChange[], now: Date): Promise<PutOutcome> {
    const at = now.toISOString();
    return this.db.tx(async (sql): Promise<PutOutcome> => {
      await sql.run('SELECT pg_advisory_xact_lock($1)', [DASHBOARDS_LOCK_KEY]);
      const existing = await sql.row('SELECT source FROM dashboards WHERE dashboard_id = $1', [definition.dashboardId]);
      if (existing && str(existing, 'source') === 'file') {
        return {
          kind: 'conflict',
          message: `dashboard ${definition.dashboardId} is defined in the checks file: change it there`,
        };
      }
      if (definition.customUrl !== null) {
        const other = await sql.row('SELECT dashboard_id FROM dashboards WHERE custom_url = $1 AND dashboard_id <> $2', [definition.customUrl, definition.dashboardId]);
        if (other)
          return {
            kind: 'conflict',
            message: `customUrl ${definition.customUrl} is used by dashboard ${str(other, 'dashboard_id')}`,
          };
      }
      const { id, created } = await write(sql, definition, 'api', at);
      await writeKeys(sql, id, keys, at);
      return {
        kind: created ? 'created' : 'updated',
        record: await recordOf(sql, (await sql.row('SELECT * FROM dashboards WHERE id = $1', [id])) as Row),
      };
    });
  }

  async dashboard(dashboardId: string): Promise<DashboardRecord | undefined> {
    const row = await this.db.row('SELECT * FROM dashboards WHERE dashboard_id = $1', [dashboardId]);
    return row ? recordOf(this.db, row) : undefined;
  }

  async dashboardByRef(ref: string): Promise<DashboardRecord | undefined> {
    // A file dashboard first: the file wins a customUrl (sync keeps them unique, this keeps the rule if not).
    const row =
      (await this.db.row("SELECT * FROM dashboards WHERE custom_url = $1 ORDER BY CASE source WHEN 'file' THEN 0 ELSE 1 END, id LIMIT 1", [ref])) ??
      (await this.db.row('SELECT * FROM dashboards WHERE dashboard_id = $1', [ref])) ??
      (/^[1-9][0-9]{0,14}$/.test(ref) ? await this.db.row('SELECT * FROM dashboards WHERE id = $1', [Number(ref)]) : undefined);
    return row ? recordOf(this.db, row) : undefined;
  }

  async deleteDashboard(dashboardId: string): Promise<true | false | 'file'> {
    return this.db.tx(async (sql) => {
      await sql.run('SELECT pg_advisory_xact_lock($1)', [DASHBOARDS_LOCK_KEY]);
      const row = await sql.row('SELECT id, source FROM dashboards WHERE dashboard_id = $1', [dashboardId]);
      if (!row) return false;
      if (str(row, 'source') === 'file') return 'file';
      await sql.run('DELETE FROM dashboards WHERE id = $1', [num(row, 'id')]);
      return true;
    });
  }

  async incident(id: string): Promise<IncidentRecord | undefined> {
    const row = await this.db.row('SELECT * FROM incidents WHERE id = $1', [id]);
    return row ? incidentOf(this.db, row) : undefined;
  }

  async incidentsOf(dashboard: number): Promise<IncidentRecord[]> {
    const rows = await this.db.rows('SELECT * FROM incidents WHERE dashboard = $1 ORDER BY id', [dashboard]);
    const incidents: IncidentRecord[] = [];
    for (const row of rows) incidents.push(await incidentOf(this.db, row));
    return incidents.sort((a, b) => (b.startedAt ?? b.incidentUpdates.at(-1)?.created_at ?? '').localeCompare(a.startedAt ?? a.incidentUpdates.at(-1)?.created_at ?? ''));
  }

  async samples(checkId: string, from: Date, to: Date): Promise<ResultSample[]> {
    // The response time is the analytics routes' own (result_metrics), so that the 24 h P95/P99 is their
    // last24Hours figure however odd the stored value (negative, fractional, a string, missing).
    const rows = await this.db.rows(
      `SELECT r.started_at, r.location, r.has_failures, m.response_time::float8 AS response_time
       FROM results r LEFT JOIN result_metrics m ON m.check_id = r.check_id AND m.location = r.location AND m.started_at = r.started_at AND m.seq = r.seq
       WHERE r.check_id = $1 AND r.result_type = 'FINAL' AND r.started_at >= $2 AND r.started_at < $3
       ORDER BY r.started_at DESC LIMIT $4`,
      [checkId, from.getTime(), to.getTime(), MAX_SAMPLES],
    );
    const samples: ResultSample[] = new Array(rows.length);
    for (let i = 0; i < rows.length; i++) {
      const row = rows[rows.length - 1 - i] as Row;
      const responseTime = row.response_time;
      samples[i] = {
        at: num(row, 'started_at'),
        responseTime: typeof responseTime === 'number' && responseTime >= 0 ? responseTime : null,
        up: num(row, 'has_failures') === 0,
        location: str(row, 'location'),
      };
    }
    return samples;
  }

  async availability(checkId: string, to: Date, windowsMs: readonly number[]): Promise<Array<{ total: number; up: number }>> {
    if (windowsMs.length === 0) return [];
    const end = to.getTime();
    // One pass over the index (check, type, start, has_failures): no result body is read.
    const columns = windowsMs.map((_, i) => `count(*) FILTER (WHERE started_at >= $${i + 4})::int AS total_${i}, count(*) FILTER (WHERE started_at >= $${i + 4} AND has_failures = 0)::int AS up_${i}`);
    const row = (await this.db.row(`SELECT ${columns.join(', ')} FROM results WHERE check_id = $1 AND result_type = 'FINAL' AND started_at >= $2 AND started_at < $3`, [
      checkId,
      end - Math.max(...windowsMs),
      end,
      ...windowsMs.flatMap((ms) => [end - ms]),
    ])) as Row;
    return windowsMs.map((_, i) => ({
      total: Number(row[`total_${i}`] ?? 0),
      up: Number(row[`up_${i}`] ?? 0),
    }));
  }
}
