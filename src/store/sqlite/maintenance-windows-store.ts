// Maintenance windows on SQLite (the model is ../maintenance-windows.ts).

import type { MaintenanceWindowDefinition } from '../../core/maintenance-window.js';
import type { MaintenanceWindowRecord, MaintenanceWindowStore } from '../maintenance-windows.js';
import type { Row, SqliteAccess } from './sqlite-store.js';

function recordOf(row: Row): MaintenanceWindowRecord {
  const definition = JSON.parse(String(row.definition)) as MaintenanceWindowDefinition;
  return { ...definition, created_at: String(row.created_at), updated_at: typeof row.updated_at === 'string' ? row.updated_at : null };
}

export class SqliteMaintenanceWindowStore implements MaintenanceWindowStore {
  constructor(private readonly db: SqliteAccess) {}

  async sync(windows: readonly MaintenanceWindowDefinition[], now: Date): Promise<void> {
    const at = now.toISOString();
    this.db.tx(() => {
      const keep = new Set(windows.map((w) => w.id));
      for (const row of this.db.all('SELECT id FROM maintenance_windows')) {
        if (!keep.has(Number(row.id))) this.db.run('DELETE FROM maintenance_windows WHERE id = ?', Number(row.id));
      }
      for (const window of windows) {
        const definition = JSON.stringify(window);
        const row = this.db.get('SELECT definition FROM maintenance_windows WHERE id = ?', window.id);
        if (!row) {
          this.db.run('INSERT INTO maintenance_windows (id, name, definition, created_at, updated_at) VALUES (?, ?, ?, ?, NULL)', window.id, window.name, definition, at);
        } else if (String(row.definition) !== definition) {
          this.db.run('UPDATE maintenance_windows SET name = ?, definition = ?, updated_at = ? WHERE id = ?', window.name, definition, at, window.id);
        }
      }
    });
  }

  async list(limit: number, page: number): Promise<MaintenanceWindowRecord[]> {
    return this.db.all('SELECT * FROM maintenance_windows ORDER BY id LIMIT ? OFFSET ?', limit, (page - 1) * limit).map(recordOf);
  }

  async all(): Promise<MaintenanceWindowRecord[]> {
    return this.db.all('SELECT * FROM maintenance_windows ORDER BY id').map(recordOf);
  }
}
