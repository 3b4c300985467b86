// Runtime secret detection end to end (the real agent in once mode,
// test/support/scripted-run.ts): MULTI_STEP, BROWSER and PLAYWRIGHT checks
// with `secretDetection: true` print, log in their pages, send and save a JWT,
// an AWS access key id and a bearer token nobody declared secret; each is
// masked in the jobLog, console messages, page errors, requests, HARs and text
// artifacts, and listed by kind and place. Ordinary output gives no
// detection; a check without detection keeps its output as it was. Also the
// PLAYWRIGHT report header (PASSED / DEGRADED / FAILED).

import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import type { DetectedSecret } from '../../src/secrets/detection.js';
import { type Asset, type BrowserDetail, RUNTIME, type SuiteDetail, useScriptedRun } from '../support/scripted-run.js';

const JWT =
  'eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJvdXRwb3N0LXRlc3QiLCJzY29wZSI6ImFkbWluIiwiaWF0IjoxNzY0MDAwMDAwfQ.k3Jq9XbW2vQm7ZcT1pLr8sYd4NfHa6Ue0GiKoVx5Ctw';
const AWS_KEY = 'AKIAQ3EGRZLN7VW2KX5D';
const BEARER = 'ya29.a0AfB_byC3xR9mK2pL7vN4qT8sW1zY6hJ5gF0dE';
const VALUES = [JWT, AWS_KEY, BEARER];
/** Printed by the check without detection: not one of VALUES, so the agent's output may hold it. */
const UNDETECTED_KEY = 'AKIAZZ7YEXAMPLE0NOTS';

const values = `const JWT = ${JSON.stringify(JWT)}, AWS = ${JSON.stringify(AWS_KEY)}, BEARER = ${JSON.stringify(BEARER)};\n`;

const run = useScriptedRun(() => [
  {
    id: 'multi-step',
    checkType: 'MULTI_STEP',
    secretDetection: true,
    script: `${values}const fs = require('node:fs');
const { request } = require('playwright-core');
console.log('signed in with ' + JWT);
console.log('aws key ' + AWS);
console.error('Authorization: Bearer ' + BEARER);
console.log('declared: Bearer ' + environment.API_TOKEN);
fs.writeFileSync(artifact('tokens.txt'), ['id_token=' + JWT, 'AWS_ACCESS_KEY_ID=' + AWS, 'auth: Bearer ' + BEARER].join('\\n') + '\\n');
const api = await request.newContext({ baseURL: environment.BASE });
await step('call', async () => {
  const res = await api.get('/echo?key=' + AWS, { headers: { 'X-Forwarded-Auth': 'Bearer ' + BEARER } });
  expect(res).toBeOK();
});`,
  },
  {
    id: 'multi-step-ordinary',
    checkType: 'MULTI_STEP',
    secretDetection: true,
    script: `const { request } = require('playwright-core');
console.log('request 3f2b8c1e-9d4a-4f6b-8e2c-7a1d5b9c0e3f at commit 9fceb02d0ae598e95dc970b74767f19372d61af8');
console.log('GET /static/app.5d41402abc4b2a76b9719d911017c592.js integrity sha384-oqVuAfXRKap7fdgcCY5uykM6+R9GqQ8K/uxy9rx7HNQlGYl1kPzQho1wx4JwY8wC');
console.log('.btn{color:#fff;background:#0d6efd} token_type=bearer expires_in=3600 nextPageToken=CAoQAA8x2kLmQ7rT');
const api = await request.newContext({ baseURL: environment.BASE });
await step('call', async () => { expect(await api.get('/echo?page=2&sort=desc')).toBeOK(); });`,
  },
  {
    id: 'multi-step-off',
    checkType: 'MULTI_STEP',
    script: `console.log('aws key ${UNDETECTED_KEY}');`,
  },
  {
    id: 'browser',
    checkType: 'BROWSER',
    secretDetection: true,
    maxResponseTime: 60_000,
    script: `${values}const { chromium } = require('playwright-core');
const browser = await chromium.launch();
const context = await browser.newContext({ recordHar: { path: artifact('net.har'), content: 'embed' } });
const page = await context.newPage();
await step('open', async () => { await page.goto(environment.PAGE); });
await step('use tokens', async () => {
  const logged = page.waitForEvent('console', (m) => m.text().startsWith('session '));
  const thrown = page.waitForEvent('pageerror');
  await page.evaluate(([jwt, aws]) => { console.log('session ' + jwt); setTimeout(() => { throw new Error('bad key ' + aws); }); }, [JWT, AWS]);
  await Promise.all([logged, thrown]);
  await page.evaluate(async (bearer) => { await fetch('/api/profile', { method: 'POST', headers: { 'X-Auth': 'Bearer ' + bearer }, body: 'note=hello' }); }, BEARER);
});
await context.close();
await browser.close();`,
  },
  {
    id: 'suite',
    checkType: 'PLAYWRIGHT',
    runtimeId: RUNTIME,
    secretDetection: true,
    maxResponseTime: 90_000,
    script: `import { test, expect } from '@playwright/test';
${values}
test('uses tokens', async ({ page }) => {
  console.log('aws key ' + AWS);
  await page.goto(process.env.PAGE!);
  await page.evaluate((jwt) => console.log('session ' + jwt), JWT);
  await page.evaluate(async (bearer) => { await fetch('/api/profile', { headers: { 'X-Auth': 'Bearer ' + bearer } }); }, BEARER);
  await expect(page.locator('#status')).toHaveText('Clicked', { timeout: 500 });
});`,
  },
  {
    id: 'suite-degraded',
    checkType: 'PLAYWRIGHT',
    runtimeId: RUNTIME,
    degradedResponseTime: 1,
    maxResponseTime: 90_000,
    script: `import { test } from '@playwright/test';\ntest('passes', async () => {});`,
  },
  {
    id: 'suite-passed',
    checkType: 'PLAYWRIGHT',
    runtimeId: RUNTIME,
    degradedResponseTime: 200_000,
    maxResponseTime: 200_000,
    script: `import { test } from '@playwright/test';\ntest('passes', async () => {});`,
  },
]);
const { final, multi } = run;

