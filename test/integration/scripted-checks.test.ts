// Scripted checks end to end (issue #8): the real agent in once mode runs
// MULTI_STEP scripts and API setup/teardown scripts on runtime 2026-04 (its
// packages installed from its lockfile here, no browser download), against a
// small local target, and BROWSER scripts with Debian's chromium (.ci/run installs it). Also: time and memory limits, secrets in output, a
// module the runtime does not have, missing and REMOVED runtimes,
// `outpost runtimes`, and a browser check's screenshots as artifacts (a page
// served here, clicked in Chromium; a failing one screenshotted automatically).

import { execFileSync } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { CheckResultEntry } from '../../src/core/result-entry.js';
import { readRuntime } from '../../src/checks/scripted/runtimes.js';
import { cleanEnv, MAIN, REPO, startAgent, tempDir } from '../support/agent-process.js';
import { startTargetServer, type TargetServer } from '../support/target-server.js';

interface StepDetail {
  name: string;
  passed: boolean;
  error: string | null;
}
interface RequestRecord {
  step: string | null;
  method: string;
  url: string;
  status: number | null;
  passed: boolean;
  durationMs: number;
  headers: Record<string, string>;
}
interface MultiStepDetail {
  requestError: string | null;
  failingStep: string | null;
  steps: StepDetail[];
  requests: RequestRecord[];
  jobLog: string[];
}
interface ApiDetail {
  requestError: string | null;
  response: { status: number; body: string } | null;
  assertions: Array<{ source: string; passed: boolean; error?: string }>;
  jobLog: string[];
}

const RUNTIME = '2026-04';
const RUNTIME_DIR = path.join(REPO, 'runtimes', RUNTIME);
const SIGNING_KEY = 'signing-key-0123456789';
const SECRET_TOKEN = 'tok-very-secret-4711';
const AGENT_SECRET = 'agent-held-secret-9876';
/** Begins with a two-byte character: a pipe chunk may end inside it. */
const UMLAUT_SECRET = 'ä-geheim-5150';

let target: TargetServer;
/** Serves CLICK_PAGE at /page: a button that changes the text of #status. */
let pageServer: Server;
let pageUrl = '';
let runtimesDir: string;
/** The agent's TMPDIR: its scripts' folders are made here, so a process left behind would name it. */
let scriptsTmp: string;
let stdout = '';
let stderr = '';
let exitCode: number | null = null;
const results = new Map<string, CheckResultEntry>();

const final = (id: string) => {
  const entry = results.get(id);
  if (!entry) throw new Error(`no FINAL result for ${id}; stderr: ${stderr.slice(-2000)}`);
  return entry;
};
const multi = (id: string) => final(id).multiStepCheckResult as unknown as MultiStepDetail;
const api = (id: string) => final(id).apiCheckResult as unknown as ApiDetail;

/** Installs the runtime's packages from its lockfile, once (idempotent), without install scripts or a browser. */
function installRuntime(): void {
  const runtime = readRuntime(RUNTIME_DIR);
  if (typeof runtime !== 'string' && runtime.installed) return;
  execFileSync('npm', ['ci', '--ignore-scripts', '--no-audit', '--no-fund'], {
    cwd: RUNTIME_DIR,
    env: { ...process.env, PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD: '1' },
    stdio: 'ignore',
  });
}

const CLICK_PAGE = `<!doctype html>
<html><head><title>Outpost click test</title></head>
<body style="font: 32px sans-serif">
<p id="status">Waiting</p>
<button id="go" onclick="document.getElementById('status').textContent = 'Clicked'; setTimeout(() => { throw new RangeError('late click handler'); })">Go</button>
<script>console.log('page ready'); console.warn('deprecated thing');</script>
</body></html>`;

/**
 * Opens the page (every request carrying the secret token in two headers), clicks, asserts the new
 * text to be `expected`; the browser is closed in a finally block.
 */
const clickScript = (expected: string) => `const { chromium } = require('playwright-core');
const browser = await chromium.launch();
try {
  const page = await browser.newPage({ extraHTTPHeaders: { Authorization: 'Bearer ' + environment.API_TOKEN, 'X-Token': environment.API_TOKEN } });
  await step('open', async () => {
    await page.goto(environment.PAGE);
    expect(await page.textContent('#status')).toBe('Waiting');
  });
  await step('click', async () => {
    await page.evaluate((token) => console.log('token ' + token), environment.API_TOKEN);
    await page.click('#go');
    await page.waitForTimeout(50);
    expect(await page.textContent('#status')).toBe('${expected}');
  });
  await page.screenshot({ path: artifact('after-click.png') });
  require('node:fs').writeFileSync(artifact('notes.txt'), 'clicked with ' + environment.API_TOKEN + '\\n');
} finally {
  await browser.close();
}`;

interface Asset {
  name: string;
  url: string;
  size: number;
  contentType: string;
}
const assets = (id: string) => (final(id).browserCheckResult as unknown as { jobAssets: Asset[] }).jobAssets;
interface BrowserDetail extends MultiStepDetail {
  pageErrors: Array<{ step: string | null; url: string; name: string; message: string }>;
  consoleMessages: Array<{ step: string | null; type: string; text: string; url: string; line: number | null }>;
}
const browserDetail = (id: string) => final(id).browserCheckResult as unknown as BrowserDetail;

/** A Playwright suite: one test passes, one (in a describe block) fails its assertion; a helper from `files`. */
const PLAYWRIGHT_SPEC = `import { test, expect } from '@playwright/test';
import { clickPage } from './helpers/pages';

test.use({ extraHTTPHeaders: { Authorization: 'Bearer ' + process.env.API_TOKEN } });

test('opens the page', async ({ page }) => {
  await page.goto(clickPage());
  await expect(page.locator('#status')).toHaveText('Waiting');
});

test.describe('button', () => {
  test('says done', async ({ page, browser }) => {
    const other = await browser.newContext();
    const second = await other.newPage();
    await second.goto(clickPage() + '?second');
    // Left open: the test fails before it would close it.
    await page.goto(clickPage());
    await page.click('#go');
    await expect(page.locator('#status')).toHaveText('Done', { timeout: 1_000 });
  });
});
`;

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

