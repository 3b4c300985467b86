// How many ATTEMPT results a job may have: what honest agents send for it.
// A run sends one per retried attempt, at most its check's maxRetries
// (src/checks/retry.ts attemptsPerRun, which the scheduler stores with the
// job). A job whose lease ran out is run again by the next agent that claims
// it, and the earlier run's ATTEMPTs may still arrive from its spool: each
// claim of the job (jobs.leases) brings room for one more run's.

import { MAX_RETRIES } from '../core/protocol.js';
import { MAX_ATTEMPTS_PER_JOB } from './store.js';

export interface AttemptBound {
  /** The most ATTEMPTs the job may have. */
  max: number;
  perRun: number;
  runs: number;
}

/**
 * The bound for a job from its jobs.attempts_per_run (NULL for a job queued
 * before the column existed: the protocol's maximum) and jobs.leases (0 for a
 * job claimed before it existed: counted as one claim). MAX_ATTEMPTS_PER_JOB
 * stays the ceiling.
 */
export function attemptBound(attemptsPerRun: number | null, leases: number): AttemptBound {
  const perRun = attemptsPerRun ?? MAX_RETRIES;
  const runs = Math.max(1, leases);
  return { max: Math.min(perRun * runs, MAX_ATTEMPTS_PER_JOB), perRun, runs };
}

/** The per-result refusal, naming the reason. */
export function tooManyAttempts(jobId: string, kept: number, bound: AttemptBound): string {
  const runs = bound.runs === 1 ? 'its one run' : `its ${bound.runs} runs`;
  return `job ${jobId} has ${kept} ATTEMPT results already, as many as ${runs} can send (its check's retryStrategy allows ${bound.perRun} retries a run): no more are kept`;
}
