// Running one job to its final result: attempts (src/jobs/attempt.ts) retried
// as the check's retryStrategy says, the job's metrics, the test fault hook,
// and the one place where every result of a job is scrubbed and size-capped.

import { performance } from 'node:perf_hooks';
import type { ArtifactStore } from '../artifacts/store.js';
import type { CheckDefinition } from '../checks/definition.js';
import type { CheckSettings, ExecutionContext } from '../checks/executor.js';
import { backoffMs, shouldRetry } from '../checks/retry.js';
import { Variables } from '../checks/variables.js';
import { sleep } from '../core/backoff.js';
import { JobAbortedError } from '../core/errors.js';
import type { MemoryBudget, MemoryLease } from '../core/memory-budget.js';
import type { Outcome } from '../core/outcome.js';
import type { EnvironmentVariable } from '../core/protocol.js';
import type { CheckResultEntry, SerializedResult } from '../core/result-entry.js';
import type { JobMetrics } from '../observability/metrics.js';
import { errorResult, resultOutcome } from '../results/result.js';
import { capResultSize, capSerializedResult, DEFAULT_MAX_RESULT_BYTES, jsonBytesAtMost, SMALL_RESULT_BYTES } from '../results/result-size.js';
import { type JobSecrets, SecretPolicy } from '../secrets/policy.js';
import type { Scrubber } from '../secrets/scrubber.js';
import { type Runnable, runAttempt } from './attempt.js';
import type { PreparedJob } from './prepare.js';

/**
 * How a job ended. `release` gives back the memory budget its result still
 * holds: call it once the result has been handed on (spooled or written).
 */
export type JobCompletion =
  | { jobId: string; result: CheckResultEntry; line: string | undefined; prepared: PreparedJob; release: () => void }
  | { jobId: string; result: null; prepared: PreparedJob; reason: 'lease-lost'; release: () => void };

type Finished = { jobId: string; result: CheckResultEntry; prepared: PreparedJob } | DistributiveOmit<Extract<JobCompletion, { result: null }>, 'release'>;
type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

/** What an executor-exception handler learns about the job (for error events). */
export interface ExecutorErrorInfo {
  checkType: string;
  /** The job's scrubber: agent-wide and job secrets. */
  scrubber: Scrubber;
  check: CheckDefinition;
  variables: readonly EnvironmentVariable[];
}

/**
 * Test hook, set only by OUTPOST_TEST_FAULT (config.ts; docs/configuration.md):
 * `executor-throw` makes every executor call throw an error whose message
 * carries the check's request and variable values, to prove that results,
 * logs and events scrub and sanitize it. Undefined in production.
 */
export type TestFault = 'executor-throw';

export interface RunOptions {
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

/** What the queue lends a running job: its abort signal, and whether everything was aborted already. */
export interface JobSlot {
  /** Set once the queue aborted all jobs: a job that starts after that ends at once with this error. */
  abortedWith(): JobAbortedError | undefined;
  /**
   * Registers the job as running (abortable by id); `leave` when it ends.
   * `noMoreAttempts`, when given, aborts once the job may start no further attempt: its own abort, or the
   * start of a shutdown drain (src/jobs/queue.ts), whose reason it carries; without it only `signal` does.
   */
  enter(jobId: string): { signal: AbortSignal; noMoreAttempts?: AbortSignal; leave: () => void };
}

/** A job's variables that can be secrets: the envelope's, and the check's own (local checks files merge them already). */
function jobVariables(prepared: PreparedJob): EnvironmentVariable[] {
  return [...prepared.variables, ...(prepared.runnable?.check.environmentVariables ?? [])];
}

export class JobRunner {
  private readonly secrets: SecretPolicy;

  constructor(
    private readonly metrics: JobMetrics,
    private readonly settings: CheckSettings,
    private readonly options: RunOptions = {},
  ) {
    this.secrets = options.secrets ?? new SecretPolicy();
  }

