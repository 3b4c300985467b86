// The job queue (src/jobs/queue.ts): slots, aborting jobs, and the shutdown
// drain every mode uses. Executors are fakes; timings are short real timers,
// and waits poll to a deadline rather than assert how long something took.

import { describe, expect, it } from 'vitest';
import { JobAbortedError } from '../../src/core/errors.js';
import type { CheckResultEntry } from '../../src/core/result-entry.js';
import { type JobCompletion, JobQueue } from '../../src/jobs/queue.js';
import { createMetrics } from '../../src/observability/metrics.js';
import { aborted, fakeExecutor, gate, outcome, preparedJob, SETTINGS, waitFor } from '../support/fake-jobs.js';

const SHUTDOWN = new JobAbortedError('shutdown', 'Aborted: test shutdown');

function requestError(result: CheckResultEntry | null): unknown {
  return (result?.apiCheckResult as { requestError?: unknown } | undefined)?.requestError;
}

/** Submits like the sources do: hand the result on, then release; records each report. */
function reporter(queue: JobQueue) {
  const reports: JobCompletion[] = [];
  const submit = (jobId: string, executor = fakeExecutor(async () => outcome())) =>
    queue.submit(preparedJob(executor, { jobId })).then(async (completion) => {
      try {
        // Handing on takes a moment: the drain must wait for it, not only for the job.
        await new Promise((resolve) => setTimeout(resolve, 20));
        reports.push(completion);
      } finally {
        completion.release();
      }
    });
  const count = (jobId: string) => reports.filter((r) => r.jobId === jobId).length;
  return { reports, submit, count };
}

describe('JobQueue slots', () => {
  it('never runs more than its concurrency; the rest wait in line and start as slots free', async () => {
    const queue = new JobQueue(2, createMetrics(), SETTINGS);
    let running = 0;
    let most = 0;
    const gates = Array.from({ length: 6 }, () => gate());
    const done = gates.map((g, i) =>
      queue.submit(
        preparedJob(
          fakeExecutor(async () => {
            running++;
            most = Math.max(most, running);
            await g.promise;
            running--;
            return outcome();
          }),
          { jobId: `job-${i}` },
        ),
      ),
    );
    await waitFor(() => queue.inFlight === 2, 'two jobs running');
    expect(queue.queued).toBe(4);
    expect(queue.free).toBe(0);
    expect(queue.runningJobIds().sort()).toEqual(['job-0', 'job-1']);
    // Let them finish one at a time: each freed slot starts exactly the next in line.
    for (const [i, g] of gates.entries()) {
      g.open();
      await done[i];
      if (i + 2 < gates.length) await waitFor(() => queue.has(`job-${i + 2}`), `job-${i + 2} to start`);
      expect(queue.inFlight).toBeLessThanOrEqual(2);
    }
    const completions = await Promise.all(done);
    expect(completions.map((c) => c.jobId)).toEqual(gates.map((_, i) => `job-${i}`));
    expect(completions.every((c) => c.result?.hasErrors === false)).toBe(true);
    expect(most).toBe(2);
    expect(queue.inFlight).toBe(0);
    expect(queue.free).toBe(2);
    expect(queue.runningJobIds()).toEqual([]);
  });

  it('waitForFreeSlot resolves when a slot frees, or when its signal aborts', async () => {
    const queue = new JobQueue(1, createMetrics(), SETTINGS);
    await queue.waitForFreeSlot();
    const g = gate();
    const job = queue.submit(
      preparedJob(
        fakeExecutor(async () => {
          await g.promise;
          return outcome();
        }),
      ),
    );
    await waitFor(() => queue.inFlight === 1, 'the job to start');
    let freed = false;
    const waiting = queue.waitForFreeSlot().then(() => {
      freed = true;
    });
    const stop = new AbortController();
    const cancelled = queue.waitForFreeSlot(stop.signal);
    stop.abort();
    await cancelled;
    expect(freed).toBe(false);
    g.open();
    await waiting;
    expect(queue.free).toBe(1);
    await job;
  });
  it('waitUntilFree resolves once that many slots are free, when its time is up, or when its signal aborts', async () => {
    const queue = new JobQueue(4, createMetrics(), SETTINGS);
    await queue.waitUntilFree(4);
    const gates = Array.from({ length: 4 }, () => gate());
    const jobs = gates.map((g) =>
      queue.submit(
        preparedJob(
          fakeExecutor(async () => {
            await g.promise;
            return outcome();
          }),
        ),
      ),
    );
    await waitFor(() => queue.inFlight === 4, 'the jobs to start');
    let half = false;
    const waiting = queue.waitUntilFree(2).then(() => {
      half = true;
    });
    const stop = new AbortController();
    const cancelled = queue.waitUntilFree(2, stop.signal);
    stop.abort();
    await cancelled;
    await queue.waitUntilFree(2, undefined, 10);
    gates[0]?.open();
    await waitFor(() => queue.free === 1, 'one slot to free');
    expect(half).toBe(false);
    gates[1]?.open();
    await waiting;
    expect(queue.free).toBeGreaterThanOrEqual(2);
    for (const g of gates) g.open();
    await Promise.all(jobs);
  });
});

