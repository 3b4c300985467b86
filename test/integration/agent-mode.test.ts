// The real agent process against the real server (test/support/control-plane.ts:
// in-process, behind a proxy that injects faults and notes protocol violations).

import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { probe, tempDir } from '../support/agent-process.js';
import { useHarness } from '../support/harness.js';

const h = useHarness();

function urlCheck(url: string, extra: Record<string, unknown> = {}) {
  return { id: `check-${Math.random().toString(36).slice(2, 8)}`, name: 'test check', checkType: 'URL', request: { url }, ...extra };
}

function spooledResultIds(stateDir: string): Set<string> {
  const dir = path.join(stateDir, 'spool');
  const ids = new Set<string>();
  for (const name of readdirSync(dir)) {
    for (const line of readFileSync(path.join(dir, name), 'utf8').split('\n')) {
      if (line) ids.add((JSON.parse(line) as { resultId: string }).resultId);
    }
  }
  return ids;
}

function spooled(stateDir: string): number {
  try {
    return readdirSync(path.join(stateDir, 'spool')).filter((n) => n.endsWith('.jsonl')).length;
  } catch {
    return 0;
  }
}


describe('agent mode against the real server', () => {
  it('claims only for free slots and delivers every result once', async () => {
    const cp = await h.server();
    const ids = await Promise.all(Array.from({ length: 10 }, () => cp.addJob(urlCheck(`${h.target.url}/slow/150`))));
    const proc = h.agent(cp, { JOB_CONCURRENCY: '2' });
    const port = await proc.healthPort();
    await cp.waitFor(() => ids.every((id) => cp.resultsFor(id).length === 1), 30_000, 'all results');

    expect(cp.violations).toEqual([]);
    // Never more than two jobs ran at once, and no claim asked for more than the free slots.
    expect(h.target.maxConcurrent()).toBeLessThanOrEqual(2);
    for (const claim of cp.claims) expect(claim.max).toBeLessThanOrEqual(2);
    expect(cp.claims.reduce((n, c) => n + c.given, 0)).toBe(10);
    expect(cp.conflictingResults).toBe(0);
    for (const id of ids) {
      const [stored] = cp.resultsFor(id);
      expect(stored?.result.hasFailures).toBe(false);
      expect(stored?.result.checkRunId).toBe(cp.jobs.get(id)?.job?.checkRunId);
      expect(stored?.result.apiCheckResult?.response).toMatchObject({ status: 200 });
    }
    expect((await probe(port, '/-/readiness')).status).toBe(200);
    const metrics = (await probe(port, '/metrics')).text;
    expect(metrics).toMatch(/outpost_jobs_total\{check_type="URL",outcome="passed"\} 10/);
    expect(metrics).toMatch(/outpost_control_plane_requests_total\{route="results",status="200"\} \d+/);
    expect(metrics).toMatch(/outpost_queue_capacity 2/);
    // Ten jobs at two at a time is light load: a handful of calls, far from 600 a minute.
    expect(cp.countRequests()).toBeLessThan(60);
  });

  it('turns a malformed job into an error result naming the field, and keeps running', async () => {
    const cp = await h.server();
    const bad = await cp.addJob({ id: 'bad-check', checkType: 'URL', request: { followRedirects: 'yes' } });
    const proc = h.agent(cp);
    await cp.waitFor(() => cp.resultsFor(bad).length === 1, 15_000, 'the error result');
    const [stored] = cp.resultsFor(bad);
    expect(stored?.result.hasErrors).toBe(true);
    const error = String(stored?.result.apiCheckResult?.requestError);
    expect(error).toContain('check.request.url: is required');
    expect(error).toContain('check.request.followRedirects: must be true or false');
    const good = await cp.addJob(urlCheck(`${h.target.url}/ok`));
    await cp.waitFor(() => cp.resultsFor(good).length === 1, 15_000, 'a later good result');
    expect(cp.resultsFor(good)[0]?.result.hasFailures).toBe(false);
    const noCheck = await cp.addJob(null);
    await cp.waitFor(() => cp.resultsFor(noCheck).length === 1, 15_000, 'the result for a job without a check');
    expect(cp.resultsFor(noCheck)[0]?.result.apiCheckResult?.requestError).toContain('check is required');
    expect(proc.proc.exitCode).toBeNull();
    expect(cp.violations).toEqual([]);
  });

  it('runs a job whose check has fields it does not read, naming them (bounded) in one jobLog line of its result', async () => {
    const cp = await h.server();
    const longKey = `k${'x'.repeat(300)}`;
    const extra: Record<string, unknown> = { muted: false, doubleCheck: true, [longKey]: 1 };
    for (let i = 0; i < 12; i++) extra[`newServiceField${i}`] = i;
    // locations, tags and alertAfter are a server's own fields, in every job it makes: not named.
    const check = urlCheck(`${h.target.url}/ok`, { ...extra, locations: ['somewhere'], tags: ['t'], alertAfter: 2 });
    const id = await cp.addJob({ ...check, request: { url: `${h.target.url}/ok`, folowRedirects: true } });
    const known = await cp.addJob(urlCheck(`${h.target.url}/ok`));
    // On a check worker (the job crosses a thread) as well as on the main thread.
    h.agent(cp, { CHECK_WORKERS: '2', JOB_CONCURRENCY: '4' });
    await cp.waitFor(() => cp.resultsFor(id).length === 1 && cp.resultsFor(known).length === 1, 30_000, 'both results');
    const result = cp.resultsFor(id)[0]?.result;
    // Run, not refused: a newer control plane may send fields an older agent does not know.
    expect(result?.hasErrors).toBe(false);
    expect(result?.hasFailures).toBe(false);
    const lines = (result?.apiCheckResult?.jobLog ?? []) as string[];
    const notes = lines.filter((line) => line.includes('does not read'));
    expect(notes, lines.join('\n')).toHaveLength(1);
    const [note] = notes as [string];
    expect(note).toMatch(/^The check has 16 fields this agent does not read, ignored: /);
    expect(note).toContain('check.request.folowRedirects (did you mean "followRedirects"?)');
    expect(note).toContain('check.muted, check.doubleCheck');
    expect(note).toContain(' and 6 more');
    expect(note).not.toContain('locations');
    expect(note).not.toContain('tags');
    expect(note).not.toContain('alertAfter');
    // A key from the job is cut, not copied whole.
    expect(note).not.toContain(longKey);
    expect(note).toContain(`check.${longKey.slice(0, 50)}`);
    expect(note.length).toBeLessThan(1_500);
    // A check with no such field gets no such line.
    expect(((cp.resultsFor(known)[0]?.result.apiCheckResult?.jobLog ?? []) as string[]).filter((line) => line.includes('does not read'))).toEqual([]);
    expect(cp.violations).toEqual([]);
  });

  it('honours 429 Retry-After and retries 5xx, delivering exactly once', async () => {
    const cp = await h.server();
    cp.inject({ route: 'claim', status: 429, retryAfter: '2' });
    cp.inject({ route: 'results', status: 500, count: 2 });
    cp.inject({ route: 'results', status: 503 });
    const ids = await Promise.all(Array.from({ length: 5 }, () => cp.addJob(urlCheck(`${h.target.url}/ok`))));
    h.agent(cp);
    await cp.waitFor(() => ids.every((id) => cp.resultsFor(id).length === 1), 30_000, 'all results');
    const claims = cp.requests.filter((r) => r.route === '/v1/agent/claim');
    expect(claims[0]?.status).toBe(429);
    // The second claim waited for Retry-After (2 s), not for a short backoff.
    expect((claims[1]?.at ?? 0) - (claims[0]?.at ?? 0)).toBeGreaterThanOrEqual(1_900);
    const results = cp.requests.filter((r) => r.route === '/v1/agent/results').map((r) => r.status);
    expect(results.slice(0, 3)).toEqual([500, 500, 503]);
    expect(results.at(-1)).toBe(200);
    expect(cp.results.size).toBe(5);
    expect(cp.conflictingResults).toBe(0);
    expect(cp.violations).toEqual([]);
  });

  it('survives resets, malformed JSON and answers slower than its timeout', async () => {
    const cp = await h.server();
    cp.inject({ route: 'claim', reset: true });
    cp.inject({ route: 'claim', malformed: true });
    cp.inject({ route: 'results', delayMs: 2_500 });
    const ids = await Promise.all(Array.from({ length: 3 }, () => cp.addJob(urlCheck(`${h.target.url}/ok`))));
    const proc = h.agent(cp, { CONTROL_PLANE_TIMEOUT_SECONDS: '1' });
    await cp.waitFor(() => ids.every((id) => cp.resultsFor(id).length === 1), 30_000, 'all results');
    await proc.waitForLog((l) => String(l.msg).includes('malformed JSON'), 5_000, 'the malformed-JSON warning');
    // 1 s, plus the few ms a results batch this small is given to cross the link (src/core/transfer-allowance.ts).
    await proc.waitForLog((l) => /timed out after 1\d{3} ms/.test(String(l.msg)), 5_000, 'the timeout warning');
    expect(cp.results.size).toBe(3);
    expect(cp.violations).toEqual([]);
  });

  it('delivers every result exactly once when the control plane is down for a while', async () => {
    const cp = await h.server();
    const proc = h.agent(cp, { JOB_CONCURRENCY: '4' });
    await proc.waitForLog((l) => l.msg === 'outpost agent started');
    const ids = await Promise.all(Array.from({ length: 8 }, () => cp.addJob(urlCheck(`${h.target.url}/slow/800`))));
    await cp.waitFor(() => cp.outstanding() > 0, 10_000, 'claimed jobs');
    await cp.stopListening();
    await new Promise((r) => setTimeout(r, 3_000));
    await cp.resume();
    await cp.waitFor(() => ids.every((id) => cp.resultsFor(id).length === 1), 60_000, 'all results after the outage');
    expect(new Set(cp.received.filter((r) => cp.results.has(r.resultId)).map((r) => r.jobId)).size).toBe(8);
    expect(cp.conflictingResults).toBe(0);
    expect(cp.violations).toEqual([]);
  });

  it('re-sends spooled results after kill -9', async () => {
    const cp = await h.server();
    const stateDir = tempDir();
    cp.inject({ route: 'results', status: 503, count: 1_000 });
    const ids = await Promise.all(Array.from({ length: 6 }, () => cp.addJob(urlCheck(`${h.target.url}/ok`))));
    const first = h.agent(cp, { STATE_DIR: stateDir, JOB_CONCURRENCY: '6' });
    await cp.waitFor(() => ids.every((id) => cp.jobs.get(id)?.state === 'leased'), 15_000, 'claimed jobs');
    await first.waitForLog((l) => l.status === 503, 15_000, 'a failed results call');
    expect(spooled(stateDir)).toBeGreaterThan(0);
    first.kill('SIGKILL');
    await first.exit;
    const spooledIds = spooledResultIds(stateDir);
    expect(spooledIds.size).toBe(6);
    expect(cp.results.size).toBe(0);
    cp.clearFaults();
    const second = h.agent(cp, { STATE_DIR: stateDir });
    await second.waitForLog((l) => String(l.msg).includes('re-sending them'), 15_000, 'the spool recovery line');
    await cp.waitFor(() => ids.every((id) => cp.resultsFor(id).length === 1), 30_000, 'the spooled results');
    await cp.waitFor(() => spooled(stateDir) === 0, 5_000, 'an empty spool');
    // The very results the first process spooled, not re-runs.
    expect(new Set(cp.results.keys())).toEqual(spooledIds);
    expect(cp.violations).toEqual([]);
  });

  it('aborts a job whose lease is lost and does not report it', async () => {
    const cp = await h.server({ leaseMs: 1_000 });
    const id = await cp.addJob(urlCheck(`${h.target.url}/slow/20000`));
    const proc = h.agent(cp);
    await cp.waitFor(() => cp.jobs.get(id)?.state === 'leased', 10_000, 'the claim');
    await cp.waitFor(() => cp.countRequests('leases') >= 1, 5_000, 'a lease extension');
    await cp.revokeLease(id);
    await proc.waitForLog((l) => String(l.msg).startsWith('lease lost'), 10_000, 'the lease-lost line');
    await proc.waitForLog((l) => String(l.msg).includes('job aborted: lease lost'), 10_000, 'the abort');
    await new Promise((r) => setTimeout(r, 1_000));
    expect(cp.received.filter((r) => r.jobId === id)).toEqual([]);
    const health = await probe(await proc.healthPort(), '/health');
    expect(health.body).toMatchObject({ inFlight: 0 });
    expect(cp.violations).toEqual([]);
  });

  it('pauses claiming while the spool is full, and resumes when it drains', async () => {
    const cp = await h.server();
    cp.inject({ route: 'results', status: 503, count: 10_000 });
    const ids = await Promise.all(Array.from({ length: 12 }, () => cp.addJob(urlCheck(`${h.target.url}/ok`))));
    const proc = h.agent(cp, { SPOOL_MAX_RESULTS: '4', JOB_CONCURRENCY: '2' });
    await proc.waitForLog((l) => String(l.msg).startsWith('spool is full'), 20_000, 'the spool-full line');
    await new Promise((r) => setTimeout(r, 1_000));
    const claimed = [...cp.jobs.values()].filter((s) => s.claims > 0).length;
    // Claims stop once spooled plus claimed-but-unspooled results reach 4: at most 3 + one claim of 2,
    // however slowly the disk syncs (a job's slot frees before its result is on disk).
    expect(claimed).toBeLessThanOrEqual(5);
    expect(claimed).toBeGreaterThanOrEqual(4);
    cp.clearFaults();
    await cp.waitFor(() => ids.every((id) => cp.resultsFor(id).length === 1), 60_000, 'all results after draining');
    await proc.waitForLog((l) => String(l.msg).startsWith('spool drained'), 5_000, 'the resume line');
    expect(cp.violations).toEqual([]);
  });

  it('stays up but not ready on a bad key, and becomes ready when the key is accepted', async () => {
    // The location's only key is the server's own; 'old-key' is refused until it is made a key too.
    const cp = await h.server();
    const proc = h.agent(cp, { API_KEY: 'old-key', AUTH_RETRY_SECONDS: '1' });
    const port = await proc.healthPort();
    const line = await proc.waitForLog((l) => String(l.msg).includes('rejected the API key'), 10_000, 'the bad-token line');
    expect(line.level).toBe(50);
    expect((await probe(port, '/-/readiness')).status).toBe(503);
    expect((await probe(port, '/-/liveness')).status).toBe(200);
    // One clear line per episode, not one per retry.
    await new Promise((r) => setTimeout(r, 2_500));
    expect(proc.logs.filter((l) => String(l.msg).includes('rejected the API key')).length).toBe(1);
    await cp.addKey('old-key');
    await cp.waitFor(() => cp.requests.some((r) => r.status === 200), 10_000, 'an accepted request');
    const deadline = Date.now() + 10_000;
    while ((await probe(port, '/-/readiness')).status !== 200 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    expect((await probe(port, '/-/readiness')).status).toBe(200);
  });
});
