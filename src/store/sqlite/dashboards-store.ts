// Dashboards, their keys and incidents on SQLite (the model is
// ../dashboards.ts). The SQL is plain (no upsert syntax, no JSON function):
// samples() takes response times from the analytics table result_metrics
// (analytics-schema.ts); availability() reads only indexed columns.

import type { DashboardDefinition, IncidentDefinition, } from '../../core/dashboard.js';
import type {
  DashboardKeyChange,
  DashboardRecord,
  DashboardStore,
  FileDashboard,
  IncidentRecord,
  PutOutcome,
  ResultSample,
  StoredDashboardKey,
} from '../dashboards.js';
import { json, num, type Row, str, strOrNull } from '../rows.js';
import type { SqliteAccess } from './sqlite-store.js';
import { incidentRecordOf } from '../feature-rows.js';

/** A chart reads at most this many results of one check: the newest ones (docs/dashboards.md). */
export const MAX_SAMPLES = 200_000;

export class SqliteDashboardStore implements DashboardStore {
  constructor(private readonly db: SqliteAccess) {}

  private keysOf(dashboard: number): StoredDashboardKey[] {
    return this.db.all('SELECT * FROM dashboard_keys WHERE dashboard = ? ORDER BY created_at, id', dashboard).map((row) => ({
      id: str(row, 'id'),
      hash: str(row, 'hash'),
      maskedKey: str(row, 'masked_key'),
      created_at: str(row, 'created_at'),
      updated_at: strOrNull(row, 'updated_at'),
    }));
  }

  private recordOf(row: Row): DashboardRecord {
    const id = num(row, 'id');
    return {
      id,
      definition: json<DashboardDefinition>(row, 'definition'),
      source: str(row, 'source') === 'file' ? 'file' : 'api',
      keys: this.keysOf(id),
      created_at: str(row, 'created_at'),
      updated_at: strOrNull(row, 'updated_at'),
    };
  }

  /** Writes the dashboard row (a new one, or the one with this dashboardId); returns its numeric id. */
  private write(definition: DashboardDefinition, source: 'file' | 'api', at: string): { id: number; created: boolean } {
    const text = JSON.stringify(definition);
    const row = this.db.get('SELECT id, definition, source FROM dashboards WHERE dashboard_id = ?', definition.dashboardId);
    if (!row) {
      this.db.run(
        'INSERT INTO dashboards (dashboard_id, custom_url, source, definition, created_at, updated_at) VALUES (?, ?, ?, ?, ?, NULL)',
        definition.dashboardId,
        definition.customUrl,
        source,
        text,
        at,
      );
      return { id: num(this.db.get('SELECT id FROM dashboards WHERE dashboard_id = ?', definition.dashboardId) as Row, 'id'), created: true };
    }
    const id = num(row, 'id');
    if (str(row, 'definition') !== text || str(row, 'source') !== source) {
      this.db.run('UPDATE dashboards SET custom_url = ?, source = ?, definition = ?, updated_at = ? WHERE id = ?', definition.customUrl, source, text, at, id);
    }
    return { id, created: false };
  }

  /** Makes `keys` the dashboard's keys: a key whose id and digest stay keeps its times. */
  private writeKeys(dashboard: number, keys: readonly DashboardKeyChange[], at: string): void {
    const stored = new Map(this.keysOf(dashboard).map((k) => [k.id, k]));
    const wanted = new Set(keys.map((k) => k.id));
    for (const id of stored.keys()) if (!wanted.has(id)) this.db.run('DELETE FROM dashboard_keys WHERE dashboard = ? AND id = ?', dashboard, id);
    for (const key of keys) {
      if ('keep' in key) continue;
      const old = stored.get(key.id);
      if (!old) {
        this.db.run('INSERT INTO dashboard_keys (dashboard, id, hash, masked_key, created_at, updated_at) VALUES (?, ?, ?, ?, ?, NULL)', dashboard, key.id, key.hash, key.maskedKey, at);
      } else if (old.hash !== key.hash) {
        this.db.run('UPDATE dashboard_keys SET hash = ?, masked_key = ?, updated_at = ? WHERE dashboard = ? AND id = ?', key.hash, key.maskedKey, at, dashboard, key.id);
      }
    }
  }

