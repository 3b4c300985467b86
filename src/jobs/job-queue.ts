// Runs prepared jobs with bounded concurrency (p-queue), a hard per-job
// timeout through an AbortSignal, and a hanging-job watch.

import { performance } from 'node:perf_hooks';
import PQueue from 'p-queue';
import { AttemptArtifacts } from './attempt-artifacts.js';
import type { ArtifactStore } from '../artifacts/store.js';
import type { CheckDefinition } from '../checks/definition.js';
import { JobAbortedError } from '../core/errors.js';
import type { CheckSettings, ExecutionContext } from '../checks/executor.js';
import type { Outcome } from '../core/outcome.js';
import { backoffMs, shouldRetry } from '../checks/retry.js';
import { Variables } from '../checks/variables.js';
import { sleep } from '../core/backoff.js';
import type { EnvironmentVariable } from '../core/protocol.js';
import type { PreparedJob } from './prepare.js';
import { serviceEnvironment } from './service-env.js';
import type { Metrics } from '../observability/metrics.js';
import { buildResult, errorResult, resultOutcome } from '../results/result.js';
import type { CheckResultEntry } from '../core/result-entry.js';
import { capResultSize, DEFAULT_MAX_RESULT_BYTES } from '../results/result-size.js';
import { guardCaptures } from './captures.js';
import { type JobSecrets, SecretPolicy } from '../secrets/policy.js';
import type { Scrubber } from '../secrets/scrubber.js';
import type { MemoryBudget, MemoryLease } from '../core/memory-budget.js';

/** An executor that ignores its abort signal this long past the cap is abandoned. */
export const ABANDON_AFTER_MS = 5_000;

/**
 * How a job ended. `release` gives back the memory budget its result still
 * holds: call it once the result has been handed on (spooled or written).
 */
export type JobCompletion =
  | { jobId: string; result: CheckResultEntry; prepared: PreparedJob; release: () => void }
  | { jobId: string; result: null; prepared: PreparedJob; reason: 'lease-lost'; release: () => void };

type Finished = DistributiveOmit<JobCompletion, 'release'>;
type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

interface Running {
  controller: AbortController;
  startedAt: number;
}

/** What an executor-exception handler learns about the job (for error events). */
export interface ExecutorErrorInfo {
  checkType: string;
  /** The job's scrubber: agent-wide and job secrets. */
  scrubber: Scrubber;
  check: CheckDefinition;
  variables: readonly EnvironmentVariable[];
}

/**
 * Test hook, set only by OUTPOST_TEST_FAULT (config.ts, README "Test hooks"):
 * `executor-throw` makes every executor call throw an error whose message
 * carries the check's request and variable values, to prove that results,
 * logs and events scrub and sanitize it. Undefined in production.
 */
export type TestFault = 'executor-throw';

export interface QueueOptions {
  /** Which values are secrets; without it only the always-sensitive headers are redacted. */
  secrets?: SecretPolicy;
  /** An executor threw (a bug in it, not a target failure). */
  onExecutorError?: (error: unknown, job: ExecutorErrorInfo) => void;
  testFault?: TestFault;
  /** Where attempts' artifacts go; without it there are no diagnostics and no script artifacts. */
  artifacts?: ArtifactStore;
  /** Diagnose network failures into the artifacts (DIAGNOSTICS; default on when `artifacts` is given). */
  diagnostics?: boolean;
  /** The agent-wide budget for response bodies and results in memory; without it bodies are bounded per job only. */
  bodyMemory?: MemoryBudget;
  /** A result's largest size as JSON (MAX_RESULT_BYTES); longer parts are cut. */
  maxResultBytes?: number;
}

/** A job's variables that can be secrets: the envelope's, and the check's own (local checks files merge them already). */
function jobVariables(prepared: PreparedJob): EnvironmentVariable[] {
  return [...prepared.variables, ...(prepared.runnable?.check.environmentVariables ?? [])];
}

export class JobQueue {
  private readonly queue: PQueue;
  private readonly running = new Map<string, Running>();
  private abortedWith: JobAbortedError | undefined;
  private readonly secrets: SecretPolicy;

