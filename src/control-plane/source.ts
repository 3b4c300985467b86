// Claims jobs from the control plane, only for free slots, and hands them to
// the queue. Claiming pauses while the spool is over its bound.

import type { ExecutorRegistry } from '../checks/executor.js';
import { prepareJob } from '../jobs/prepare.js';
import type { Logger } from '../observability/logger.js';
import type { JobCompletion, JobQueue } from '../queue/job-queue.js';
import type { CheckResultEntry } from '../results/result.js';
import { sleep } from './backoff.js';
import { type ControlPlaneClient, type ControlPlaneError, withRetry } from './client.js';
import type { LeaseKeeper } from './leases.js';
import type { AgentDescriptor, Job } from './protocol.js';
import type { Spool } from './spool.js';

/** When fewer than half the slots are free, wait this long for more to free up, so one claim covers several. */
const CLAIM_GATHER_MS = 50;

export interface SourceOptions {
  queue: JobQueue;
  spool: Spool;
  client: ControlPlaneClient;
  leases: LeaseKeeper;
  registry: ExecutorRegistry;
  logger: Logger;
  agent: AgentDescriptor;
  waitSeconds: number;
  authRetryMs: number;
  onCompletion: (completion: JobCompletion, job: Job) => Promise<void>;
  /** A failed attempt that will be retried (resultType ATTEMPT). */
  onAttempt: (result: CheckResultEntry, job: Job) => Promise<void>;
  onFailure: (error: ControlPlaneError) => void;
}

export class ControlPlaneSource {
  private readonly stopped = new AbortController();
  private loop: Promise<void> | undefined;
  private spoolPaused = false;
  /** Jobs handed to the queue whose results are not yet spooled. */
  readonly inProgress = new Set<Promise<void>>();

  constructor(private readonly options: SourceOptions) {}

  start(): void {
    this.loop ??= this.run();
  }

  /** Stops claiming (an open long poll is cancelled) and waits for the loop to end. */
  async stop(): Promise<void> {
    this.stopped.abort();
    await this.loop;
  }

  private async run(): Promise<void> {
    const { queue, spool, client, logger } = this.options;
    const signal = this.stopped.signal;
    while (!signal.aborted) {
      await queue.waitForFreeSlot(signal);
      if (signal.aborted) break;
      // Jobs already claimed will add their results too: counted, so that a slow disk (a job's slot
      // frees before its result is synced) cannot let claims run past the spool's bound.
      const incoming = this.inProgress.size;
      if (spool.isFull(incoming)) {
        if (!this.spoolPaused) {
          logger.warn({ spooled: spool.results, incoming, bytes: spool.bytes }, 'spool is full: claiming paused until it drains');
          this.spoolPaused = true;
        }
        if (spool.isFull()) await spool.waitUntilDrained(signal);
        else await this.oneSpooled(signal);
        continue;
      }
      if (this.spoolPaused) {
        logger.info({ spooled: spool.results }, 'spool drained: claiming resumed');
        this.spoolPaused = false;
      }
      if (queue.free < queue.concurrency / 2) await sleep(CLAIM_GATHER_MS, signal);
      const max = queue.free;
      if (max === 0 || signal.aborted) continue;
      let jobs: Job[];
      try {
        const answer = await withRetry(
          // Until the control plane has accepted the key, ask without waiting: readiness hangs
          // on that first answer, and an idle long poll would hold it back for waitSeconds.
          () =>
            client.claim({ max, waitSeconds: client.authorized === true ? this.options.waitSeconds : 0, agent: this.options.agent }, signal),
          { signal, logger, authRetryMs: this.options.authRetryMs, onFailure: this.options.onFailure },
        );
        jobs = answer.jobs;
      } catch (error) {
        if (signal.aborted) break;
        logger.error({ err: error }, 'claim refused; trying again in 5 s');
        await sleep(5_000, signal);
        continue;
      }
      if (jobs.length > max) {
        logger.warn({ max, received: jobs.length }, 'control plane sent more jobs than claimed; running them anyway');
      }
      for (const job of jobs) this.accept(job);
    }
  }

  /** Resolves when one of the jobs in progress has its result spooled (or the source stops). */
  private async oneSpooled(signal: AbortSignal): Promise<void> {
    if (this.inProgress.size === 0 || signal.aborted) return;
    let onAbort: (() => void) | undefined;
    const aborted = new Promise<void>((resolve) => {
      onAbort = resolve;
      signal.addEventListener('abort', onAbort, { once: true });
    });
    await Promise.race([...this.inProgress, aborted]);
    if (onAbort) signal.removeEventListener('abort', onAbort);
  }

  private accept(job: Job): void {
    const { queue, leases, registry, logger } = this.options;
    if (!job || typeof job !== 'object' || typeof job.id !== 'string' || job.id.length === 0) {
      // Without an id no result can be reported; the lease will expire on the service's side.
      logger.error({ job: typeof job === 'object' ? Object.keys(job ?? {}) : typeof job }, 'claimed job has no id; ignoring it');
      return;
    }
    if (queue.has(job.id)) {
      logger.warn({ jobId: job.id }, 'job claimed twice while still running; ignoring the second copy');
      return;
    }
    leases.track(job.id, job.leaseExpiresAt);
    const prepared = prepareJob(job, registry, logger);
    const done = queue
      .submit(prepared, (result) => this.options.onAttempt(result, job))
      .then(async (completion) => {
        try {
          await this.options.onCompletion(completion, job);
        } finally {
          completion.release();
        }
      })
      .catch((error: unknown) => logger.error({ err: error, jobId: job.id }, 'could not hand a result to the spool'))
      .finally(() => {
        leases.release(job.id);
        this.inProgress.delete(done);
      });
    this.inProgress.add(done);
  }
}
