// Probes and shutdown (docs/configuration.md), observed from outside the real process.

import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { exitWithin, probe, tempDir } from '../support/agent-process.js';
import { useHarness } from '../support/harness.js';

const h = useHarness();

async function setup(env: Record<string, string> = {}) {
  const cp = await h.server();
  const proc = h.agent(cp, env);
  const port = await proc.healthPort();
  return { cp, proc, port };
}

const check = (path: string) => ({ id: 'slow-check', name: 'slow', checkType: 'URL', request: { url: `${h.target.url}${path}` } });

type Poll = { at: number; readiness: number | 'closed'; liveness: number | 'closed'; health: number | 'closed' };

async function status(port: number, path: string): Promise<number | 'closed'> {
  try {
    return (await probe(port, path)).status;
  } catch {
    return 'closed';
  }
}

describe('probes and shutdown', () => {
  it('answers 503 on readiness from the moment SIGTERM arrives while liveness stays 200, then drains and exits 0', async () => {
    const { cp, proc, port } = await setup();
    const deadline = Date.now() + 10_000;
    while ((await status(port, '/-/readiness')) !== 200 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect(await status(port, '/-/readiness')).toBe(200);
    const id = await cp.addJob(check('/slow/2500'));
    await cp.waitFor(() => cp.jobs.get(id)?.state === 'leased', 10_000, 'the claim');
    await new Promise((r) => setTimeout(r, 200));
    proc.kill('SIGTERM');
    // The handler flips readiness and then logs, synchronously: every answer after this line is 503.
    await proc.waitForLog((l) => String(l.msg).startsWith('shutting down'), 5_000, 'the drain line');
    const polls: Poll[] = [];
    let exited = false;
    proc.exit.then(() => {
      exited = true;
    });
    while (!exited) {
      const [readiness, liveness, health] = await Promise.all([
        status(port, '/-/readiness'),
        status(port, '/-/liveness'),
        status(port, '/health'),
      ]);
      polls.push({ at: Date.now(), readiness, liveness, health });
      await new Promise((r) => setTimeout(r, 50));
    }
    const { code } = await proc.exit;
    expect(code).toBe(0);
    // While the slow job drained, the server kept answering: readiness 503, liveness and /health 200.
    const answered = polls.filter((p) => p.readiness !== 'closed');
    expect(answered.length).toBeGreaterThan(10);
    for (const p of answered) {
      expect(p.readiness).toBe(503);
      expect(p.liveness).toBe(200);
      expect(p.health).toBe(200);
    }
    // The job finished normally and its result was delivered before exit.
    const [stored] = cp.resultsFor(id);
    expect(stored?.result.hasErrors).toBe(false);
    expect(stored?.result.apiCheckResult?.response).toMatchObject({ status: 200 });
    expect(proc.logs.some((l) => l.msg === 'outpost agent stopped')).toBe(true);
  });

  it('aborts jobs still running when the grace time is over and reports them as errors', async () => {
    const { cp, proc } = await setup({ SHUTDOWN_GRACE_SECONDS: '1' });
    const id = await cp.addJob(check('/slow/20000'));
    await cp.waitFor(() => cp.jobs.get(id)?.state === 'leased', 10_000, 'the claim');
    await new Promise((r) => setTimeout(r, 200));
    proc.kill('SIGTERM');
    const { code } = await proc.exit;
    expect(code).toBe(0);
    const [stored] = cp.resultsFor(id);
    expect(stored?.result, JSON.stringify(stored?.result)).toBeDefined();
    expect(stored?.result.hasErrors).toBe(true);
    expect(stored?.result.apiCheckResult?.requestError).toBe('Aborted: the agent shut down before the check finished');
  });

  it('ends a retry\'s backoff wait when the drain begins: no attempt starts after SIGTERM, the job ends as an error before attempt 2', async () => {
    const { cp, proc } = await setup();
    // A 5-minute wait before attempt 2, and the default grace of 280 s: only the drain's start can end it.
    const retrying = { ...check('/status/500'), id: 'retrying', retryStrategy: { type: 'FIXED', baseBackoffSeconds: 300, maxRetries: 1 } };
    const before = h.target.hits();
    const id = await cp.addJob(retrying);
    await cp.waitFor(() => cp.resultsFor(id).some((r) => r.result.resultType === 'ATTEMPT'), 15_000, 'the first attempt\'s ATTEMPT result');
    proc.kill('SIGTERM');
    const { code } = await exitWithin(proc, 20_000, 'the drain waited out the retry\'s backoff');
    expect(code, proc.stderr()).toBe(0);
    expect(h.target.hits() - before).toBe(1);
    const final = cp.resultsFor(id).find((r) => r.result.resultType === 'FINAL')?.result;
    expect(final, JSON.stringify(cp.resultsFor(id))).toMatchObject({ hasErrors: true, attempts: 2 });
    expect(final?.apiCheckResult?.requestError).toBe('Aborted: the agent shut down before the check finished (before attempt 2)');
  });

  it('exits at once on a second signal, leaving results in the spool', async () => {
    const stateDir = tempDir();
    const { cp, proc } = await setup({ STATE_DIR: stateDir, JOB_CONCURRENCY: '2' });
    cp.inject({ route: 'results', status: 503, count: 1_000 });
    const fast = await cp.addJob({ ...check('/ok'), id: 'fast' });
    const slow = await cp.addJob(check('/slow/20000'));
    await cp.waitFor(() => cp.jobs.get(slow)?.state === 'leased', 10_000, 'the claim');
    await proc.waitForLog((l) => l.status === 503, 10_000, 'a refused results call');
    proc.kill('SIGTERM');
    await proc.waitForLog((l) => String(l.msg).startsWith('shutting down'), 5_000, 'the drain line');
    proc.kill('SIGTERM');
    const { code } = await proc.exit;
    expect(code).toBe(143);
    expect(proc.logs.some((l) => String(l.msg).startsWith('second signal'))).toBe(true);
    expect(cp.results.size).toBe(0);
    const spool = path.join(stateDir, 'spool');
    const lines = readdirSync(spool).flatMap((n) => readFileSync(path.join(spool, n), 'utf8').split('\n').filter(Boolean));
    expect(lines.map((l) => (JSON.parse(l) as { jobId: string }).jobId)).toEqual([fast]);
  });

  it('says once that results cannot be delivered while it flushes to the deadline, then exits 0 with them spooled', async () => {
    const stateDir = tempDir();
    const { cp, proc } = await setup({ STATE_DIR: stateDir, SHUTDOWN_GRACE_SECONDS: '1' });
    cp.inject({ route: 'results', status: 503, count: 1_000 });
    const id = await cp.addJob({ ...check('/ok'), id: 'undeliverable' });
    await proc.waitForLog((l) => l.status === 503, 10_000, 'a refused results call');
    proc.kill('SIGINT');
    const drainLine = await proc.waitForLog((l) => String(l.msg).startsWith('shutting down'), 5_000, 'the drain line');
    expect(drainLine.msg).toBe(
      'shutting down: not ready, no new claims, draining running jobs (a second SIGINT or SIGTERM exits at once; undelivered results stay in the spool)',
    );
    const { code } = await exitWithin(proc, 30_000, 'the agent after its flush deadline');
    expect(code, proc.stderr()).toBe(0);
    const failing = proc.logs.filter((l) => String(l.msg).includes('results cannot be delivered'));
    expect(failing).toHaveLength(1);
    expect(failing[0]?.msg).toMatch(
      /^shutting down: results cannot be delivered \(results: HTTP 503 .*\); trying again for up to \d+ s more \(to the end of SHUTDOWN_GRACE_SECONDS, at least 10 s after the drain\); a second SIGINT or SIGTERM exits at once, and undelivered results stay in the spool for the next start either way$/,
    );
    // The flush did retry more than once: one line for all of them.
    const drainAt = proc.logs.indexOf(drainLine);
    expect(proc.logs.slice(drainAt).filter((l) => l.status === 503).length).toBeGreaterThan(1);
    expect(cp.resultsFor(id)).toEqual([]);
    const spool = path.join(stateDir, 'spool');
    const lines = readdirSync(spool).flatMap((n) => readFileSync(path.join(spool, n), 'utf8').split('\n').filter(Boolean));
    expect(lines.map((l) => (JSON.parse(l) as { jobId: string }).jobId)).toEqual([id]);
  });

  it('exits 130 at once on a second SIGINT while it flushes undeliverable results', async () => {
    const { cp, proc } = await setup({ SHUTDOWN_GRACE_SECONDS: '60' });
    cp.inject({ route: 'results', status: 503, count: 1_000 });
    await cp.addJob({ ...check('/ok'), id: 'undeliverable' });
    await proc.waitForLog((l) => l.status === 503, 10_000, 'a refused results call');
    proc.kill('SIGINT');
    await proc.waitForLog((l) => String(l.msg).includes('results cannot be delivered'), 15_000, 'the undeliverable line');
    const secondAt = Date.now();
    proc.kill('SIGINT');
    // Well within the 60 s grace the flush would otherwise wait out.
    const { code } = await exitWithin(proc, 10_000, 'the agent after a second SIGINT');
    expect(code).toBe(130);
    expect(Date.now() - secondAt).toBeLessThan(10_000);
    expect(proc.logs.some((l) => String(l.msg).startsWith('second signal'))).toBe(true);
  });

  it('keeps answering probes while hundreds of jobs are in flight', async () => {
    const { cp, port } = await setup({ JOB_CONCURRENCY: '300' });
    for (let i = 0; i < 300; i++) await cp.addJob({ ...check('/slow/4000'), id: `load-${i}` });
    let inFlight = 0;
    const deadline = Date.now() + 20_000;
    while (inFlight < 250 && Date.now() < deadline) {
      inFlight = ((await probe(port, '/health')).body as { inFlight: number }).inFlight;
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(inFlight).toBeGreaterThanOrEqual(250);
    const answers = await Promise.all(Array.from({ length: 20 }, () => status(port, '/-/liveness')));
    expect(answers.every((s) => s === 200)).toBe(true);
    expect(await status(port, '/-/readiness')).toBe(200);
    const metrics = (await probe(port, '/metrics')).text;
    expect(Number(/outpost_jobs_in_flight (\d+)/.exec(metrics)?.[1])).toBeGreaterThanOrEqual(200);
    await cp.waitFor(() => cp.results.size === 300, 60_000, 'all 300 results');
    expect(cp.violations).toEqual([]);
  });

  it('becomes ready on the first answer, without waiting out a long poll on an idle control plane', async () => {
    const cp = await h.server();
    const proc = h.agent(cp, { CLAIM_WAIT_SECONDS: '25' });
    const port = await proc.healthPort();
    // Within the first 10 of the 25 seconds a long poll may be held open.
    const deadline = Date.now() + 10_000;
    while ((await probe(port, '/-/readiness')).status !== 200 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    expect((await probe(port, '/-/readiness')).status).toBe(200);
    // The first claim asked without waiting; the next one (a long poll) is still held open.
    expect(cp.claims.map((c) => c.waitSeconds)).toEqual([0]);
  });

  it('answers 404 and 405 with the service error body', async () => {
    const { port } = await setup();
    const missing = await probe(port, '/nope');
    expect(missing.status).toBe(404);
    expect(missing.body).toMatchObject({ statusCode: 404, error: 'Not Found' });
    const response = await fetch(`http://127.0.0.1:${port}/-/liveness`, { method: 'POST' });
    expect(response.status).toBe(405);
    expect(response.headers.get('allow')).toBe('GET, HEAD');
    expect(await response.json()).toMatchObject({ statusCode: 405, error: 'Method Not Allowed' });
    const health = (await probe(port, '/health')).body;
    expect(health).toMatchObject({ mode: 'agent', inFlight: 0, queued: 0, spooled: 0 });
    expect(Object.keys(health as object)).toEqual(expect.arrayContaining(['version', 'uptime']));
  });
});