  /**
   * Runs a job to its FINAL result. Failed attempts that its retry strategy
   * retries are handed to `onAttempt` as ATTEMPT results as they happen,
   * each with its JSON line (what the sinks write, serialized once; undefined
   * for a large result, which the sink serializes itself).
   *
   * Every result of a job leaves through here, scrubbed with the job's
   * scrubber (built once per job: agent-wide secrets, the job's secret
   * variables, and what its executor registered at run time).
   */
  async run(prepared: PreparedJob, slot: JobSlot, onAttempt: (result: CheckResultEntry, line: string | undefined) => Promise<void>): Promise<JobCompletion> {
    const secrets = this.secrets.forJob(jobVariables(prepared));
    const runnable = prepared.runnable;
    for (const { name, value } of runnable?.executor.definitionSecrets?.(runnable.check.request) ?? []) secrets.add(value, name);
    // Each attempt gets its own lease; the last one is held until its result has been handed on.
    let memory: MemoryLease | undefined;
    const release = () => memory?.release();
    const nextLease = () => {
      release();
      memory = this.options.bodyMemory?.lease();
      return memory;
    };
    const maxBytes = this.options.maxResultBytes ?? DEFAULT_MAX_RESULT_BYTES;
    // A small result (the usual one) is scrubbed and bounded as one JSON line, serialized once
    // (src/secrets/policy.ts scrubResultLine). A larger one is scrubbed value by value and cut first, and
    // leaves without a line: it is never serialized at full size, and its JSON (up to six times its text,
    // for escaped bytes) is not held while it waits for the sink, which serializes it as it writes it.
    const leave = (entry: CheckResultEntry): Partial<SerializedResult> & Pick<SerializedResult, 'entry'> => {
      if (jsonBytesAtMost(entry, Math.min(maxBytes, SMALL_RESULT_BYTES))) return capSerializedResult(secrets.scrubResultLine(entry), maxBytes, memory);
      return { entry: capResultSize(secrets.scrubResult(entry), maxBytes, memory) };
    };
    try {
      const completion = await this.attempts(prepared, slot, secrets, nextLease, async (entry) => {
        const { entry: result, line } = leave(entry);
        // The ATTEMPT result is spooled when this returns: the next attempt starts with nothing held.
        await onAttempt(result, line);
        release();
      });
      if (completion.result === null) return { ...completion, release };
      const { entry: result, line } = leave(completion.result);
      return { jobId: completion.jobId, prepared: completion.prepared, result, line, release };
    } catch (error) {
      release();
      throw error;
    } finally {
      secrets.release();
    }
  }

