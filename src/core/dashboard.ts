// Status dashboards and their incidents as the checks file (`dashboards`,
// `incidents`) and PUT /v1/dashboards/{dashboardId} declare them: the
// service's dashboard field set with its defaults, and the incident record.
// docs/dashboards.md describes the model; src/checks/dashboard-fields.ts
// validates both; src/server/dashboard-page.ts renders them.

export const DASHBOARD_WIDTHS = ['FULL', '960PX'] as const;
export type DashboardWidth = (typeof DASHBOARD_WIDTHS)[number];
export const REFRESH_RATES = [60, 300, 600] as const;
export const PAGINATION_RATES = [30, 60, 300] as const;
export const MIN_CHECKS_PER_PAGE = 1;
export const MAX_CHECKS_PER_PAGE = 20;
export const DEFAULT_CHECKS_PER_PAGE = 15;

/** An access key of a private dashboard as given: the raw key, or only the id of a key already stored (kept as it is). */
export interface DashboardKeyInput {
  id: string;
  rawKey?: string;
}

/** Every field of the service's dashboard record that is not made by the server, defaults applied. */
export interface DashboardDefinition {
  dashboardId: string;
  customUrl: string | null;
  customDomain: string | null;
  logo: string | null;
  favicon: string | null;
  link: string | null;
  description: string | null;
  header: string | null;
  width: DashboardWidth;
  refreshRate: (typeof REFRESH_RATES)[number];
  paginate: boolean;
  paginationRate: (typeof PAGINATION_RATES)[number];
  checksPerPage: number;
  useTagsAndOperator: boolean;
  hideTags: boolean;
  enableIncidents: boolean;
  expandChecks: boolean;
  tags: string[];
  showHeader: boolean;
  showCheckRunLinks: boolean;
  showGroupNames: boolean;
  customCSS: string;
  isPrivate: boolean;
  showP95: boolean;
  showP99: boolean;
}

export const INCIDENT_IMPACTS = ['MAINTENANCE', 'MAJOR', 'MINOR'] as const;
export type IncidentImpact = (typeof INCIDENT_IMPACTS)[number];
/** The reference names INVESTIGATING and RESOLVED; the two between are this server's choice (docs/dashboards.md). */
export const INCIDENT_STATUSES = ['INVESTIGATING', 'IDENTIFIED', 'MONITORING', 'RESOLVED'] as const;
export type IncidentStatus = (typeof INCIDENT_STATUSES)[number];

export interface IncidentUpdateDefinition {
  id: string;
  status: IncidentStatus;
  description: string;
  /** ISO 8601, UTC. */
  created_at: string;
}

/** An incident as the checks file declares it; `dashboard` is the dashboardId (string) of the dashboard it is shown on. */
export interface IncidentDefinition {
  id: string;
  name: string;
  impact: IncidentImpact;
  dashboard: string;
  startedAt: string | null;
  stoppedAt: string | null;
  /** At least one; any order (answers list them newest first). */
  incidentUpdates: IncidentUpdateDefinition[];
}
