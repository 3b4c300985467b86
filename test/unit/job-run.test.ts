// Running one job (src/jobs/run.ts, src/jobs/attempt.ts): retries as the
// check's retryStrategy says, attempts counted, an executor that ignores its
// abort abandoned past its cap, and every result scrubbed of secrets.

import { describe, expect, it } from 'vitest';
import type { ExecutionContext } from '../../src/checks/executor.js';
import type { RetryStrategy } from '../../src/checks/retry.js';
import { JobAbortedError } from '../../src/core/errors.js';
import type { CheckResultEntry } from '../../src/core/result-entry.js';
import { ABANDON_AFTER_MS } from '../../src/jobs/attempt.js';
import { JobRunner, type JobSlot, type RunOptions } from '../../src/jobs/run.js';
import { createMetrics } from '../../src/observability/metrics.js';
import { SecretPolicy } from '../../src/secrets/policy.js';
import { REDACTED } from '../../src/secrets/scrubber.js';
import { aborted, fakeExecutor, outcome, preparedJob, SETTINGS } from '../support/fake-jobs.js';

const retries = (maxRetries: number, onlyOn: RetryStrategy['onlyOn'] = null): RetryStrategy => ({
  type: 'FIXED',
  baseBackoffSeconds: 0,
  maxRetries,
  maxDurationSeconds: 600,
  onlyOn,
});

const refused = { error: 'connect ECONNREFUSED', errorCode: 'ECONNREFUSED' };

/** A slot like the queue's: one controller per job, abortable from the test. */
function slot(abortedWith?: JobAbortedError) {
  const controllers = new Map<string, AbortController>();
  const s: JobSlot & { controllers: Map<string, AbortController> } = {
    controllers,
    abortedWith: () => abortedWith,
    enter: (jobId) => {
      const controller = new AbortController();
      controllers.set(jobId, controller);
      return {
        signal: controller.signal,
        leave: () => controllers.delete(jobId),
      };
    },
  };
  return s;
}

function requestError(result: CheckResultEntry | null | undefined): unknown {
  return (result?.apiCheckResult as { requestError?: unknown } | undefined)?.requestError;
}

async function run(executor: ReturnType<typeof fakeExecutor>, strategy?: RetryStrategy, options: RunOptions = {}) {
  const attempts: CheckResultEntry[] = [];
  const runner = new JobRunner(createMetrics(), SETTINGS, options);
  const completion = await runner.run(preparedJob(executor, strategy ? { retryStrategy: strategy } : {}), slot(), async (r) => {
    attempts.push(r);
  });
  completion.release();
  return { completion, attempts };
}

describe('job retries', () => {
  it('retries a failing job maxRetries times, reporting each failed attempt as ATTEMPT and the last as FINAL', async () => {
    let calls = 0;
    const { completion, attempts } = await run(
      fakeExecutor(async () => {
        calls++;
        return outcome({ requestError: `try ${calls}` }, refused);
      }),
      retries(2),
    );
    expect(calls).toBe(3);
    expect(attempts.map((a) => [a.resultType, a.attempts, a.hasErrors])).toEqual([
      ['ATTEMPT', 1, true],
      ['ATTEMPT', 2, true],
    ]);
    expect(completion.result).toMatchObject({
      resultType: 'FINAL',
      attempts: 3,
      hasErrors: true,
    });
    expect(requestError(completion.result)).toBe('try 3');
  });

  it('stops retrying at the first attempt that passes, and counts the attempts', async () => {
    let calls = 0;
    const { completion, attempts } = await run(
      fakeExecutor(async () => (++calls < 2 ? outcome({}, refused) : outcome())),
      retries(5),
    );
    expect(calls).toBe(2);
    expect(attempts).toHaveLength(1);
    expect(completion.result).toMatchObject({
      resultType: 'FINAL',
      attempts: 2,
      hasErrors: false,
      hasFailures: false,
    });
  });

  it('does not retry without a retry strategy, nor an error onlyOn NETWORK_ERROR does not cover', async () => {
    for (const [strategy, failure] of [
      [undefined, refused],
      [retries(3, 'NETWORK_ERROR'), { error: 'certificate has expired', errorCode: 'CERT_HAS_EXPIRED' }],
    ] as const) {
      let calls = 0;
      const { completion, attempts } = await run(
        fakeExecutor(async () => {
          calls++;
          return outcome({}, failure);
        }),
        strategy,
      );
      expect(calls).toBe(1);
      expect(attempts).toEqual([]);
      expect(completion.result).toMatchObject({
        resultType: 'FINAL',
        attempts: 1,
        hasErrors: true,
      });
    }
  });

  it('retries onlyOn NETWORK_ERROR for a network error code', async () => {
    let calls = 0;
    const { completion } = await run(
      fakeExecutor(async () => {
        calls++;
        return outcome({}, refused);
      }),
      retries(1, 'NETWORK_ERROR'),
    );
    expect(calls).toBe(2);
    expect(completion.result?.attempts).toBe(2);
  });
});

