// Local mode's in-process agent: claims the jobs of one location straight
// from the store (no HTTP hop, no spool: the store is the durable place),
// runs them on the JobQueue, keeps their leases, and hands every ATTEMPT and
// FINAL result to the store and then to `deliver` (stdout, --results).

import type { ExecutorRegistry } from '../checks/executor-registry.js';
import { JobAbortedError } from '../core/errors.js';
import type { Job } from '../core/protocol.js';
import type { CheckResultEntry } from '../core/result-entry.js';
import { prepareJob } from '../jobs/prepare.js';
import type { JobQueue } from '../jobs/queue.js';
import type { Logger } from '../observability/logger.js';
import type { Store } from '../store/store.js';
import { storeFailureLevel } from '../store/write-health.js';

/** Claims look again this often without a wake-up: a lease that expired, a job queued before start. */
export const DEFAULT_POLL_MS = 1_000;

export interface StoreSourceOptions {
  store: Store;
  queue: JobQueue;
  registry: ExecutorRegistry;
  logger: Logger;
  /** The location whose jobs this process runs. */
  location: string;
  /** Who holds the leases in the store. */
  agentId: string;
  checkTypes: readonly string[];
  runtimes: readonly string[];
  leaseMs: number;
  /** Called after the store has the result (or failed to take it). */
  deliver: (result: CheckResultEntry) => Promise<void>;
  pollMs?: number;
}

export class StoreSource {
  /** Jobs running, with their logger: every line about a job carries jobId, checkId and checkType (README). */
  private readonly held = new Map<string, Logger>();
  private readonly stopping = new AbortController();
  private loop: Promise<void> | undefined;
  private leaseTimer: NodeJS.Timeout | undefined;
  private wakeUp: (() => void) | undefined;
  private woken = false;
  /** FINAL results taken from the queue and not yet handed on: their jobs' slots are free already. */
  private delivering = 0;
  private delivered: (() => void) | undefined;

  constructor(private readonly options: StoreSourceOptions) {}

  start(): void {
    this.loop = this.claimLoop();
    // A lease is extended well before it runs out; a store that is slow once does not lose a job.
    this.leaseTimer = setInterval(() => void this.extendLeases(), Math.max(1_000, Math.floor(this.options.leaseMs / 3)));
    this.leaseTimer.unref();
  }

  /** A job was queued for the location: claim at once rather than at the next poll. */
  wake(): void {
    this.woken = true;
    this.wakeUp?.();
  }

  /** Stops claiming; resolves once the claim loop has ended. Jobs running go on (drain waits for them). */
  async stop(): Promise<void> {
    this.stopping.abort();
    this.wakeUp?.();
    await this.loop;
  }

  /** Stops extending leases: after the drain, when no job is left running. */
  close(): void {
    clearInterval(this.leaseTimer);
  }

  private get stopped(): boolean {
    return this.stopping.signal.aborted;
  }

  private async claimLoop(): Promise<void> {
    const { store, queue, logger, location, agentId, checkTypes, runtimes, leaseMs } = this.options;
    while (!this.stopped) {
      await queue.waitForFreeSlot(this.stopping.signal);
      // Backpressure: while results cannot be handed on (a stdout nobody reads), no more jobs are taken on to make more.
      await this.deliveriesBelow(queue.concurrency);
      if (this.stopped) break;
      this.woken = false;
      let jobs: Job[] = [];
      try {
        jobs = await store.claimJobs({ location, agentId, checkTypes, runtimes, max: queue.free, leaseMs, now: new Date() });
      } catch (error) {
        logger[storeFailureLevel(error)]({ err: error }, 'claiming jobs from the store failed');
      }
      if (this.stopped && jobs.length > 0) {
        // Shutting down: the jobs go back to the queue for the next start.
        await store.releaseJobs(agentId, jobs.map((job) => job.id)).catch((error: unknown) => logger.warn({ err: error }, 'handing claimed jobs back failed'));
        break;
      }
      for (const job of jobs) this.run(job);
      if (jobs.length === 0) await this.idle();
    }
  }

  /** Resolves once fewer than `max` results wait to be handed on, or on stop(). */
  private async deliveriesBelow(max: number): Promise<void> {
    while (this.delivering >= max && !this.stopped) {
      await new Promise<void>((resolve) => {
        const done = () => {
          this.stopping.signal.removeEventListener('abort', done);
          resolve();
        };
        this.delivered = done;
        this.stopping.signal.addEventListener('abort', done, { once: true });
      });
    }
  }

  /** Waits for a wake-up, the poll interval or stop(). */
  private idle(): Promise<void> {
    if (this.woken || this.stopped) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const timer = setTimeout(done, this.options.pollMs ?? DEFAULT_POLL_MS);
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.wakeUp = () => {
        this.wakeUp = undefined;
        done();
      };
    });
  }

  private run(job: Job): void {
    const { queue, registry, logger } = this.options;
    const prepared = prepareJob(job, registry, logger);
    const jobLogger = prepared.logger;
    this.held.set(job.id, jobLogger);
    queue
      .submit(prepared, (attempt) => this.report(job.id, attempt, jobLogger))
      .then(async (completion) => {
        this.delivering++;
        try {
          // The memory its body held is given back once the result is written out, not merely queued to be.
          if (completion.result) await this.report(job.id, completion.result, jobLogger);
        } finally {
          completion.release();
          this.delivering--;
          this.delivered?.();
          this.delivered = undefined;
        }
      })
      .catch((error: unknown) => jobLogger.error({ err: error }, 'running a job failed'))
      .finally(() => this.held.delete(job.id));
  }

  private async report(jobId: string, result: CheckResultEntry, logger: Logger): Promise<void> {
    const { store, location, agentId } = this.options;
    try {
      const outcome = await store.acceptResults(agentId, location, [{ jobId, resultId: result.id, result }], new Date());
      for (const rejected of outcome.rejected) {
        logger.warn({ resultId: rejected.resultId, status: rejected.statusCode, reason: rejected.message }, 'the store did not keep a result');
      }
    } catch (error) {
      // Printed and appended all the same: the run goes on without the store.
      logger[storeFailureLevel(error)]({ err: error, resultId: result.id }, 'storing a result failed');
    }
    await this.options.deliver(result);
  }

  private async extendLeases(): Promise<void> {
    const { store, queue, logger, location, agentId, leaseMs } = this.options;
    const jobIds = [...this.held.keys()];
    if (jobIds.length === 0) return;
    try {
      const { lost } = await store.extendLeases(agentId, location, jobIds, leaseMs, new Date());
      for (const jobId of lost) {
        const jobLogger = this.held.get(jobId);
        if (!jobLogger) continue;
        jobLogger.warn('lease lost: the job timed out or its check was deleted; aborting it');
        queue.abort(jobId, new JobAbortedError('lease-lost', 'Aborted: the job lease was lost'));
      }
    } catch (error) {
      logger[storeFailureLevel(error, 'warn')]({ err: error, jobs: jobIds.length }, 'extending leases in the store failed');
    }
  }
}