  async sync(dashboards: readonly FileDashboard[], incidents: readonly IncidentDefinition[], now: Date): Promise<void> {
    const at = now.toISOString();
    this.db.tx(() => {
      const keep = new Set(dashboards.map((d) => d.definition.dashboardId));
      for (const row of this.db.all("SELECT id, dashboard_id FROM dashboards WHERE source = 'file'")) {
        if (!keep.has(str(row, 'dashboard_id'))) this.db.run('DELETE FROM dashboards WHERE id = ?', num(row, 'id'));
      }
      // The file wins a customUrl: an API dashboard that has it loses it.
      const urls = new Set(dashboards.map((d) => d.definition.customUrl).filter((u): u is string => u !== null));
      for (const row of this.db.all("SELECT id, dashboard_id, custom_url, definition FROM dashboards WHERE source = 'api' AND custom_url IS NOT NULL")) {
        if (!urls.has(str(row, 'custom_url')) || keep.has(str(row, 'dashboard_id'))) continue;
        const definition = { ...json<DashboardDefinition>(row, 'definition'), customUrl: null };
        this.db.run('UPDATE dashboards SET custom_url = NULL, definition = ?, updated_at = ? WHERE id = ?', JSON.stringify(definition), at, num(row, 'id'));
      }
      const ids = new Map<string, number>();
      for (const dashboard of dashboards) {
        const { id } = this.write(dashboard.definition, 'file', at);
        this.writeKeys(id, dashboard.keys, at);
        ids.set(dashboard.definition.dashboardId, id);
      }
      this.syncIncidents(incidents, ids, at);
    });
  }

  private syncIncidents(incidents: readonly IncidentDefinition[], dashboards: ReadonlyMap<string, number>, at: string): void {
    const keep = new Set(incidents.map((i) => i.id));
    for (const row of this.db.all('SELECT id FROM incidents')) if (!keep.has(str(row, 'id'))) this.db.run('DELETE FROM incidents WHERE id = ?', str(row, 'id'));
    for (const incident of incidents) {
      const dashboard = dashboards.get(incident.dashboard);
      if (dashboard === undefined) continue;
      const row = this.db.get('SELECT * FROM incidents WHERE id = ?', incident.id);
      if (!row) {
        this.db.run(
          'INSERT INTO incidents (id, dashboard, name, impact, started_at, stopped_at, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, NULL)',
          incident.id,
          dashboard,
          incident.name,
          incident.impact,
          incident.startedAt,
          incident.stoppedAt,
          at,
        );
      } else if (
        num(row, 'dashboard') !== dashboard ||
        str(row, 'name') !== incident.name ||
        str(row, 'impact') !== incident.impact ||
        strOrNull(row, 'started_at') !== incident.startedAt ||
        strOrNull(row, 'stopped_at') !== incident.stoppedAt
      ) {
        this.db.run(
          'UPDATE incidents SET dashboard = ?, name = ?, impact = ?, started_at = ?, stopped_at = ?, updated_at = ? WHERE id = ?',
          dashboard,
          incident.name,
          incident.impact,
          incident.startedAt,
          incident.stoppedAt,
          at,
          incident.id,
        );
      }
      const updates = new Set(incident.incidentUpdates.map((u) => u.id));
      for (const old of this.db.all('SELECT id FROM incident_updates WHERE incident_id = ?', incident.id)) {
        if (!updates.has(str(old, 'id'))) this.db.run('DELETE FROM incident_updates WHERE incident_id = ? AND id = ?', incident.id, str(old, 'id'));
      }
      for (const update of incident.incidentUpdates) {
        const old = this.db.get('SELECT status, description, created_at FROM incident_updates WHERE incident_id = ? AND id = ?', incident.id, update.id);
        if (!old) {
          this.db.run(
            'INSERT INTO incident_updates (incident_id, id, status, description, created_at, created_ms, updated_at) VALUES (?, ?, ?, ?, ?, ?, NULL)',
            incident.id,
            update.id,
            update.status,
            update.description,
            update.created_at,
            Date.parse(update.created_at),
          );
        } else if (str(old, 'status') !== update.status || str(old, 'description') !== update.description || str(old, 'created_at') !== update.created_at) {
          this.db.run(
            'UPDATE incident_updates SET status = ?, description = ?, created_at = ?, created_ms = ?, updated_at = ? WHERE incident_id = ? AND id = ?',
            update.status,
            update.description,
            update.created_at,
            Date.parse(update.created_at),
            at,
            incident.id,
            update.id,
          );
        }
      }
    }
  }

