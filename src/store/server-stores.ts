// Which database the server keeps its state in (docs/postgres.md): the
// SQLite file in STATE_DIR, one server; or PostgreSQL (DATABASE_URL), any
// number of replicas. Both give the same stores; the rest of the server
// never asks which one it has, only whether the store is shared (several
// replicas: the leader lease decides who schedules).

import type { AlertStore } from './alerts.js';
import type { AnalyticsStore } from './analytics.js';
import type { DashboardStore } from './dashboards.js';
import type { ErrorGroupStore } from './error-groups.js';
import type { HeartbeatStore } from './heartbeats.js';
import { type LeaderLease, SOLE_LEASE } from './leader-lease.js';
import type { MaintenanceWindowStore } from './maintenance-windows.js';
import type { Store } from './store.js';
import type { WriteHealth } from './write-health.js';

export type DatabaseSetting =
  | { kind: 'sqlite'; file: string }
  | {
      kind: 'postgres';
      /** DATABASE_URL as given, credentials included: handed to the driver and nowhere else. */
      url: string;
      poolSize: number;
      /** What logs and /health show: the URL without its password. */
      shown: DatabaseDescription;
    };

/** The database as the server shows it: never a password. */
export interface DatabaseDescription {
  kind: 'sqlite' | 'postgres';
  /** sqlite: the file; postgres: host:port/database. */
  location: string;
  user?: string;
  sslmode?: string;
}

export interface ServerStores {
  store: Store;
  alerts: AlertStore;
  heartbeats: HeartbeatStore;
  windows: MaintenanceWindowStore;
  errorGroups: ErrorGroupStore;
  analytics: AnalyticsStore;
  dashboards: DashboardStore;
  lease: LeaderLease;
  /** True when other servers may use the same database at the same time. */
  shared: boolean;
  description: DatabaseDescription;
  /** Whether the database answers now (readiness). */
  ping(): Promise<boolean>;
  /** Whether writes work, as the last failed transaction or probe said (readiness). */
  writes: WriteHealth;
  /** One small write; its outcome updates `writes`. */
  probeWrite(): Promise<boolean>;
  /**
   * Shared stores: calls `listener` with the location of every job another
   * server queued or put back, so this one's waiting claims look again;
   * resolves once listening. Undefined for a store only this server uses.
   */
  listenForJobs?(listener: (location: string) => void, onProblem: (error: unknown) => void): Promise<void>;
  close(): Promise<void>;
}

/** Opens the database and brings its schema up to date. */
export async function openServerStores(setting: DatabaseSetting): Promise<ServerStores> {
  if (setting.kind === 'postgres') {
    const { PgStore } = await import('./postgres/pg-store.js');
    const { PgAlertStore } = await import('./postgres/alerts-store.js');
    const { PgHeartbeatStore } = await import('./postgres/heartbeats-store.js');
    const { PgMaintenanceWindowStore } = await import('./postgres/maintenance-windows-store.js');
    const { PgLeaderLease } = await import('./postgres/leader-lease.js');
    const { PgAnalyticsStore } = await import('./postgres/analytics-store.js');
    const { PgDashboardStore } = await import('./postgres/dashboards-store.js');
    const where = `${setting.shown.location}${setting.shown.user ? ` as ${setting.shown.user}` : ''}`;
    const store = await PgStore.open({ url: setting.url, poolSize: setting.poolSize, applicationName: 'outpost server' }, where);
    let notifications: { close(): Promise<void> } | undefined;
    return {
      store,
      alerts: new PgAlertStore(store.db),
      heartbeats: new PgHeartbeatStore(store.db),
      windows: new PgMaintenanceWindowStore(store.db),
      errorGroups: store.errorGroups,
      analytics: new PgAnalyticsStore(store.db),
      dashboards: new PgDashboardStore(store.db),
      lease: new PgLeaderLease(store.db),
      shared: true,
      description: setting.shown,
      ping: () => store.db.ping(),
      writes: store.db.writes,
      probeWrite: () => store.db.probeWrite(),
      async listenForJobs(listener, onProblem) {
        const { JobNotifications } = await import('./postgres/job-notifications.js');
        const listening = new JobNotifications(setting.url, listener, onProblem);
        notifications = listening;
        await listening.start();
      },
      async close() {
        await notifications?.close();
        await store.close();
      },
    };
  }
  const { SqliteStore } = await import('./sqlite/sqlite-store.js');
  const { SqliteAlertStore } = await import('./sqlite/alerts-store.js');
  const { SqliteHeartbeatStore } = await import('./sqlite/heartbeats-store.js');
  const { SqliteMaintenanceWindowStore } = await import('./sqlite/maintenance-windows-store.js');
  const { SqliteAnalyticsStore } = await import('./sqlite/analytics-store.js');
  const { SqliteDashboardStore } = await import('./sqlite/dashboards-store.js');
  const store = await SqliteStore.open(setting.file);
  return {
    store,
    alerts: new SqliteAlertStore(store.access),
    heartbeats: new SqliteHeartbeatStore(store.access),
    windows: new SqliteMaintenanceWindowStore(store.access),
    errorGroups: store.errorGroups,
    analytics: new SqliteAnalyticsStore(store.access),
    dashboards: new SqliteDashboardStore(store.access),
    lease: SOLE_LEASE,
    shared: false,
    description: { kind: 'sqlite', location: setting.file },
    // A file that was opened keeps answering; a broken disk shows in the requests that fail.
    ping: async () => true,
    writes: store.writes,
    probeWrite: () => store.probeWrite(),
    close: () => store.close(),
  };
}
