// The claim loop (src/control-plane/source.ts) against the real server (test/support/control-plane.ts)
// over real HTTP, with a real queue and spool and a fake executor: claims
// only for free slots, every completion handed on once, leases kept while a
// job runs, claiming paused while the spool is full, and stop().

import { randomUUID } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import type { Executor } from '../../src/checks/executor.js';
import { ExecutorRegistry } from '../../src/checks/executor-registry.js';
import { ControlPlaneClient } from '../../src/control-plane/client.js';
import { LeaseKeeper } from '../../src/control-plane/leases.js';
import { ControlPlaneSink } from '../../src/control-plane/sink.js';
import { ControlPlaneSource } from '../../src/control-plane/source.js';
import { Spool } from '../../src/control-plane/spool.js';
import { JobAbortedError } from '../../src/core/errors.js';
import { type JobCompletion, JobQueue } from '../../src/jobs/queue.js';
import { createMetrics } from '../../src/observability/metrics.js';
import { fakeExecutor, gate, outcome, SETTINGS, waitFor } from '../support/fake-jobs.js';
import { ControlPlane } from '../support/control-plane.js';

const logger = pino({ level: 'silent' });
const cleanup: Array<() => Promise<void>> = [];

afterEach(async () => {
  for (const step of cleanup.splice(0).reverse()) await step();
});

async function setUp(options: {
  concurrency: number;
  executor: Executor;
  waitSeconds?: number;
  spoolMaxResults?: number;
  ipv6Addresses?: () => string[];
  claimIdReuseMs?: number;
  log?: pino.Logger;
}) {
  const cp = await ControlPlane.start();
  cleanup.push(() => cp.close());
  const agentId = randomUUID();
  const client = new ControlPlaneClient(
    {
      apiUrl: cp.url,
      apiKey: cp.apiKey,
      agentId,
      version: '0.0.0-test',
      timeoutMs: 10_000,
      proxy: {},
    },
    createMetrics(),
  );
  cleanup.push(() => client.close());
  const spool = await Spool.open(
    mkdtempSync(path.join(tmpdir(), 'outpost-source-')),
    { maxResults: options.spoolMaxResults ?? 10_000, maxBytes: 1024 ** 3 },
    logger,
  );
  cleanup.push(() => spool.close());
  const queue = new JobQueue(options.concurrency, createMetrics(), SETTINGS);
  const leases = new LeaseKeeper(client, logger, (jobId) => queue.abort(jobId, new JobAbortedError('lease-lost', 'lost')));
  const completions: JobCompletion[] = [];
  const source = new ControlPlaneSource({
    queue,
    spool,
    client,
    leases,
    registry: new ExecutorRegistry([options.executor]),
    logger: options.log ?? logger,
    agent: {
      id: agentId,
      version: '0.0.0-test',
      checkTypes: ['URL'],
      runtimes: [],
    },
    ...(options.ipv6Addresses ? { ipv6Addresses: options.ipv6Addresses } : {}),
    waitSeconds: options.waitSeconds ?? 1,
    authRetryMs: 1_000,
    ...(options.claimIdReuseMs === undefined ? {} : { claimIdReuseMs: options.claimIdReuseMs }),
    onFailure: () => undefined,
    onAttempt: async () => undefined,
    onCompletion: async (completion, job) => {
      completions.push(completion);
      if (completion.result)
        await spool.append({
          jobId: job.id,
          resultId: completion.result.id,
          result: completion.result,
        });
    },
  });
  cleanup.push(() => source.stop());
  return { cp, client, spool, queue, leases, source, completions };
}

const check = (n: number) => ({
  id: `check-${n}`,
  name: `check ${n}`,
  checkType: 'URL',
  request: { url: 'http://target.example/' },
});

