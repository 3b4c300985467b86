// Check workers (src/jobs/workers/): the pool behind the job queue, with the
// compiled worker (dist/, so `npm run build` first) running real URL and TCP
// checks against a node:http server on loopback. Dispatch and scrubbing,
// retries' ATTEMPT results, aborts (lost lease, shutdown), a worker that
// dies (test/support/crashing-worker.mjs), closing; the shared memory
// budget; and the default count.

import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { workerRegistry } from '../../src/checks/registry.js';
import { JobAbortedError } from '../../src/core/errors.js';
import { MemoryBudget } from '../../src/core/memory-budget.js';
import type { CheckResultEntry } from '../../src/core/result-entry.js';
import { prepareCheck } from '../../src/jobs/prepare.js';
import { type JobCompletion, JobQueue } from '../../src/jobs/queue.js';
import { availableCores, cgroupCpuQuota, checkWorkerCount } from '../../src/jobs/workers/cores.js';
import { type PoolOptions, WorkerPool } from '../../src/jobs/workers/pool.js';
import { createMetrics, type Metrics } from '../../src/observability/metrics.js';
import { SecretPolicy } from '../../src/secrets/policy.js';
import { SETTINGS, waitFor } from '../support/fake-jobs.js';

const logger = pino({ level: 'silent' });
const registry = workerRegistry();
const identity = { checkRunId: 1, sequenceId: 's', runLocation: 'here' };
const CRASHING = new URL('../support/crashing-worker.mjs', import.meta.url);
const WORKER = new URL('../../dist/jobs/workers/worker.js', import.meta.url);

let server: Server;
let base = '';
const seen: string[] = [];
/** Requests to /hang are held until the test ends. */
const hanging: ServerResponse[] = [];

