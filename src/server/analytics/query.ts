// The analytics routes' query string, checked parameter by parameter: a bad
// or unknown one is a 400 naming it (docs/analytics.md lists the bounds).
// Windows are in UTC; a quick range's calendar weeks start on Monday.

import type { CheckType } from '../../core/check-type.js';
import { badRequest } from '../http/api-error.js';
import { bucketCount, type StatusFilter } from './aggregate.js';
import { isMetric, type Metric, metricsFor } from './metrics.js';

export const QUICK_RANGES = ['last24Hours', 'last7Days', 'last30Days', 'thisWeek', 'thisMonth', 'lastWeek', 'lastMonth'] as const;
export type QuickRange = (typeof QUICK_RANGES)[number];

export const ANALYTICS_PARAMETERS = ['metrics', 'from', 'to', 'quickRange', 'aggregationInterval', 'filterByStatus', 'groupBy', 'limit', 'page'] as const;

export const MIN_INTERVAL_MINUTES = 1;
export const MAX_INTERVAL_MINUTES = 43_200;
export const DEFAULT_LIMIT = 10;
export const MAX_LIMIT = 100;
export const MAX_PAGE = 10_000;
/** The longest window one answer covers. */
export const MAX_WINDOW_DAYS = 366;
/** Buckets in one series: a week at one minute. */
export const MAX_BUCKETS = 10_080;
/** Buckets in one answer, over the series of a page (limit × buckets when grouped). */
export const MAX_POINTS = 100_800;
/** Results one answer reads; a longer window of a busier check is refused rather than read. */
export const MAX_WINDOW_RESULTS = 5_000_000;

const MINUTE_MS = 60_000;
const DAY_MS = 24 * 60 * MINUTE_MS;
/** The largest UNIX time in seconds a Date can hold (8.64e15 ms). */
const MAX_UNIX_SECONDS = 8_640_000_000_000;

export interface AnalyticsQuery {
  metrics: Metric[];
  fromMs: number;
  toMs: number;
  intervalMs?: number;
  statuses?: ReadonlySet<StatusFilter>;
  groupByLocation: boolean;
  limit: number;
  page: number;
}

const badParameter = (parameter: string, message: string, attributes: Record<string, unknown> = {}) => badRequest(message, { parameter, ...attributes });

/** The window of a quick range at `now`: the last N days end now; this week and month too; last week and month are whole. */
export function quickRangeWindow(range: QuickRange, now: Date): { fromMs: number; toMs: number } {
  const t = now.getTime();
  const midnight = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate());
  const monday = midnight - ((now.getUTCDay() + 6) % 7) * DAY_MS;
  const firstOfMonth = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1);
  switch (range) {
    case 'last24Hours':
      return { fromMs: t - DAY_MS, toMs: t };
    case 'last7Days':
      return { fromMs: t - 7 * DAY_MS, toMs: t };
    case 'last30Days':
      return { fromMs: t - 30 * DAY_MS, toMs: t };
    case 'thisWeek':
      return { fromMs: monday, toMs: t };
    case 'thisMonth':
      return { fromMs: firstOfMonth, toMs: t };
    case 'lastWeek':
      return { fromMs: monday - 7 * DAY_MS, toMs: monday };
    case 'lastMonth':
      return { fromMs: Date.UTC(now.getUTCFullYear(), now.getUTCMonth() - 1, 1), toMs: firstOfMonth };
  }
}

function unixSeconds(query: URLSearchParams, name: string): number | undefined {
  const raw = query.get(name);
  if (raw === null) return undefined;
  if (!/^\d{1,16}$/.test(raw) || Number(raw) > MAX_UNIX_SECONDS) {
    throw badParameter(name, `${name} must be a UNIX time in whole seconds (an integer of at least 0), not ${JSON.stringify(raw)}`);
  }
  return Number(raw) * 1000;
}

function integerIn(query: URLSearchParams, name: string, min: number, max: number, fallback: number): number;
function integerIn(query: URLSearchParams, name: string, min: number, max: number, fallback: undefined): number | undefined;
function integerIn(query: URLSearchParams, name: string, min: number, max: number, fallback: number | undefined): number | undefined {
  const raw = query.get(name);
  if (raw === null) return fallback;
  if (!/^\d{1,9}$/.test(raw) || Number(raw) < min || Number(raw) > max) {
    throw badParameter(name, `${name} must be an integer from ${min} to ${max}, not ${JSON.stringify(raw)}`);
  }
  return Number(raw);
}