describe('attempt supervision', () => {
  it('aborts an executor at its cap, and abandons one that ignores the abort, reporting an error', async () => {
    const signals: AbortSignal[] = [];
    let finish: () => void = () => undefined;
    const { completion } = await run(
      fakeExecutor(async (ctx) => {
        signals.push(ctx.signal);
        // Ignores its signal: never settles until the test lets it.
        await new Promise<void>((resolve) => {
          finish = resolve;
        });
        return outcome();
      }, 100),
    );
    finish();
    expect(signals[0]?.aborted).toBe(true);
    expect(signals[0]?.reason).toMatchObject({ reason: 'timeout' });
    expect(completion.result).toMatchObject({
      resultType: 'FINAL',
      attempts: 1,
      hasErrors: true,
    });
    expect(requestError(completion.result)).toBe(`Timed out after 100 ms (the URL check limit); the executor did not stop within ${ABANDON_AFTER_MS} ms`);
  }, 20_000);

  it('abandons an executor that ignores a signal aborted before its attempt began (an abort that reached a check worker first)', async () => {
    const early: JobSlot = {
      abortedWith: () => undefined,
      enter: () => {
        const controller = new AbortController();
        controller.abort(new JobAbortedError('shutdown', 'Aborted: the agent shut down before the check finished'));
        return { signal: controller.signal, leave: () => undefined };
      },
    };
    let finish: () => void = () => undefined;
    const executor = fakeExecutor(async (ctx) => {
      expect(ctx.signal.aborted).toBe(true);
      await new Promise<void>((resolve) => {
        finish = resolve;
      });
      return outcome();
    }, 60_000);
    const completion = await new JobRunner(createMetrics(), SETTINGS).run(preparedJob(executor), early, async () => undefined);
    finish();
    expect(completion.result).toMatchObject({ resultType: 'FINAL', hasErrors: true });
    expect(requestError(completion.result)).toBe(`Aborted: the agent shut down before the check finished; the executor did not stop within ${ABANDON_AFTER_MS} ms`);
  }, 20_000);

  it('an executor that stops at its cap reports its own result', async () => {
    const { completion } = await run(
      fakeExecutor(async (ctx) => {
        const reason = (await aborted(ctx)) as Error;
        return outcome({ requestError: reason.message }, { error: reason.message });
      }, 50),
    );
    expect(completion.result?.hasErrors).toBe(true);
    expect(requestError(completion.result)).toBe('Timed out after 50 ms (the URL check limit)');
  });

  it('a lost lease ends the job without a result; the executor is not retried', async () => {
    const s = slot();
    let calls = 0;
    const runner = new JobRunner(createMetrics(), SETTINGS);
    const running = runner.run(
      preparedJob(
        fakeExecutor(async (ctx) => {
          calls++;
          await aborted(ctx);
          return outcome({}, refused);
        }),
        { jobId: 'leased', retryStrategy: retries(3) },
      ),
      s,
      async () => undefined,
    );
    while (!s.controllers.has('leased')) await new Promise((r) => setTimeout(r, 5));
    s.controllers.get('leased')?.abort(new JobAbortedError('lease-lost', 'lost'));
    const completion = await running;
    expect(completion).toMatchObject({
      jobId: 'leased',
      result: null,
      reason: 'lease-lost',
    });
    expect(calls).toBe(1);
    // The job left its slot.
    expect(s.controllers.size).toBe(0);
  });

  it('a job started after the queue aborted everything ends with that error, without running', async () => {
    let ran = false;
    const runner = new JobRunner(createMetrics(), SETTINGS);
    const completion = await runner.run(
      preparedJob(
        fakeExecutor(async () => {
          ran = true;
          return outcome();
        }),
      ),
      slot(new JobAbortedError('shutdown', 'Aborted: shut down')),
      async () => undefined,
    );
    expect(ran).toBe(false);
    expect(requestError(completion.result)).toBe('Aborted: shut down');
  });

  it('an invalid job gets an error result naming the problem', async () => {
    const runner = new JobRunner(createMetrics(), SETTINGS);
    const job = {
      ...preparedJob(fakeExecutor(async () => outcome())),
      runnable: undefined,
      invalid: 'Invalid job: no check',
    };
    const completion = await runner.run(job, slot(), async () => undefined);
    expect(completion.result).toMatchObject({ hasErrors: true });
    expect(requestError(completion.result)).toBe('Invalid job: no check');
  });
});

