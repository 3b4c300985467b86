// Fake executors and prepared jobs for the queue's and job runner's unit
// tests (test/unit/job-queue.test.ts, test/unit/job-run.test.ts).

import pino from 'pino';
import type { CheckDefinition } from '../../src/checks/definition.js';
import type { ExecutionContext, Executor } from '../../src/checks/executor.js';
import { NO_RETRIES, type RetryStrategy } from '../../src/checks/retry.js';
import type { Outcome } from '../../src/core/outcome.js';
import type { PreparedJob } from '../../src/jobs/prepare.js';

export const SETTINGS = { responseBodyLimitBytes: 1024, userAgent: 'test' };

/** An executor whose run is `run`; `capMs` is the check type's hard cap. */
export function fakeExecutor(run: (ctx: ExecutionContext) => Promise<Outcome>, capMs = 5_000): Executor {
  return {
    checkType: 'URL',
    member: 'apiCheckResult',
    limits: { degradedMs: 1000, maxMs: 2000, capMs },
    assertionSources: [],
    parseRequest: () => ({}),
    target: () => 'http://target.example/',
    run: (_check, ctx) => run(ctx),
  };
}

export function outcome(detail: Record<string, unknown> = {}, failure?: { error: string; errorCode?: string }): Outcome {
  const now = new Date();
  return {
    startedAt: now,
    stoppedAt: now,
    responseTime: 1,
    assertionsFailed: false,
    member: 'apiCheckResult',
    detail,
    ...failure,
  };
}

export function preparedJob(
  executor: Executor,
  options: {
    jobId?: string;
    retryStrategy?: RetryStrategy;
    variables?: PreparedJob['variables'];
  } = {},
): PreparedJob {
  const check: CheckDefinition = {
    id: 'c1',
    name: 'fake check',
    checkType: 'URL',
    frequency: 60,
    degradedResponseTime: 1000,
    maxResponseTime: 2000,
    shouldFail: false,
    assertions: [],
    retryStrategy: options.retryStrategy ?? NO_RETRIES,
    request: { url: 'http://target.example/' },
    environmentVariables: [],
  };
  return {
    jobId: options.jobId ?? 'job-1',
    identity: { checkRunId: 1, sequenceId: 's', runLocation: 'here' },
    checkIdentity: { id: 'c1', name: 'fake check', checkType: 'URL' },
    runnable: { check, executor, target: 'http://target.example/' },
    variables: options.variables ?? [],
    triggerSource: null,
    logger: pino({ level: 'silent' }),
  };
}

/** Resolves once the executor's signal aborts, with its reason. */
export function aborted(ctx: ExecutionContext): Promise<unknown> {
  return new Promise((resolve) => {
    if (ctx.signal.aborted) resolve(ctx.signal.reason);
    else
      ctx.signal.addEventListener('abort', () => resolve(ctx.signal.reason), {
        once: true,
      });
  });
}

/** Polls `condition` until it holds or `timeoutMs` passes (then throws, naming `what`). */
export async function waitFor(condition: () => boolean, what: string, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** A promise with its resolve, for executors the test lets finish. */
export function gate(): { promise: Promise<void>; open: () => void } {
  let open: () => void = () => undefined;
  const promise = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { promise, open };
}
