// Scripts under a network policy (docs/network-policy.md): with
// BLOCKED_NETWORKS=default and ALLOWED_NETWORKS=127.0.0.1, MULTI_STEP request
// contexts and BROWSER pages reach the target on 127.0.0.1 through the
// agent's filtering proxy, and are refused — a 403 with the reason, nothing
// sent — at a listener on 127.0.0.2 (loopback, blocked by `default`),
// directly, over CONNECT and through a redirect from the allowed target.

import net, { type AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RUNTIME, useScriptedRun } from '../support/scripted-run.js';

let blockedPort = 0;
let accepted = 0;
const blocked = net.createServer((socket) => {
  accepted++;
  socket.on('error', () => undefined);
  socket.end('HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok');
});

// Registered before useScriptedRun's: the listener's port is known when the checks are written.
beforeAll(async () => {
  await new Promise<void>((resolve) => blocked.listen(0, '127.0.0.2', resolve));
  blockedPort = (blocked.address() as AddressInfo).port;
});
afterAll(() => {
  blocked.close();
});

const reason = () => `blocked by network policy: 127.0.0.2:${blockedPort} is in BLOCKED_NETWORKS 127.0.0.0/8 (default: loopback)`;

const run = useScriptedRun(
  () => [
    {
      id: 'multi-step',
      checkType: 'MULTI_STEP',
      maxResponseTime: 60_000,
      script: `const { request } = require('playwright-core');
const api = await request.newContext();
await step('allowed', async () => {
  const res = await api.get(environment.BASE + '/ok');
  expect(res.status()).toBe(200);
});
await step('blocked over http', async () => {
  const res = await api.get('http://127.0.0.2:${blockedPort}/');
  console.log('http answer ' + res.status() + ' ' + res.headers()['x-outpost-network-policy']);
});
await step('blocked over https', async () => {
  const answer = await api.get('https://127.0.0.2:${blockedPort}/').then((r) => 'status ' + r.status(), (e) => 'refused: ' + String(e.message).split('\\n')[0]);
  console.log('https answer ' + answer);
});
await step('redirect into blocked', async () => {
  const res = await api.get(environment.BASE + '/redirect-to?url=' + encodeURIComponent('http://127.0.0.2:${blockedPort}/'));
  expect(res.status()).toBe(200);
});`,
    },
    {
      id: 'browser',
      checkType: 'BROWSER',
      maxResponseTime: 90_000,
      script: `const { chromium } = require('playwright-core');
const browser = await chromium.launch();
const page = await browser.newPage();
await step('allowed', async () => {
  const res = await page.goto(environment.BASE + '/ok');
  expect(res.status()).toBe(200);
});
await step('blocked', async () => {
  const res = await page.goto('http://127.0.0.2:${blockedPort}/');
  console.log('page answer ' + res.status() + ' ' + (await res.headerValue('x-outpost-network-policy')));
  expect(res.status()).toBe(200);
});`,
    },
    {
      id: 'suite',
      checkType: 'PLAYWRIGHT',
      runtimeId: RUNTIME,
      maxResponseTime: 90_000,
      script: `import { test, expect } from '@playwright/test';
test('allowed', async ({ page }) => {
  const res = await page.goto(process.env.PAGE!);
  expect(res!.status()).toBe(200);
});
test('blocked page and request', async ({ page, request }) => {
  const res = await page.goto('http://127.0.0.2:${blockedPort}/');
  console.log('suite page ' + res!.status() + ' ' + (await res!.headerValue('x-outpost-network-policy')));
  const answer = await request.get('http://127.0.0.2:${blockedPort}/');
  console.log('suite request ' + answer.status() + ' ' + answer.headers()['x-outpost-network-policy']);
});`,
    },
    {
      id: 'api-setup',
      checkType: 'API',
      runtimeId: RUNTIME,
      request: {
        url: '{{BASE}}/ok',
        // axios reads HTTP_PROXY from the environment: an API script's own client goes through the proxy too.
        setupScript: `const axios = require('axios');
const allowed = await axios.get(environment.BASE + '/ok');
const refused = await axios.get('http://127.0.0.2:${blockedPort}/', { validateStatus: () => true });
console.log('setup answers ' + allowed.status + ' ' + refused.status + ' ' + refused.headers['x-outpost-network-policy']);`,
      },
    },
  ],
  { env: { BLOCKED_NETWORKS: 'default', ALLOWED_NETWORKS: '127.0.0.1' } },
);

describe('scripts go through the filtering proxy under a network policy', () => {
  it('MULTI_STEP: the allowed target answers; http, https (CONNECT) and a redirect into a blocked address are refused with the reason', () => {
    const detail = run.multi('multi-step');
    const log = detail.jobLog.join('\n');
    expect(log).toMatch(/Network policy: the script's HTTP\(S\) goes through the agent's filtering proxy \(http:\/\/127\.0\.0\.1:\d+\)/);
    expect(detail.steps.map((s) => [s.name, s.passed])).toEqual([
      ['allowed', true],
      ['blocked over http', true],
      ['blocked over https', true],
      ['redirect into blocked', false],
    ]);
    expect(log).toContain(`http answer 403 ${reason()}`);
    // playwright-core hands back the proxy's answer to CONNECT as the response; either way, not the target's.
    expect(log).toMatch(/https answer (status 403|refused: .+)\n/);
    expect(detail.steps[3]?.error).toMatch(/403/);
    expect(detail.requests.find((r) => r.url.includes('127.0.0.2'))?.status).toBe(403);
  });

  it('BROWSER: the page on the allowed target loads; a page at the blocked address gets the 403 with the reason', () => {
    const detail = run.browserDetail('browser');
    expect(detail.steps.map((s) => [s.name, s.passed])).toEqual([
      ['allowed', true],
      ['blocked', false],
    ]);
    expect(detail.jobLog.join('\n')).toContain(`page answer 403 ${reason()}`);
  });

  it('API setup script: its axios calls go through the proxy, the allowed one answered, the blocked one refused', () => {
    const detail = run.api('api-setup');
    expect(run.final('api-setup')).toMatchObject({ hasFailures: false, hasErrors: false });
    expect(detail.jobLog.join('\n')).toContain(`setup answers 200 403 ${reason()}`);
  });

  it('PLAYWRIGHT suite: pages and the request fixture go through the proxy (use.proxy)', () => {
    const detail = run.suite('suite');
    expect(run.final('suite')).toMatchObject({ hasFailures: false, hasErrors: false });
    const log = detail.jobLog.join('\n');
    expect(log).toContain(`suite page 403 ${reason()}`);
    expect(log).toContain(`suite request 403 ${reason()}`);
  });

  it('the blocked listener saw no connection', () => {
    expect(run.final('multi-step')).toBeDefined();
    expect(accepted).toBe(0);
  });
});
