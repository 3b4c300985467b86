// Maintenance windows on PostgreSQL (the model is ../maintenance-windows.ts).
// Replicas applying the same checks file at once take turns (SYNC_LOCK_KEY).

import type { MaintenanceWindowDefinition } from '../../core/maintenance-window.js';
import type { MaintenanceWindowRecord, MaintenanceWindowStore } from '../maintenance-windows.js';
import type { PgDatabase, Row } from './db.js';
import { SYNC_LOCK_KEY } from './locks.js';

function recordOf(row: Row): MaintenanceWindowRecord {
  const definition = JSON.parse(String(row.definition)) as MaintenanceWindowDefinition;
  return { ...definition, created_at: String(row.created_at), updated_at: typeof row.updated_at === 'string' ? row.updated_at : null };
}

export class PgMaintenanceWindowStore implements MaintenanceWindowStore {
  constructor(private readonly db: PgDatabase) {}

  async sync(windows: readonly MaintenanceWindowDefinition[], now: Date): Promise<void> {
    const at = now.toISOString();
    await this.db.tx(async (sql) => {
      await sql.run('SELECT pg_advisory_xact_lock($1)', [SYNC_LOCK_KEY]);
      await sql.run('DELETE FROM maintenance_windows WHERE NOT (id = ANY($1::bigint[]))', [windows.map((w) => w.id)]);
      for (const window of windows) {
        const definition = JSON.stringify(window);
        await sql.run(
          `INSERT INTO maintenance_windows (id, name, definition, created_at, updated_at) VALUES ($1, $2, $3, $4, NULL)
           ON CONFLICT (id) DO UPDATE SET name = excluded.name, definition = excluded.definition, updated_at = $4
           WHERE maintenance_windows.definition <> excluded.definition`,
          [window.id, window.name, definition, at],
        );
      }
    });
  }

  async list(limit: number, page: number): Promise<MaintenanceWindowRecord[]> {
    return (await this.db.rows('SELECT * FROM maintenance_windows ORDER BY id LIMIT $1 OFFSET $2', [limit, (page - 1) * limit])).map(recordOf);
  }

  async all(): Promise<MaintenanceWindowRecord[]> {
    return (await this.db.rows('SELECT * FROM maintenance_windows ORDER BY id')).map(recordOf);
  }
}