type WithDetections = { detectedSecrets?: DetectedSecret[]; jobAssets: Asset[] };
const detections = (id: string) => (final(id).multiStepCheckResult ?? final(id).browserCheckResult) as unknown as WithDetections;
const assetText = (id: string, name: string) => {
  const asset = detections(id).jobAssets.find((a) => a.name === name);
  if (!asset) throw new Error(`${id} has no artifact ${name}: ${JSON.stringify(detections(id).jobAssets.map((a) => a.name))}`);
  return readFileSync(fileURLToPath(asset.url), 'utf8');
};
const expectNone = (text: string) => {
  for (const value of VALUES) expect(text).not.toContain(value);
};

describe('runtime secret detection', () => {
  it('masks what a MULTI_STEP script prints, sends and saves, and lists it by kind and place', () => {
    const detail = multi('multi-step');
    expect(final('multi-step')).toMatchObject({ hasFailures: false, hasErrors: false });
    expect(detail.jobLog).toEqual(expect.arrayContaining(['signed in with *****', 'aws key *****', 'Authorization: Bearer *****']));
    // A declared secret that looks like a bearer token is scrubbed as ever, and not reported as undeclared.
    expect(detail.jobLog).toContain('declared: Bearer *****');
    expect(detail.requests[0]?.url).toMatch(/\/echo\?key=\*\*\*\*\*$/);
    expect(detail.requests[0]?.headers).toEqual({ 'X-Forwarded-Auth': 'Bearer *****' });
    expect(assetText('multi-step', 'tokens.txt')).toBe('id_token=*****\nAWS_ACCESS_KEY_ID=*****\nauth: Bearer *****\n');
    expect(detections('multi-step').detectedSecrets).toEqual([
      { kind: 'jwt', where: 'jobLog' },
      { kind: 'aws-access-key', where: 'jobLog' },
      { kind: 'bearer-token', where: 'jobLog' },
      { kind: 'aws-access-key', where: 'requests' },
      { kind: 'bearer-token', where: 'requests' },
      { kind: 'jwt', where: 'artifact tokens.txt' },
      { kind: 'aws-access-key', where: 'artifact tokens.txt' },
      { kind: 'bearer-token', where: 'artifact tokens.txt' },
    ]);
    expect(detail.jobLog).toContain(
      'Secret detection: values that look like credentials were masked (jwt in jobLog, aws-access-key in jobLog, bearer-token in jobLog, aws-access-key in requests, bearer-token in requests, jwt in artifact tokens.txt, aws-access-key in artifact tokens.txt, bearer-token in artifact tokens.txt); declare them secret',
    );
    expectNone(JSON.stringify(final('multi-step')));
  });

  it('masks what a BROWSER script\'s pages log, throw and send, in the result and its HAR', () => {
    const detail = run.browserDetail('browser');
    expect(final('browser')).toMatchObject({ hasFailures: false, hasErrors: false });
    expect(detail.consoleMessages.map((m) => m.text)).toContain('session *****');
    expect(detail.pageErrors.map((e) => e.message)).toContain('bad key *****');
    const har = assetText('browser', 'net.har');
    expect(har).toContain('/api/profile');
    expect(har).toContain('Bearer *****');
    expectNone(har);
    expect(detections('browser').detectedSecrets).toEqual(
      expect.arrayContaining([
        { kind: 'jwt', where: 'consoleMessages' },
        { kind: 'aws-access-key', where: 'pageErrors' },
        { kind: 'bearer-token', where: 'artifact net.har' },
      ]),
    );
    expectNone(JSON.stringify(final('browser')));
  });

  it('masks what a PLAYWRIGHT suite prints, logs and sends, in the result and its failure HAR', () => {
    const detail = run.suite('suite') as SuiteDetail & BrowserDetail;
    expect(final('suite')).toMatchObject({ hasFailures: true });
    expect(detail.jobLog).toContain('aws key *****');
    expect(detail.consoleMessages.map((m) => m.text)).toContain('session *****');
    const har = assetText('suite', 'failure-network-1.har');
    expect(har).toContain('/api/profile');
    expectNone(har);
    expect(detections('suite').detectedSecrets).toEqual(
      expect.arrayContaining([
        { kind: 'aws-access-key', where: 'jobLog' },
        { kind: 'jwt', where: 'consoleMessages' },
        { kind: 'bearer-token', where: 'artifact failure-network-1.har' },
      ]),
    );
    expectNone(JSON.stringify(final('suite')));
  });

  it('never lets a detected value out in the agent\'s output or logs', () => {
    expectNone(run.stdout);
    expectNone(run.stderr);
  });

  it('finds nothing in ordinary output', () => {
    expect(final('multi-step-ordinary')).toMatchObject({ hasFailures: false, hasErrors: false });
    expect(detections('multi-step-ordinary').detectedSecrets).toEqual([]);
    expect(multi('multi-step-ordinary').jobLog).toContain('Secret detection: nothing that looks like a credential was found');
    expect(multi('multi-step-ordinary').jobLog.join('\n')).toContain('nextPageToken=CAoQAA8x2kLmQ7rT');
  });

  it('is off unless the check or the agent turns it on', () => {
    expect(multi('multi-step-off').jobLog).toContain(`aws key ${UNDETECTED_KEY}`);
    expect(detections('multi-step-off')).not.toHaveProperty('detectedSecrets');
  });
});