describe('scrubbing and the test fault', () => {
  it('scrubs every result, ATTEMPT and FINAL, of agent-wide, job and run-time secrets', async () => {
    const attempts: CheckResultEntry[] = [];
    const runner = new JobRunner(createMetrics(), SETTINGS, {
      secrets: new SecretPolicy([{ name: 'OUTPOST_SECRET_A', value: 'agent-secret-a' }], 0),
    });
    const leak = (ctx: ExecutionContext) => {
      ctx.secrets?.add('run-time-secret', 'request.password');
      return outcome({ requestError: 'agent-secret-a job-secret-j run-time-secret' }, refused);
    };
    const completion = await runner.run(
      preparedJob(
        fakeExecutor(async (ctx) => leak(ctx)),
        {
          retryStrategy: retries(1),
          variables: [{ key: 'J', value: 'job-secret-j', secret: true }],
        },
      ),
      slot(),
      async (r) => {
        attempts.push(r);
      },
    );
    completion.release();
    expect(attempts).toHaveLength(1);
    for (const result of [attempts[0], completion.result]) {
      expect(requestError(result)).toBe(`${REDACTED} ${REDACTED} ${REDACTED}`);
      const text = JSON.stringify(result);
      for (const secret of ['agent-secret-a', 'job-secret-j', 'run-time-secret']) expect(text).not.toContain(secret);
    }
  });

  it('OUTPOST_TEST_FAULT=executor-throw replaces the executor with a throw that is reported, and scrubbed from the result', async () => {
    const reported: unknown[] = [];
    let ran = false;
    const runner = new JobRunner(createMetrics(), SETTINGS, {
      secrets: new SecretPolicy([], 0),
      testFault: 'executor-throw',
      onExecutorError: (error) => reported.push(error),
    });
    const completion = await runner.run(
      preparedJob(
        fakeExecutor(async () => {
          ran = true;
          return outcome();
        }),
        { variables: [{ key: 'S', value: 'fault-secret', secret: true }] },
      ),
      slot(),
      async () => undefined,
    );
    expect(ran).toBe(false);
    expect(reported).toHaveLength(1);
    expect(String((reported[0] as Error).message)).toContain('fault-secret');
    expect(completion.result?.hasErrors).toBe(true);
    expect(String(requestError(completion.result))).toMatch(/^Internal error in the URL executor: OUTPOST_TEST_FAULT=executor-throw/);
    expect(JSON.stringify(completion.result)).not.toContain('fault-secret');
  });
});
