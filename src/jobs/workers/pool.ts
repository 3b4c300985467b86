// Check workers: N worker threads that run jobs' attempts so the agent uses
// every core, while everything else stays one of a kind on the main thread —
// the queue and its JOB_CONCURRENCY slots, claims, leases, the spool, the
// sink, the health server and /metrics (updates arrive as messages,
// src/jobs/workers/remote-metrics.ts). The queue (src/jobs/queue.ts) hands a
// job here when canRun() says so; the worker's JobRunner scrubs and caps its
// results before they cross back. A worker that dies turns its jobs into
// error results and is started again; readiness is false until it is up.

import { Worker } from 'node:worker_threads';
import { notPublished, type Published } from '../../artifacts/store.js';
import type { CheckSettings } from '../../checks/executor.js';
import { JobAbortedError } from '../../core/errors.js';
import type { MemoryBudget } from '../../core/memory-budget.js';
import type { CheckResultEntry } from '../../core/result-entry.js';
import type { Logger, LogLevel } from '../../observability/logger.js';
import type { Metrics } from '../../observability/metrics.js';
import { errorResult } from '../../results/result.js';
import { capResultSize, DEFAULT_MAX_RESULT_BYTES } from '../../results/result-size.js';
import { type NamedSecret, SecretPolicy } from '../../secrets/policy.js';
import type { PreparedJob } from '../prepare.js';
import type { JobCompletion, JobSlot, RunOptions } from '../run.js';
import { type FromWorker, fromWire, type ToWorker, type WireJob, WORKER_BEAT_MS, type WorkerSetup, wireError } from './protocol.js';
import { Outbox } from './outbox.js';
import { applyMetricOps } from './remote-metrics.js';

/** How long a worker may take to load its modules and say it is ready. */
export const WORKER_START_TIMEOUT_MS = 20_000;
/** How long a stopping worker may take to flush and exit before it is terminated. */
export const WORKER_STOP_TIMEOUT_MS = 2_000;
/**
 * A worker whose event loop has not turned for this long is stalled (a check
 * stuck in synchronous code: its own hard-cap timers cannot fire) and is
 * terminated, which ends its jobs as errors like a crash.
 */
export const WORKER_STALL_MS = 30_000;
/** Restart delays after a crash: doubling from the first, capped at the second, reset by a minute without a crash. */
const RESTART_FIRST_MS = 100;
const RESTART_MAX_MS = 30_000;
const CRASH_MEMORY_MS = 60_000;

/** The check types a worker runs; the rest (scripts, heartbeats) stay on the main thread. */
const WORKER_TYPES = new Set<string>(['URL', 'API', 'TCP', 'DNS', 'ICMP']);

export interface PoolOptions {
  workers: number;
  metrics: Metrics;
  settings: CheckSettings;
  /** The queue's options: the workers get the same secrets, budget, limits and artifact folder. */
  run: RunOptions;
  /** The agent-wide secrets the main thread's SecretPolicy was built from. */
  agentSecrets: NamedSecret[];
  logLevel: LogLevel;
  logStream: 'stdout' | 'stderr';
  logger: Logger;
  /** The body budget, built with room for one holder per worker plus the main thread (MemoryBudget.forHolders). */
  bodyMemory?: MemoryBudget;
  checkSeriesMinSeconds?: number;
  /** The worker's module; by default the compiled worker.js beside this file. */
  entry?: URL;
  /** WORKER_STALL_MS, shorter in tests. */
  stallMs?: number;
}

interface RunningJob {
  prepared: PreparedJob;
  signal: AbortSignal;
  onAttempt: (result: CheckResultEntry, line: string | undefined) => Promise<void>;
  settle: (completion: JobCompletion | Error) => void;
}

interface Handle {
  index: number;
  worker: Worker;
  /** What goes to the worker, one postMessage per turn of this thread's loop. */
  outbox: Outbox<ToWorker>;
  up: boolean;
  jobs: Map<string, RunningJob>;
  /** jobsInFlight increments applied for this worker and not yet taken back. */
  inFlight: number;
  /** When the worker last sent anything (its loop turned). */
  lastHeard: number;
  /** Why the pool ended it, when it did (a stall). */
  endedFor?: string;
}

