// The analytics metrics: their names, which check types offer which, and the
// report's `metadata` for each (unit, label, aggregation). docs/analytics.md
// says what each one counts.

import type { CheckType } from '../../core/check-type.js';

export const RESPONSE_TIME_STATS = ['avg', 'max', 'median', 'min', 'p50', 'p90', 'p95', 'p99', 'stddev', 'sum'] as const;
export type ResponseTimeStat = (typeof RESPONSE_TIME_STATS)[number];

export const METRICS = [
  'responseTime',
  'availability',
  'retries',
  ...RESPONSE_TIME_STATS.map((stat) => `responseTime_${stat}` as const),
] as const;
export type Metric = (typeof METRICS)[number];

export interface MetricMetadata {
  unit: string;
  label: string;
  aggregation: string;
}

const STAT_LABELS: Record<ResponseTimeStat, string> = {
  avg: 'average',
  max: 'maximum',
  median: 'median',
  min: 'minimum',
  p50: '50th percentile',
  p90: '90th percentile',
  p95: '95th percentile',
  p99: '99th percentile',
  stddev: 'standard deviation',
  sum: 'sum',
};

export function metricMetadata(metric: Metric): MetricMetadata {
  if (metric === 'availability') return { unit: 'percent', label: 'Availability', aggregation: 'ratio' };
  if (metric === 'retries') return { unit: 'count', label: 'Retries', aggregation: 'sum' };
  // Without a suffix the response time is the bucket's average.
  if (metric === 'responseTime') return { unit: 'milliseconds', label: 'Response time', aggregation: 'avg' };
  const stat = metric.slice('responseTime_'.length) as ResponseTimeStat;
  return { unit: 'milliseconds', label: `Response time (${STAT_LABELS[stat]})`, aggregation: stat };
}

/**
 * The metrics a check type offers. A heartbeat's result is a ping that came
 * or did not: it has no response time and is never retried.
 */
export function metricsFor(checkType: CheckType | 'AGENTIC'): readonly Metric[] {
  return checkType === 'HEARTBEAT' ? ['availability'] : METRICS;
}

export function isMetric(name: string): name is Metric {
  return (METRICS as readonly string[]).includes(name);
}