beforeAll(async () => {
  server = createServer((req: IncomingMessage, res: ServerResponse) => {
    seen.push(req.url ?? '');
    if (req.url?.startsWith('/hang')) {
      hanging.push(res);
      return;
    }
    res.writeHead(req.url?.startsWith('/fail') ? 500 : 200, { 'content-type': 'text/plain' }).end('hello from the peer');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  for (const res of hanging.splice(0)) res.destroy();
  await new Promise((resolve) => server.close(resolve));
});

const pools: WorkerPool[] = [];
afterEach(async () => {
  for (const res of hanging.splice(0)) res.destroy();
  for (const pool of pools.splice(0)) await pool.close();
});

function urlJob(jobId: string, path: string, extra: Record<string, unknown> = {}, variables: Array<{ key: string; value: string; secret?: boolean }> = []) {
  const raw = {
    id: `check-${jobId}`,
    name: (extra.name as string | undefined) ?? `check ${jobId}`,
    checkType: 'URL',
    frequency: 60,
    request: { url: `${base}${path}` },
    ...extra,
  };
  return prepareCheck(raw, 'check', jobId, identity, registry, logger, { variables });
}

interface Setup {
  metrics: Metrics;
  budget: MemoryBudget;
  pool: WorkerPool;
  queue: JobQueue;
  secrets: SecretPolicy;
}

async function setup(workers = 2, options: Partial<PoolOptions> = {}, concurrency = 4): Promise<Setup> {
  const metrics = createMetrics();
  const budget = MemoryBudget.forHolders(8 * 1024 * 1024, 1 + workers);
  const secrets = new SecretPolicy([{ name: 'OUTPOST_SECRET_AGENT', value: 'agent-wide-secret-value' }]);
  const run = { secrets, bodyMemory: budget, maxResultBytes: 256 * 1024 };
  const pool = WorkerPool.start({
    workers,
    metrics,
    settings: SETTINGS,
    run,
    agentSecrets: [{ name: 'OUTPOST_SECRET_AGENT', value: 'agent-wide-secret-value' }],
    logLevel: 'error',
    logStream: 'stderr',
    logger,
    bodyMemory: budget,
    entry: WORKER,
    ...options,
  });
  pools.push(pool);
  await pool.whenReady();
  const queue = new JobQueue(concurrency, metrics, SETTINGS, { ...run, workers: pool });
  return { metrics, budget, pool, queue, secrets };
}

async function counter(metrics: Metrics, name: string): Promise<Record<string, number>> {
  const metric = (await metrics.registry.getMetricsAsJSON()).find((m) => m.name === name);
  const out: Record<string, number> = {};
  for (const v of (metric?.values ?? []) as Array<{ labels: Record<string, string>; value: number }>) out[Object.values(v.labels).join('/') || '-'] = v.value;
  return out;
}

/** Hands the result on and releases it, as the sinks do. */
async function settle(completion: Promise<JobCompletion>): Promise<JobCompletion> {
  const done = await completion;
  done.release();
  return done;
}

describe('check workers: dispatch', () => {
  it('runs URL and TCP jobs on the workers: results come back scrubbed, and /metrics counts them once', async () => {
    const { metrics, pool, queue, budget } = await setup();
    const secret = { key: 'TOKEN', value: 'job-secret-token-42', secret: true };
    const jobs = Array.from({ length: 8 }, (_, i) => urlJob(`j${i}`, `/ok?n=${i}&t={{TOKEN}}&a=agent-wide-secret-value`, {}, [secret]));
    const tcp = prepareCheck(
      { id: 'tcp-1', name: 'tcp', checkType: 'TCP', frequency: 60, request: { hostname: '127.0.0.1', port: Number(new URL(base).port) } },
      'check',
      'tcp-job',
      identity,
      registry,
      logger,
    );
    expect(jobs.every((j) => pool.canRun(j, { abortedWith: () => undefined, enter: () => ({ signal: new AbortController().signal, leave: () => undefined }) }))).toBe(true);
    const results = await Promise.all([...jobs, tcp].map((j) => settle(queue.submit(j))));
    for (const { result } of results) {
      expect(result?.resultType).toBe('FINAL');
      expect(result?.hasErrors).toBe(false);
      const text = JSON.stringify(result);
      expect(text).not.toContain('job-secret-token-42');
      expect(text).not.toContain('agent-wide-secret-value');
    }
    // The workers filled the variable in: the peer saw the value the results no longer show.
    expect(seen.filter((u) => u.includes('t=job-secret-token-42'))).toHaveLength(8);
    expect(await counter(metrics, 'outpost_jobs_total')).toEqual({ 'URL/passed': 8, 'TCP/passed': 1 });
    expect((await counter(metrics, 'outpost_jobs_in_flight'))['-']).toBe(0);
    expect(metrics.checks.render()).toContain('probe_success{check_id="check-j3"');
    expect(metrics.checks.size).toBe(9);
    expect((await counter(metrics, 'outpost_check_workers'))['-']).toBe(2);
    expect(budget.inUseBytes).toBe(0);
  });

  it('sends each job to the least busy worker', async () => {
    const { queue, pool } = await setup(2);
    const jobs = Array.from({ length: 4 }, (_, i) => queue.submit(urlJob(`spread-${i}`, `/hang/spread-${i}`)));
    await waitFor(() => hanging.length === 4, 'four requests at the peer');
    expect(pool.busy()).toEqual([2, 2]);
    queue.abortAll(new JobAbortedError('shutdown', 'Aborted: test over'));
    await Promise.all(jobs.map(settle));
    expect(pool.busy()).toEqual([0, 0]);
  });

  it('keeps scripted work, invalid jobs and API checks with scripts on the main thread', async () => {
    const { pool } = await setup(2);
    const slot = { abortedWith: () => undefined, enter: () => ({ signal: new AbortController().signal, leave: () => undefined }) };
    const withScript = prepareCheck(
      { id: 'api', name: 'api', checkType: 'API', frequency: 60, request: { url: `${base}/ok`, method: 'GET' }, setupScript: 'console.log(1)' },
      'check',
      'api-job',
      identity,
      registry,
      logger,
    );
    expect(withScript.runnable).toBeDefined();
    expect(pool.canRun(withScript, slot)).toBe(false);
    expect(pool.canRun(urlJob('bad', '/ok', { frequency: 'often' }), slot)).toBe(false);
    expect(pool.canRun(urlJob('ok', '/ok'), slot)).toBe(true);
    expect(pool.canRun(urlJob('ok', '/ok'), { ...slot, abortedWith: () => new JobAbortedError('shutdown', 'x') })).toBe(false);
  });

  it('hands failed attempts that are retried to onAttempt as ATTEMPT results, then the FINAL one', async () => {
    const { queue } = await setup(2);
    const attempts: CheckResultEntry[] = [];
    const job = urlJob('retry', '/fail', { retryStrategy: { type: 'FIXED', baseBackoffSeconds: 0, maxRetries: 2 } });
    const { result } = await settle(queue.submit(job, async (entry) => void attempts.push(entry)));
    expect(attempts.map((a) => [a.resultType, a.attempts])).toEqual([
      ['ATTEMPT', 1],
      ['ATTEMPT', 2],
    ]);
    expect([result?.resultType, result?.attempts, result?.hasFailures]).toEqual(['FINAL', 3, true]);
  });
});

describe('check workers: aborts', () => {
  it('a lost lease ends the job without a result; a shutdown abort ends it with an error result', async () => {
    const { queue } = await setup(2);
    const lost = queue.submit(urlJob('lost', '/hang/1'));
    const shut = queue.submit(urlJob('shut', '/hang/2'));
    await waitFor(() => hanging.length === 2, 'both requests at the peer');
    expect(queue.runningJobIds().sort()).toEqual(['lost', 'shut']);
    queue.abort('lost', new JobAbortedError('lease-lost', 'Aborted: the job lease was lost'));
    const lostDone = await settle(lost);
    expect(lostDone.result).toBeNull();
    queue.abortAll(new JobAbortedError('shutdown', 'Aborted: test shutdown'));
    const { result } = await settle(shut);
    expect(result?.hasErrors).toBe(true);
    expect(JSON.stringify(result)).toContain('Aborted: test shutdown');
    // Jobs submitted after the abort end at once, on the main thread.
    const late = await settle(queue.submit(urlJob('late', '/ok')));
    expect(JSON.stringify(late.result)).toContain('Aborted: test shutdown');
  });

  it('drain waits for running jobs within the grace, then aborts what is left and reports it', async () => {
    const { queue, pool } = await setup(2);
    const reported: JobCompletion[] = [];
    const quick = queue.submit(urlJob('quick', '/ok')).then((c) => reported.push(c) && c.release());
    const stuck = queue.submit(urlJob('stuck', '/hang/3')).then((c) => reported.push(c) && c.release());
    await waitFor(() => hanging.length === 1, 'the stuck request at the peer');
    const drained = await queue.drain(300, { abortWith: new JobAbortedError('shutdown', 'Aborted: grace over') });
    await Promise.all([quick, stuck]);
    expect(drained).toBe(false);
    expect(reported.map((c) => [c.jobId, c.result?.hasErrors])).toEqual([
      ['quick', false],
      ['stuck', true],
    ]);
    await pool.close();
    expect(pool.up).toBe(0);
    expect(pool.ready()).toBe(false);
  });
});

describe('check workers: a worker that dies', () => {
  it('turns its jobs into error results, gives its memory back, and is restarted (not ready meanwhile)', async () => {
    const { queue, pool, metrics, budget } = await setup(1, { entry: CRASHING }, 2);
    const held = queue.submit(urlJob('held', '/hang/4'));
    await waitFor(() => hanging.length === 1, 'a request held at the peer');
    const crash = await settle(queue.submit(urlJob('boom', '/ok', { name: 'crash' })));
    expect(crash.result?.hasErrors).toBe(true);
    expect(JSON.stringify(crash.result)).toContain('check worker stopped unexpectedly');
    const other = await settle(held);
    expect(other.result?.hasErrors).toBe(true);
    expect(pool.ready()).toBe(false);
    expect(await counter(metrics, 'outpost_jobs_total')).toEqual({ 'URL/error': 2 });
    expect((await counter(metrics, 'outpost_jobs_in_flight'))['-']).toBe(0);
    expect(budget.inUseBytes).toBe(0);
    // While no worker is up, jobs run on the main thread rather than wait.
    const meanwhile = await settle(queue.submit(urlJob('meanwhile', '/ok')));
    expect(meanwhile.result?.hasErrors).toBe(false);
    await pool.whenReady();
    expect((await counter(metrics, 'outpost_check_worker_restarts_total'))['-']).toBe(1);
    const after = await settle(queue.submit(urlJob('after', '/ok')));
    expect(after.result?.hasErrors).toBe(false);
  });
});

describe('check workers: a result that cannot be cloned', () => {
  it('ends its job as an error result naming why, gives its memory back, and the worker goes on', async () => {
    const { queue, pool, metrics, budget } = await setup(1, { entry: CRASHING }, 2);
    const job = await settle(queue.submit(urlJob('unclonable', '/ok', { name: 'unclonable' })));
    expect(job.result?.hasErrors).toBe(true);
    expect(JSON.stringify(job.result)).toContain('its check worker could not hand over its result (DataCloneError: function Object() { [native code] } could not be cloned.)');
    // Counted once, as it ran: the check passed; only its hand-over failed (logged at error).
    expect(await counter(metrics, 'outpost_jobs_total')).toEqual({ 'URL/passed': 1 });
    expect((await counter(metrics, 'outpost_jobs_in_flight'))['-']).toBe(0);
    await waitFor(() => budget.inUseBytes === 0, 'the result memory given back');
    expect((await counter(metrics, 'outpost_check_worker_restarts_total'))['-']).toBe(0);
    expect(pool.ready()).toBe(true);
    const after = await settle(queue.submit(urlJob('after-unclonable', '/ok')));
    expect(after.result?.hasErrors).toBe(false);
  });
});

describe('check workers: a worker that stalls', () => {
  it('is ended when its event loop stops turning: its jobs become error results and it comes back', async () => {
    const { queue, pool, metrics } = await setup(1, { entry: CRASHING, stallMs: 1_500 }, 2);
    const stalled = await settle(queue.submit(urlJob('stuck-loop', '/ok', { name: 'stall' })));
    expect(stalled.result?.hasErrors).toBe(true);
    expect(JSON.stringify(stalled.result)).toContain('its event loop stood still for over 1500 ms');
    await pool.whenReady();
    expect((await counter(metrics, 'outpost_check_worker_restarts_total'))['-']).toBe(1);
    const after = await settle(queue.submit(urlJob('after-stall', '/ok')));
    expect(after.result?.hasErrors).toBe(false);
  });
});

describe('check workers: how many', () => {
  const files = (map: Record<string, string>) => (file: string) => {
    const text = map[file];
    if (text === undefined) throw Object.assign(new Error(`ENOENT ${file}`), { code: 'ENOENT' });
    return text;
  };

  it('reads the CPU quota from cgroup v2 cpu.max, else v1 cfs files; none when unlimited', () => {
    expect(cgroupCpuQuota(files({ '/sys/fs/cgroup/cpu.max': '150000 100000\n' }))).toBe(1.5);
    expect(cgroupCpuQuota(files({ '/sys/fs/cgroup/cpu.max': 'max 100000\n' }))).toBeUndefined();
    expect(cgroupCpuQuota(files({ '/sys/fs/cgroup/cpu/cpu.cfs_quota_us': '200000', '/sys/fs/cgroup/cpu/cpu.cfs_period_us': '100000' }))).toBe(2);
    expect(cgroupCpuQuota(files({ '/sys/fs/cgroup/cpu/cpu.cfs_quota_us': '-1', '/sys/fs/cgroup/cpu/cpu.cfs_period_us': '100000' }))).toBeUndefined();
    expect(cgroupCpuQuota(files({}))).toBeUndefined();
  });

  it('defaults to the available cores (quota rounded up) less the main thread (all of them for once mode), 1 on two cores or fewer and below JOB_CONCURRENCY 4, never above JOB_CONCURRENCY; CHECK_WORKERS wins', () => {
    expect(availableCores(files({ '/sys/fs/cgroup/cpu.max': '150000 100000' }), 8)).toBe(2);
    expect(availableCores(files({ '/sys/fs/cgroup/cpu.max': '50000 100000' }), 8)).toBe(1);
    expect(availableCores(files({}), 8)).toBe(8);
    expect(checkWorkerCount(undefined, 3, () => 8)).toBe(1);
    expect(checkWorkerCount(undefined, 4, () => 8)).toBe(4);
    expect(checkWorkerCount(undefined, 100, () => 8)).toBe(7);
    expect(checkWorkerCount(undefined, 100, () => 3)).toBe(2);
    expect(checkWorkerCount(undefined, 100, () => 2)).toBe(1);
    expect(checkWorkerCount(undefined, 100, () => 1)).toBe(1);
    // `outpost once`: its main thread only writes lines, so every core gets a worker.
    expect(checkWorkerCount(undefined, 100, () => 2, false)).toBe(2);
    expect(checkWorkerCount(undefined, 100, () => 8, false)).toBe(8);
    expect(checkWorkerCount(undefined, 100, () => 1, false)).toBe(1);
    expect(checkWorkerCount(undefined, 3, () => 8, false)).toBe(1);
    expect(checkWorkerCount(2, 1, () => 8)).toBe(2);
  });
});

describe('check workers: one body memory budget for every thread', () => {
  it('holders take from one total; reclaim gives back what a dead holder held, and only that', () => {
    const main = MemoryBudget.forHolders(1000, 3);
    const worker = MemoryBudget.attach(main.share(1));
    const other = MemoryBudget.attach(main.share(2));
    expect(worker.lease().take(600)).toBe(600);
    const lease = other.lease();
    expect(lease.take(600)).toBe(400);
    expect(main.inUseBytes).toBe(1000);
    expect(main.reclaim(1)).toBe(600);
    expect([main.inUseBytes, other.inUseBytes]).toEqual([400, 400]);
    lease.release();
    expect(main.inUseBytes).toBe(0);
    expect(() => MemoryBudget.attach(main.share(3))).toThrow(RangeError);
  });
});
