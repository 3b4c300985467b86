// Claims jobs from the control plane, only for free slots, and hands them to
// the queue. Claiming pauses while the spool is over its bound, and while it
// cannot write to disk (results are then held in memory, bounded by what runs).

import { randomUUID } from 'node:crypto';
import type { ExecutorRegistry } from '../checks/executor-registry.js';
import { superviseLoop } from '../health/supervise.js';
import { type Heartbeat, NO_HEARTBEAT } from '../health/watchdog.js';
import { prepareJob, unpreparedJob } from '../jobs/prepare.js';
import type { Logger } from '../observability/logger.js';
import type { JobCompletion, JobQueue } from '../jobs/queue.js';
import type { CheckResultEntry } from '../core/result-entry.js';
import { sleep } from '../core/backoff.js';
import { ClaimPacer } from './claim-pacing.js';
import { ClaimRefusals, describeRefusal } from './claim-refusals.js';
import type { UnreadableJob } from './claim-answer.js';
import { type ControlPlaneClient, type ControlPlaneError, withRetry } from './client.js';
import type { LeaseKeeper } from './leases.js';
import { type AgentDescriptor, type Job, PROTOCOL_ROUTES } from '../core/protocol.js';
import type { Spool } from './spool.js';

/**
 * Retries of a claim keep its claimId this long at most: a failure that repeats (a proxy that always
 * cuts the answer) would otherwise keep the same jobs leased to this agent, retried for ever.
 */
export const CLAIM_ID_REUSE_MS = 30_000;

/** The pause after a claim the control plane refused for good: it is tried again (the URL or the server may be fixed). */
const REFUSED_CLAIM_RETRY_MS = 5_000;

/** When fewer than half the slots are free, wait up to this long for half to be free, so one claim covers several. */
const CLAIM_GATHER_MS = 50;
/** Jobs of one claim answer named one log line each (not valid JSON, claimed twice); the rest are counted. */
const LOGGED_PER_CLAIM = 10;

export interface SourceOptions {
  queue: JobQueue;
  spool: Spool;
  client: ControlPlaneClient;
  leases: LeaseKeeper;
  registry: ExecutorRegistry;
  logger: Logger;
  agent: AgentDescriptor;
  /** The host's IPv6 addresses, read at each claim (net/ipv6-addresses.ts); left out, none are reported. */
  ipv6Addresses?: () => string[];
  waitSeconds: number;
  authRetryMs: number;
  /** How long retries of one claim keep its claimId (CLAIM_ID_REUSE_MS; tests shorten it). */
  claimIdReuseMs?: number;
  onCompletion: (completion: JobCompletion, job: Job) => Promise<void>;
  /** A failed attempt that will be retried (resultType ATTEMPT). */
  onAttempt: (result: CheckResultEntry, job: Job, line: string | undefined) => Promise<void>;
  onFailure: (error: ControlPlaneError) => void;
  /** The claim loop's heartbeat for the watchdog, and the longest one claim may take (limiter wait, long poll, timeout). */
  heartbeat?: Heartbeat;
  claimBoundMs?: number;
  /** OUTPOST_TEST_FAULT=claim-loop-throw: every run of the claim loop throws at once. */
  testFault?: 'claim-loop-throw';
}

export class ControlPlaneSource {
  private readonly stopped = new AbortController();
  private loop: Promise<void> | undefined;
  private spoolPaused = false;
  private spoolBroken = false;
  private readonly pacer = new ClaimPacer();
  private readonly refusals: ClaimRefusals;
  /** Jobs handed to the queue whose results are not yet spooled. */
  readonly inProgress = new Set<Promise<void>>();

  constructor(private readonly options: SourceOptions) {
    this.refusals = new ClaimRefusals(options.logger);
  }

  start(): void {
    const { logger, heartbeat = NO_HEARTBEAT } = this.options;
    this.loop ??= superviseLoop('claim-loop', () => this.run(), { logger, signal: this.stopped.signal, heartbeat });
  }

