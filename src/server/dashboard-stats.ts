// What a dashboard shows of one check, from its stored FINAL results
// (docs/dashboards.md, "Figures"): uptime over 24 h, 7 d and 30 d, the
// response-time chart's buckets and P95/P99 over the chart's range.

import type { ResultSample } from '../store/dashboards.js';
import { percentileCont } from './stats/percentile.js';

const HOUR_MS = 3_600_000;

/** The chart's ranges: each is cut into buckets of a fixed size (24 points, 28 points, 30 points). */
export const CHART_RANGES = {
  '24h': { ms: 24 * HOUR_MS, bucketMs: HOUR_MS, label: 'last 24 hours', bucketLabel: '1 hour' },
  '7d': { ms: 7 * 24 * HOUR_MS, bucketMs: 6 * HOUR_MS, label: 'last 7 days', bucketLabel: '6 hours' },
  '30d': { ms: 30 * 24 * HOUR_MS, bucketMs: 24 * HOUR_MS, label: 'last 30 days', bucketLabel: '1 day' },
} as const;
export type ChartRange = keyof typeof CHART_RANGES;
export const UPTIME_WINDOWS = [
  ['24h', 24 * HOUR_MS],
  ['7d', 7 * 24 * HOUR_MS],
  ['30d', 30 * 24 * HOUR_MS],
] as const;

export interface Bucket {
  /** Start of the bucket, ms. */
  from: number;
  /** Results with a response time in it; 0: no point is drawn. */
  count: number;
  /** Mean response time of its results, ms. */
  mean: number;
}

export interface CheckFigures {
  /** Share of up results per window, 0–1; null when the window has no result. */
  uptime: Record<'24h' | '7d' | '30d', number | null>;
  /** Results per uptime window. */
  counts: Record<'24h' | '7d' | '30d', number>;
  buckets: Bucket[];
  p95: number | null;
  p99: number | null;
  /** Results the P95/P99 are over (the chart's range, those with a response time). */
  samples: number;
}

/**
 * The buckets of the range ending at `now`: `ms / bucketMs` of them, the
 * first starting at now − ms, so that the chart, the P95/P99 and the
 * analytics routes' quick ranges (last24Hours …) cover the same window
 * [now − ms, now).
 */
export function bucketStarts(now: number, range: ChartRange): number[] {
  const { ms, bucketMs } = CHART_RANGES[range];
  return Array.from({ length: ms / bucketMs }, (_, i) => now - ms + i * bucketMs);
}

/** Uptime per window from [total, up] counts in UPTIME_WINDOWS' order. */
export function uptimeOf(counts: ReadonlyArray<{ total: number; up: number }>): Pick<CheckFigures, 'uptime' | 'counts'> {
  const uptime = { '24h': null, '7d': null, '30d': null } as CheckFigures['uptime'];
  const totals = { '24h': 0, '7d': 0, '30d': 0 } as CheckFigures['counts'];
  UPTIME_WINDOWS.forEach(([name], i) => {
    const { total, up } = counts[i] ?? { total: 0, up: 0 };
    totals[name] = total;
    uptime[name] = total === 0 ? null : up / total;
  });
  return { uptime, counts: totals };
}

/** Counts per uptime window from samples (oldest first), as the store's availability() answers them. */
export function countWindows(samples: readonly ResultSample[], now: number): Array<{ total: number; up: number }> {
  return UPTIME_WINDOWS.map(([, ms]) => {
    let total = 0;
    let up = 0;
    for (const s of samples) {
      if (s.at < now - ms || s.at >= now) continue;
      total++;
      if (s.up) up++;
    }
    return { total, up };
  });
}

/**
 * The figures of one check at `now`: its samples of the chart's range (oldest
 * first) and its availability counts per uptime window (computed from the
 * samples when not given: tests pass 30 days of samples).
 */
export function checkFigures(samples: readonly ResultSample[], now: number, range: ChartRange, availability = countWindows(samples, now)): CheckFigures {
  const { uptime, counts } = uptimeOf(availability);
  const starts = bucketStarts(now, range);
  const { bucketMs } = CHART_RANGES[range];
  const first = starts[0] as number;
  const sums = new Float64Array(starts.length);
  const bucketCounts = new Uint32Array(starts.length);
  // P95/P99 are over the chart's window: [now − range, now).
  const values: number[] = [];
  for (const s of samples) {
    // A result without a response time counts for uptime only, as in the analytics routes.
    if (s.responseTime === null || s.at < first || s.at >= now) continue;
    const index = Math.floor((s.at - first) / bucketMs);
    if (index < 0 || index >= starts.length) continue;
    sums[index] = (sums[index] as number) + s.responseTime;
    bucketCounts[index] = (bucketCounts[index] as number) + 1;
    values.push(s.responseTime);
  }
  const sorted = Float64Array.from(values).sort();
  return {
    uptime,
    counts,
    buckets: starts.map((from, i) => ({ from, count: bucketCounts[i] as number, mean: (bucketCounts[i] as number) > 0 ? (sums[i] as number) / (bucketCounts[i] as number) : 0 })),
    p95: sorted.length === 0 ? null : percentileCont(sorted, 0.95),
    p99: sorted.length === 0 ? null : percentileCont(sorted, 0.99),
    samples: sorted.length,
  };
}
