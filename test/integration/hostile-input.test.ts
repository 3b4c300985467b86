// Hostile input through the real agent process: a catastrophic regular
// expression, a deeply nested value in a job, a checks file or a response
// body, and a claim answer one job of which is not valid JSON.

import { writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { probe, tempDir } from '../support/agent-process.js';
import { useHarness } from '../support/harness.js';

const h = useHarness();

/** Routes: /evil → 40 a's and a b (text), /deep → a JSON body of 50,000 nested arrays. */
let target: http.Server;
let targetUrl = '';
beforeAll(async () => {
  const deep = `${'['.repeat(50_000)}${']'.repeat(50_000)}`;
  target = http.createServer((req, res) => {
    const json = req.url === '/deep';
    res.writeHead(200, { 'content-type': json ? 'application/json' : 'text/plain' });
    res.end(json ? deep : `${'a'.repeat(40)}b`);
  });
  await new Promise<void>((resolve) => target.listen(0, '127.0.0.1', resolve));
  targetUrl = `http://127.0.0.1:${(target.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await new Promise((resolve) => target.close(resolve));
});

function checksFile(content: unknown): string {
  const file = path.join(tempDir(), 'checks.json');
  writeFileSync(file, typeof content === 'string' ? content : JSON.stringify(content));
  return file;
}

/** `"x"` inside `depth` arrays, as JSON text (JSON.stringify itself cannot write it). */
function nested(depth: number): string {
  return `${'['.repeat(depth)}"x"${']'.repeat(depth)}`;
}

type Result = { apiCheckResult?: { assertions?: Array<{ passed: boolean; error?: string; actual?: unknown }>; requestError?: string } };

function results(stdout: string): Result[] {
  return stdout
    .split('\n')
    .filter((l) => l.startsWith('{') && !l.startsWith('{"level":'))
    .map((l) => JSON.parse(l) as Result);
}

describe('a catastrophic regular expression', () => {
  it('runs in linear time in once mode, and the liveness probe answers in local mode', { timeout: 60_000 }, async () => {
    const check = {
      id: 'redos',
      checkType: 'API',
      request: { url: `${targetUrl}/evil` },
      // Unanchored: tried at each of the 40 positions, exponential at each for a backtracking engine.
      assertions: [{ source: 'TEXT_BODY', regex: '(a+)+c', comparison: 'IS_NULL', target: '' }],
    };
    const once = h.start(['once', checksFile({ checks: [check] })]);
    expect((await once.exit).code, once.stderr()).toBe(0);
    expect(results(once.stdout())[0]?.apiCheckResult?.assertions?.[0]).toMatchObject({ passed: true, actual: null });

    const local = h.start(['local', checksFile({ checks: [{ ...check, frequency: 1 }] })]);
    const port = await local.healthPort();
    await local.waitForLog((l) => l.msg === 'outpost local mode started');
    for (let i = 0; i < 3; i++) {
      expect((await probe(port, '/-/liveness')).status).toBe(200);
      await new Promise((r) => setTimeout(r, 300));
    }
    expect(local.proc.exitCode).toBeNull();
  });

  it('runs in linear time in agent mode: the result comes once, and the probes answer', async () => {
    const cp = await h.server({ leaseMs: 5_000 });
    const id = await cp.addJob({
      id: 'redos',
      checkType: 'API',
      request: { url: `${targetUrl}/evil` },
      assertions: [{ source: 'TEXT_BODY', regex: '(a+)+c', comparison: 'IS_NULL', target: '' }],
    });
    const proc = h.agent(cp);
    const port = await proc.healthPort();
    await cp.waitFor(() => cp.resultsFor(id).length === 1, 20_000, 'the result');
    expect(cp.resultsFor(id)[0]?.result.apiCheckResult?.assertions).toMatchObject([{ passed: true, actual: null }]);
    expect(cp.jobs.get(id)?.claims).toBe(1);
    expect((await probe(port, '/-/liveness')).status).toBe(200);
    expect((await probe(port, '/-/readiness')).status).toBe(200);
    expect(cp.violations).toEqual([]);
  });

  it('with a backreference is refused at validation, naming the field', async () => {
    const file = checksFile({ checks: [{ id: 'backref', checkType: 'API', request: { url: `${targetUrl}/evil` }, assertions: [{ source: 'TEXT_BODY', regex: '^(a+)+\\1$', comparison: 'NOT_NULL' }] }] });
    const proc = h.start(['once', file]);
    expect((await proc.exit).code).toBe(78);
    expect(proc.stderr()).toContain('$.checks[0].assertions[0].regex: cannot be evaluated in linear time');
  });
});

describe('a deeply nested value', () => {
  it('in a response body fails the assertion with the reason, and once mode still prints the result', async () => {
    const file = checksFile({
      checks: [{ id: 'deep', checkType: 'API', request: { url: `${targetUrl}/deep` }, assertions: [{ source: 'JSON_BODY', property: '$', comparison: 'NOT_NULL' }] }],
    });
    const proc = h.start(['once', file]);
    expect((await proc.exit).code, proc.stderr()).toBe(1);
    expect(proc.stderr()).not.toMatch(/\n\s+at /);
    const [result] = results(proc.stdout());
    expect(result?.apiCheckResult?.assertions?.[0]).toMatchObject({
      passed: false,
      error: 'cannot evaluate JSONPath "$": the document is nested deeper than 256 levels',
    });
  });

  it('in a checks file is one line naming the field, exit 78', async () => {
    const check = JSON.stringify({ id: 'deep', name: 'NAME', checkType: 'URL', request: { url: `${targetUrl}/` } }).replace('"NAME"', nested(10_000));
    const proc = h.start(['local', checksFile(`{"checks":[${check}]}`)]);
    expect((await proc.exit).code).toBe(78);
    expect(proc.stderr().trim()).toMatch(/^outpost: \S+: \$\.checks\[0\]\.name: must be a string \(got a value nested deeper than 64 levels\)$/);
  });

  it('in a claimed job becomes its error result, and the claim loop goes on', async () => {
    const cp = await h.server();
    const poisoned = '6d1f6f6e-0000-4000-8000-0000000dee90';
    const check = { id: 'poisoned', name: 'NAME', checkType: 'URL', request: { url: `${targetUrl}/` } };
    // A checks file would never let the server hold this: the proxy writes it into the claim answer. About 20 KB: well within any size limit.
    cp.claimJobText = (job) => (job.id === poisoned ? JSON.stringify(job).replace('"NAME"', nested(10_000)) : JSON.stringify(job));
    await cp.addJob(check, { id: poisoned });
    const proc = h.agent(cp);
    await cp.waitFor(() => cp.resultsFor(poisoned).length === 1, 20_000, 'the poisoned job result');
    expect(cp.resultsFor(poisoned)[0]?.result.apiCheckResult?.requestError).toBe(
      'Invalid check definition: check.name: must be a string (got a value nested deeper than 64 levels)',
    );
    const good = await cp.addJob({ id: 'good', checkType: 'URL', request: { url: `${targetUrl}/` } });
    await cp.waitFor(() => cp.resultsFor(good).length === 1, 20_000, 'a later job result');
    expect(cp.claims.filter((c) => c.given > 0)).toHaveLength(2);
    proc.kill('SIGTERM');
    expect((await proc.exit).code).toBe(0);
    expect(cp.violations).toEqual([]);
  });
});

describe('a claim answer that is not valid JSON', () => {
  it('runs the good jobs and reports the bad one by id', async () => {
    const cp = await h.server();
    const check = (n: number) => ({ id: `check-${n}`, checkType: 'URL', request: { url: `${targetUrl}/` } });
    const good: string[] = [];
    for (const n of [1, 2, 3, 4]) good.push(await cp.addJob(check(n)));
    const badId = '6d1f6f6e-0000-4000-8000-00000000bad0';
    // The server writes valid JSON: the proxy puts a bare NaN into this job's text in the claim answer.
    cp.claimJobText = (job) => (job.id === badId ? JSON.stringify({ ...job, attempt: 1 }).replace('"attempt":1', '"attempt":NaN') : JSON.stringify(job));
    await cp.addJob(check(5), { id: badId });
    h.agent(cp, { JOB_CONCURRENCY: '8' });
    await cp.waitFor(() => [...good, badId].every((id) => cp.resultsFor(id).length === 1), 20_000, 'five results');
    for (const id of good) expect(cp.resultsFor(id)[0]?.result.hasFailures).toBe(false);
    const bad = cp.resultsFor(badId)[0]?.result;
    expect(bad?.hasErrors).toBe(true);
    expect(bad?.apiCheckResult?.requestError).toMatch(/^Invalid job: job is not valid JSON: Unexpected token/);
    expect(cp.claims[0]?.given).toBe(5);
    expect(cp.violations).toEqual([]);
  });
});