beforeAll(async () => {
  installRuntime();
  target = await startTargetServer();
  pageServer = createServer((req, res) => {
    if (new URL(req.url ?? '/', 'http://page').pathname !== '/page') return void res.writeHead(404).end();
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(CLICK_PAGE);
  });
  await new Promise<void>((resolve) => pageServer.listen(0, '127.0.0.1', resolve));
  pageUrl = `http://127.0.0.1:${(pageServer.address() as AddressInfo).port}/page`;
  // A runtimes folder with the real 2026-04 and a REMOVED one.
  runtimesDir = tempDir('outpost-runtimes-');
  symlinkSync(RUNTIME_DIR, path.join(runtimesDir, RUNTIME));
  // One without @playwright/test (its packages, none, are installed).
  mkdirSync(path.join(runtimesDir, '2025-10', 'node_modules'), { recursive: true });
  writeFileSync(
    path.join(runtimesDir, '2025-10', 'runtime.json'),
    JSON.stringify({ name: '2025-10', stage: 'DEPRECATED', multiStepSupport: true, nodeJsVersion: '20', runtimeEndOfLife: '10/31/2027', description: 'no packages', dependencies: {} }),
  );
  mkdirSync(path.join(runtimesDir, '2023-02'));
  writeFileSync(
    path.join(runtimesDir, '2023-02', 'runtime.json'),
    JSON.stringify({ name: '2023-02', stage: 'REMOVED', multiStepSupport: true, nodeJsVersion: '18', runtimeEndOfLife: '01/31/2025', description: 'an old one', dependencies: {} }),
  );
  const echo = `${target.url}/echo`;
  const checks = [
    { id: 'multi-step-fails', checkType: 'MULTI_STEP', runtimeId: RUNTIME, maxResponseTime: 60_000, script: MULTI_STEP_SCRIPT },
    {
      id: 'multi-step-passes',
      checkType: 'MULTI_STEP',
      runtimeId: RUNTIME,
      maxResponseTime: 60_000,
      script: `const { request } = require('playwright-core');\nconst ctx = await request.newContext();\nawait step('ok', async () => { expect(await (await ctx.get('${target.url}/ok')).text()).toBe('ok'); });\nawait ctx.dispose();`,
    },
    {
      id: 'setup-signs',
      checkType: 'API',
      runtimeId: RUNTIME,
      request: {
        method: 'POST',
        url: echo,
        bodyType: 'JSON',
        body: '{"order":42}',
        setupScript: `const crypto = require('node:crypto');
const jwt = require('jsonwebtoken');
request.headers['X-Signature'] = crypto.createHmac('sha256', environment.SIGNING_KEY).update(request.body).digest('hex');
request.headers['X-Jwt'] = jwt.sign({ sub: 'ada' }, environment.SIGNING_KEY, { noTimestamp: true });
request.queryParameters.signed = 'yes';`,
        tearDownScript: `const body = JSON.parse(response.body);
expect(response.status).toBe(200);
expect(body.headers['x-signature']).toBe(request.headers['X-Signature']);`,
      },
      environmentVariables: [{ key: 'SIGNING_KEY', value: SIGNING_KEY }],
      assertions: [
        { source: 'JSON_BODY', property: '$.headers["x-signature"]', comparison: 'EQUALS', target: createHmac('sha256', SIGNING_KEY).update('{"order":42}').digest('hex') },
        { source: 'JSON_BODY', property: '$.url', comparison: 'EQUALS', target: '/echo?signed=yes' },
      ],
    },
    {
      id: 'teardown-fails',
      checkType: 'API',
      request: { url: echo, tearDownScript: `\nconst body = JSON.parse(response.body);\nexpect(body.method).toBe('DELETE');` },
    },
    { id: 'setup-throws', checkType: 'API', request: { url: echo, setupScript: `\n\nthrow new Error('no token today');` } },
    // Scripts at check level, beside `request`, are taken too.
    {
      id: 'scripts-at-check-level',
      checkType: 'API',
      request: { url: echo },
      setupScript: `request.headers['X-From-Setup'] = 'yes';`,
      tearDownScript: `expect(JSON.parse(response.body).headers['x-from-setup']).toBe('no');`,
    },
    { id: 'node-assert', checkType: 'MULTI_STEP', script: `const assert = require('node:assert');\nawait step('compare', async () => { assert.strictEqual(1 + 1, 3); });` },
    { id: 'loops', checkType: 'MULTI_STEP', maxResponseTime: 1500, script: 'while (true) {}' },
    { id: 'allocates', checkType: 'MULTI_STEP', maxResponseTime: 120_000, script: `const keep = [];\nwhile (true) keep.push({ n: Math.random(), s: 'x'.repeat(64) + Math.random() });` },
    {
      id: 'prints-secrets',
      checkType: 'MULTI_STEP',
      script: `console.log('token ' + environment.API_TOKEN + ' agent ' + process.env.OUTPOST_SECRET_AGENT);\nconsole.error('env ' + Object.keys(process.env).sort().join(','));`,
    },
    { id: 'unknown-module', checkType: 'MULTI_STEP', runtimeId: RUNTIME, script: `const x = 1;\nrequire('left-pad');` },
    { id: 'missing-runtime', checkType: 'MULTI_STEP', runtimeId: '2031-01', script: 'console.log(1)' },
    { id: 'removed-runtime', checkType: 'MULTI_STEP', runtimeId: '2023-02', script: 'console.log(1)' },
    {
      id: 'browser',
      checkType: 'BROWSER',
      maxResponseTime: 90_000,
      script: `const { chromium } = require('playwright-core');
const browser = await chromium.launch();
const page = await browser.newPage();
await step('open', async () => {
  const res = await page.goto(environment.BASE + '/ok');
  expect(res.status()).toBe(200);
  expect(await page.textContent('body')).toContain('ok');
});
await step('find the cart', async () => {
  expect(await page.title()).toBe('Cart');
});`,
    },
    {
      id: 'browser-hangs',
      checkType: 'BROWSER',
      maxResponseTime: 8_000,
      script: `const { chromium } = require('playwright-core');
const browser = await chromium.launch();
const page = await browser.newPage();
console.log('launched');
await step('open', async () => { await page.goto(environment.PAGE); });
await step('wait', async () => { await new Promise(() => {}); });`,
    },
    { id: 'browser-click', checkType: 'BROWSER', maxResponseTime: 90_000, script: clickScript('Clicked') },
    { id: 'browser-click-fails', checkType: 'BROWSER', maxResponseTime: 90_000, script: clickScript('Done') },
    {
      id: 'browser-chatty',
      checkType: 'BROWSER',
      maxResponseTime: 90_000,
      script: `const { chromium } = require('playwright-core');
const browser = await chromium.launch();
const page = await browser.newPage();
await page.setContent('<p>chatty</p>');
await page.evaluate(() => { for (let i = 0; i < 150; i++) console.log('line ' + i + ' ' + 'x'.repeat(i === 0 ? 2000 : 0)); });
await page.waitForTimeout(100);
await browser.close();`,
    },
    {
      id: 'browser-trace',
      checkType: 'BROWSER',
      maxResponseTime: 90_000,
      script: `const { chromium } = require('playwright-core');
const browser = await chromium.launch();
const context = await browser.newContext();
await context.tracing.start({ screenshots: true, snapshots: true });
const page = await context.newPage();
await page.goto(environment.PAGE);
await page.click('#go');
await context.tracing.stop({ path: artifact('trace.zip') });
await browser.close();`,
    },
    {
      id: 'playwright-suite',
      checkType: 'PLAYWRIGHT',
      runtimeId: RUNTIME,
      maxResponseTime: 90_000,
      script: PLAYWRIGHT_SPEC,
      files: [
        { path: 'helpers/pages.ts', content: "export const clickPage = () => process.env.PAGE as string;\n" },
        { path: 'more.spec.ts', content: "import { test } from '@playwright/test';\ntest('prints', async () => { console.log('token ' + process.env.API_TOKEN); });\n" },
      ],
    },
    {
      id: 'playwright-passes',
      checkType: 'PLAYWRIGHT',
      maxResponseTime: 90_000,
      script: `import { test, expect } from '@playwright/test';\ntest('opens', async ({ page }) => {\n  await page.goto(process.env.PAGE!);\n  await expect(page.locator('#status')).toHaveText('Waiting');\n});\ntest.skip('not today', async () => {});`,
    },
    { id: 'playwright-syntax', checkType: 'PLAYWRIGHT', script: `import { test } from '@playwright/test';\ntest('x', async () => { let = ; });` },
    {
      id: 'playwright-slow',
      checkType: 'PLAYWRIGHT',
      maxResponseTime: 6_000,
      script: `import { test } from '@playwright/test';\ntest('waits', async ({ page }) => {\n  await page.goto(process.env.PAGE!);\n  await page.waitForTimeout(120_000);\n});`,
    },
    { id: 'playwright-no-runner', checkType: 'PLAYWRIGHT', runtimeId: '2025-10', script: `import { test } from '@playwright/test';` },
    // From a review: processes a script starts, split characters, artifacts by content, parallel
    // steps, thrown strings, floating rejections, structural equality, caught step failures.
    {
      id: 'spawns-sleepers',
      checkType: 'MULTI_STEP',
      maxResponseTime: 20_000,
      script: `const { spawn } = require('node:child_process');
spawn('/bin/sleep', ['6543'], { env: {}, stdio: 'inherit' });
spawn('/bin/sleep', ['6544'], { env: {}, stdio: 'inherit', detached: true });
console.log('started');`,
    },
    {
      id: 'spawns-and-loops',
      checkType: 'MULTI_STEP',
      maxResponseTime: 1_500,
      script: `require('node:child_process').spawn('/bin/sleep', ['6545'], { env: {}, stdio: 'ignore', detached: true });\nfor (;;) {}`,
    },
    { id: 'prints-split-secret', checkType: 'MULTI_STEP', script: `process.stdout.write('a'.repeat(65535) + environment.UMLAUT_SECRET + '\\n');` },
    {
      id: 'artifacts-by-content',
      checkType: 'MULTI_STEP',
      script: `const fs = require('node:fs');
fs.writeFileSync(artifact('notes.md'), '# token ' + environment.API_TOKEN + '\\n');
fs.writeFileSync(artifact('data'), 'token=' + environment.API_TOKEN);
fs.writeFileSync(artifact('blob.bin'), Buffer.concat([Buffer.from([0, 1, 2]), Buffer.from(environment.API_TOKEN)]));
fs.writeFileSync(artifact('clean.bin'), Buffer.from([0, 1, 2, 3]));
fs.writeFileSync(artifact('bom.csv'), '\\ufeffa,b\\n');`,
    },
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
      id: 'nested-at-limit',
      checkType: 'MULTI_STEP',
      maxResponseTime: 1_500,
      script: `await step('outer', async () => {\n  await step('inner', async () => { await new Promise(() => {}); });\n});`,
    },
    {
      id: 'exits-itself',
      checkType: 'MULTI_STEP',
      script: `require('node:child_process').spawn('/bin/sleep', ['6546'], { env: {}, stdio: 'ignore', detached: true });\nprocess.exit(3);`,
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
      id: 'browser-caught-failure',
      checkType: 'BROWSER',
      maxResponseTime: 90_000,
      script: `const { chromium } = require('playwright-core');
const browser = await chromium.launch();
const page = await browser.newPage();
await page.setContent('<p>fine</p>');
try {
  await step('flaky', async () => { expect(1).toBe(2); });
} catch {}
await browser.close();`,
    },
    {
      id: 'caught-later-failure',
      checkType: 'MULTI_STEP',
      script: `try {\n  await step('login', async () => { expect(1).toBe(2); });\n} finally {\n  try { await step('logout', async () => { throw new Error('x'); }); } catch {}\n}`,
    },
    {
      id: 'browser-retried',
      checkType: 'BROWSER',
      maxResponseTime: 90_000,
      script: `const { chromium } = require('playwright-core');
try { await step('warm-up', async () => { throw new Error('cold'); }); } catch {}
const browser = await chromium.launch();
const page = await browser.newPage();
await page.goto(environment.PAGE + '?attempt=1');
try { await step('first try', async () => { expect(1).toBe(2); }); } catch {}
await page.goto(environment.PAGE + '?attempt=2');
await step('final', async () => { expect(await page.textContent('#status')).toBe('Done'); });`,
    },
    {
      id: 'playwright-shared-context',
      checkType: 'PLAYWRIGHT',
      maxResponseTime: 90_000,
      script: `import { test, expect } from '@playwright/test';
test.describe.configure({ mode: 'serial' });
let shared;
test('opens a context the next test uses', async ({ browser }) => {
  shared = await (await browser.newContext()).newPage();
  await shared.goto(process.env.PAGE!);
});
test('uses it', async () => {
  await expect(shared.locator('#status')).toHaveText('Waiting');
});`,
    },
    {
      id: 'browser-wrapped-error',
      checkType: 'BROWSER',
      maxResponseTime: 90_000,
      script: `const { chromium } = require('playwright-core');
const browser = await chromium.launch();
try {
  const page = await browser.newPage();
  await page.setContent('<p>here</p>');
  try {
    await step('find', async () => { expect(await page.textContent('p')).toBe('gone'); });
  } catch (e) {
    throw new Error('wrapped: ' + e.message);
  }
} finally {
  await browser.close();
}`,
    },
    {
      id: 'browser-throws-undefined',
      checkType: 'BROWSER',
      maxResponseTime: 90_000,
      script: `const { chromium } = require('playwright-core');
const browser = await chromium.launch();
const page = await browser.newPage();
await page.setContent('<p>here</p>');
await step('u', async () => { throw undefined; });`,
    },
    {
      id: 'browser-slow-screenshot',
      checkType: 'BROWSER',
      maxResponseTime: 5_000,
      script: `const { chromium } = require('playwright-core');
const browser = await chromium.launch();
const page = await browser.newPage();
await page.setContent('<p>busy</p>');
page.evaluate(() => { for (;;) {} }).catch(() => {});
await step('check', async () => {
  expect(1).toBe(2);
});`,
    },
    { id: 'after-all', checkType: 'URL', request: { url: `${target.url}/ok` } },
  ];
  const dir = tempDir();
  const file = path.join(dir, 'checks.json');
  writeFileSync(
    file,
    JSON.stringify({
      environmentVariables: [
        { key: 'BASE', value: target.url },
        { key: 'PAGE', value: pageUrl },
        { key: 'API_TOKEN', value: SECRET_TOKEN, secret: true },
        { key: 'UMLAUT_SECRET', value: UMLAUT_SECRET, secret: true },
      ],
      checks,
    }),
  );
  scriptsTmp = tempDir('outpost-scripted-agent-');
  // A run folder an agent killed long ago left behind, and one as fresh as a running agent's.
  for (const name of ['outpost-script-stale', 'outpost-script-fresh']) mkdirSync(path.join(scriptsTmp, name));
  writeFileSync(path.join(scriptsTmp, 'outpost-script-stale', 'left.txt'), 'x');
  const hourAgo = new Date(Date.now() - 3_600_000);
  utimesSync(path.join(scriptsTmp, 'outpost-script-stale'), hourAgo, hourAgo);
  const proc = startAgent(
    ['once', file],
    cleanEnv({ TMPDIR: scriptsTmp, STATE_DIR: tempDir('outpost-scripted-state-'), JOB_CONCURRENCY: '4', RUNTIMES_DIR: runtimesDir, SCRIPT_MEMORY_MB: '64', OUTPOST_SECRET_AGENT: AGENT_SECRET, UNRELATED_AGENT_SETTING: 'x' }),
  );
  exitCode = (await proc.exit).code;
  stdout = proc.stdout();
  stderr = proc.stderr();
  for (const line of proc.stdoutLines.filter(Boolean)) {
    const r = JSON.parse(line) as CheckResultEntry;
    if (r.resultType === 'FINAL') results.set(r.checkId as string, r);
  }
}, 240_000);

