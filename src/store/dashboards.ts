// Status dashboards and incidents in the store (docs/dashboards.md): the
// checks file's (synced at start and at each reload) and those made with
// PUT /v1/dashboards/{dashboardId}; a private dashboard's access keys as
// their SHA-256 only. Also the one read of results the pages need: a check's
// FINAL results in a time window, reduced to what a chart and an uptime
// figure use. Implemented in sqlite/dashboards-store.ts.

import type { DashboardDefinition, IncidentDefinition, IncidentImpact, IncidentStatus } from '../core/dashboard.js';

/** A key as stored: no raw value, only its digest and masked form. */
export interface StoredDashboardKey {
  id: string;
  hash: string;
  maskedKey: string;
  created_at: string;
  updated_at: string | null;
}

/** A key to store: `hash` and `maskedKey` of a raw key given now, or `keep` a stored key by its id. */
export type DashboardKeyChange = { id: string; keep: true } | { id: string; hash: string; maskedKey: string };

export interface DashboardRecord {
  /** Numeric id (incidents name their dashboard by it). */
  id: number;
  definition: DashboardDefinition;
  /** 'file': from the checks file (the API cannot change it); 'api': PUT. */
  source: 'file' | 'api';
  keys: StoredDashboardKey[];
  created_at: string;
  updated_at: string | null;
}

export interface IncidentUpdateRecord {
  id: string;
  status: IncidentStatus;
  description: string;
  incidentId: string;
  created_at: string;
  updated_at: string | null;
}

export interface IncidentRecord {
  id: string;
  name: string;
  impact: IncidentImpact;
  /** The numeric id of its dashboard. */
  dashboardId: number;
  startedAt: string | null;
  stoppedAt: string | null;
  created_at: string;
  updated_at: string | null;
  /** Newest first. */
  incidentUpdates: IncidentUpdateRecord[];
}

export interface FileDashboard {
  definition: DashboardDefinition;
  /** Every key with its digest: the file holds the raw keys. */
  keys: Array<{ id: string; hash: string; maskedKey: string }>;
}

/** One FINAL result, as a chart and an uptime figure see it. */
export interface ResultSample {
  /** startedAt, ms since the epoch. */
  at: number;
  /**
   * Whole ms as the analytics routes count it (result_metrics.response_time, filled by the triggers of
   * src/store/sqlite/analytics-schema.ts and src/store/postgres/analytics-schema.ts: rounded, at least 0);
   * null when the result has no numeric responseTime, which leaves it out of the chart and the P95/P99.
   */
  responseTime: number | null;
  /** Not failed (hasFailures false; an error is always a failure in Outpost's results): counts as up. */
  up: boolean;
  location: string;
}

export type PutOutcome = { kind: 'created' | 'updated'; record: DashboardRecord } | { kind: 'conflict'; message: string };

export interface DashboardStore {
  /**
   * Makes the file's dashboards and incidents the stored file ones: new ones
   * created, changed ones updated, missing ones deleted (API dashboards
   * stay). A file dashboard takes over an API one with the same dashboardId
   * (keeping its numeric id); an API dashboard whose customUrl a file
   * dashboard now uses loses that customUrl. Incidents are the file's only.
   */
  sync(dashboards: readonly FileDashboard[], incidents: readonly IncidentDefinition[], now: Date): Promise<void>;
  /** Creates or replaces an API dashboard; a file dashboard's id or a customUrl another dashboard uses is a conflict. */
  put(definition: DashboardDefinition, keys: readonly DashboardKeyChange[], now: Date): Promise<PutOutcome>;
  /** By dashboardId. */
  dashboard(dashboardId: string): Promise<DashboardRecord | undefined>;
  /** What /dashboards/{ref} names: a customUrl first, then a dashboardId, then a numeric id. */
  dashboardByRef(ref: string): Promise<DashboardRecord | undefined>;
  /** API dashboards only; 'file' when the checks file owns it, false when unknown. */
  deleteDashboard(dashboardId: string): Promise<true | false | 'file'>;
  incident(id: string): Promise<IncidentRecord | undefined>;
  /** The incidents of a dashboard (numeric id), newest started first. */
  incidentsOf(dashboard: number): Promise<IncidentRecord[]>;
  /** The FINAL results of a check started in [from, to), oldest first. */
  samples(checkId: string, from: Date, to: Date): Promise<ResultSample[]>;
  /** For each window (ms before `to`): the FINAL results started in [to − window, to), and how many of them did not fail. */
  availability(checkId: string, to: Date, windowsMs: readonly number[]): Promise<Array<{ total: number; up: number }>>;
}
