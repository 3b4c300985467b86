// PLAYWRIGHT checks end to end: a @playwright/test suite (with `files`) on
// Debian's chromium, run by the real agent in once mode
// (test/support/scripted-run.ts): one step per test, failure screenshots and
// HARs, page errors and console messages per test, skipped tests, a spec that
// does not load, the time limit, a runtime without @playwright/test.

import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { type Asset, type BrowserDetail, processes, RUNTIME, SECRET_TOKEN, useScriptedRun } from '../support/scripted-run.js';

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

const run = useScriptedRun(() => {
  return [
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
  ];
});
const { final, assets, suite } = run;

describe('PLAYWRIGHT checks (a @playwright/test suite on Debian chromium)', () => {
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
    expect(urls(hars[0])).toContain(run.pageUrl);
    expect(urls(hars[0])).not.toContain(`${run.pageUrl}?second`);
    expect(urls(hars[1])).toContain(`${run.pageUrl}?second`);
    // The runner's own report is the jobLog: plain text, the secret a test printed scrubbed.
    expect(detail.jobLog).toContain('token *****');
    expect(detail.jobLog.join('\n')).not.toContain('\u001b[');
    expect(detail.jobLog.join('\n')).toMatch(/1 failed/);
    expect(JSON.stringify(final('playwright-suite'))).not.toContain(SECRET_TOKEN);
  });

  it("records each test's page errors and console messages under the test's name, and the failing test's network as a redacted HAR", () => {
    const detail = final('playwright-suite').browserCheckResult as unknown as BrowserDetail;
    expect(detail.pageErrors).toEqual([{ step: 'check.spec.ts › button › says done', url: run.pageUrl, name: 'RangeError', message: 'late click handler' }]);
    expect(detail.consoleMessages).toEqual(
      expect.arrayContaining([
        { step: 'check.spec.ts › opens the page', type: 'log', text: 'page ready', url: run.pageUrl, line: 6 },
        { step: 'check.spec.ts › button › says done', type: 'warning', text: 'deprecated thing', url: run.pageUrl, line: 6 },
      ]),
    );
    const har = readFileSync(fileURLToPath(assets('playwright-suite').find((a) => a.name === 'failure-network-1.har')?.url ?? ''), 'utf8');
    expect(har).not.toContain(SECRET_TOKEN);
    const entries = (JSON.parse(har) as { log: { entries: Array<{ request: { url: string; headers: Array<{ name: string; value: string }> } }> } }).log.entries;
    const page = entries.find((e) => e.request.url === run.pageUrl);
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
    expect(processes()).not.toContain(run.scriptsTmp);
  });

  it('a runtime without @playwright/test is a clear error naming those that have it', () => {
    expect(final('playwright-no-runner')).toMatchObject({ hasErrors: true });
    expect(suite('playwright-no-runner').requestError).toBe('Runtime 2025-10 has no @playwright/test, which PLAYWRIGHT checks run with (runtimes that have it: 2026-04)');
  });

  it('leaves a context one PLAYWRIGHT test opened open for the next test', () => {
    expect(final('playwright-shared-context'), JSON.stringify(final('playwright-shared-context').browserCheckResult)).toMatchObject({ hasFailures: false, hasErrors: false });
  });
});
