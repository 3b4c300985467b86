// One attempt of a job, supervised: the check type's hard cap, a warning
// when it runs past its expected time, abandoning an executor that ignores
// its abort signal, and the attempt's artifacts (src/jobs/attempt-artifacts.ts).

import { performance } from 'node:perf_hooks';
import type { ArtifactStore } from '../artifacts/store.js';
import type { CheckSettings, ExecutionContext } from '../checks/executor.js';
import type { Variables } from '../checks/variables.js';
import { JobAbortedError } from '../core/errors.js';
import type { MemoryLease } from '../core/memory-budget.js';
import type { Outcome } from '../core/outcome.js';
import type { CheckResultEntry } from '../core/result-entry.js';
import { buildResult, errorResult } from '../results/result.js';
import type { JobSecrets } from '../secrets/policy.js';
import { AttemptArtifacts } from './attempt-artifacts.js';
import { guardCaptures } from './captures.js';
import type { PreparedJob } from './prepare.js';
import { serviceEnvironment } from './service-env.js';

/** An executor that ignores its abort signal this long past the cap is abandoned. */
export const ABANDON_AFTER_MS = 5_000;

export type Runnable = NonNullable<PreparedJob['runnable']>;

export interface AttemptInput {
  prepared: PreparedJob;
  runnable: Runnable;
  /** The job's signal: aborted when its lease is lost or the queue aborts everything. */
  jobSignal: AbortSignal;
  variables: Variables;
  /** 1 for the first attempt. */
  attempt: number;
  secrets: JobSecrets;
  /** This attempt's share of the body memory budget, when there is one. */
  memory: MemoryLease | undefined;
  settings: CheckSettings;
  /** Where the attempt's artifacts go; without it there are no diagnostics and no script artifacts. */
  artifacts: ArtifactStore | undefined;
  diagnostics: boolean;
  /** Runs the check: the executor, or a test fault in its place. */
  perform: (ctx: ExecutionContext) => Promise<Outcome>;
  /** The executor threw (a bug in it, not a target failure). */
  onThrow: (error: unknown) => void;
}

export interface AttemptResult {
  entry: CheckResultEntry;
  errorCode?: string;
}

/** One attempt under the check type's hard cap. Null when the lease was lost. */
export async function runAttempt(input: AttemptInput): Promise<AttemptResult | null> {
  const { prepared, runnable, jobSignal, attempt, secrets, memory } = input;
  const { check, executor, target } = runnable;
  const { logger } = prepared;
  const started = performance.now();
  const startedAt = new Date();
  const controller = new AbortController();
  const artifacts = input.artifacts ? new AttemptArtifacts(input.artifacts, prepared.jobId, attempt, jobSignal, logger) : undefined;
  let abandon: (value: 'abandoned') => void = () => undefined;
  const abandoned = new Promise<'abandoned'>((resolve) => {
    abandon = resolve;
  });
  let abandonTimer: NodeJS.Timeout | undefined;
  // The two ways this attempt is aborted (below) start the abandon timer themselves: no listener on its own signal.
  const stop = (reason: unknown) => {
    if (controller.signal.aborted) return;
    controller.abort(reason);
    // An open diagnostics window has its own bound: the executor is given that, plus the usual grace.
    const arm = (ms: number) => {
      abandonTimer = setTimeout(() => {
        const left = artifacts?.windowLeft() ?? 0;
        if (left > 0) arm(left + ABANDON_AFTER_MS);
        else abandon('abandoned');
      }, ms);
    };
    arm(ABANDON_AFTER_MS);
  };
  const forward = () => stop(jobSignal.reason);
  if (jobSignal.aborted) forward();
  jobSignal.addEventListener('abort', forward, { once: true });
  const capMs = executor.limits.capMs;
  const hardTimeout = setTimeout(() => stop(new JobAbortedError('timeout', `Timed out after ${capMs} ms (the ${check.checkType} check limit)`)), capMs);
  const expectedMs = executor.expectedMs?.(check) ?? check.maxResponseTime;
  let published = false;
  const hangingWatch = setTimeout(() => {
    // Diagnosing a failure takes its own, documented time (DIAGNOSTICS_BUDGET_MS).
    if (artifacts?.diagnosing) return;
    logger.warn({ target, attempt, elapsedMs: Math.round(performance.now() - started), expectedMs }, 'job is running past its expected time');
  }, expectedMs + 1);
  hangingWatch.unref();
  try {
    logger.debug({ target, attempt }, 'attempt started');
    const ctx: ExecutionContext = {
      signal: controller.signal,
      logger,
      jobLog: [...(prepared.jobLogNotes ?? [])],
      variables: input.variables,
      settings: input.settings,
      secrets,
      serviceEnv: serviceEnvironment(prepared.triggerSource),
      ...(artifacts ? { artifacts: artifacts.writer } : {}),
      ...(memory ? { bodyMemory: memory } : {}),
      ...(artifacts && input.diagnostics ? { diagnostics: artifacts.hooks } : {}),
    };
    const outcome = await Promise.race([input.perform(ctx), abandoned]);
    const reason = controller.signal.reason;
    if (reason instanceof JobAbortedError && reason.reason === 'lease-lost') return null;
    if (outcome === 'abandoned') {
      logger.error({ target }, 'executor ignored its abort signal; job abandoned');
      const entry = errorResult(
        `${reason instanceof Error ? reason.message : 'Aborted'}; the executor did not stop within ${ABANDON_AFTER_MS} ms`,
        prepared.identity,
        prepared.checkIdentity,
        executor.member,
        startedAt,
      );
      entry.attempts = attempt;
      return { entry };
    }
    guardCaptures(outcome, secrets.scrubber);
    const entry = buildResult(outcome, check, prepared.identity, check, 'FINAL', attempt);
    // The result is delivered after its artifacts are uploaded (or have failed to be), within a bounded time.
    published = true;
    if (artifacts && !artifacts.untouched) await artifacts.publish(entry, executor.member);
    return { entry, ...(outcome.errorCode ? { errorCode: outcome.errorCode } : {}) };
  } catch (error) {
    // Executors report target failures as outcomes; reaching here is a bug in one.
    logger.error({ err: error, target }, 'executor threw');
    input.onThrow(error);
    const message = `Internal error in the ${check.checkType} executor: ${(error as Error)?.message ?? String(error)}`;
    const entry = errorResult(message, prepared.identity, prepared.checkIdentity, executor.member, startedAt);
    entry.attempts = attempt;
    return { entry };
  } finally {
    clearTimeout(hardTimeout);
    clearTimeout(hangingWatch);
    if (abandonTimer) clearTimeout(abandonTimer);
    jobSignal.removeEventListener('abort', forward);
    if (artifacts && !published) void artifacts.discard();
  }
}