afterAll(async () => {
  await target?.close();
  await new Promise((resolve) => (pageServer ? pageServer.close(resolve) : resolve(undefined)));
});

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

  it('kills a script that loops forever at its time limit, and the agent goes on', () => {
    expect(final('loops')).toMatchObject({ hasErrors: true });
    expect(multi('loops').requestError).toBe('MULTI_STEP was stopped: it ran past its time limit of 1500 ms');
    expect(final('after-all')).toMatchObject({ hasFailures: false, hasErrors: false });
    expect(exitCode).toBe(1);
    // No script process is left behind.
    const processes = execFileSync('ps', ['-eo', 'args'], { encoding: 'utf8' });
    expect(processes).not.toContain(scriptsTmp);
  });

  it('kills a script that allocates without bound at its memory limit', () => {
    expect(final('allocates')).toMatchObject({ hasErrors: true });
    expect(multi('allocates').requestError).toBe('MULTI_STEP was killed: it exceeded its memory limit of 64 MB');
    expect(multi('allocates').jobLog.join('\n')).not.toMatch(/Mark-Compact/);
  });

  it('scrubs secrets a script prints, and gives it only its variables and the service environment', () => {
    const log = multi('prints-secrets').jobLog;
    expect(log[0]).toBe('token ***** agent *****');
    expect(stdout).not.toContain(SECRET_TOKEN);
    expect(stdout).not.toContain(AGENT_SECRET);
    expect(stderr).not.toContain(SECRET_TOKEN);
    const env = (log.find((l) => l.startsWith('env ')) ?? '').slice(4).split(',');
    expect(env).toEqual(expect.arrayContaining(['API_TOKEN', 'BASE', 'OUTPOST', 'OUTPOST_SECRET_AGENT', 'NODE_PATH']));
    for (const name of ['PATH', 'UNRELATED_AGENT_SETTING', 'RUNTIMES_DIR', 'SCRIPT_MEMORY_MB', 'JOB_CONCURRENCY', 'CI']) expect(env).not.toContain(name);
  });

  it("keeps a node:assert message's lines, so the values compared are in the error", () => {
    expect(final('node-assert')).toMatchObject({ hasFailures: true, hasErrors: false });
    expect(multi('node-assert').requestError).toBe('MULTI_STEP failed at step "compare", line 2: Expected values to be strictly equal: · 2 !== 3');
  });

  it('names a module the runtime does not have, and what it has', () => {
    expect(final('unknown-module')).toMatchObject({ hasErrors: true });
    expect(multi('unknown-module').requestError).toBe(
      "MULTI_STEP failed at line 2: Cannot find module 'left-pad' (runtime 2026-04 provides: @playwright/test, axios, date-fns, jsonwebtoken, lodash, otpauth, playwright-core, uuid, and Node.js built-ins)",
    );
  });

  it('refuses a missing or REMOVED runtime with a clear error result', () => {
    expect(multi('missing-runtime').requestError).toBe('Runtime 2031-01 is not installed on this agent (available: 2025-10, 2026-04)');
    expect(multi('removed-runtime').requestError).toBe('Runtime 2023-02 has been REMOVED: move the check to a current runtime (available: 2025-10, 2026-04)');
    expect(final('removed-runtime')).toMatchObject({ hasErrors: true });
  });
});

