// MULTI_STEP checks end to end: the real agent in once mode runs step scripts
// on runtime 2026-04 against a small local target (test/support/scripted-run.ts):
// steps and the requests each made, failures named by step and line, thrown
// values, floating rejections and the harness's own expect().toEqual.

import { describe, expect, it } from 'vitest';
import { RUNTIME, SECRET_TOKEN, useScriptedRun } from '../support/scripted-run.js';

const MULTI_STEP_SCRIPT = `const { request } = require('playwright-core');
const ctx = await request.newContext({ baseURL: environment.BASE });
await step('log in', async () => {
  const res = await ctx.post('/echo', { headers: { Authorization: 'Bearer ' + environment.API_TOKEN }, data: { user: 'ada' } });
  expect(res).toBeOK();
  const body = await res.json();
  expect(body.method).toBe('POST');
});
await step('read items', async () => {
  const [a, b] = await Promise.all([ctx.get('/ok'), ctx.get('/echo?page=2')]);
  expect(await a.text()).toBe('ok');
  expect(b.status()).toBe(200);
});
await step('check stock', async () => {
  const res = await ctx.get('/status/503');
  expect(res.status()).toBe(200);
});
await step('never reached', async () => {
  await ctx.get('/ok');
});
`;

const run = useScriptedRun(({ target }) => {
  return [
    { id: 'multi-step-fails', checkType: 'MULTI_STEP', runtimeId: RUNTIME, maxResponseTime: 60_000, script: MULTI_STEP_SCRIPT },
    {
      id: 'multi-step-passes',
      checkType: 'MULTI_STEP',
      runtimeId: RUNTIME,
      maxResponseTime: 60_000,
      script: `const { request } = require('playwright-core');\nconst ctx = await request.newContext();\nawait step('ok', async () => { expect(await (await ctx.get('${target.url}/ok')).text()).toBe('ok'); });\nawait ctx.dispose();`,
    },
    { id: 'node-assert', checkType: 'MULTI_STEP', script: `const assert = require('node:assert');\nawait step('compare', async () => { assert.strictEqual(1 + 1, 3); });` },
    // From a review: parallel steps, thrown strings, floating rejections, structural equality, caught step failures.
    {
      id: 'parallel-steps',
      checkType: 'MULTI_STEP',
      script: `const { request } = require('playwright-core');
const api = await request.newContext({ baseURL: environment.BASE });
await Promise.all([
  step('a', async () => { await new Promise((r) => setTimeout(r, 50)); await api.get('/ok?from=a'); }),
  step('b', async () => { await api.get('/ok?from=b'); await new Promise((r) => setTimeout(r, 100)); }),
]);
await api.get('/ok?from=outside');`,
    },
    { id: 'throws-string', checkType: 'MULTI_STEP', script: `await step('s1', async () => { throw 'boom'; });` },
    {
      id: 'throws-string-twice',
      checkType: 'MULTI_STEP',
      script: `try { await step('first', async () => { throw 'boom'; }); } catch {}\nawait step('second', async () => { throw 'boom'; });`,
    },
    {
      id: 'floating-rejection',
      checkType: 'MULTI_STEP',
      script: `await step('fire and forget', async () => {\n  Promise.reject(new Error('nobody awaited me'));\n  await new Promise((r) => setTimeout(r, 500));\n});`,
    },
    {
      id: 'structural-equality',
      checkType: 'MULTI_STEP',
      script: `expect({ a: 1, b: [1, { c: 2 }] }).toEqual({ b: [1, { c: 2 }], a: 1 });
expect([NaN]).toEqual([NaN]);
expect({ a: 1, gone: undefined }).toEqual({ a: 1 });
expect(new Map([[1, 2]])).not.toEqual({});
expect(new Date(5)).toEqual(new Date(5));
expect({ a: 1 }).not.toEqual({ a: 2 });
expect([1, 2]).not.toEqual([2, 1]);
const o = { x: 1 };
expect([o, o]).not.toEqual([{ x: 1 }, { x: 2 }]);
expect(require('node:querystring').parse('a=1')).toEqual({ a: '1' });
expect(new Set([{ a: 1 }])).toEqual(new Set([{ a: 1 }]));
expect(new Set([{ a: 1 }])).not.toEqual(new Set([{ a: 2 }]));
expect(new Error('a')).not.toEqual({});
expect(new Error('a')).toEqual(new Error('a'));
expect(new URL('http://a/')).not.toEqual(new URL('http://b/'));`,
    },
    {
      id: 'caught-later-failure',
      checkType: 'MULTI_STEP',
      script: `try {\n  await step('login', async () => { expect(1).toBe(2); });\n} finally {\n  try { await step('logout', async () => { throw new Error('x'); }); } catch {}\n}`,
    },
  ];
});
const { final, multi } = run;

