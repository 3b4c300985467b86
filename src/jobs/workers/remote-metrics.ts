// A check worker's JobMetrics: it updates nothing itself but forwards each
// update to the main thread, which applies it to the one registry /metrics
// renders (applyMetricOps). Updates are batched per turn of the event loop,
// and flushed before a job's result is posted so /metrics never lags it.

import type { CheckResultEntry } from '../../core/result-entry.js';
import { CheckMetrics, type RecordOptions } from '../../observability/check-metrics.js';
import type { JobMetrics, Metrics } from '../../observability/metrics.js';
import type { MetricOp } from './protocol.js';

/** Updates a batch holds at most before it is flushed at once. */
const MAX_BATCH = 256;

export class RemoteMetrics implements JobMetrics {
  private batch: MetricOp[] = [];
  private scheduled = false;
  private readonly seriesOf: CheckMetrics;

  constructor(
    private readonly post: (ops: MetricOp[]) => void,
    checkSeriesMinSeconds?: number,
  ) {
    this.seriesOf = new CheckMetrics(Date.now, checkSeriesMinSeconds);
  }

  readonly jobsTotal = { inc: (labels: { check_type: string; outcome: string }) => this.push({ op: 'jobs', checkType: labels.check_type, outcome: labels.outcome }) };
  readonly jobDuration = { observe: (labels: { check_type: string }, seconds: number) => this.push({ op: 'duration', checkType: labels.check_type, seconds }) };
  readonly jobsInFlight = { inc: () => this.push({ op: 'inFlight', delta: 1 }), dec: () => this.push({ op: 'inFlight', delta: -1 }) };
  readonly checks = {
    record: (entry: CheckResultEntry, options?: RecordOptions) => {
      const series = this.seriesOf.seriesFor(entry, options);
      if (series) this.push({ op: 'series', series });
    },
  };

  /** Posts what is batched now. */
  flush(): void {
    if (this.batch.length === 0) return;
    const ops = this.batch;
    this.batch = [];
    this.post(ops);
  }

  private push(op: MetricOp): void {
    this.batch.push(op);
    if (this.batch.length >= MAX_BATCH) this.flush();
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.flush();
    });
  }
}

/** Applies a worker's updates to the main thread's metrics; returns the change of jobs in flight (for a crash's correction). */
export function applyMetricOps(metrics: Metrics, ops: readonly MetricOp[]): number {
  let inFlight = 0;
  for (const op of ops) {
    if (op.op === 'jobs') metrics.jobsTotal.inc({ check_type: op.checkType, outcome: op.outcome });
    else if (op.op === 'duration') metrics.jobDuration.observe({ check_type: op.checkType }, op.seconds);
    else if (op.op === 'inFlight') {
      inFlight += op.delta;
      if (op.delta > 0) metrics.jobsInFlight.inc();
      else metrics.jobsInFlight.dec();
    } else metrics.checks.put(op.series);
  }
  return inFlight;
}