describe('BROWSER checks (Debian chromium, headless)', () => {
  it('run a page script in steps, failing at the step whose assertion failed', () => {
    expect(final('browser')).toMatchObject({ hasFailures: true, hasErrors: false });
    const detail = final('browser').browserCheckResult as unknown as MultiStepDetail;
    expect(detail.steps.map((s) => [s.name, s.passed])).toEqual([
      ['open', true],
      ['find the cart', false],
    ]);
    expect(detail.requestError).toBe('BROWSER failed at step "find the cart", line 10: expected "" to be "Cart"');
  });

  it('stop a script at its time limit, keeping what it recorded, and kill the browser with it', () => {
    expect(final('browser-hangs')).toMatchObject({ hasErrors: true });
    const detail = final('browser-hangs').browserCheckResult as unknown as MultiStepDetail;
    expect(detail.jobLog[0]).toBe('launched');
    expect(detail.requestError).toBe('BROWSER was stopped at step "wait": it ran past its time limit of 8000 ms');
    expect(detail.failingStep).toBe('wait');
    expect(detail.steps).toEqual([
      expect.objectContaining({ name: 'open', passed: true }),
      expect.objectContaining({ name: 'wait', passed: false, error: 'the time limit was reached during this step' }),
    ]);
    // The page as it hung, and its network log.
    expect(assets('browser-hangs').map((a) => a.name)).toEqual(['failure-1.png', 'failure-network-1.har']);
    // The browser ran with its profile in the script's temporary directory: nothing of it is left.
    expect(execFileSync('ps', ['-eo', 'args'], { encoding: 'utf8' })).not.toContain(scriptsTmp);
  });
});