  private async attempts(
    prepared: PreparedJob,
    slot: JobSlot,
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
      this.metrics.jobsTotal.inc({ check_type: checkType, outcome: 'error' });
      return { jobId, result, prepared };
    }
    const { check, executor, target } = runnable;
    const abortedWith = slot.abortedWith();
    if (abortedWith) {
      const result = errorResult(abortedWith.message, prepared.identity, prepared.checkIdentity, executor.member);
      return this.finish(prepared, result, started, secrets);
    }
    const job = slot.enter(jobId);
    this.metrics.jobsInFlight.inc();
    const variables = new Variables(prepared.variables, this.settings.processSecrets);
    const perform = this.performer(prepared, runnable);
    const onThrow = (error: unknown) =>
      this.options.onExecutorError?.(error, { checkType: check.checkType, scrubber: secrets.scrubber, check, variables: jobVariables(prepared) });
    try {
      const early = job.signal.reason;
      if (job.signal.aborted && early instanceof JobAbortedError && early.reason === 'lease-lost') {
        // Lost while it waited for a slot: not run at all (its result would be discarded).
        logger.warn({ target }, 'job aborted before it started: lease lost');
        this.metrics.jobsTotal.inc({ check_type: checkType, outcome: 'aborted' });
        return { jobId, result: null, prepared, reason: 'lease-lost' };
      }
      for (let attempt = 1; ; attempt++) {
        const result = await runAttempt({
          prepared,
          runnable,
          jobSignal: job.signal,
          variables,
          attempt,
          secrets,
          memory: nextLease(),
          settings: this.settings,
          artifacts: this.options.artifacts,
          diagnostics: this.options.diagnostics !== false,
          perform,
          onThrow,
        });
        if (result === null) {
          logger.warn({ target }, 'job aborted: lease lost, result discarded');
          this.metrics.jobsTotal.inc({ check_type: checkType, outcome: 'aborted' });
          return { jobId, result: null, prepared, reason: 'lease-lost' };
        }
        const { entry, errorCode } = result;
        const failed = entry.hasFailures || entry.hasErrors;
        const elapsed = performance.now() - started;
        // Once shutdown has begun no attempt starts: a failed one is the job's FINAL result (docs/checks/http.md "Retries").
        const stop = job.noMoreAttempts ?? job.signal;
        if (failed && !stop.aborted && shouldRetry(check.retryStrategy, attempt, errorCode, elapsed)) {
          entry.resultType = 'ATTEMPT';
          const wait = backoffMs(check.retryStrategy, attempt);
          logger.info({ target, attempt, retryInMs: wait }, 'attempt failed; retrying');
          await onAttempt(entry);
          // Cut short by the job's abort, and by a shutdown drain's start rather than only by its end.
          await sleep(wait, stop);
          if (!stop.aborted) continue;
          const reason: unknown = stop.reason;
          if (reason instanceof JobAbortedError && reason.reason === 'lease-lost') {
            this.metrics.jobsTotal.inc({ check_type: checkType, outcome: 'aborted' });
            return { jobId, result: null, prepared, reason: 'lease-lost' };
          }
          const final = errorResult(
            `${reason instanceof Error ? reason.message : 'Aborted'} (before attempt ${attempt + 1})`,
            prepared.identity,
            prepared.checkIdentity,
            executor.member,
          );
          final.attempts = attempt + 1;
          return this.finish(prepared, final, started, secrets);
        }
        return this.finish(prepared, entry, started, secrets);
      }
    } finally {
      job.leave();
      this.metrics.jobsInFlight.dec();
    }
  }

  /** The executor's run, or the test fault in its place. */
  private performer(prepared: PreparedJob, runnable: Runnable): (ctx: ExecutionContext) => Promise<Outcome> {
    if (this.options.testFault === 'executor-throw') return () => injectedFault(prepared);
    return (ctx) => runnable.executor.run(runnable.check, ctx);
  }

  private finish(prepared: PreparedJob, result: CheckResultEntry, started: number, secrets: JobSecrets): Finished {
    const checkType = prepared.checkIdentity.checkType ?? 'UNKNOWN';
    const label = resultOutcome(result);
    this.metrics.jobsTotal.inc({ check_type: checkType, outcome: label });
    this.metrics.jobDuration.observe({ check_type: checkType }, (performance.now() - started) / 1000);
    // The result is scrubbed later (run's leave); its series' labels are scrubbed here, as the result's fields will be.
    const { scrubber } = secrets;
    const shown = {
      checkId: scrubber.scrubText(result.checkId ?? ''),
      name: scrubber.scrubText(result.name ?? ''),
      ...(result.runLocation ? { location: scrubber.scrubText(result.runLocation) } : {}),
    };
    this.metrics.checks.record(result, { frequencySeconds: prepared.runnable?.check.frequency, shown });
    prepared.logger.debug({ target: prepared.runnable?.target, outcome: label, responseTime: result.responseTime, attempts: result.attempts }, 'job finished');
    return { jobId: prepared.jobId, result, prepared };
  }
}

/** OUTPOST_TEST_FAULT=executor-throw: fails like a buggy executor, with target data and secrets in the message. */
async function injectedFault(prepared: PreparedJob): Promise<Outcome> {
  const request = JSON.stringify(prepared.runnable?.check.request ?? null);
  const values = JSON.stringify(jobVariables(prepared).map((v) => v.value));
  throw new Error(`OUTPOST_TEST_FAULT=executor-throw: injected executor failure; request ${request}; variables ${values}`);
}
