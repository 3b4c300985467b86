// The analytics figures, computed from the columns the store returns
// (src/store/analytics.ts): results are filtered by status, put in buckets
// of the aggregation interval, and each bucket's metrics computed exactly —
// percentiles over every response time of the bucket (stats/percentile.ts),
// not a sketch. Pure code: the route and the tests call it alike.
// docs/analytics.md states what counts for each metric.

import { FLAG_FAILED, type LocationColumns } from '../../store/analytics.js';
import { percentileCont } from '../stats/percentile.js';
import type { Metric } from './metrics.js';

export type StatusFilter = 'success' | 'failure';

export interface AggregateOptions {
  fromMs: number;
  toMs: number;
  /** Bucket length in ms; undefined: one bucket, the whole window. Buckets start at fromMs; the last one ends at toMs. */
  intervalMs?: number;
  metrics: readonly Metric[];
  /** Only results of these statuses (success: no failures; failure: hasFailures); undefined or both: every result. */
  statuses?: ReadonlySet<StatusFilter>;
  /** One series per location (sorted by id) instead of one for all. */
  groupByLocation: boolean;
}

export interface AggregatedBucket {
  startMs: number;
  /** The FINAL results counted in this bucket. */
  results: number;
  /** Every requested metric; null where the bucket has nothing to compute it from. */
  values: Partial<Record<Metric, number | null>>;
}

export interface AggregatedSeries {
  /** The series' location; undefined when not grouped. */
  location?: string;
  buckets: AggregatedBucket[];
}

const QUANTILES: Partial<Record<Metric, number>> = {
  responseTime_median: 0.5,
  responseTime_p50: 0.5,
  responseTime_p90: 0.9,
  responseTime_p95: 0.95,
  responseTime_p99: 0.99,
};

/** The number of buckets a window has at an interval (the last one may be shorter). */
export function bucketCount(fromMs: number, toMs: number, intervalMs: number | undefined): number {
  return intervalMs === undefined ? 1 : Math.max(1, Math.ceil((toMs - fromMs) / intervalMs));
}

function counted(flags: number, statuses: ReadonlySet<StatusFilter> | undefined): boolean {
  if (statuses === undefined || statuses.size !== 1) return true;
  return statuses.has('failure') === ((flags & FLAG_FAILED) !== 0);
}

function seriesOf(parts: readonly LocationColumns[], options: AggregateOptions, location: string | undefined): AggregatedSeries {
  const { fromMs, toMs, intervalMs, metrics, statuses } = options;
  const n = bucketCount(fromMs, toMs, intervalMs);
  const results = new Float64Array(n);
  const failures = new Float64Array(n);
  const retries = new Float64Array(n);
  const timed = new Float64Array(n);
  const sums = new Float64Array(n);
  const mins = new Float64Array(n).fill(Number.POSITIVE_INFINITY);
  const maxs = new Float64Array(n).fill(Number.NEGATIVE_INFINITY);
  const bucketOf = (t: number) => (intervalMs === undefined ? 0 : Math.floor((t - fromMs) / intervalMs));
  for (const part of parts) {
    for (let i = 0; i < part.startedAt.length; i++) {
      const t = part.startedAt[i] as number;
      const flags = part.flags[i] as number;
      if (t < fromMs || t >= toMs || !counted(flags, statuses)) continue;
      const b = bucketOf(t);
      results[b] = (results[b] as number) + 1;
      if (flags & FLAG_FAILED) failures[b] = (failures[b] as number) + 1;
      retries[b] = (retries[b] as number) + (part.attempts[i] as number) - 1;
      const rt = part.responseTime[i] as number;
      if (rt < 0) continue;
      timed[b] = (timed[b] as number) + 1;
      sums[b] = (sums[b] as number) + rt;
      if (rt < (mins[b] as number)) mins[b] = rt;
      if (rt > (maxs[b] as number)) maxs[b] = rt;
    }
  }

  // Percentiles and the standard deviation need every value: one array, a sorted slice per bucket.
  const needValues = metrics.some((m) => m in QUANTILES || m === 'responseTime_stddev');
  const starts = new Float64Array(n + 1);
  let values = new Float64Array(0);
  if (needValues) {
    for (let b = 0; b < n; b++) starts[b + 1] = (starts[b] as number) + (timed[b] as number);
    values = new Float64Array(starts[n] as number);
    const fill = starts.slice(0, n);
    for (const part of parts) {
      for (let i = 0; i < part.startedAt.length; i++) {
        const t = part.startedAt[i] as number;
        const rt = part.responseTime[i] as number;
        if (rt < 0 || t < fromMs || t >= toMs || !counted(part.flags[i] as number, statuses)) continue;
        const b = bucketOf(t);
        const at = fill[b] as number;
        values[at] = rt;
        fill[b] = at + 1;
      }
    }
    for (let b = 0; b < n; b++) sortWholeMilliseconds(values.subarray(starts[b], starts[b + 1]), mins[b] as number, maxs[b] as number);
  }

  const buckets: AggregatedBucket[] = [];
  for (let b = 0; b < n; b++) {
    const count = results[b] as number;
    const k = timed[b] as number;
    const sorted = values.subarray(starts[b], starts[b + 1]);
    const bucketValues: Partial<Record<Metric, number | null>> = {};
    for (const metric of metrics) {
      bucketValues[metric] = metricValue(metric, { count, failures: failures[b] as number, retries: retries[b] as number, k, sum: sums[b] as number, min: mins[b] as number, max: maxs[b] as number, sorted });
    }
    buckets.push({ startMs: fromMs + b * (intervalMs ?? 0), results: count, values: bucketValues });
  }
  return location === undefined ? { buckets } : { location, buckets };
}