  constructor(
    readonly concurrency: number,
    private readonly metrics: Metrics,
    private readonly settings: CheckSettings,
    private readonly options: QueueOptions = {},
  ) {
    this.secrets = options.secrets ?? new SecretPolicy();
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

  /**
   * Aborts every running job, and makes every job still waiting finish at
   * once with an error result (p-queue's clear() would drop them with their
   * promises never settling).
   */
  abortAll(error: JobAbortedError): void {
    this.abortedWith = error;
    for (const { controller } of this.running.values()) controller.abort(error);
  }

  /**
   * Runs a job to its FINAL result. Failed attempts that its retry strategy
   * retries are handed to `onAttempt` as ATTEMPT results as they happen.
   */
  submit(prepared: PreparedJob, onAttempt: (result: CheckResultEntry) => Promise<void> = async () => undefined): Promise<JobCompletion> {
    const task = () => this.execute(prepared, onAttempt);
    return this.queue.add(task) as Promise<JobCompletion>;
  }

  /**
   * Every result of a job leaves the queue through here, scrubbed with the
   * job's scrubber (built once per job: agent-wide secrets, the job's secret
   * variables, and what its executor registered at run time).
   */
  private async execute(prepared: PreparedJob, onAttempt: (result: CheckResultEntry) => Promise<void>): Promise<JobCompletion> {
    const secrets = this.secrets.forJob(jobVariables(prepared));
    // Each attempt gets its own lease; the last one is held until its result has been handed on.
    let memory: MemoryLease | undefined;
    const release = () => memory?.release();
    const nextLease = () => {
      release();
      memory = this.options.bodyMemory?.lease();
      return memory;
    };
    const maxBytes = this.options.maxResultBytes ?? DEFAULT_MAX_RESULT_BYTES;
    const leave = (entry: CheckResultEntry) => capResultSize(secrets.scrubResult(entry), maxBytes, memory);
    try {
      const completion = await this.run(prepared, secrets, nextLease, async (entry) => {
        // The ATTEMPT result is spooled when this returns: the next attempt starts with nothing held.
        await onAttempt(leave(entry));
        release();
      });
      return completion.result === null ? { ...completion, release } : { ...completion, result: leave(completion.result), release };
    } catch (error) {
      release();
      throw error;
    } finally {
      secrets.release();
    }
  }

  private async run(
    prepared: PreparedJob,
    secrets: JobSecrets,
    nextLease: () => MemoryLease | undefined,
    onAttempt: (result: CheckResultEntry) => Promise<void>,
  ): Promise<Finished> {
    const started = performance.now();
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
    if (this.abortedWith) {
      const result = errorResult(this.abortedWith.message, prepared.identity, prepared.checkIdentity, executor.member);
      return this.finish(prepared, result, started);
    }
    const job = new AbortController();
    this.running.set(jobId, { controller: job, startedAt: started });
    this.metrics.jobsInFlight.inc();
    const variables = new Variables(prepared.variables, this.settings.processSecrets);
    try {
      for (let attempt = 1; ; attempt++) {
        const result = await this.attempt(prepared, job.signal, variables, attempt, secrets, nextLease());
        if (result === null) {
          logger.warn({ target }, 'job aborted: lease lost, result discarded');
          this.metrics.jobsTotal.inc({ checkType, outcome: 'aborted' });
          return { jobId, result: null, prepared, reason: 'lease-lost' };
        }
        const { entry, errorCode } = result;
        const failed = entry.hasFailures || entry.hasErrors;
        const elapsed = performance.now() - started;
        if (failed && !job.signal.aborted && shouldRetry(check.retryStrategy, attempt, errorCode, elapsed)) {
          entry.resultType = 'ATTEMPT';
          const wait = backoffMs(check.retryStrategy, attempt);
          logger.info({ target, attempt, retryInMs: wait }, 'attempt failed; retrying');
          await onAttempt(entry);
          await sleep(wait, job.signal);
          if (!job.signal.aborted) continue;
          const reason = job.signal.reason;
          if (reason instanceof JobAbortedError && reason.reason === 'lease-lost') {
            this.metrics.jobsTotal.inc({ checkType, outcome: 'aborted' });
            return { jobId, result: null, prepared, reason: 'lease-lost' };
          }
          const final = errorResult(
            `${reason instanceof Error ? reason.message : 'Aborted'} (before attempt ${attempt + 1})`,
            prepared.identity,
            prepared.checkIdentity,
            executor.member,
          );
          final.attempts = attempt + 1;
          return this.finish(prepared, final, started);
        }
        return this.finish(prepared, entry, started);
      }
    } finally {
      this.running.delete(jobId);
      this.metrics.jobsInFlight.dec();
    }
  }

  private finish(prepared: PreparedJob, result: CheckResultEntry, started: number): Finished {
    const checkType = prepared.checkIdentity.checkType ?? 'UNKNOWN';
    const label = resultOutcome(result);
    this.metrics.jobsTotal.inc({ checkType, outcome: label });
    this.metrics.jobDuration.observe({ checkType }, (performance.now() - started) / 1000);
    prepared.logger.debug({ target: prepared.runnable?.target, outcome: label, responseTime: result.responseTime, attempts: result.attempts }, 'job finished');
    return { jobId: prepared.jobId, result, prepared };
  }

  /** One attempt under the check type's hard cap. Null when the lease was lost. */
  private async attempt(
    prepared: PreparedJob,
    jobSignal: AbortSignal,
    variables: Variables,
    attempt: number,
    secrets: JobSecrets,
    memory: MemoryLease | undefined,
  ): Promise<{ entry: CheckResultEntry; errorCode?: string } | null> {
    const { check, executor, target } = prepared.runnable as NonNullable<PreparedJob['runnable']>;
    const { logger } = prepared;
    const started = performance.now();
    const startedAt = new Date();
    const controller = new AbortController();
    const forward = () => controller.abort(jobSignal.reason);
    if (jobSignal.aborted) forward();
    jobSignal.addEventListener('abort', forward, { once: true });
    const capMs = executor.limits.capMs;
    const hardTimeout = setTimeout(
      () => controller.abort(new JobAbortedError('timeout', `Timed out after ${capMs} ms (the ${check.checkType} check limit)`)),
      capMs,
    );
    const expectedMs = executor.expectedMs?.(check) ?? check.maxResponseTime;
    const artifacts = this.options.artifacts ? new AttemptArtifacts(this.options.artifacts, prepared.jobId, attempt, jobSignal, logger) : undefined;
    let published = false;
    const hangingWatch = setTimeout(() => {
      // Diagnosing a failure takes its own, documented time (DIAGNOSTICS_BUDGET_MS).
      if (artifacts?.diagnosing) return;
      logger.warn(
        { target, attempt, elapsedMs: Math.round(performance.now() - started), expectedMs },
        'job is running past its expected time',
      );
    }, expectedMs + 1);
    hangingWatch.unref();
    let abandonTimer: NodeJS.Timeout | undefined;
    const abandoned = new Promise<'abandoned'>((resolve) => {
      controller.signal.addEventListener(
        'abort',
        () => {
          // An open diagnostics window has its own bound: the executor is given that, plus the usual grace.
          const arm = (ms: number) => {
            abandonTimer = setTimeout(() => {
              const left = artifacts?.windowLeft() ?? 0;
              if (left > 0) arm(left + ABANDON_AFTER_MS);
              else resolve('abandoned');
            }, ms);
          };
          arm(ABANDON_AFTER_MS);
        },
        { once: true },
      );
    });
    try {
      logger.debug({ target, attempt }, 'attempt started');
      const ctx: ExecutionContext = {
        signal: controller.signal,
        logger,
        jobLog: [],
        variables,
        settings: this.settings,
        secrets,
        serviceEnv: serviceEnvironment(prepared.triggerSource),
        ...(artifacts ? { artifacts: artifacts.writer } : {}),
        ...(memory ? { bodyMemory: memory } : {}),
        ...(artifacts && this.options.diagnostics !== false ? { diagnostics: artifacts.hooks } : {}),
      };
      const running = this.options.testFault === 'executor-throw' ? injectedFault(prepared) : executor.run(check, ctx);
      const outcome = await Promise.race([running, abandoned]);
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
      await artifacts?.publish(entry, executor.member);
      return { entry, ...(outcome.errorCode ? { errorCode: outcome.errorCode } : {}) };
    } catch (error) {
      // Executors report target failures as outcomes; reaching here is a bug in one.
      logger.error({ err: error, target }, 'executor threw');
      this.options.onExecutorError?.(error, { checkType: check.checkType, scrubber: secrets.scrubber, check, variables: jobVariables(prepared) });
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
}

/** OUTPOST_TEST_FAULT=executor-throw: fails like a buggy executor, with target data and secrets in the message. */
async function injectedFault(prepared: PreparedJob): Promise<Outcome> {
  const request = JSON.stringify(prepared.runnable?.check.request ?? null);
  const values = JSON.stringify(jobVariables(prepared).map((v) => v.value));
  throw new Error(`OUTPOST_TEST_FAULT=executor-throw: injected executor failure; request ${request}; variables ${values}`);
}
