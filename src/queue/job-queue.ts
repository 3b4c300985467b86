// Runs prepared jobs with bounded concurrency (p-queue), a hard per-job
// timeout through an AbortSignal, and a hanging-job watch (DESIGN §2).

import { performance } from 'node:perf_hooks';
import PQueue from 'p-queue';
import { JobAbortedError } from '../checks/errors.js';
import type { PreparedJob } from '../jobs/prepare.js';
import type { Metrics } from '../observability/metrics.js';
import { buildResult, type CheckResultEntry, errorResult, resultOutcome } from '../results/result.js';

/** An executor that ignores its abort signal this long past the cap is abandoned. */
export const ABANDON_AFTER_MS = 5_000;

export type JobCompletion =
  | { jobId: string; result: CheckResultEntry; prepared: PreparedJob }
  | { jobId: string; result: null; prepared: PreparedJob; reason: 'lease-lost' };

interface Running {
  controller: AbortController;
  startedAt: number;
}

export class JobQueue {
  private readonly queue: PQueue;
  private readonly running = new Map<string, Running>();

  constructor(
    readonly concurrency: number,
    private readonly metrics: Metrics,
  ) {
    this.queue = new PQueue({ concurrency });
    metrics.queueCapacity.set(concurrency);
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
    return this.running.has(jobId);
  }

  /** Resolves when a slot frees (at once if one is free), or when `signal` aborts. */
  async waitForFreeSlot(signal?: AbortSignal): Promise<void> {
    while (this.free === 0 && !signal?.aborted) {
      await new Promise<void>((resolve) => {
        const done = () => {
          this.queue.off('next', done);
          signal?.removeEventListener('abort', done);
          resolve();
        };
        this.queue.on('next', done);
        signal?.addEventListener('abort', done, { once: true });
      });
    }
  }

  async onIdle(): Promise<void> {
    await this.queue.onIdle();
  }

  /** Aborts one job (lease lost) or all of them (end of shutdown grace). */
  abort(jobId: string, error: JobAbortedError): void {
    this.running.get(jobId)?.controller.abort(error);
  }

  abortAll(error: JobAbortedError): void {
    this.queue.clear();
    for (const { controller } of this.running.values()) controller.abort(error);
  }

  submit(prepared: PreparedJob): Promise<JobCompletion> {
    const task = () => this.execute(prepared);
    return this.queue.add(task) as Promise<JobCompletion>;
  }

  private async execute(prepared: PreparedJob): Promise<JobCompletion> {
    const started = performance.now();
    const startedAt = new Date();
    const { jobId, logger } = prepared;
    const runnable = prepared.runnable;
    const checkType = prepared.checkIdentity.checkType ?? 'UNKNOWN';
    if (!runnable) {
      logger.warn({ problem: prepared.invalid }, 'job rejected: invalid definition');
      const result = errorResult(prepared.invalid ?? 'Invalid job', prepared.identity, prepared.checkIdentity);
      this.metrics.jobsTotal.inc({ checkType, outcome: 'error' });
      return { jobId, result, prepared };
    }

    const { check, executor, target } = runnable;
    const controller = new AbortController();
    this.running.set(jobId, { controller, startedAt: started });
    this.metrics.jobsInFlight.inc();
    const capMs = executor.limits.capMs;
    const hardTimeout = setTimeout(
      () => controller.abort(new JobAbortedError('timeout', `Timed out after ${capMs} ms (the ${check.checkType} check limit)`)),
      capMs,
    );
    const hangingWatch = setTimeout(() => {
      logger.warn(
        { target, elapsedMs: Math.round(performance.now() - started), expectedMs: check.maxResponseTime },
        'job is running past its expected time',
      );
    }, check.maxResponseTime + 1);
    hangingWatch.unref();
    let abandonTimer: NodeJS.Timeout | undefined;
    const abandoned = new Promise<'abandoned'>((resolve) => {
      controller.signal.addEventListener(
        'abort',
        () => {
          abandonTimer = setTimeout(() => resolve('abandoned'), ABANDON_AFTER_MS);
        },
        { once: true },
      );
    });

    try {
      logger.debug({ target }, 'job started');
      const jobLog: string[] = [];
      const run = executor.run(check, { signal: controller.signal, logger, jobLog });
      const outcome = await Promise.race([run, abandoned]);
      const reason = controller.signal.reason;
      if (reason instanceof JobAbortedError && reason.reason === 'lease-lost') {
        logger.warn({ target }, 'job aborted: lease lost, result discarded');
        this.metrics.jobsTotal.inc({ checkType, outcome: 'aborted' });
        return { jobId, result: null, prepared, reason: 'lease-lost' };
      }
      const result =
        outcome === 'abandoned'
          ? errorResult(
              `${reason instanceof Error ? reason.message : 'Aborted'}; the executor did not stop within ${ABANDON_AFTER_MS} ms`,
              prepared.identity,
              prepared.checkIdentity,
              executor.member,
              startedAt,
            )
          : buildResult(outcome, check, prepared.identity, check);
      if (outcome === 'abandoned') logger.error({ target }, 'executor ignored its abort signal; job abandoned');
      const label = resultOutcome(result);
      this.metrics.jobsTotal.inc({ checkType, outcome: label });
      this.metrics.jobDuration.observe({ checkType }, (performance.now() - started) / 1000);
      logger.debug({ target, outcome: label, responseTime: result.responseTime }, 'job finished');
      return { jobId, result, prepared };
    } catch (error) {
      // Executors report target failures as outcomes; reaching here is a bug in one.
      logger.error({ err: error, target }, 'executor threw');
      this.metrics.jobsTotal.inc({ checkType, outcome: 'error' });
      const message = `Internal error in the ${check.checkType} executor: ${(error as Error)?.message ?? String(error)}`;
      const result = errorResult(message, prepared.identity, prepared.checkIdentity, executor.member, startedAt);
      return { jobId, result, prepared };
    } finally {
      clearTimeout(hardTimeout);
      clearTimeout(hangingWatch);
      if (abandonTimer) clearTimeout(abandonTimer);
      this.running.delete(jobId);
      this.metrics.jobsInFlight.dec();
    }
  }
}