/** A comma-separated list, each item once; an empty item is refused. */
function list(query: URLSearchParams, name: string): string[] | undefined {
  const raw = query.get(name);
  if (raw === null) return undefined;
  const items = raw.split(',').map((item) => item.trim());
  if (items.some((item) => item === '')) throw badParameter(name, `${name} must be a comma-separated list without empty items, not ${JSON.stringify(raw)}`);
  return [...new Set(items)];
}

/** The query of GET /v1/analytics/…/{id} for a check of `checkType`, at `now`. */
export function parseAnalyticsQuery(query: URLSearchParams, checkType: CheckType, now: Date): AnalyticsQuery {
  const seen = new Set<string>();
  for (const name of query.keys()) {
    if (!(ANALYTICS_PARAMETERS as readonly string[]).includes(name)) throw badParameter(name, `unknown query parameter ${name}`);
    if (seen.has(name)) throw badParameter(name, `query parameter ${name} is given more than once (metrics and filterByStatus take a comma-separated list)`);
    seen.add(name);
  }

  const names = list(query, 'metrics');
  if (names === undefined) throw badParameter('metrics', 'metrics is required: a comma-separated list of metric names (GET /v1/analytics/metrics?checkType=… lists them)');
  const offered = metricsFor(checkType);
  const metrics: Metric[] = [];
  for (const name of names) {
    if (!isMetric(name) || !offered.includes(name)) {
      throw badParameter('metrics', `metric ${JSON.stringify(name)} is not one a ${checkType} check offers: ${offered.join(', ')}`, { metric: name });
    }
    metrics.push(name);
  }

  const range = query.get('quickRange') ?? 'last24Hours';
  if (!(QUICK_RANGES as readonly string[]).includes(range)) {
    throw badParameter('quickRange', `quickRange must be one of ${QUICK_RANGES.join(', ')}, not ${JSON.stringify(range)}`);
  }
  let { fromMs, toMs } = quickRangeWindow(range as QuickRange, now);
  const from = unixSeconds(query, 'from');
  const to = unixSeconds(query, 'to');
  if (to !== undefined && from === undefined) throw badParameter('to', 'to needs from: a custom window is from (and to, or now)');
  if (from !== undefined) {
    fromMs = from;
    toMs = to ?? now.getTime();
    if (fromMs >= toMs) throw badParameter('from', 'from must be before to (or before now, when to is left out)');
  }
  if (toMs - fromMs > MAX_WINDOW_DAYS * DAY_MS) throw badParameter('from', `the window may be at most ${MAX_WINDOW_DAYS} days long`);

  const intervalMinutes = integerIn(query, 'aggregationInterval', MIN_INTERVAL_MINUTES, MAX_INTERVAL_MINUTES, undefined);
  const intervalMs = intervalMinutes === undefined ? undefined : intervalMinutes * MINUTE_MS;

  const statusList = list(query, 'filterByStatus');
  let statuses: Set<StatusFilter> | undefined;
  if (statusList !== undefined) {
    for (const status of statusList) {
      if (status !== 'success' && status !== 'failure') throw badParameter('filterByStatus', `filterByStatus must list success and/or failure, not ${JSON.stringify(status)}`);
    }
    statuses = new Set(statusList as StatusFilter[]);
  }

  const groupBy = query.get('groupBy');
  if (groupBy !== null && groupBy !== 'runLocation') throw badParameter('groupBy', `groupBy must be runLocation, not ${JSON.stringify(groupBy)}`);
  const limit = integerIn(query, 'limit', 1, MAX_LIMIT, DEFAULT_LIMIT);
  const page = integerIn(query, 'page', 1, MAX_PAGE, 1);

  const buckets = bucketCount(fromMs, toMs, intervalMs);
  const seriesPerPage = groupBy === null ? 1 : limit;
  if (buckets > MAX_BUCKETS || buckets * seriesPerPage > MAX_POINTS) {
    throw badParameter(
      'aggregationInterval',
      `the window at this aggregationInterval has ${buckets} buckets; at most ${MAX_BUCKETS} per series and ${MAX_POINTS} per answer (buckets × limit when grouped): choose a longer interval${groupBy === null ? '' : ' or a smaller limit'}`,
      { buckets },
    );
  }
  return {
    metrics,
    fromMs,
    toMs,
    ...(intervalMs === undefined ? {} : { intervalMs }),
    ...(statuses === undefined ? {} : { statuses }),
    groupByLocation: groupBy !== null,
    limit,
    page,
  };
}
