// The job queue: bounded concurrency (p-queue), aborting running jobs, and
// the one shutdown drain every mode uses. Running a job is src/jobs/run.ts.

import PQueue from 'p-queue';
import type { CheckSettings } from '../checks/executor.js';
import type { JobAbortedError } from '../core/errors.js';
import type { CheckResultEntry } from '../core/result-entry.js';
import type { Metrics } from '../observability/metrics.js';
import type { PreparedJob } from './prepare.js';
import { type JobCompletion, JobRunner, type JobSlot, type RunOptions } from './run.js';
import type { WorkerPool } from './workers/pool.js';

export type { ExecutorErrorInfo, JobCompletion, TestFault } from './run.js';
export interface QueueOptions extends RunOptions {
  /** Check worker threads that run the jobs they can (src/jobs/workers/pool.ts); without it every job runs here. */
  workers?: WorkerPool;
}

export interface DrainOptions {
  /** Stops whatever submits jobs; awaited before the wait, and counted in the grace. */
  stopTaking?: () => Promise<void> | void;
  /** What jobs still running at the end of the grace are aborted with (their results say so). */
  abortWith: JobAbortedError;
  /** Called once the grace is over, just before the jobs left are aborted. */
  onGraceOver?: () => void;
  /**
   * After that abort, how long the jobs left get to be reported (their results handed on); without it, as long
   * as it takes. Past it the drain ends without them: a sink that cannot take a result (a stdout nobody reads,
   * src/local/sink.ts) must not hold the process forever.
   */
  reportWithinMs?: number;
  /** Called when `reportWithinMs` ran out, with the number of jobs not reported. */
  onReportTimeout?: (unreported: number) => void;
}

/** The bound local and once modes give the final report after the grace (docs/configuration.md "Shutdown"): the agent's spool flush gets as much. */
export const FINAL_REPORT_MS = 10_000;

export class JobQueue {
  private readonly queue: PQueue;
  private readonly runner: JobRunner;
  private readonly running = new Map<string, AbortController>();
  /** Jobs submitted and not yet started (a duplicate of one is not a new job). */
  private readonly waiting = new Set<string>();
  /** Jobs aborted while they waited: each starts aborted. */
  private readonly abortedWaiting = new Map<string, JobAbortedError>();
  private abortedWith: JobAbortedError | undefined;
  /** Aborted when a drain begins: jobs waiting for a retry end then, not at the end of the grace. */
  private readonly draining = new AbortController();
  /** One promise per submitted job, settled once its completion is released (its result handed on) or it failed. */
  private readonly unreported = new Set<Promise<void>>();
  private readonly slot: JobSlot;
  private readonly workers: WorkerPool | undefined;

  constructor(
    readonly concurrency: number,
    metrics: Metrics,
    settings: CheckSettings,
    options: QueueOptions = {},
  ) {
    this.runner = new JobRunner(metrics, settings, options);
    this.workers = options.workers;
    this.queue = new PQueue({ concurrency });
    metrics.queueCapacity.set(concurrency);
    this.slot = {
      abortedWith: () => this.abortedWith,
      enter: (jobId) => {
        const controller = new AbortController();
        // Aborted while it waited for a slot (its lease was lost): it starts aborted, and ends as such.
        const early = this.abortedWaiting.get(jobId);
        if (early) controller.abort(early);
        this.abortedWaiting.delete(jobId);
        this.waiting.delete(jobId);
        this.running.set(jobId, controller);
        const noMoreAttempts = this.noMoreAttempts(controller.signal);
        return {
          signal: controller.signal,
          noMoreAttempts: noMoreAttempts.signal,
          leave: () => {
            noMoreAttempts.detach();
            this.running.delete(jobId);
          },
        };
      },
    };
  }

  /**
   * A signal that aborts with the job's own abort or the drain's start, whichever comes first (with its
   * reason). Hand-made rather than AbortSignal.any, so that the queue's one long-lived drain signal holds
   * no listener of a job that has left.
   */
  private noMoreAttempts(job: AbortSignal): { signal: AbortSignal; detach: () => void } {
    const controller = new AbortController();
    const fromJob = () => controller.abort(job.reason);
    const fromDrain = () => controller.abort(this.draining.signal.reason);
    const detach = () => {
      job.removeEventListener('abort', fromJob);
      this.draining.signal.removeEventListener('abort', fromDrain);
    };
    if (job.aborted) fromJob();
    else if (this.draining.signal.aborted) fromDrain();
    else {
      job.addEventListener('abort', fromJob, { once: true });
      this.draining.signal.addEventListener('abort', fromDrain, { once: true });
    }
    return { signal: controller.signal, detach };
  }

  /** Jobs running now. */
  get inFlight(): number {
    return this.queue.pending;
  }

  /** Jobs accepted but not yet started. */
  get queued(): number {
    return this.queue.size;
  }

  /** Slots a source may fill without jobs waiting in line. */
  get free(): number {
    return Math.max(0, this.concurrency - this.queue.pending - this.queue.size);
  }