describe('ControlPlaneSource', () => {
  it('claims only for free slots, hands every completion on once, and keeps leases only while jobs run', async () => {
    const g = gate();
    let running = 0;
    let most = 0;
    const { cp, queue, leases, source, completions, spool } = await setUp({
      concurrency: 2,
      executor: fakeExecutor(async () => {
        running++;
        most = Math.max(most, running);
        await g.promise;
        running--;
        return outcome();
      }),
    });
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push(await cp.addJob(check(i)));
    source.start();
    await waitFor(() => queue.inFlight === 2, 'two jobs running');
    // Give the loop time to claim more if it wrongly would.
    await new Promise((r) => setTimeout(r, 200));
    expect([...cp.jobs.values()].filter((s) => s.state === 'leased')).toHaveLength(2);
    expect(leases.size).toBe(2);
    expect(source.inProgress.size).toBe(2);
    g.open();
    await waitFor(() => completions.length === 5, 'five completions', 10_000);
    expect(completions.map((c) => c.jobId).sort()).toEqual([...ids].sort());
    expect(completions.every((c) => c.result?.hasErrors === false)).toBe(true);
    expect(cp.claims.every((c) => c.given <= c.max && c.max <= 2)).toBe(true);
    expect(most).toBe(2);
    await waitFor(() => source.inProgress.size === 0, 'every job released');
    expect(leases.size).toBe(0);
    expect(spool.results).toBe(5);
    await source.stop();
  }, 20_000);

  it('runs a job named twice in one answer once, and logs the ignored elements once per claim, not once each', async () => {
    const g = gate();
    let runs = 0;
    const lines: Array<{ msg: string; jobs?: number }> = [];
    const { cp, source, completions } = await setUp({
      concurrency: 1,
      executor: fakeExecutor(async () => {
        runs++;
        await g.promise;
        return outcome();
      }),
      log: pino({ level: 'warn' }, { write: (line: string) => lines.push(JSON.parse(line) as { msg: string }) }),
    });
    // Each job comes twice, with 500 elements that have no id between: a hostile or broken answer.
    cp.claimJobText = (job) => [JSON.stringify(job), ...Array.from({ length: 500 }, () => '0'), JSON.stringify(job)].join(',');
    const first = await cp.addJob(check(1));
    const second = await cp.addJob(check(2));
    source.start();
    await waitFor(() => runs === 1, 'the first job running');
    g.open();
    await waitFor(() => completions.length === 2, 'two completions', 10_000);
    await new Promise((r) => setTimeout(r, 300));
    expect(runs).toBe(2);
    expect(completions.map((c) => c.jobId).sort()).toEqual([first, second].sort());
    // One line for the elements without an id and one for the second copies, per claim: not one per element.
    const withoutId = lines.filter((l) => l.msg.startsWith('claimed jobs without an id'));
    expect(withoutId.length).toBeGreaterThan(0);
    expect(withoutId.every((l) => (l.jobs ?? 0) >= 500)).toBe(true);
    expect(lines.some((l) => l.msg.startsWith('jobs claimed again while running or waiting'))).toBe(true);
    expect(lines.length).toBeLessThan(20);
    await source.stop();
  }, 20_000);

  it('turns a job of a type it has no executor for into an error completion', async () => {
    const { cp, source, completions } = await setUp({
      concurrency: 1,
      executor: fakeExecutor(async () => outcome()),
    });
    cp.handsOutUnadvertisedTypes = true;
    const id = await cp.addJob({ id: 'c', name: 'c', checkType: 'TCP', request: {} });
    source.start();
    await waitFor(() => completions.length === 1, 'the completion');
    expect(completions[0]?.jobId).toBe(id);
    expect(completions[0]?.result?.hasErrors).toBe(true);
    await source.stop();
  });

  it('pauses claiming while the spool is full, and resumes once it drains', async () => {
    const { cp, client, spool, source, completions } = await setUp({
      concurrency: 1,
      executor: fakeExecutor(async () => outcome()),
      spoolMaxResults: 1,
    });
    const ids = [await cp.addJob(check(1)), await cp.addJob(check(2)), await cp.addJob(check(3))];
    source.start();
    await waitFor(() => spool.results === 1, 'one result spooled');
    await new Promise((r) => setTimeout(r, 300));
    // The spool holds its bound: no other job was claimed.
    expect(completions).toHaveLength(1);
    expect([...cp.jobs.values()].filter((s) => s.state === 'ready')).toHaveLength(2);
    const sink = new ControlPlaneSink(spool, client, logger, 1_000, () => undefined);
    sink.start();
    cleanup.push(() => sink.flush(Date.now()).then(() => undefined));
    await waitFor(() => ids.every((id) => cp.resultsFor(id).length === 1), 'all three results at the control plane', 15_000);
    expect(completions).toHaveLength(3);
    await source.stop();
  }, 30_000);

  it('stop() ends the loop without waiting out an open long poll, and claims no more', async () => {
    const { cp, client, source } = await setUp({
      concurrency: 1,
      executor: fakeExecutor(async () => outcome()),
      waitSeconds: 30,
    });
    source.start();
    // The first claim asks without waiting; once the key is accepted the next one is a long poll.
    await waitFor(() => client.authorized === true && cp.claims.length >= 1, 'the first claim answered');
    // After the pause that follows an empty answer (EMPTY_CLAIM_FLOOR_MS), the next claim is a 30 s long poll.
    await new Promise((r) => setTimeout(r, 1_500));
    const stopping = Date.now();
    await source.stop();
    // Not waited out: far sooner than the long poll would have ended.
    expect(Date.now() - stopping).toBeLessThan(20_000);
    expect(cp.claims).toHaveLength(1);
    // No claim after it: the loop is over (the pacing floor has passed, and no job is waiting to wake a poll).
    await new Promise((r) => setTimeout(r, 1_500));
    expect(cp.claims).toHaveLength(1);
  }, 25_000);

  it('reports the host IPv6 addresses with each claim, read anew each time; none: the field is left out', async () => {
    let addresses = ['2001:db8::7'];
    const { cp, source } = await setUp({ concurrency: 1, executor: fakeExecutor(async () => outcome()), waitSeconds: 0, ipv6Addresses: () => addresses });
    source.start();
    await waitFor(() => cp.claims.length >= 1, 'the first claim');
    addresses = [];
    await waitFor(() => cp.claims.length >= 2, 'a second claim', 10_000);
    await source.stop();
    expect(cp.claims[0]?.ipv6Addresses).toEqual(['2001:db8::7']);
    expect(cp.claims.at(-1)?.ipv6Addresses).toBeUndefined();
  }, 20_000);

  it('keeps a claimId across retries after a lost connection, and takes a new one after an unreadable answer, and for each claim', async () => {
    const { cp, source } = await setUp({ concurrency: 1, executor: fakeExecutor(async () => outcome()), waitSeconds: 0 });
    cp.inject({ route: 'claim', reset: true });
    cp.inject({ route: 'claim', malformed: true });
    source.start();
    await waitFor(() => cp.claims.length >= 2, 'two answered claims', 15_000);
    await source.stop();
    const [reset, malformed, answered, next] = cp.claimIdsSent;
    expect(reset).toMatch(/^[0-9a-f-]{36}$/);
    // The connection was lost: the server may have leased jobs under it, so the retry asks again under it.
    expect(malformed).toBe(reset);
    // An answer arrived but could not be read: asking under the same name would get the same answer again.
    expect(answered).not.toBe(malformed);
    expect(next).not.toBe(answered);
  }, 20_000);

  it('gives up a claimId once retries have kept it for claimIdReuseMs: a failure that repeats does not pin its jobs', async () => {
    const { cp, source } = await setUp({ concurrency: 1, executor: fakeExecutor(async () => outcome()), waitSeconds: 0, claimIdReuseMs: 1 });
    cp.inject({ route: 'claim', status: 503, count: 2 });
    source.start();
    await waitFor(() => cp.claims.length >= 1, 'an answered claim', 15_000);
    await source.stop();
    const [first, second, third] = cp.claimIdsSent;
    // Retries wait at least 0.5 s, far past 1 ms: each asks under a new name.
    expect(new Set([first, second, third]).size).toBe(3);
  }, 20_000);
});
