// A brute-force computation of the analytics figures, written apart from
// src/server/analytics/ on purpose: for each bucket it walks every row, sorts
// the bucket's response times with Array#sort and reads percentiles off the
// definition (rank p·(n−1), linear interpolation between the closest ranks).
// The unit and integration tests compare the server's answers with it.

import type { Metric } from '../../src/server/analytics/metrics.js';

export interface ReferenceRow {
  location: string;
  startedAtMs: number;
  /** Whole ms; a negative value: the result has none. */
  responseTime: number;
  failed: boolean;
  attempts: number;
}

export interface ReferenceOptions {
  fromMs: number;
  toMs: number;
  intervalMs?: number;
  metrics: readonly Metric[];
  statuses?: readonly ('success' | 'failure')[];
  groupByLocation: boolean;
}

export interface ReferencePoint {
  startMs: number;
  results: number;
  values: Partial<Record<Metric, number | null>>;
}

export interface ReferenceSeries {
  location?: string;
  points: ReferencePoint[];
}

function quantile(sorted: number[], p: number): number {
  const h = p * (sorted.length - 1);
  const lo = Math.floor(h);
  const hi = Math.ceil(h);
  return (sorted[lo] as number) + (h - lo) * ((sorted[hi] as number) - (sorted[lo] as number));
}

function value(metric: Metric, rows: ReferenceRow[]): number | null {
  if (rows.length === 0) return null;
  if (metric === 'availability') return (rows.filter((r) => !r.failed).length * 100) / rows.length;
  if (metric === 'retries') return rows.reduce((sum, r) => sum + r.attempts - 1, 0);
  const times = rows.filter((r) => r.responseTime >= 0).map((r) => r.responseTime);
  if (times.length === 0) return null;
  const sorted = [...times].sort((a, b) => a - b);
  const sum = times.reduce((a, b) => a + b, 0);
  const mean = sum / times.length;
  switch (metric) {
    case 'responseTime':
    case 'responseTime_avg':
      return mean;
    case 'responseTime_sum':
      return sum;
    case 'responseTime_min':
      return sorted[0] as number;
    case 'responseTime_max':
      return sorted[sorted.length - 1] as number;
    case 'responseTime_stddev':
      return Math.sqrt(times.reduce((acc, t) => acc + (t - mean) ** 2, 0) / times.length);
    case 'responseTime_median':
    case 'responseTime_p50':
      return quantile(sorted, 0.5);
    case 'responseTime_p90':
      return quantile(sorted, 0.9);
    case 'responseTime_p95':
      return quantile(sorted, 0.95);
    case 'responseTime_p99':
      return quantile(sorted, 0.99);
  }
}

export function referenceSeries(rows: readonly ReferenceRow[], options: ReferenceOptions): ReferenceSeries[] {
  const statuses = options.statuses ?? [];
  const inWindow = rows.filter(
    (r) =>
      r.startedAtMs >= options.fromMs &&
      r.startedAtMs < options.toMs &&
      (statuses.length !== 1 || (statuses[0] === 'failure') === r.failed),
  );
  const starts: number[] = [];
  if (options.intervalMs === undefined) starts.push(options.fromMs);
  else for (let s = options.fromMs; s < options.toMs; s += options.intervalMs) starts.push(s);
  const pointsOf = (subset: ReferenceRow[]): ReferencePoint[] =>
    starts.map((start, i) => {
      const end = starts[i + 1] ?? options.toMs;
      const bucket = subset.filter((r) => r.startedAtMs >= start && r.startedAtMs < end);
      return { startMs: start, results: bucket.length, values: Object.fromEntries(options.metrics.map((m) => [m, value(m, bucket)])) };
    });
  if (!options.groupByLocation) return [{ points: pointsOf(inWindow) }];
  const locations = [...new Set(inWindow.map((r) => r.location))].sort();
  return locations.map((location) => ({ location, points: pointsOf(inWindow.filter((r) => r.location === location)) }));
}

/** Equal, with a relative tolerance for the figures a sum's order may round differently (averages, standard deviations). */
export function closeTo(actual: number | null | undefined, expected: number | null, metric: Metric): boolean {
  if (expected === null) return actual === null;
  if (typeof actual !== 'number') return false;
  if (metric === 'responseTime' || metric === 'responseTime_avg' || metric === 'responseTime_stddev' || metric === 'availability') {
    return Math.abs(actual - expected) <= 1e-9 * Math.max(1, Math.abs(expected));
  }
  return actual === expected;
}