  async put(definition: DashboardDefinition, keys: readonly DashboardKeyChange[], now: Date): Promise<PutOutcome> {
    const at = now.toISOString();
    return this.db.tx((): PutOutcome => {
      const existing = this.db.get('SELECT source FROM dashboards WHERE dashboard_id = ?', definition.dashboardId);
      if (existing && str(existing, 'source') === 'file') {
        return { kind: 'conflict', message: `dashboard ${definition.dashboardId} is defined in the checks file: change it there` };
      }
      if (definition.customUrl !== null) {
        const other = this.db.get('SELECT dashboard_id FROM dashboards WHERE custom_url = ? AND dashboard_id <> ?', definition.customUrl, definition.dashboardId);
        if (other) return { kind: 'conflict', message: `customUrl ${definition.customUrl} is used by dashboard ${str(other, 'dashboard_id')}` };
      }
      const { id, created } = this.write(definition, 'api', at);
      this.writeKeys(id, keys, at);
      return { kind: created ? 'created' : 'updated', record: this.recordOf(this.db.get('SELECT * FROM dashboards WHERE id = ?', id) as Row) };
    });
  }

  async dashboard(dashboardId: string): Promise<DashboardRecord | undefined> {
    const row = this.db.get('SELECT * FROM dashboards WHERE dashboard_id = ?', dashboardId);
    return row ? this.recordOf(row) : undefined;
  }

  async dashboardByRef(ref: string): Promise<DashboardRecord | undefined> {
    // A file dashboard first: the file wins a customUrl (sync keeps them unique, this keeps the rule if not).
    const row =
      this.db.get("SELECT * FROM dashboards WHERE custom_url = ? ORDER BY CASE source WHEN 'file' THEN 0 ELSE 1 END, id LIMIT 1", ref) ??
      this.db.get('SELECT * FROM dashboards WHERE dashboard_id = ?', ref) ??
      (/^[1-9][0-9]{0,14}$/.test(ref) ? this.db.get('SELECT * FROM dashboards WHERE id = ?', Number(ref)) : undefined);
    return row ? this.recordOf(row) : undefined;
  }

  async deleteDashboard(dashboardId: string): Promise<true | false | 'file'> {
    return this.db.tx(() => {
      const row = this.db.get('SELECT id, source FROM dashboards WHERE dashboard_id = ?', dashboardId);
      if (!row) return false;
      if (str(row, 'source') === 'file') return 'file';
      this.db.run('DELETE FROM dashboards WHERE id = ?', num(row, 'id'));
      return true;
    });
  }

  private incidentOf(row: Row): IncidentRecord {
    return incidentRecordOf(row, this.db.all('SELECT * FROM incident_updates WHERE incident_id = ? ORDER BY created_ms DESC, id DESC', str(row, 'id')));
  }

  async incident(id: string): Promise<IncidentRecord | undefined> {
    const row = this.db.get('SELECT * FROM incidents WHERE id = ?', id);
    return row ? this.incidentOf(row) : undefined;
  }

  async incidentsOf(dashboard: number): Promise<IncidentRecord[]> {
    return this.db
      .all('SELECT * FROM incidents WHERE dashboard = ? ORDER BY id', dashboard)
      .map((row) => this.incidentOf(row))
      .sort((a, b) => (b.startedAt ?? b.incidentUpdates.at(-1)?.created_at ?? '').localeCompare(a.startedAt ?? a.incidentUpdates.at(-1)?.created_at ?? ''));
  }

  async samples(checkId: string, from: Date, to: Date): Promise<ResultSample[]> {
    // The response time is the analytics routes' own (result_metrics), so that the 24 h P95/P99 is their
    // last24Hours figure however odd the stored value (negative, fractional, a string, missing).
    const rows = this.db.all(
      `SELECT r.started_at, r.location, r.has_failures, m.response_time
       FROM results r LEFT JOIN result_metrics m ON m.check_id = r.check_id AND m.location = r.location AND m.started_at = r.started_at AND m.seq = r.seq
       WHERE r.check_id = ? AND r.result_type = 'FINAL' AND r.started_at >= ? AND r.started_at < ?
       ORDER BY r.started_at DESC LIMIT ?`,
      checkId,
      from.getTime(),
      to.getTime(),
      MAX_SAMPLES,
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
    const columns = windowsMs.map(
      (_, i) => `SUM(CASE WHEN started_at >= ? THEN 1 ELSE 0 END) AS total_${i}, SUM(CASE WHEN started_at >= ? AND has_failures = 0 THEN 1 ELSE 0 END) AS up_${i}`,
    );
    const starts = windowsMs.flatMap((ms) => [end - ms, end - ms]);
    const row = this.db.get(
      `SELECT ${columns.join(', ')} FROM results WHERE check_id = ? AND result_type = 'FINAL' AND started_at >= ? AND started_at < ?`,
      ...starts,
      checkId,
      end - Math.max(...windowsMs),
      end,
    ) as Row;
    return windowsMs.map((_, i) => ({ total: Number(row[`total_${i}`] ?? 0), up: Number(row[`up_${i}`] ?? 0) }));
  }
}