describe('PLAYWRIGHT report header', () => {
  it('is DEGRADED when every test passed but the run took longer than degradedResponseTime', () => {
    expect(final('suite-degraded')).toMatchObject({ isDegraded: true, hasFailures: false, hasErrors: false });
    const detail = run.suite('suite-degraded') as SuiteDetail & { suiteStatus: string };
    expect(detail.suiteStatus).toBe('DEGRADED');
    expect(detail.jobLog[0]).toMatch(/^Suite DEGRADED: 1 passed, 0 failed, 0 flaky, 0 skipped in [\d,]+ ms, over degradedResponseTime 1 ms$/);
  });

  it('is PASSED within degradedResponseTime and FAILED when a test failed', () => {
    expect(final('suite-passed')).toMatchObject({ isDegraded: false, hasFailures: false });
    expect((run.suite('suite-passed') as SuiteDetail & { suiteStatus: string }).suiteStatus).toBe('PASSED');
    expect(run.suite('suite-passed').jobLog[0]).toMatch(/^Suite PASSED: 1 passed, 0 failed, 0 flaky, 0 skipped in [\d,]+ ms$/);
    expect((run.suite('suite') as SuiteDetail & { suiteStatus: string }).suiteStatus).toBe('FAILED');
    expect(run.suite('suite').jobLog[0]).toMatch(/^Suite FAILED: 0 passed, 1 failed, 0 flaky, 0 skipped in [\d,]+ ms$/);
  });
});