export class WorkerPool {
  private readonly handles: Handle[] = [];
  private readonly secrets: SecretPolicy;
  private readonly timers = new Set<NodeJS.Timeout>();
  /** Workers starting now, by index: settles when the worker is up or failed to start. */
  private readonly starting = new Map<number, Promise<void>>();
  private closing = false;
  private crashes = 0;
  private lastCrash = 0;

  private readonly stallCheck: NodeJS.Timeout;

  private constructor(private readonly options: PoolOptions) {
    this.secrets = options.run.secrets ?? new SecretPolicy();
    const stallMs = options.stallMs ?? WORKER_STALL_MS;
    const everyMs = Math.max(100, Math.min(WORKER_BEAT_MS, stallMs / 4));
    this.stallCheck = setInterval(() => this.endStalled(stallMs, everyMs), everyMs);
    this.stallCheck.unref();
  }

  private lastCheck = Date.now();

  private endStalled(stallMs: number, everyMs: number): void {
    const now = Date.now();
    const late = now - this.lastCheck > 2 * everyMs + 1_000;
    this.lastCheck = now;
    // This thread stood still itself (a stop signal, a frozen VM): the workers' beats wait unread, so judge nothing now.
    if (late) {
      for (const handle of this.handles) if (handle) handle.lastHeard = now;
      return;
    }
    for (const handle of this.handles) {
      if (!handle?.up || handle.endedFor || now - handle.lastHeard <= stallMs) continue;
      handle.endedFor = `its event loop stood still for over ${stallMs} ms`;
      this.options.logger.error({ worker: handle.index, jobs: handle.jobs.size, stallMs }, 'a check worker stalled; ending it');
      void handle.worker.terminate();
    }
  }

  /**
   * Starts every worker without waiting for them: until one is up, jobs run
   * on the main thread, and readiness waits for all (ready()). A worker that
   * cannot start is logged and tried again like one that crashed.
   */
  static start(options: PoolOptions): WorkerPool {
    const pool = new WorkerPool(options);
    for (let index = 0; index < options.workers; index++) pool.launch(index);
    return pool;
  }