describe('JobQueue abort', () => {
  it('aborts one running job by id; a lost lease ends it without a result', async () => {
    const queue = new JobQueue(2, createMetrics(), SETTINGS);
    const seen: unknown[] = [];
    const g = gate();
    const victim = queue.submit(
      preparedJob(
        fakeExecutor(async (ctx) => {
          seen.push(await aborted(ctx));
          return outcome({}, { error: 'aborted' });
        }),
        { jobId: 'victim' },
      ),
    );
    const other = queue.submit(
      preparedJob(
        fakeExecutor(async () => {
          await g.promise;
          return outcome();
        }),
        { jobId: 'other' },
      ),
    );
    await waitFor(() => queue.has('victim') && queue.has('other'), 'both jobs running');
    const lost = new JobAbortedError('lease-lost', 'Aborted: the job lease was lost');
    queue.abort('victim', lost);
    const completion = await victim;
    expect(seen).toEqual([lost]);
    expect(completion).toMatchObject({
      jobId: 'victim',
      result: null,
      reason: 'lease-lost',
    });
    expect(queue.has('victim')).toBe(false);
    // The other job was not touched.
    expect(queue.has('other')).toBe(true);
    g.open();
    expect((await other).result?.hasErrors).toBe(false);
    // Aborting a job that is not running is a no-op.
    queue.abort('victim', lost);
  });

  it('a job whose lease is lost while it waits for a slot starts aborted: no run, no result; it counts as known meanwhile', async () => {
    const queue = new JobQueue(1, createMetrics(), SETTINGS);
    const g = gate();
    const first = queue.submit(
      preparedJob(
        fakeExecutor(async () => {
          await g.promise;
          return outcome();
        }),
        { jobId: 'first' },
      ),
    );
    let ran = false;
    const waiting = queue.submit(
      preparedJob(
        fakeExecutor(async () => {
          ran = true;
          return outcome();
        }),
        { jobId: 'waiting' },
      ),
    );
    await waitFor(() => queue.queued === 1, 'the second job waiting');
    // A second copy of it (a claim answer naming it twice) is not a new job.
    expect(queue.has('waiting')).toBe(true);
    queue.abort('waiting', new JobAbortedError('lease-lost', 'Aborted: the job lease was lost'));
    g.open();
    expect((await first).result?.hasErrors).toBe(false);
    expect(await waiting).toMatchObject({ jobId: 'waiting', result: null, reason: 'lease-lost' });
    expect(ran).toBe(false);
    expect(queue.has('waiting')).toBe(false);
  });

  it('abortAll aborts running jobs and ends queued ones at once with the error, without running them', async () => {
    const queue = new JobQueue(1, createMetrics(), SETTINGS);
    let queuedRan = false;
    const running = queue.submit(
      preparedJob(
        fakeExecutor(async (ctx) => {
          const reason = await aborted(ctx);
          return outcome({ requestError: (reason as Error).message }, { error: (reason as Error).message });
        }),
        { jobId: 'running' },
      ),
    );
    const queued = queue.submit(
      preparedJob(
        fakeExecutor(async () => {
          queuedRan = true;
          return outcome();
        }),
        { jobId: 'queued' },
      ),
    );
    await waitFor(() => queue.has('running'), 'the first job to start');
    queue.abortAll(SHUTDOWN);
    const [first, second] = await Promise.all([running, queued]);
    expect(requestError(first.result)).toBe('Aborted: test shutdown');
    expect(first.result?.hasErrors).toBe(true);
    expect(requestError(second.result)).toBe('Aborted: test shutdown');
    expect(second.result?.hasErrors).toBe(true);
    expect(queuedRan).toBe(false);
  });
});