describe('MULTI_STEP checks', () => {
  it('fails at the step whose assertion failed, with each step and request recorded', () => {
    const entry = final('multi-step-fails');
    expect(entry).toMatchObject({ hasFailures: true, hasErrors: false });
    const detail = multi('multi-step-fails');
    expect(detail.requestError).toMatch(/^MULTI_STEP failed at step "check stock", line 16: expected 503 to be 200/);
    expect(detail.steps.map((s) => [s.name, s.passed])).toEqual([
      ['log in', true],
      ['read items', true],
      ['check stock', false],
    ]);
    expect(detail.requests.map((r) => [r.step, r.method, new URL(r.url).pathname, r.status, r.passed])).toEqual(
      expect.arrayContaining([
        ['log in', 'POST', '/echo', 200, true],
        ['read items', 'GET', '/ok', 200, true],
        ['read items', 'GET', '/echo', 200, true],
        ['check stock', 'GET', '/status/503', 503, false],
      ]),
    );
    expect(detail.requests).toHaveLength(4);
    // The Authorization header is redacted, and the secret in it scrubbed.
    expect(detail.requests[0]?.headers.Authorization).toBe('*****');
    expect(JSON.stringify(entry)).not.toContain(SECRET_TOKEN);
  });

  it('passes when every step passes', () => {
    expect(final('multi-step-passes')).toMatchObject({ hasFailures: false, hasErrors: false });
    expect(multi('multi-step-passes').steps).toEqual([expect.objectContaining({ name: 'ok', passed: true })]);
  });

  it("keeps a node:assert message's lines, so the values compared are in the error", () => {
    expect(final('node-assert')).toMatchObject({ hasFailures: true, hasErrors: false });
    expect(multi('node-assert').requestError).toBe('MULTI_STEP failed at step "compare", line 2: Expected values to be strictly equal: · 2 !== 3');
  });
});

describe('MULTI_STEP steps: parallel, thrown values, caught failures', () => {
  it('keeps each of two parallel steps its own requests, and a request after them in none', () => {
    const requests = multi('parallel-steps').requests.map((r) => [r.step, new URL(r.url).search]);
    expect(requests).toEqual(expect.arrayContaining([['a', '?from=a'], ['b', '?from=b'], [null, '?from=outside']]));
    expect(requests).toHaveLength(3);
  });

  it('names the step a thrown string failed', () => {
    expect(multi('throws-string').failingStep).toBe('s1');
    expect(multi('throws-string').requestError).toBe('MULTI_STEP failed at step "s1": thrown: "boom"');
    // The same value thrown again in another step is that step's failure.
    expect(multi('throws-string-twice').failingStep).toBe('second');
  });

  it('names the step that failed first when a later step fails and is caught', () => {
    expect(multi('caught-later-failure').failingStep).toBe('login');
    expect(multi('caught-later-failure').requestError).toBe('MULTI_STEP failed at step "login", line 2: expected 1 to be 2');
  });

  it('fails the run, in its step, on a rejection nobody awaited', () => {
    const detail = multi('floating-rejection');
    expect(final('floating-rejection')).toMatchObject({ hasErrors: true });
    expect(detail.requestError).toBe('MULTI_STEP failed at step "fire and forget", line 2: nobody awaited me');
    expect(detail.steps).toEqual([expect.objectContaining({ name: 'fire and forget', passed: false, error: 'nobody awaited me' })]);
  });

  it('compares toEqual structurally: key order and undefined properties do not matter, NaN equals NaN', () => {
    expect(final('structural-equality'), multi('structural-equality').requestError ?? '').toMatchObject({ hasFailures: false, hasErrors: false });
  });
});