  /** Resolves once every worker is up, or rejects after `timeoutMs` (tests, benchmarks). */
  async whenReady(timeoutMs = WORKER_START_TIMEOUT_MS): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!this.ready()) {
      if (this.closing || Date.now() > deadline) throw new Error(`check workers not ready within ${timeoutMs} ms (${this.up} of ${this.options.workers} up)`);
      await Promise.race([...this.starting.values(), new Promise((resolve) => setTimeout(resolve, 50).unref())]).catch(() => undefined);
    }
  }

  get size(): number {
    return this.options.workers;
  }

  /** Workers up now. */
  get up(): number {
    return this.handles.filter((h) => h?.up).length;
  }

  /** Jobs on each worker now, by worker index (0 for a worker that is down). */
  busy(): number[] {
    return Array.from({ length: this.options.workers }, (_, index) => this.handles[index]?.jobs.size ?? 0);
  }

  /** Every worker is up (readiness). */
  ready(): boolean {
    return !this.closing && this.up === this.options.workers;
  }

  /**
   * Whether this job goes to a worker: a runnable job of a type workers run
   * (an API check with scripts stays here, as scripts do), while the queue
   * has not aborted everything and a worker is up. Otherwise the main
   * thread runs it, so a job never waits for a worker to restart.
   */
  canRun(prepared: PreparedJob, slot: JobSlot): boolean {
    const runnable = prepared.runnable;
    if (!runnable || this.closing || slot.abortedWith()) return false;
    if (!WORKER_TYPES.has(runnable.check.checkType)) return false;
    const request = runnable.check.request as { setupScript?: unknown; tearDownScript?: unknown } | null;
    if (request?.setupScript || request?.tearDownScript) return false;
    return this.up > 0;
  }

  /** Runs a job on the least busy worker; settles like JobRunner.run. */
  run(prepared: PreparedJob, slot: JobSlot, onAttempt: (result: CheckResultEntry, line: string | undefined) => Promise<void>): Promise<JobCompletion> {
    const handle = this.pick();
    const runnable = prepared.runnable;
    if (!handle || !runnable) return Promise.reject(new Error('no check worker is up'));
    const { jobId } = prepared;
    const entered = slot.enter(jobId);
    const post = (message: ToWorker) => handle.outbox.post(message);
    const forwardAbort = () => {
      const reason: unknown = entered.signal.reason;
      const aborted = reason instanceof JobAbortedError ? reason : new JobAbortedError('shutdown', reason instanceof Error ? reason.message : 'Aborted');
      post({ type: 'abort', jobId, error: { reason: aborted.reason, message: aborted.message } });
    };
    const forwardNoMoreAttempts = () => {
      // The job's own abort says so already.
      if (entered.signal.aborted) return;
      const reason: unknown = entered.noMoreAttempts?.reason;
      const error = reason instanceof JobAbortedError ? reason : new JobAbortedError('shutdown', reason instanceof Error ? reason.message : 'Aborted');
      post({ type: 'no-more-attempts', jobId, error: { reason: error.reason, message: error.message } });
    };
    return new Promise<JobCompletion>((resolve, reject) => {
      handle.jobs.set(jobId, {
        prepared,
        signal: entered.signal,
        onAttempt,
        settle: (completion) => {
          handle.jobs.delete(jobId);
          entered.signal.removeEventListener('abort', forwardAbort);
          entered.noMoreAttempts?.removeEventListener('abort', forwardNoMoreAttempts);
          entered.leave();
          if (completion instanceof Error) reject(completion);
          else resolve(completion);
        },
      });
      post({ type: 'run', job: wireJob(prepared, runnable.check) });
      if (entered.signal.aborted) forwardAbort();
      else entered.signal.addEventListener('abort', forwardAbort, { once: true });
      if (entered.noMoreAttempts?.aborted) forwardNoMoreAttempts();
      else entered.noMoreAttempts?.addEventListener('abort', forwardNoMoreAttempts, { once: true });
    });
  }

  /** Stops every worker: asked to flush and exit, terminated after WORKER_STOP_TIMEOUT_MS. Jobs still on one end as errors. */
  async close(): Promise<void> {
    this.closing = true;
    clearInterval(this.stallCheck);
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.clear();
    await Promise.all(
      this.handles.filter(Boolean).map(async (handle) => {
        const exited = new Promise<void>((resolve) => handle.worker.once('exit', () => resolve()));
        if (!handle.up) {
          await handle.worker.terminate();
          return;
        }
        handle.outbox.post({ type: 'stop' });
        handle.outbox.flush();
        let timer: NodeJS.Timeout | undefined;
        const late = new Promise<'late'>((resolve) => {
          timer = setTimeout(() => resolve('late'), WORKER_STOP_TIMEOUT_MS);
        });
        if ((await Promise.race([exited, late])) === 'late') await handle.worker.terminate();
        clearTimeout(timer);
        await exited;
      }),
    );
  }

  private pick(): Handle | undefined {
    let best: Handle | undefined;
    for (const handle of this.handles) if (handle?.up && (!best || handle.jobs.size < best.jobs.size)) best = handle;
    return best;
  }

  private launch(index: number): void {
    const started = this.spawn(index);
    this.starting.set(index, started);
    started.then(
      () => this.starting.delete(index),
      (error: unknown) => {
        this.starting.delete(index);
        if (!this.closing) this.options.logger.error({ worker: index, err: error }, 'a check worker could not start; trying again');
      },
    );
  }

  private spawn(index: number): Promise<void> {
    const { options } = this;
    const setup: WorkerSetup = {
      settings: options.settings,
      agentSecrets: options.agentSecrets,
      logLevel: options.logLevel,
      logStream: options.logStream,
      diagnostics: options.run.diagnostics !== false,
      ...(options.bodyMemory ? { bodyMemory: options.bodyMemory.share(index + 1) } : {}),
      ...(options.run.maxResultBytes !== undefined ? { maxResultBytes: options.run.maxResultBytes } : {}),
      ...(options.run.artifacts ? { artifactsRoot: options.run.artifacts.root } : {}),
      ...(options.run.testFault ? { testFault: options.run.testFault } : {}),
      ...(options.checkSeriesMinSeconds !== undefined ? { checkSeriesMinSeconds: options.checkSeriesMinSeconds } : {}),
    };
    const worker = new Worker(options.entry ?? new URL('./worker.js', import.meta.url), { workerData: setup, name: `outpost-check-worker-${index}` });
    const outbox = new Outbox<ToWorker>(
      (messages) => worker.postMessage(messages),
      (message, error) => this.unsendable(handle, message, error),
    );
    const handle: Handle = { index, worker, outbox, up: false, jobs: new Map(), inFlight: 0, lastHeard: Date.now() };
    this.handles[index] = handle;
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        reject(new Error(`check worker ${index} did not start within ${WORKER_START_TIMEOUT_MS} ms`));
        void worker.terminate();
      }, WORKER_START_TIMEOUT_MS);
      let lastError: unknown;
      worker.on('message', (messages: FromWorker[]) => {
        handle.lastHeard = Date.now();
        for (const message of messages) {
          if (message.type === 'ready') {
            clearTimeout(timer);
            handle.up = true;
            options.metrics.checkWorkers.set(this.up);
            resolve();
          } else this.onMessage(handle, message);
        }
      });
      worker.on('error', (error) => {
        lastError = error;
      });
      worker.on('exit', (code) => {
        clearTimeout(timer);
        const wasUp = handle.up;
        handle.up = false;
        options.metrics.checkWorkers.set(this.up);
        if (!wasUp) reject(lastError instanceof Error ? lastError : new Error(`check worker ${index} exited with code ${code} before it was ready`));
        this.onExit(handle, lastError, code);
      });
    });
  }

  private onMessage(handle: Handle, message: FromWorker): void {
    const { options } = this;
    switch (message.type) {
      case 'metrics':
        handle.inFlight += applyMetricOps(options.metrics, message.ops);
        return;
      case 'attempt': {
        const job = handle.jobs.get(message.jobId);
        const answer = (error?: unknown) =>
          handle.outbox.post({ type: 'attempt-handled', jobId: message.jobId, seq: message.seq, ...(error !== undefined ? { error: wireError(error) } : {}) });
        if (!job) return answer(new Error('the job is no longer running'));
        job.onAttempt(message.result, message.line).then(() => answer(), answer);
        return;
      }
      case 'done': {
        const job = handle.jobs.get(message.jobId);
        if (!job) return;
        const release = () => {
          if (handle.up && this.handles[handle.index] === handle) handle.outbox.post({ type: 'release', jobId: message.jobId });
        };
        const { prepared } = job;
        job.settle(
          message.result === null
            ? { jobId: message.jobId, result: null, prepared, reason: 'lease-lost', release }
            : { jobId: message.jobId, result: message.result, line: message.line, prepared, release },
        );
        return;
      }
      case 'failed': {
        // The job ran but its end could not reach this thread (a result that cannot be cloned, a runner that
        // threw): it still ends as a result, never as a rejection that would leave its slot open.
        const job = handle.jobs.get(message.jobId);
        if (!job) return;
        const error = fromWire(message.error);
        // A job that ran to its end is in outpost_jobs_total already (counted): not once more.
        job.settle(this.crashResult(job.prepared, `its check worker could not hand over its result (${error.name}: ${error.message})`, message.counted !== true));
        return;
      }
      case 'executor-error':
        options.run.onExecutorError?.(fromWire(message.error), {
          checkType: message.checkType,
          scrubber: this.secrets.agentScrubber,
          check: message.check,
          variables: message.variables,
        });
        return;
      case 'publish': {
        const job = handle.jobs.get(message.jobId);
        const store = options.run.artifacts;
        const answer = (published: Published) =>
          handle.outbox.post({ type: 'published', callId: message.callId, published });
        if (!store || !job) {
          answer(notPublished('the job is no longer running'));
          return;
        }
        store.publish(message.jobId, message.dir, message.files, job.signal, job.prepared.logger).then(answer, (error: unknown) =>
          answer(notPublished(error)),
        );
        return;
      }
      case 'ready':
      case 'beat':
        return;
    }
  }

  /** A message that could not be cloned fails alone: a job that cannot be handed over ends as the error its run() gives. */
  private unsendable(handle: Handle, message: ToWorker, error: unknown): void {
    if (message.type === 'run') {
      const job = handle.jobs.get(message.job.jobId);
      const why = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
      job?.settle(this.crashResult(job.prepared, `it could not be handed to a check worker (${why})`));
      return;
    }
    if (message.type === 'published') {
      handle.outbox.post({ type: 'published', callId: message.callId, published: notPublished(error) });
      return;
    }
    this.options.logger.error({ worker: handle.index, err: error, message: message.type }, 'a message to a check worker could not be sent');
  }

  /** A worker stopped: its jobs end as error results (never lost), its memory goes back, and it starts again unless the pool is closing. */
  private onExit(handle: Handle, error: unknown, code: number): void {
    const { options } = this;
    const why = handle.endedFor ?? (error instanceof Error ? `${error.name}: ${error.message}` : `exit code ${code}`);
    if (!this.closing) options.logger.error({ worker: handle.index, err: error, code, jobs: handle.jobs.size }, 'a check worker stopped unexpectedly; its jobs end as errors and it is restarted');
    for (let i = 0; i < handle.inFlight; i++) options.metrics.jobsInFlight.dec();
    handle.inFlight = 0;
    for (const job of [...handle.jobs.values()]) job.settle(this.crashResult(job.prepared, this.closing ? 'the agent stopped its check workers' : `its check worker stopped unexpectedly (${why})`));
    options.bodyMemory?.reclaim(handle.index + 1);
    if (this.closing) return;
    options.metrics.checkWorkerRestarts.inc();
    const now = Date.now();
    this.crashes = now - this.lastCrash > CRASH_MEMORY_MS ? 1 : this.crashes + 1;
    this.lastCrash = now;
    const delay = Math.min(RESTART_MAX_MS, RESTART_FIRST_MS * 2 ** Math.min(this.crashes - 1, 16));
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      if (this.closing) return;
      this.launch(handle.index);
    }, delay);
    this.timers.add(timer);
  }

  /** The error result of a job whose worker died: scrubbed and capped like every other result. */
  private crashResult(prepared: PreparedJob, why: string, count = true): JobCompletion {
    const { metrics } = this.options;
    const checkType = prepared.checkIdentity.checkType ?? 'UNKNOWN';
    const entry = errorResult(`Internal error: the job did not finish: ${why}`, prepared.identity, prepared.checkIdentity, prepared.runnable?.executor.member);
    const secrets = this.secrets.forJob([...prepared.variables, ...(prepared.runnable?.check.environmentVariables ?? [])]);
    const result = capResultSize(secrets.scrubResult(entry), this.options.run.maxResultBytes ?? DEFAULT_MAX_RESULT_BYTES);
    secrets.release();
    if (count) metrics.jobsTotal.inc({ check_type: checkType, outcome: 'error' });
    metrics.checks.record(result, { frequencySeconds: prepared.runnable?.check.frequency });
    prepared.logger.error({ target: prepared.runnable?.target }, `job ended as an error: ${why}`);
    return { jobId: prepared.jobId, result, line: undefined, prepared, release: () => undefined };
  }
}

function wireJob(prepared: PreparedJob, check: WireJob['check']): WireJob {
  // The worker's root logger has its own pid binding.
  const { pid: _pid, hostname: _hostname, ...logBindings } = prepared.logger.bindings();
  return {
    jobId: prepared.jobId,
    identity: prepared.identity,
    checkIdentity: prepared.checkIdentity,
    check,
    variables: prepared.variables,
    triggerSource: prepared.triggerSource,
    logBindings,
    ...(prepared.jobLogNotes ? { jobLogNotes: prepared.jobLogNotes } : {}),
  };
}
