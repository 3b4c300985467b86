// Which failure a BROWSER check's automatic screenshots show (Debian's
// chromium; test/support/scripted-run.ts runs the agent in once mode): the one
// the run ends with, not one the script caught; a wrapped error; a thrown
// undefined; an assertion whose screenshot of a hung page ran out of time.

import { describe, expect, it } from 'vitest';
import { useScriptedRun } from '../support/scripted-run.js';

const run = useScriptedRun(() => {
  return [
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
  ];
});
const { final, assets, browserDetail } = run;

describe('BROWSER failure screenshots', () => {
  it("keeps the screenshots of the failure the run ends with, not of one it caught before", () => {
    expect(final('browser-retried')).toMatchObject({ hasFailures: true });
    expect(browserDetail('browser-retried').failingStep).toBe('final');
    expect(assets('browser-retried').map((a) => a.name)).toEqual(['failure-1.png', 'failure-network-1.har']);
    expect(browserDetail('browser-retried').jobLog).toContain(`Failure screenshot failure-1.png: ${run.pageUrl}?attempt=2`);
  });

  it('keeps the failure screenshot of a step whose error the script wrapped, and of a thrown undefined', () => {
    expect(final('browser-wrapped-error')).toMatchObject({ hasErrors: true });
    expect(browserDetail('browser-wrapped-error').requestError).toBe('BROWSER failed at line 9: wrapped: expected "here" to be "gone"');
    expect(assets('browser-wrapped-error').map((a) => a.name)).toEqual(['failure-1.png', 'failure-network-1.har']);
    expect(browserDetail('browser-throws-undefined').failingStep).toBe('u');
    expect(assets('browser-throws-undefined').map((a) => a.name)).toEqual(['failure-1.png', 'failure-network-1.har']);
  });

  it('keeps no failure screenshot of a step failure the script caught and went past', () => {
    expect(final('browser-caught-failure')).toMatchObject({ hasFailures: false, hasErrors: false });
    expect(assets('browser-caught-failure')).toEqual([]);
  });

  it('reports an assertion that failed as such, though its screenshot of a hung page ran into the time limit', () => {
    expect(final('browser-slow-screenshot')).toMatchObject({ hasFailures: true, hasErrors: false });
    expect(browserDetail('browser-slow-screenshot').requestError).toBe('BROWSER failed at step "check", line 7: expected 1 to be 2');
  });
});