  /** Stops claiming (an open long poll is cancelled) and waits for the loop to end. */
  async stop(): Promise<void> {
    this.stopped.abort();
    await this.loop;
    // Stopped on purpose: not stuck.
    this.options.heartbeat?.idle();
  }

  private async run(): Promise<void> {
    const { queue, spool, client, logger } = this.options;
    const signal = this.stopped.signal;
    const { heartbeat = NO_HEARTBEAT, claimBoundMs = 0 } = this.options;
    while (!signal.aborted) {
      if (this.options.testFault === 'claim-loop-throw') throw new Error('OUTPOST_TEST_FAULT=claim-loop-throw: injected claim loop crash');
      // Waiting for a slot is on purpose; a loop that does not come back while slots are free is stuck.
      if (queue.free === 0) heartbeat.idle();
      await queue.waitForFreeSlot(signal);
      if (signal.aborted) break;
      // Jobs already claimed will add their results too: counted, so that a slow disk (a job's slot
      // frees before its result is synced) cannot let claims run past the spool's bound.
      const incoming = this.inProgress.size;
      if (!spool.writable) {
        if (!this.spoolBroken) {
          logger.warn({ held: spool.heldInMemory, incoming }, 'spool cannot write to disk: claiming paused until it can');
          this.spoolBroken = true;
        }
        // Paused on purpose (readiness already says why): not stuck.
        heartbeat.idle();
        await spool.changed(signal);
        continue;
      }
      if (this.spoolBroken) {
        logger.info({ spooled: spool.results }, 'spool writes again: claiming resumed');
        this.spoolBroken = false;
      }
      if (spool.isFull(incoming)) {
        if (!this.spoolPaused) {
          logger.warn({ spooled: spool.results, incoming, bytes: spool.bytes }, 'spool is full: claiming paused until it drains');
          this.spoolPaused = true;
        }
        heartbeat.idle();
        if (spool.isFull()) await spool.waitUntilDrained(signal);
        else await this.oneSpooled(signal);
        continue;
      }
      if (this.spoolPaused) {
        logger.info({ spooled: spool.results }, 'spool drained: claiming resumed');
        this.spoolPaused = false;
      }
      heartbeat.beat(CLAIM_GATHER_MS + claimBoundMs);
      // Fast checks free half the slots well within the gather time: claiming then keeps the slots busy.
      await queue.waitUntilFree(Math.ceil(queue.concurrency / 2), signal, CLAIM_GATHER_MS);
      const max = queue.free;
      if (max === 0 || signal.aborted) continue;
      let jobs: Job[];
      const claimedAt = Date.now();
      let askedWaitSeconds = 0;
      let unreadable: UnreadableJob[] = [];
      // The same on the retries below: jobs an earlier try leased, whose answer never arrived, come back
      // in the answer at once instead of waiting out their lease (docs/protocol.md). A new one after
      // CLAIM_ID_REUSE_MS, and after an answer that arrived but could not be read (it would come again).
      let claimId = randomUUID();
      let claimIdSince = Date.now();
      const newClaimId = () => {
        claimId = randomUUID();
        claimIdSince = Date.now();
      };
      const reuseMs = this.options.claimIdReuseMs ?? CLAIM_ID_REUSE_MS;
      const onFailure = (error: ControlPlaneError) => {
        if (error.statusCode !== undefined && error.statusCode >= 200 && error.statusCode < 300) newClaimId();
        this.options.onFailure(error);
      };
      try {
        const answer = await withRetry(
          () => {
            if (Date.now() - claimIdSince > reuseMs) newClaimId();
            // Until the control plane has accepted the key, ask without waiting: readiness hangs
            // on that first answer, and an idle long poll would hold it back for waitSeconds.
            askedWaitSeconds = client.authorized === true ? this.options.waitSeconds : 0;
            heartbeat.beat(claimBoundMs);
            const ipv6Addresses = this.options.ipv6Addresses?.() ?? [];
            const agent = ipv6Addresses.length > 0 ? { ...this.options.agent, ipv6Addresses } : this.options.agent;
            return client.claim({ max, waitSeconds: askedWaitSeconds, agent, claimId }, signal);
          },
          { signal, logger, authRetryMs: this.options.authRetryMs, onFailure, onWait: (ms) => heartbeat.beat(ms) },
        );
        jobs = answer.jobs;
        unreadable = answer.unreadable ?? [];
        if (answer.lost) {
          logger.error({ lost: answer.lost }, 'claim answer had jobs that are not valid JSON and have no readable id; their leases will expire');
        }
      } catch (error) {
        if (signal.aborted) break;
        this.refusals.refused(describeRefusal(error, client.routeUrl('claim'), PROTOCOL_ROUTES.claim, REFUSED_CLAIM_RETRY_MS));
        heartbeat.beat(REFUSED_CLAIM_RETRY_MS);
        await sleep(REFUSED_CLAIM_RETRY_MS, signal);
        continue;
      }
      this.refusals.accepted();
      // A job that is not valid JSON but has a readable id gets an error result like any invalid job.
      const notParsed = new Map<Job, string>();
      for (const [i, bad] of unreadable.entries()) {
        // Named one by one up to a few: a hostile answer must not turn into a log line per element.
        if (i < LOGGED_PER_CLAIM) logger.error({ jobId: bad.id, problem: bad.problem }, 'claimed job is not valid JSON; reporting it as an error');
        else if (i === LOGGED_PER_CLAIM) logger.error({ more: unreadable.length - LOGGED_PER_CLAIM }, 'more claimed jobs are not valid JSON; reporting each as an error');
        const placeholder: Job = { id: bad.id, leaseExpiresAt: bad.leaseExpiresAt ?? '', check: undefined };
        notParsed.set(placeholder, bad.problem);
        jobs.push(placeholder);
      }
      if (jobs.length > max) {
        logger.warn({ max, received: jobs.length }, 'control plane sent more jobs than claimed; running them anyway');
      }
      let accepted = 0;
      let withoutId = 0;
      const twice: string[] = [];
      for (const job of jobs) {
        try {
          const taken = this.accept(job, notParsed.get(job));
          if (taken === 'accepted') accepted++;
          else if (taken === 'no-id') withoutId++;
          else twice.push(job.id);
        } catch (error) {
          // Whatever one job does, the loop claims on: the job's lease is let go and expires at the service.
          logger.error({ err: error, jobId: (job as { id?: unknown } | null)?.id }, 'could not accept a claimed job; ignoring it');
          if (typeof job?.id === 'string') this.options.leases.release(job.id);
        }
      }
      if (withoutId > 0) logger.error({ jobs: withoutId }, 'claimed jobs without an id; ignoring them (their leases expire at the service)');
      if (twice.length > 0) logger.warn({ jobs: twice.length, jobIds: twice.slice(0, LOGGED_PER_CLAIM) }, 'jobs claimed again while running or waiting; ignoring the second copies');
      // Jobs ignored (no id, a second copy) are no work: counted, they would reset the pacer.
      const pause = this.pacer.next(accepted, Date.now() - claimedAt, askedWaitSeconds * 1000);
      heartbeat.beat(pause);
      await sleep(pause, signal);
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

  /** `unreadable`: why the job could not even be parsed (its result is that error). Whether the job went to the queue, and if not why. */
  private accept(job: Job, unreadable?: string): 'accepted' | 'no-id' | 'twice' {
    const { queue, leases, registry, logger } = this.options;
    // Without an id no result can be reported; the lease will expire on the service's side.
    if (!job || typeof job !== 'object' || typeof job.id !== 'string' || job.id.length === 0) return 'no-id';
    if (queue.has(job.id)) return 'twice';
    leases.track(job.id, job.leaseExpiresAt);
    const prepared = unreadable ? unpreparedJob(job.id, `Invalid job: ${unreadable}`, logger) : prepareJob(job, registry, logger, { noteUnreadFields: true });
    const done = queue
      .submit(prepared, (result, line) => this.options.onAttempt(result, job, line))
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
    return 'accepted';
  }
}
