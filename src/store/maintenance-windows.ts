// Maintenance windows in the store: the checks file's, synced at start
// (sqlite/maintenance-windows-store.ts), with the service's record times.
// Whether one is in effect is src/server/maintenance.ts.

import type { MaintenanceWindowDefinition } from '../core/maintenance-window.js';

/** The service's maintenance window record. */
export interface MaintenanceWindowRecord extends MaintenanceWindowDefinition {
  created_at: string;
  updated_at: string | null;
}

export interface MaintenanceWindowStore {
  /** Makes the file's windows the stored ones: new ones created, changed ones updated (updated_at), missing ones deleted. */
  sync(windows: readonly MaintenanceWindowDefinition[], now: Date): Promise<void>;
  /** A page of windows by id; `page` counts from 1. */
  list(limit: number, page: number): Promise<MaintenanceWindowRecord[]>;
  all(): Promise<MaintenanceWindowRecord[]>;
}