describe('JobQueue drain', () => {
  it('with nothing submitted, stops taking and resolves true', async () => {
    const queue = new JobQueue(2, createMetrics(), SETTINGS);
    let stopped = false;
    const stopTaking = () => {
      stopped = true;
    };
    expect(await queue.drain(1_000, { stopTaking, abortWith: SHUTDOWN })).toBe(true);
    expect(stopped).toBe(true);
  });

  it('waits for running jobs to finish and be reported, without aborting them', async () => {
    const queue = new JobQueue(2, createMetrics(), SETTINGS);
    const { reports, submit, count } = reporter(queue);
    const slow = (ms: number) =>
      fakeExecutor(async () => {
        await new Promise((r) => setTimeout(r, ms));
        return outcome();
      });
    const jobs = [submit('a', slow(100)), submit('b', slow(150)), submit('c', slow(50))];
    let graceOver = false;
    const order: string[] = [];
    const drained = await queue.drain(30_000, {
      stopTaking: async () => {
        await new Promise((r) => setTimeout(r, 10));
        order.push('stopped');
      },
      abortWith: SHUTDOWN,
      onGraceOver: () => {
        graceOver = true;
      },
    });
    order.push('drained');
    expect(drained).toBe(true);
    expect(graceOver).toBe(false);
    expect(order).toEqual(['stopped', 'drained']);
    // Every job was reported (its result handed on) before drain resolved, once, and without an error.
    expect(reports.map((r) => r.jobId).sort()).toEqual(['a', 'b', 'c']);
    for (const id of ['a', 'b', 'c']) expect(count(id)).toBe(1);
    expect(reports.every((r) => r.result?.hasErrors === false)).toBe(true);
    await Promise.all(jobs);
  });

  it('includes a job submitted while taking stops', async () => {
    const queue = new JobQueue(2, createMetrics(), SETTINGS);
    const { reports, submit } = reporter(queue);
    const drained = await queue.drain(30_000, {
      stopTaking: () => {
        // A claim that was answered just as the source stopped.
        void submit(
          'late',
          fakeExecutor(async () => {
            await new Promise((r) => setTimeout(r, 50));
            return outcome();
          }),
        );
      },
      abortWith: SHUTDOWN,
    });
    expect(drained).toBe(true);
    expect(reports.map((r) => r.jobId)).toEqual(['late']);
  });

  it('at the end of the grace aborts what is left, and every job still reports exactly once', async () => {
    const queue = new JobQueue(2, createMetrics(), SETTINGS);
    const { reports, submit, count } = reporter(queue);
    let queuedRan = false;
    const jobs = [
      submit('fast'),
      // Honours its abort signal, reporting the reason as its error.
      submit(
        'stuck',
        fakeExecutor(async (ctx) => {
          const reason = (await aborted(ctx)) as Error;
          return outcome({ requestError: reason.message }, { error: reason.message });
        }),
      ),
      submit(
        'stuck-too',
        fakeExecutor(async (ctx) => {
          const reason = (await aborted(ctx)) as Error;
          return outcome({ requestError: reason.message }, { error: reason.message });
        }),
      ),
      // Still waiting for a slot when the grace ends.
      submit(
        'queued',
        fakeExecutor(async () => {
          queuedRan = true;
          return outcome();
        }),
      ),
    ];
    await waitFor(() => count('fast') === 1 && queue.has('stuck') && queue.has('stuck-too'), 'the fast job reported and both stuck jobs running');
    let graceOvers = 0;
    const drained = await queue.drain(200, {
      abortWith: SHUTDOWN,
      onGraceOver: () => graceOvers++,
    });
    expect(drained).toBe(false);
    expect(graceOvers).toBe(1);
    // drain resolved only after every job was reported.
    expect(reports.map((r) => r.jobId).sort()).toEqual(['fast', 'queued', 'stuck', 'stuck-too']);
    for (const id of ['fast', 'queued', 'stuck', 'stuck-too']) expect(count(id), id).toBe(1);
    const byId = new Map(reports.map((r) => [r.jobId, r.result]));
    expect(byId.get('fast')?.hasErrors).toBe(false);
    for (const id of ['stuck', 'stuck-too', 'queued']) {
      expect(byId.get(id)?.hasErrors, id).toBe(true);
      expect(requestError(byId.get(id) ?? null), id).toBe('Aborted: test shutdown');
    }
    expect(queuedRan).toBe(false);
    await Promise.all(jobs);
    expect(reports).toHaveLength(4);
  });

  it('counts a job whose result could not be handed on as reported', async () => {
    const queue = new JobQueue(1, createMetrics(), SETTINGS);
    const failing = queue.submit(preparedJob(fakeExecutor(async () => outcome()))).then((completion) => {
      try {
        throw new Error('spool refused it');
      } finally {
        completion.release();
      }
    });
    const drained = queue.drain(30_000, { abortWith: SHUTDOWN });
    await expect(failing).rejects.toThrow('spool refused it');
    expect(await drained).toBe(true);
  });
});
