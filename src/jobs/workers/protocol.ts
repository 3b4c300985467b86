// The messages between the main thread and a check worker
// (src/jobs/workers/pool.ts, src/jobs/workers/worker.ts). Everything here is
// plain structured-cloneable data: a prepared job goes in without its
// executor or logger (the worker looks both up again), results come out
// already scrubbed and size-capped by the worker's JobRunner (src/jobs/run.ts).
// Each side posts arrays of these, a turn's worth at a time
// (src/jobs/workers/outbox.ts).

import type { ArtifactFile } from '../../artifacts/writer.js';
import type { Published } from '../../artifacts/store.js';
import type { CheckDefinition } from '../../checks/definition.js';
import type { CheckSettings } from '../../checks/executor.js';
import type { SharedBudget } from '../../core/memory-budget.js';
import type { EnvironmentVariable } from '../../core/protocol.js';
import type { CheckIdentity, CheckResultEntry, RunIdentity } from '../../core/result-entry.js';
import type { RecordedSeries } from '../../observability/check-metrics.js';
import type { LogLevel } from '../../observability/logger.js';
import type { NamedSecret } from '../../secrets/policy.js';
import type { TestFault } from '../run.js';

/** How often a worker says its event loop turns. */
export const WORKER_BEAT_MS = 1_000;

/** What a worker is started with (workerData). */
export interface WorkerSetup {
  settings: CheckSettings;
  /** The agent-wide secrets: the worker's own SecretPolicy scrubs its results and log lines with them. */
  agentSecrets: NamedSecret[];
  logLevel: LogLevel;
  logStream: 'stdout' | 'stderr';
  /** The shared body memory budget, this worker's holder in it. */
  bodyMemory?: SharedBudget;
  maxResultBytes?: number;
  diagnostics: boolean;
  /** Where attempts' artifact folders go (the main thread's store publishes them); absent without a store. */
  artifactsRoot?: string;
  testFault?: TestFault;
  /** CheckMetrics' floor for series lifetime, so the worker computes the same series the main thread would. */
  checkSeriesMinSeconds?: number;
}

/** A prepared job without what cannot cross a thread: the worker finds the executor by check type. */
export interface WireJob {
  jobId: string;
  identity: RunIdentity;
  checkIdentity: CheckIdentity;
  check: CheckDefinition;
  variables: EnvironmentVariable[];
  triggerSource: string | null;
  /** The job logger's bindings (jobId, checkId, checkType…). */
  logBindings: Record<string, unknown>;
  jobLogNotes?: string[];
}

export interface WireAbort {
  reason: 'timeout' | 'lease-lost' | 'shutdown';
  message: string;
}

export interface WireError {
  name: string;
  message: string;
  stack?: string;
}

export type MetricOp =
  | { op: 'jobs'; checkType: string; outcome: string }
  | { op: 'duration'; checkType: string; seconds: number }
  | { op: 'inFlight'; delta: 1 | -1 }
  | { op: 'series'; series: RecordedSeries };

/** Main thread → worker. */
export type ToWorker =
  | { type: 'run'; job: WireJob }
  | { type: 'abort'; jobId: string; error: WireAbort }
  /** Shutdown has begun: the job finishes the attempt it runs but starts no other (src/jobs/queue.ts drain). */
  | { type: 'no-more-attempts'; jobId: string; error: WireAbort }
  | { type: 'attempt-handled'; jobId: string; seq: number; error?: WireError }
  | { type: 'published'; callId: number; published: Published }
  | { type: 'release'; jobId: string }
  | { type: 'stop' };

/** Worker → main thread. */
export type FromWorker =
  | { type: 'ready' }
  /** The worker's event loop turns: sent every WORKER_BEAT_MS. */
  | { type: 'beat' }
  | { type: 'metrics'; ops: MetricOp[] }
  // `line`: the result as the sinks write it, scrubbed and serialized once in the worker (src/jobs/run.ts).
  | { type: 'attempt'; jobId: string; seq: number; result: CheckResultEntry; line: string | undefined }
  | { type: 'done'; jobId: string; result: CheckResultEntry; line: string | undefined }
  | { type: 'done'; jobId: string; result: null }
  /** The job ended without a result the main thread can take; `counted`: it is in outpost_jobs_total already (it ran to its end). */
  | { type: 'failed'; jobId: string; error: WireError; counted?: boolean }
  | { type: 'executor-error'; error: WireError; checkType: string; check: CheckDefinition; variables: EnvironmentVariable[] }
  | { type: 'publish'; callId: number; jobId: string; dir: string; files: ArtifactFile[] };

export function wireError(error: unknown): WireError {
  if (error instanceof Error) return { name: error.name, message: error.message, ...(error.stack ? { stack: error.stack } : {}) };
  return { name: 'Error', message: String(error) };
}

export function fromWire(error: WireError): Error {
  const rebuilt = new Error(error.message);
  rebuilt.name = error.name;
  if (error.stack) rebuilt.stack = error.stack;
  return rebuilt;
}