describe('BROWSER check artifacts', () => {
  const PNG = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  const local = (asset: Asset | undefined) => {
    if (!asset) throw new Error('no such asset');
    expect(asset.url).toMatch(/^file:\/\//);
    const file = fileURLToPath(asset.url);
    expect(existsSync(file)).toBe(true);
    const bytes = readFileSync(file);
    expect(bytes.length).toBe(asset.size);
    return bytes;
  };

  it('a page served here is opened in Chromium, clicked and asserted; the screenshot the script saved is a PNG in jobAssets', () => {
    const entry = final('browser-click');
    expect(entry, JSON.stringify(entry)).toMatchObject({ hasFailures: false, hasErrors: false });
    const detail = entry.browserCheckResult as unknown as MultiStepDetail;
    expect(detail.steps.map((s) => [s.name, s.passed])).toEqual([
      ['open', true],
      ['click', true],
    ]);
    const list = assets('browser-click');
    expect(list.map((a) => [a.name, a.contentType])).toEqual([
      ['after-click.png', 'image/png'],
      ['notes.txt', 'text/plain'],
    ]);
    const png = local(list[0]);
    expect(png.subarray(0, 8).equals(PNG)).toBe(true);
    expect(png.length).toBeGreaterThan(1000);
    // A text artifact is scrubbed of the job's secrets.
    expect(local(list[1]).toString('utf8')).toBe('clicked with *****\n');
  });

  it('a failing step leaves a screenshot of the page as it failed, taken before the script closed the browser', () => {
    const entry = final('browser-click-fails');
    expect(entry).toMatchObject({ hasFailures: true, hasErrors: false });
    const detail = entry.browserCheckResult as unknown as MultiStepDetail;
    expect(detail.requestError).toBe('BROWSER failed at step "click", line 13: expected "Clicked" to be "Done"');
    const list = assets('browser-click-fails');
    expect(detail.failingStep).toBe('click');
    expect(list.map((a) => [a.name, a.contentType])).toEqual([
      ['failure-1.png', 'image/png'],
      ['failure-network-1.har', 'application/json'],
    ]);
    expect(local(list[0]).subarray(0, 8).equals(PNG)).toBe(true);
    expect(detail.jobLog).toContain(`Failure screenshot failure-1.png: ${pageUrl}`);
    // The earlier failing browser check got one too.
    expect(assets('browser').map((a) => a.name)).toEqual(['failure-1.png', 'failure-network-1.har']);
    expect(execFileSync('ps', ['-eo', 'args'], { encoding: 'utf8' })).not.toContain(scriptsTmp);
  });

  it('a failing run keeps the network log as a HAR, with sensitive headers redacted and secrets scrubbed', () => {
    const har = local(assets('browser-click-fails')[1]).toString('utf8');
    expect(har).not.toContain(SECRET_TOKEN);
    const entries = (JSON.parse(har) as { log: { entries: Array<{ request: { method: string; url: string; headers: Array<{ name: string; value: string }> }; response: { status: number } }> } }).log.entries;
    const page = entries.find((e) => e.request.url === pageUrl);
    expect(page, har.slice(0, 2000)).toBeDefined();
    expect(page?.request.method).toBe('GET');
    expect(page?.response.status).toBe(200);
    const header = (name: string) => page?.request.headers.find((h) => h.name.toLowerCase() === name.toLowerCase())?.value;
    expect(header('Authorization')).toBe('*****');
    expect(header('X-Token')).toBe('*****');
  });

  it("a script's own trace is kept as a zip", () => {
    expect(final('browser-trace')).toMatchObject({ hasFailures: false, hasErrors: false });
    const list = assets('browser-trace');
    expect(list.map((a) => [a.name, a.contentType])).toEqual([['trace.zip', 'application/zip']]);
    const zip = local(list[0]);
    expect(zip.subarray(0, 4).equals(Buffer.from([0x50, 0x4b, 0x03, 0x04]))).toBe(true);
    // The archive names Playwright's trace files.
    expect(zip.toString('latin1')).toContain('trace.trace');
    expect(zip.toString('latin1')).toContain('trace.network');
  });
});

describe('BROWSER pages: errors and console messages', () => {
  it('a passing run records its pages\' uncaught errors and console messages, by step, secrets scrubbed', () => {
    const detail = browserDetail('browser-click');
    expect(detail.failingStep).toBeNull();
    expect(detail.pageErrors).toEqual([{ step: 'click', url: pageUrl, name: 'RangeError', message: 'late click handler' }]);
    expect(detail.consoleMessages).toEqual(
      expect.arrayContaining([
        // Line 6 of CLICK_PAGE, counted from 1 like script errors' lines.
        { step: 'open', type: 'log', text: 'page ready', url: pageUrl, line: 6 },
        { step: 'open', type: 'warning', text: 'deprecated thing', url: pageUrl, line: 6 },
        expect.objectContaining({ step: 'click', type: 'log', text: 'token *****' }),
      ]),
    );
    // A passing run keeps no network log.
    expect(assets('browser-click').map((a) => a.name)).not.toContain('failure-network-1.har');
    expect(JSON.stringify(final('browser-click'))).not.toContain(SECRET_TOKEN);
  });

  it('keeps at most 100 console messages, cut to 1,000 characters, and counts the rest in the jobLog', () => {
    const detail = browserDetail('browser-chatty');
    expect(detail.consoleMessages).toHaveLength(100);
    expect(detail.consoleMessages[0]?.text).toHaveLength(1_000);
    expect(detail.consoleMessages[0]?.text.endsWith('...')).toBe(true);
    expect(detail.consoleMessages[99]?.text).toBe('line 99 ');
    expect(detail.jobLog).toContain('50 more console messages were not kept (at most 100)');
  });

  it('a failing run records them too', () => {
    const detail = browserDetail('browser-click-fails');
    expect(detail.pageErrors.map((e) => e.message)).toEqual(['late click handler']);
    expect(detail.consoleMessages.map((m) => m.text)).toEqual(expect.arrayContaining(['page ready', 'deprecated thing', 'token *****']));
  });
});

describe('API setup and teardown scripts', () => {
  it('a setup script signs the request (node:crypto, jsonwebtoken) and changes its query; the teardown asserts on the body', () => {
    const entry = final('setup-signs');
    expect(entry, JSON.stringify(entry)).toMatchObject({ hasFailures: false, hasErrors: false });
    expect(api('setup-signs').assertions.map((a) => a.passed)).toEqual([true, true]);
    const echoed = JSON.parse(api('setup-signs').response?.body ?? '{}') as { headers: Record<string, string> };
    expect(echoed.headers['x-jwt']?.split('.')).toHaveLength(3);
  });

  it('a failing teardown assertion fails the check, naming the line', () => {
    expect(final('teardown-fails')).toMatchObject({ hasFailures: true, hasErrors: false });
    expect(api('teardown-fails').assertions.at(-1)).toMatchObject({
      source: 'TEARDOWN_SCRIPT',
      passed: false,
      error: 'tearDownScript failed at line 3: expected "GET" to be "DELETE"',
    });
  });

  it('takes setupScript and tearDownScript at check level too', () => {
    expect(final('scripts-at-check-level')).toMatchObject({ hasFailures: true, hasErrors: false });
    expect(api('scripts-at-check-level').assertions.at(-1)).toMatchObject({
      source: 'TEARDOWN_SCRIPT',
      passed: false,
      error: 'tearDownScript failed at line 1: expected "yes" to be "no"',
    });
  });

  it('a setup script that throws sends nothing and reports its error and line', () => {
    expect(final('setup-throws')).toMatchObject({ hasErrors: true });
    expect(api('setup-throws').requestError).toBe('setupScript failed at line 3: no token today');
    expect(api('setup-throws').response).toBeNull();
  });
});

describe('outpost runtimes', () => {
  it('lists the runtimes with stage, whether installed, end of life, Node.js and whether they run PLAYWRIGHT suites', () => {
    const out = execFileSync(process.execPath, [MAIN, 'runtimes'], { env: cleanEnv({ RUNTIMES_DIR: runtimesDir }), encoding: 'utf8' });
    expect(out).toContain(`Runtimes in ${runtimesDir}:`);
    expect(out).toMatch(/2023-02\s+REMOVED\s+installed\s+end of life 01\/31\/2025\s+Node.js 18\n/);
    expect(out).toMatch(/2025-10\s+DEPRECATED\s+installed\s+end of life 10\/31\/2027\s+Node.js 20\n/);
    expect(out).toMatch(/2026-04\s+CURRENT\s+installed\s+end of life 04\/30\/2028\s+Node.js 24, @playwright\/test \(PLAYWRIGHT\)\n/);
  });
});

describe('a script run whose agent is killed with SIGKILL', () => {
  it('ends itself and its browser, and removes its folder: nothing is left to run unbounded', async () => {
    const tmp = tempDir('outpost-orphaned-');
    const dir = tempDir();
    const file = path.join(dir, 'checks.json');
    const script = `const { chromium } = require('playwright-core');
const browser = await chromium.launch();
const page = await browser.newPage();
await page.goto(environment.PAGE);
for (;;) {}`;
    writeFileSync(
      file,
      JSON.stringify({
        environmentVariables: [{ key: 'PAGE', value: pageUrl }],
        checks: [{ id: 'busy-browser', checkType: 'BROWSER', maxResponseTime: 120_000, script }],
      }),
    );
    const proc = startAgent(['once', file], cleanEnv({ TMPDIR: tmp, STATE_DIR: tempDir('outpost-orphaned-state-'), RUNTIMES_DIR: runtimesDir }));
    const ours = () =>
      execFileSync('ps', ['-eo', 'args'], { encoding: 'utf8' })
        .split('\n')
        .filter((line) => line.includes(tmp));
    // The harness and Chromium (its profile is in the run's folder) are running, and the page has loaded.
    await vi.waitFor(() => expect(ours().filter((line) => line.includes('chromium')).length).toBeGreaterThan(1), { timeout: 30_000, interval: 100 });
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    expect(ours().some((line) => line.includes('harness.cjs'))).toBe(true);
    proc.kill('SIGKILL');
    expect((await proc.exit).signal).toBe('SIGKILL');
    // Bounded, not fast: a second or two on a quiet machine, but a loaded CI machine (load average 12 seen)
    // stretches both the watchdog's exit and the removal of Chromium's profile.
    await vi.waitFor(() => expect(ours()).toEqual([]), { timeout: 30_000, interval: 100 });
    // Its folder too: a HAR there may hold a secret.
    await vi.waitFor(() => expect(readdirSync(tmp).filter((name) => name.startsWith('outpost-script-'))).toEqual([]), { timeout: 30_000, interval: 100 });
  }, 120_000);
});

describe('PLAYWRIGHT checks (a @playwright/test suite on Debian chromium)', () => {
  interface SuiteDetail extends MultiStepDetail {
    steps: Array<StepDetail & { status: string; location: string; durationMs: number }>;
    tests: { expected: number; unexpected: number; flaky: number; skipped: number } | null;
  }
  const suite = (id: string) => final(id).browserCheckResult as unknown as SuiteDetail;

  it('runs every spec of the suite, one step per test, failing at the test whose assertion failed, with its screenshot', () => {
    expect(final('playwright-suite')).toMatchObject({ checkType: 'PLAYWRIGHT', hasFailures: true, hasErrors: false });
    const detail = suite('playwright-suite');
    expect(detail.requestError).toBe(
      'PLAYWRIGHT failed at test "check.spec.ts › button › says done", check.spec.ts:19: expect(locator).toHaveText(expected) failed · Locator: locator(\'#status\') · Expected: "Done" · Received: "Clicked" · Timeout: 1000ms',
    );
    expect(detail.failingStep).toBe('check.spec.ts › button › says done');
    expect(detail.steps.map((s) => [s.name, s.passed, s.status, s.location])).toEqual([
      ['check.spec.ts › opens the page', true, 'passed', 'check.spec.ts:6'],
      ['check.spec.ts › button › says done', false, 'failed', 'check.spec.ts:19'],
      ['more.spec.ts › prints', true, 'passed', 'more.spec.ts:2'],
    ]);
    expect(detail.tests).toEqual({ expected: 2, unexpected: 1, flaky: 0, skipped: 0 });
    const list = assets('playwright-suite');
    // Playwright's own failure screenshots (one per page it still tracks), then one HAR per context:
    // the test's page's, then the context it opened itself.
    expect(list.filter((a) => a.name.endsWith('.png')).map((a) => a.contentType)).toContain('image/png');
    expect(list[0]?.name).toBe('failure-1.png');
    const hars = list.filter((a) => a.name.endsWith('.har'));
    expect(hars.map((a) => [a.name, a.contentType])).toEqual([
      ['failure-network-1.har', 'application/json'],
      ['failure-network-2.har', 'application/json'],
    ]);
    expect(detail.jobLog).toContain('Failure screenshot failure-1.png: check.spec.ts › button › says done');
    const urls = (asset: Asset | undefined) =>
      (JSON.parse(readFileSync(fileURLToPath(asset?.url ?? ''), 'utf8')) as { log: { entries: Array<{ request: { url: string } }> } }).log.entries.map((e) => e.request.url);
    expect(urls(hars[0])).toContain(pageUrl);
    expect(urls(hars[0])).not.toContain(`${pageUrl}?second`);
    expect(urls(hars[1])).toContain(`${pageUrl}?second`);
    // The runner's own report is the jobLog: plain text, the secret a test printed scrubbed.
    expect(detail.jobLog).toContain('token *****');
    expect(detail.jobLog.join('\n')).not.toContain('\u001b[');
    expect(detail.jobLog.join('\n')).toMatch(/1 failed/);
    expect(JSON.stringify(final('playwright-suite'))).not.toContain(SECRET_TOKEN);
  });

  it("records each test's page errors and console messages under the test's name, and the failing test's network as a redacted HAR", () => {
    const detail = final('playwright-suite').browserCheckResult as unknown as BrowserDetail;
    expect(detail.pageErrors).toEqual([{ step: 'check.spec.ts › button › says done', url: pageUrl, name: 'RangeError', message: 'late click handler' }]);
    expect(detail.consoleMessages).toEqual(
      expect.arrayContaining([
        { step: 'check.spec.ts › opens the page', type: 'log', text: 'page ready', url: pageUrl, line: 6 },
        { step: 'check.spec.ts › button › says done', type: 'warning', text: 'deprecated thing', url: pageUrl, line: 6 },
      ]),
    );
    const har = readFileSync(fileURLToPath(assets('playwright-suite').find((a) => a.name === 'failure-network-1.har')?.url ?? ''), 'utf8');
    expect(har).not.toContain(SECRET_TOKEN);
    const entries = (JSON.parse(har) as { log: { entries: Array<{ request: { url: string; headers: Array<{ name: string; value: string }> } }> } }).log.entries;
    const page = entries.find((e) => e.request.url === pageUrl);
    expect(page?.request.headers.find((h) => h.name.toLowerCase() === 'authorization')?.value).toBe('*****');
  });

  it('passes when every test passes; a test the suite skips is counted, not failed', () => {
    expect(final('playwright-passes')).toMatchObject({ hasFailures: false, hasErrors: false });
    const detail = suite('playwright-passes');
    expect(detail.steps.map((s) => [s.name, s.passed, s.status])).toEqual([
      ['check.spec.ts › opens', true, 'passed'],
      ['check.spec.ts › not today', true, 'skipped'],
    ]);
    expect(detail.tests).toEqual({ expected: 1, unexpected: 0, flaky: 0, skipped: 1 });
    expect(assets('playwright-passes')).toEqual([]);
  });

  it('a spec that does not load is an error naming the file and position', () => {
    expect(final('playwright-syntax')).toMatchObject({ hasErrors: true });
    expect(suite('playwright-syntax').requestError).toBe("PLAYWRIGHT failed: SyntaxError: check.spec.ts: Unexpected reserved word 'let'. (2:24)");
  });

  it('stops the suite at its time limit, naming the test it interrupted', () => {
    expect(final('playwright-slow')).toMatchObject({ hasErrors: true });
    const detail = suite('playwright-slow');
    expect(detail.requestError).toBe('PLAYWRIGHT was stopped at test "check.spec.ts › waits": it ran past its time limit of 6000 ms');
    expect(detail.steps).toEqual([expect.objectContaining({ name: 'check.spec.ts › waits', passed: false, status: 'interrupted', error: 'the time limit was reached before this test finished' })]);
    expect(execFileSync('ps', ['-eo', 'args'], { encoding: 'utf8' })).not.toContain(scriptsTmp);
  });

  it('a runtime without @playwright/test is a clear error naming those that have it', () => {
    expect(final('playwright-no-runner')).toMatchObject({ hasErrors: true });
    expect(suite('playwright-no-runner').requestError).toBe('Runtime 2025-10 has no @playwright/test, which PLAYWRIGHT checks run with (runtimes that have it: 2026-04)');
  });
});

describe('scripted checks: what a review found', () => {
  const processes = () => execFileSync('ps', ['-eo', 'args'], { encoding: 'utf8' });

  it("ends processes a script started, even detached and without the run's environment, without waiting for them", () => {
    expect(final('spawns-sleepers'), JSON.stringify(multi('spawns-sleepers'))).toMatchObject({ hasFailures: false, hasErrors: false });
    expect(multi('spawns-sleepers').jobLog).toEqual(['started']);
    expect(final('spawns-and-loops')).toMatchObject({ hasErrors: true });
    expect(multi('spawns-and-loops').requestError).toBe('MULTI_STEP was stopped: it ran past its time limit of 1500 ms');
    for (const sleeper of ['sleep 6543', 'sleep 6544', 'sleep 6545']) expect(processes()).not.toContain(sleeper);
  });

  it('scrubs a secret whose first character a pipe chunk split in two', () => {
    const log = multi('prints-split-secret').jobLog.join('\n');
    expect(log).not.toContain('geheim-5150');
    expect(log).toContain('*****');
  });

  it("scrubs text artifacts whatever their name, and leaves out a binary one holding a secret", () => {
    const list = (final('artifacts-by-content').multiStepCheckResult as unknown as { jobAssets: Asset[] }).jobAssets;
    expect(list.map((a) => [a.name, a.contentType])).toEqual([
      ['bom.csv', 'text/csv'],
      ['clean.bin', 'application/octet-stream'],
      ['data', 'text/plain'],
      ['notes.md', 'text/plain'],
    ]);
    // A byte-order mark stays.
    expect(readFileSync(fileURLToPath(list[0]?.url ?? '')).subarray(0, 3)).toEqual(Buffer.from([0xef, 0xbb, 0xbf]));
    expect(readFileSync(fileURLToPath(list[2]?.url ?? ''), 'utf8')).toBe('token=*****');
    expect(readFileSync(fileURLToPath(list[3]?.url ?? ''), 'utf8')).toBe('# token *****\n');
    expect(multi('artifacts-by-content').jobLog).toContain("Artifact blob.bin was left out: it holds one of the job's secrets and is not text, so it cannot be scrubbed");
  });

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

  it("keeps the screenshots of the failure the run ends with, not of one it caught before", () => {
    expect(final('browser-retried')).toMatchObject({ hasFailures: true });
    expect(browserDetail('browser-retried').failingStep).toBe('final');
    expect(assets('browser-retried').map((a) => a.name)).toEqual(['failure-1.png', 'failure-network-1.har']);
    expect(browserDetail('browser-retried').jobLog).toContain(`Failure screenshot failure-1.png: ${pageUrl}?attempt=2`);
  });

  it('leaves a context one PLAYWRIGHT test opened open for the next test', () => {
    expect(final('playwright-shared-context'), JSON.stringify(final('playwright-shared-context').browserCheckResult)).toMatchObject({ hasFailures: false, hasErrors: false });
  });

  it('names the innermost of nested steps the time limit ended', () => {
    expect(multi('nested-at-limit').requestError).toBe('MULTI_STEP was stopped at step "inner": it ran past its time limit of 1500 ms');
  });

  it('ends what a script started also when the script exits by itself', () => {
    expect(multi('exits-itself').requestError).toBe('MULTI_STEP ended without a result (exit code 3)');
    expect(processes()).not.toContain('sleep 6546');
  });

  it('keeps the failure screenshot of a step whose error the script wrapped, and of a thrown undefined', () => {
    expect(final('browser-wrapped-error')).toMatchObject({ hasErrors: true });
    expect(browserDetail('browser-wrapped-error').requestError).toBe('BROWSER failed at line 9: wrapped: expected "here" to be "gone"');
    expect(assets('browser-wrapped-error').map((a) => a.name)).toEqual(['failure-1.png', 'failure-network-1.har']);
    expect(browserDetail('browser-throws-undefined').failingStep).toBe('u');
    expect(assets('browser-throws-undefined').map((a) => a.name)).toEqual(['failure-1.png', 'failure-network-1.har']);
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

  it('keeps no failure screenshot of a step failure the script caught and went past', () => {
    expect(final('browser-caught-failure')).toMatchObject({ hasFailures: false, hasErrors: false });
    expect(assets('browser-caught-failure')).toEqual([]);
  });

  it('reports an assertion that failed as such, though its screenshot of a hung page ran into the time limit', () => {
    expect(final('browser-slow-screenshot')).toMatchObject({ hasFailures: true, hasErrors: false });
    expect(browserDetail('browser-slow-screenshot').requestError).toBe('BROWSER failed at step "check", line 7: expected 1 to be 2');
  });

  it("removes a run folder an agent killed long ago left behind, and no other", () => {
    const left = readdirSync(scriptsTmp).filter((name) => name.startsWith('outpost-script-'));
    expect(left).toEqual(['outpost-script-fresh']);
  });
});