  runningJobIds(): string[] {
    return [...this.running.keys()];
  }

  has(jobId: string): boolean {
    return this.running.has(jobId) || this.waiting.has(jobId);
  }

  /** Resolves when a slot frees (at once if one is free), or when `signal` aborts. */
  async waitForFreeSlot(signal?: AbortSignal): Promise<void> {
    await this.waitUntilFree(1, signal);
  }

  /**
   * Resolves once at least `slots` slots are free (at once if they are), when
   * `withinMs` has passed, or when `signal` aborts: whichever comes first.
   */
  async waitUntilFree(slots: number, signal?: AbortSignal, withinMs = Number.POSITIVE_INFINITY): Promise<void> {
    if (this.free >= slots || signal?.aborted || withinMs <= 0) return;
    await new Promise<void>((resolve) => {
      let timer: NodeJS.Timeout | undefined;
      const finish = () => {
        this.queue.off('next', onNext);
        signal?.removeEventListener('abort', finish);
        clearTimeout(timer);
        resolve();
      };
      const onNext = () => {
        if (this.free >= slots) finish();
      };
      this.queue.on('next', onNext);
      signal?.addEventListener('abort', finish, { once: true });
      if (Number.isFinite(withinMs)) timer = setTimeout(finish, withinMs);
    });
  }

  /** Aborts one job (lease lost). */
  abort(jobId: string, error: JobAbortedError): void {
    const running = this.running.get(jobId);
    if (running) running.abort(error);
    else if (this.waiting.has(jobId)) this.abortedWaiting.set(jobId, error);
  }

  /**
   * Aborts every running job, and makes every job still waiting finish at
   * once with an error result (p-queue's clear() would drop them with their
   * promises never settling).
   */
  abortAll(error: JobAbortedError): void {
    this.abortedWith = error;
    for (const controller of this.running.values()) controller.abort(error);
  }

  /**
   * Runs a job to its FINAL result. Failed attempts that its retry strategy
   * retries are handed to `onAttempt` as ATTEMPT results as they happen.
   * The job counts for drain() until its completion is released: callers
   * release it once the result is handed on, whether or not that worked.
   */
  submit(prepared: PreparedJob, onAttempt: (result: CheckResultEntry, line: string | undefined) => Promise<void> = async () => undefined): Promise<JobCompletion> {
    let reported: () => void = () => undefined;
    const settled = new Promise<void>((resolve) => {
      reported = resolve;
    });
    this.unreported.add(settled);
    void settled.then(() => this.unreported.delete(settled));
    // Waiting until the runner enters the slot (or ends without: an invalid job): an abort meanwhile is kept for then.
    this.waiting.add(prepared.jobId);
    const forget = () => {
      this.waiting.delete(prepared.jobId);
      this.abortedWaiting.delete(prepared.jobId);
    };
    const task = () =>
      this.workers?.canRun(prepared, this.slot) ? this.workers.run(prepared, this.slot, onAttempt) : this.runner.run(prepared, this.slot, onAttempt);
    return (this.queue.add(task) as Promise<JobCompletion>).finally(forget).then(
      (completion) => ({
        ...completion,
        release: () => {
          completion.release();
          reported();
        },
      }),
      (error: unknown) => {
        reported();
        throw error;
      },
    );
  }

  /**
   * Shutdown: ends every wait for a retry (no job starts another attempt:
   * such a job ends with `abortWith`'s error, "before attempt N"), stops taking jobs, waits up to `graceMs` (from the call) for
   * every job submitted to be reported, then aborts those left (they end
   * with `abortWith`'s error as their result) and waits for them to be
   * reported too, up to `reportWithinMs`. True when everything finished within the grace.
   */
  async drain(graceMs: number, options: DrainOptions): Promise<boolean> {
    const graceEnd = Date.now() + graceMs;
    // Running attempts may finish within the grace; no job starts another (a retry's wait ends now).
    this.draining.abort(options.abortWith);
    await options.stopTaking?.();
    const drained = await this.reportedWithin(graceEnd - Date.now());
    if (!drained) {
      options.onGraceOver?.();
      this.abortAll(options.abortWith);
      const reported = await this.reportedWithin(options.reportWithinMs ?? Number.POSITIVE_INFINITY);
      if (!reported) options.onReportTimeout?.(this.unreported.size);
    }
    return drained;
  }

  /** True once every job is reported, false if `ms` ran out first. */
  private async reportedWithin(ms: number): Promise<boolean> {
    if (!Number.isFinite(ms)) {
      await this.allReported();
      return true;
    }
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<false>((resolve) => {
      timer = setTimeout(() => resolve(false), Math.max(0, ms));
      timer.unref();
    });
    try {
      return await Promise.race([this.allReported().then(() => true as const), late]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Resolves once no submitted job is left unreported, jobs submitted meanwhile included. */
  private async allReported(): Promise<void> {
    while (this.unreported.size > 0) await Promise.all([...this.unreported]);
  }
}