interface BucketTotals {
  count: number;
  failures: number;
  retries: number;
  /** Results with a response time. */
  k: number;
  sum: number;
  min: number;
  max: number;
  /** Their response times, ascending (only when a metric needs them). */
  sorted: Float64Array;
}

function metricValue(metric: Metric, t: BucketTotals): number | null {
  if (metric === 'availability') return t.count === 0 ? null : (100 * (t.count - t.failures)) / t.count;
  if (metric === 'retries') return t.count === 0 ? null : t.retries;
  if (t.k === 0) return null;
  switch (metric) {
    case 'responseTime':
    case 'responseTime_avg':
      return t.sum / t.k;
    case 'responseTime_sum':
      return t.sum;
    case 'responseTime_min':
      return t.min;
    case 'responseTime_max':
      return t.max;
    case 'responseTime_stddev':
      return populationStddev(t.sorted);
    default:
      return percentileCont(t.sorted, QUANTILES[metric] as number);
  }
}

/** Most counters a counting sort may allocate beyond the values it sorts. */
const COUNTING_SLACK = 65_536;

/**
 * Sorts response times (whole milliseconds from `min` to `max`) in place:
 * a counting sort when their range is not much wider than their number — the
 * usual case, a few thousand distinct milliseconds among many results —
 * otherwise the typed array's comparison sort. Both give the same order.
 */
export function sortWholeMilliseconds(values: Float64Array, min: number, max: number): void {
  const range = max - min + 1;
  if (values.length < 64 || !Number.isInteger(min) || !Number.isInteger(max) || range > 2 * values.length + COUNTING_SLACK) {
    values.sort();
    return;
  }
  const counts = new Uint32Array(range);
  for (const v of values) {
    // Another store may hand over fractions: those are sorted by comparison (nothing was moved yet).
    if (!Number.isInteger(v)) {
      values.sort();
      return;
    }
    counts[v - min] = (counts[v - min] as number) + 1;
  }
  let at = 0;
  for (let i = 0; i < range; i++) {
    const c = counts[i] as number;
    if (c > 0) {
      values.fill(min + i, at, at + c);
      at += c;
    }
  }
}

/** Two passes (mean, then squared deviations), so that large values with a small spread lose no precision. */
export function populationStddev(values: Float64Array): number {
  let sum = 0;
  for (const v of values) sum += v;
  const mean = sum / values.length;
  let squares = 0;
  for (const v of values) squares += (v - mean) * (v - mean);
  return Math.sqrt(squares / values.length);
}

/** The report's series: one for all locations, or one per location sorted by id. */
export function aggregate(columns: readonly LocationColumns[], options: AggregateOptions): AggregatedSeries[] {
  if (!options.groupByLocation) return [seriesOf(columns, options, undefined)];
  const byLocation = new Map<string, LocationColumns[]>();
  for (const part of columns) byLocation.set(part.location, [...(byLocation.get(part.location) ?? []), part]);
  return [...byLocation.keys()].sort().map((location) => seriesOf(byLocation.get(location) ?? [], options, location));
}
