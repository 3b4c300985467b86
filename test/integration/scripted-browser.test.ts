// BROWSER checks end to end with Debian's chromium, headless (.ci/run installs
// it; test/support/scripted-run.ts runs the agent in once mode): steps, the
// time limit, artifacts (a screenshot the script saved, failure screenshots, a
// redacted HAR, a trace zip) and the pages' errors and console messages. The
// page is served here and clicked in Chromium.

import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { type Asset, type MultiStepDetail, processes, SECRET_TOKEN, useScriptedRun } from '../support/scripted-run.js';

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

const run = useScriptedRun(() => {
  return [
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
  ];
});
const { final, assets, browserDetail } = run;

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
    expect(processes()).not.toContain(run.scriptsTmp);
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
    expect(detail.jobLog).toContain(`Failure screenshot failure-1.png: ${run.pageUrl}`);
    // The earlier failing browser check got one too.
    expect(assets('browser').map((a) => a.name)).toEqual(['failure-1.png', 'failure-network-1.har']);
    expect(processes()).not.toContain(run.scriptsTmp);
  });

  it('a failing run keeps the network log as a HAR, with sensitive headers redacted and secrets scrubbed', () => {
    const har = local(assets('browser-click-fails')[1]).toString('utf8');
    expect(har).not.toContain(SECRET_TOKEN);
    const entries = (JSON.parse(har) as { log: { entries: Array<{ request: { method: string; url: string; headers: Array<{ name: string; value: string }> }; response: { status: number } }> } }).log.entries;
    const page = entries.find((e) => e.request.url === run.pageUrl);
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
    expect(detail.pageErrors).toEqual([{ step: 'click', url: run.pageUrl, name: 'RangeError', message: 'late click handler' }]);
    expect(detail.consoleMessages).toEqual(
      expect.arrayContaining([
        // Line 6 of CLICK_PAGE, counted from 1 like script errors' lines.
        { step: 'open', type: 'log', text: 'page ready', url: run.pageUrl, line: 6 },
        { step: 'open', type: 'warning', text: 'deprecated thing', url: run.pageUrl, line: 6 },
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
