// Prometheus metrics of one agent process, on their own registry so that
// several agents (in tests) never share counters.

import type { CheckResultEntry } from '../core/result-entry.js';
import { CheckMetrics, type RecordOptions } from './check-metrics.js';
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';

export interface Metrics {
  registry: Registry;
  jobsTotal: Counter<'check_type' | 'outcome'>;
  jobDuration: Histogram<'check_type'>;
  jobsInFlight: Gauge;
  queueCapacity: Gauge;
  spoolResults: Gauge;
  spoolQuarantined: Counter;
  spoolWritable: Gauge;
  controlPlaneRequests: Counter<'route' | 'status'>;
  /** Check worker threads running now (CHECK_WORKERS; 0 when checks run on the main thread). */
  checkWorkers: Gauge;
  checkWorkerRestarts: Counter;
  /** Per-check series (probe_*), rendered after the registry's. */
  checks: CheckMetrics;
}

/**
 * What running a job updates (src/jobs/run.ts): the part of Metrics a check
 * worker thread forwards to the main thread's registry
 * (src/jobs/workers/remote-metrics.ts), so /metrics stays one aggregate.
 */
export interface JobMetrics {
  jobsTotal: { inc(labels: { check_type: string; outcome: string }): void };
  jobDuration: { observe(labels: { check_type: string }, value: number): void };
  jobsInFlight: { inc(): void; dec(): void };
  checks: { record(entry: CheckResultEntry, options?: RecordOptions): void };
}

export interface MetricsOptions {
  /** The shortest time a check's series outlive its newest result (CheckMetrics). */
  checkSeriesMinSeconds?: number;
}

export function createMetrics(options: MetricsOptions = {}): Metrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  return {
    registry,
    checks: new CheckMetrics(Date.now, options.checkSeriesMinSeconds),
    jobsTotal: new Counter({
      name: 'outpost_jobs_total',
      help: 'Jobs finished, by check type and outcome (passed, degraded, failed, error, aborted)',
      labelNames: ['check_type', 'outcome'] as const,
      registers: [registry],
    }),
    jobDuration: new Histogram({
      name: 'outpost_job_duration_seconds',
      help: 'Wall time of a job from start to result, in seconds',
      labelNames: ['check_type'] as const,
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 240],
      registers: [registry],
    }),
    jobsInFlight: new Gauge({ name: 'outpost_jobs_in_flight', help: 'Jobs running now', registers: [registry] }),
    queueCapacity: new Gauge({
      name: 'outpost_queue_capacity',
      help: 'Jobs that may run at once (JOB_CONCURRENCY)',
      registers: [registry],
    }),
    spoolResults: new Gauge({
      name: 'outpost_spool_results',
      help: 'Results on disk waiting for the control plane to accept them',
      registers: [registry],
    }),
    spoolQuarantined: new Counter({
      name: 'outpost_spool_quarantined_total',
      help: 'Results (and unusable spool files) moved to the spool quarantine folder instead of being sent',
      registers: [registry],
    }),
    spoolWritable: new Gauge({
      name: 'outpost_spool_writable',
      help: '1 while the spool can write to disk; 0 while results are held in memory and claiming is paused',
      registers: [registry],
    }),
    checkWorkers: new Gauge({
      name: 'outpost_check_workers',
      help: 'Check worker threads running now (CHECK_WORKERS); below the configured count while one restarts',
      registers: [registry],
    }),
    checkWorkerRestarts: new Counter({
      name: 'outpost_check_worker_restarts_total',
      help: 'Check worker threads that stopped unexpectedly and were restarted (their running jobs ended as errors)',
      registers: [registry],
    }),
    controlPlaneRequests: new Counter({
      name: 'outpost_control_plane_requests_total',
      help: 'Requests to the control plane, by route and HTTP status (or network_error)',
      labelNames: ['route', 'status'] as const,
      registers: [registry],
    }),
  };
}
