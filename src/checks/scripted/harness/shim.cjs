// @ts-check
// PLAYWRIGHT: the module a suite gets for '@playwright/test' (the runner writes it as
// shim/@playwright/test/index.js, first on the suite's NODE_PATH): the real one, with `test` extended.
// Every context a test makes (its `page`'s, and `browser.newContext()`'s) goes through the wrapped
// `browser.newContext`: it records a HAR of its own (`<testId>-<n>.har`, unless the suite asks for its
// own), and its pages report their errors and console messages (appended to OUTPOST_PW_EVENTS, at most
// OUTPOST_PW_EVENTS_MAX of each, the rest counted). One worker runs the tests one after another, so the
// test running is the one an auto fixture last named. Subpaths (`@playwright/test/reporter`) resolve to
// the real package. harness.cjs sets the OUTPOST_PW_* variables.
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const real = require(/** @type {string} */ (process.env.OUTPOST_PW_TEST));
const events = /** @type {string} */ (process.env.OUTPOST_PW_EVENTS);
const max = Number(process.env.OUTPOST_PW_EVENTS_MAX);
const harCloseMs = Number(process.env.OUTPOST_PW_HAR_CLOSE_MS);
const counts = { pageError: 0, console: 0 };
const dropped = { pageErrors: 0, consoleMessages: 0 };
function write(kind, entry) {
  if (counts[kind] >= max) {
    dropped[kind === 'pageError' ? 'pageErrors' : 'consoleMessages']++;
    return;
  }
  counts[kind]++;
  try { fs.appendFileSync(events, `${JSON.stringify(Object.assign({ kind }, entry))}\n`); } catch {}
}
process.on('exit', () => {
  if (dropped.pageErrors || dropped.consoleMessages) {
    try { fs.appendFileSync(events, `${JSON.stringify(Object.assign({ kind: 'dropped' }, dropped))}\n`); } catch {}
  }
});
// Between tests (a beforeAll hook), contexts belong to no test: their HARs are "outside-tests-<n>".
const OUTSIDE = 'outside-tests';
let testId = OUTSIDE;
let testName = null;
let contextsOfTest = 0;
const made = [];
function watchPage(page) {
  const name = testName;
  // biome-ignore lint/complexity/useOptionalChain: a null error's name stays null in the event, not absent.
  page.on('pageerror', (error) => write('pageError', { test: name, url: page.url(), name: error && error.name, message: error && error.message !== undefined ? String(error.message) : String(error) }));
  page.on('console', (message) => write('console', { test: name, url: page.url(), type: message.type(), text: message.text(), location: message.location() }));
}
const test = real.test.extend({
  browser: [async ({ browser }, use) => {
    const newContext = browser.newContext.bind(browser);
    browser.newContext = async (options) => {
      const own = options?.recordHar;
      const har = { path: path.join(/** @type {string} */ (process.env.OUTPOST_PW_HARS), `${testId}-${++contextsOfTest}.har`), content: 'omit' };
      const context = await newContext(own ? options : Object.assign({}, options, { recordHar: har }));
      context.on('page', watchPage);
      made.push(context);
      return context;
    };
    await use(browser);
    // A HAR is written when its context closes. Contexts left open (a failing test never reaches its own
    // close(); a later test may still have been using one) are closed after the last test, for at most harCloseMs.
    await Promise.race([Promise.all(made.map((c) => c.close().catch(() => undefined))), new Promise((resolve) => setTimeout(resolve, harCloseMs))]);
  }, { scope: 'worker', timeout: 0 }],
  // biome-ignore lint/correctness/noEmptyPattern: Playwright reads a fixture's dependencies from this pattern, which must be an object.
  _outpostCurrentTest: [async ({}, use, testInfo) => {
    testId = testInfo.testId;
    testName = testInfo.titlePath.join(' › ');
    contextsOfTest = 0;
    await use();
    testId = OUTSIDE;
    testName = null;
    contextsOfTest = 0;
  }, { auto: true }],
});
module.exports = Object.assign({}, real, { test, default: test });
