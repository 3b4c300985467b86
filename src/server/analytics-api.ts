// The analytics routes (docs/analytics.md): the metrics each check type
// offers, and a check's report — the service's multi-step analytics report —
// for multi-step checks at the service's path and for every check type at
// /v1/analytics/checks/{id}. The store reads the window's FINAL results as
// columns (store/analytics.ts); analytics/aggregate.ts computes the figures.

import type { CheckType } from '../core/check-type.js';
import { type AnalyticsStore, type LocationColumns, WindowTooLargeError } from '../store/analytics.js';
import type { Store, StoredCheck } from '../store/store.js';
import { type AggregatedSeries, aggregate } from './analytics/aggregate.js';
import { type Metric, type MetricMetadata, metricMetadata, metricsFor } from './analytics/metrics.js';
import { type AnalyticsQuery, MAX_WINDOW_RESULTS, parseAnalyticsQuery } from './analytics/query.js';
import { ApiError, badRequest, notFound } from './http/api-error.js';
import { RateLimiter } from './http/rate-limit.js';
import type { Route } from './http/router.js';
import { SERVICE_CHECK_TYPES } from './read-api.js';

export interface AnalyticsApiDeps {
  store: Store;
  analytics: AnalyticsStore;
  now?: () => Date;
  /** Reports a minute, over both report routes (REPORTS_PER_MINUTE unless a test gives another). */
  reportsPerMinute?: number;
}

/**
 * A report of a busy check costs a few hundred ms of the server's one thread
 * (docs/analytics.md): the key's 600 requests a minute could keep it busy for
 * good, so reports have a lower limit of their own, as the service allows a
 * route to.
 */
export const REPORTS_PER_MINUTE = 60;

/** One bucket of a series: its start, the FINAL results counted, and each requested metric (null: nothing to compute it from). */
export type ReportPoint = { timestamp: string; results: number } & Partial<Record<Metric, number | null>>;

export interface ReportSeries {
  /** Present when grouped by runLocation. */
  runLocation?: string;
  data: ReportPoint[];
}

/** The service's multi-step analytics report, with `series` as docs/analytics.md describes. */
export interface AnalyticsReport {
  checkId: string;
  name: string;
  checkType: CheckType;
  activated: boolean;
  muted: boolean;
  /** Seconds, as the checks file gives it. */
  frequency: number;
  from: string;
  to: string;
  tags: string[];
  series: ReportSeries[];
  pagination: { page: number; limit: number };
  metadata: Partial<Record<Metric, MetricMetadata>>;
}

function definitionField(check: StoredCheck, name: string): unknown {
  const definition = check.definition;
  return typeof definition === 'object' && definition !== null ? (definition as Record<string, unknown>)[name] : undefined;
}

/** The report of a check for a parsed query: reads the window, aggregates the page's series. */
export async function analyticsReport(
  analytics: AnalyticsStore,
  check: StoredCheck & { removedAt: string | null },
  query: AnalyticsQuery,
): Promise<AnalyticsReport> {
  let columns: LocationColumns[];
  try {
    columns = await analytics.window(check.id, query.fromMs, query.toMs, MAX_WINDOW_RESULTS);
  } catch (error) {
    if (error instanceof WindowTooLargeError) throw badRequest(error.message, { parameter: 'from', results: error.results, limit: error.limit });
    throw error;
  }
  const first = (query.page - 1) * query.limit;
  let series: AggregatedSeries[];
  if (query.groupByLocation) {
    // Only the page's locations are aggregated.
    const locations = [...new Set(columns.map((c) => c.location))].sort().slice(first, first + query.limit);
    const onPage = new Set(locations);
    series = aggregate(
      columns.filter((c) => onPage.has(c.location)),
      { ...query, groupByLocation: true },
    );
  } else {
    series = first === 0 ? aggregate(columns, { ...query, groupByLocation: false }) : [];
  }
  const tags = definitionField(check, 'tags');
  return {
    checkId: check.id,
    name: check.name,
    checkType: check.checkType,
    activated: check.removedAt === null,
    muted: definitionField(check, 'muted') === true,
    frequency: check.frequencySeconds,
    from: new Date(query.fromMs).toISOString(),
    to: new Date(query.toMs).toISOString(),
    tags: Array.isArray(tags) ? tags.filter((t): t is string => typeof t === 'string') : [],
    series: series.map((s) => ({
      ...(s.location === undefined ? {} : { runLocation: s.location }),
      data: s.buckets.map((b) => ({ timestamp: new Date(b.startMs).toISOString(), results: b.results, ...b.values })),
    })),
    pagination: { page: query.page, limit: query.limit },
    metadata: Object.fromEntries(query.metrics.map((m) => [m, metricMetadata(m)])),
  };
}

export function analyticsRoutes(deps: AnalyticsApiDeps): Route[] {
  const now = deps.now ?? (() => new Date());
  const limiter = new RateLimiter(deps.reportsPerMinute ?? REPORTS_PER_MINUTE, 60);
  const report = (onlyType?: CheckType): Route['handle'] =>
    async ({ params, query }) => {
      const decision = limiter.take('reports', Date.now());
      if (!decision.allowed) throw new ApiError(429, 'Too Many Requests', {}, { 'retry-after': String(decision.retryAfterSeconds) });
      const id = params.id as string;
      const check = await deps.store.check(id);
      if (!check) throw notFound('check', id);
      if (onlyType !== undefined && check.checkType !== onlyType) {
        // The route names a kind of check; another kind is not there, as the service's per-type routes answer.
        throw new ApiError(404, `check ${id} is of type ${check.checkType}, not ${onlyType}: GET /v1/analytics/checks/${id} reports every type`, { id });
      }
      const parsed = parseAnalyticsQuery(query, check.checkType, now());
      return { status: 200, body: await analyticsReport(deps.analytics, check, parsed) };
    };
  return [
    {
      method: 'GET',
      path: '/v1/analytics/metrics',
      auth: 'public',
      bodyLimit: 0,
      async handle({ query }) {
        for (const name of query.keys()) {
          if (name !== 'checkType') throw badRequest(`unknown query parameter ${name}`, { parameter: name });
        }
        const values = query.getAll('checkType');
        const checkType = values[0];
        if (values.length !== 1 || checkType === undefined || !(SERVICE_CHECK_TYPES as readonly string[]).includes(checkType)) {
          throw badRequest(`checkType is required, once, and must be one of ${SERVICE_CHECK_TYPES.join(', ')}`, { parameter: 'checkType' });
        }
        return { status: 200, body: metricsFor(checkType as CheckType | 'AGENTIC') };
      },
    },
    { method: 'GET', path: '/v1/analytics/multistep-checks/:id', auth: 'public', bodyLimit: 0, handle: report('MULTI_STEP') },
    { method: 'GET', path: '/v1/analytics/checks/:id', auth: 'public', bodyLimit: 0, handle: report() },
  ];
}
