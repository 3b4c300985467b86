// The harness that runs a user's script inside the child Node process
// (src/checks/script.ts writes it next to the script and starts it). It is
// CommonJS text, never evaluated in the agent itself. It reads its input as
// JSON from a file, exposes the documented globals (`request`, `response`,
// `environment`, `step`, `expect`), records the requests made through
// playwright-core's `request.newContext()` contexts, and writes what the
// script left behind (request, environment, steps, requests, error) as JSON
// to an output file. MULTI_STEP and BROWSER scripts also get `artifact(name)`
// (a path in the run's artifacts folder), and a BROWSER script that fails
// leaves a screenshot of every page still open there (failure-<n>.png).

/** At most this many pages are screenshotted at a failure. */
export const FAILURE_SCREENSHOTS_MAX = 3;
/** Each failure screenshot gets at most this long (inside the script's time limit). */
export const FAILURE_SCREENSHOT_TIMEOUT_MS = 5_000;

export const HARNESS_SOURCE = String.raw`'use strict';
const fs = require('node:fs');
const { AsyncLocalStorage } = require('node:async_hooks');
const { performance } = require('node:perf_hooks');
const [inputFile, outputFile, scriptFile] = process.argv.slice(2);
const input = JSON.parse(fs.readFileSync(inputFile, 'utf8'));
fs.unlinkSync(inputFile);

class ExpectationError extends Error {
  constructor(message) { super(message); this.name = 'ExpectationError'; }
}
const show = (v) => { try { const t = JSON.stringify(v); return t === undefined ? String(v) : (t.length > 200 ? t.slice(0, 197) + '...' : t); } catch { return String(v); } };
const same = (a, b) => { try { return JSON.stringify(a) === JSON.stringify(b); } catch { return a === b; } };
function expect(actual, negate) {
  const check = (ok, text) => { if (Boolean(ok) === Boolean(negate)) throw new ExpectationError('expected ' + show(actual) + (negate ? ' not ' : ' ') + text); };
  const api = {
    toBe: (e) => check(Object.is(actual, e), 'to be ' + show(e)),
    toEqual: (e) => check(same(actual, e), 'to equal ' + show(e)),
    toBeTruthy: () => check(actual, 'to be truthy'),
    toBeFalsy: () => check(!actual, 'to be falsy'),
    toBeDefined: () => check(actual !== undefined, 'to be defined'),
    toBeNull: () => check(actual === null, 'to be null'),
    toContain: (e) => check(actual != null && actual.includes(e), 'to contain ' + show(e)),
    toMatch: (re) => check(new RegExp(re).test(String(actual)), 'to match ' + String(re)),
    toBeGreaterThan: (e) => check(actual > e, 'to be greater than ' + show(e)),
    toBeLessThan: (e) => check(actual < e, 'to be less than ' + show(e)),
    toHaveProperty: (k) => check(actual != null && Object.prototype.hasOwnProperty.call(actual, k), 'to have property ' + show(k)),
    toBeOK: () => {
      const status = actual && typeof actual.status === 'function' ? actual.status() : actual && actual.status;
      if (Boolean(status >= 200 && status < 300) === Boolean(negate)) throw new ExpectationError('expected response status ' + status + (negate ? ' not' : '') + ' to be 2xx');
    },
  };
  if (!negate) Object.defineProperty(api, 'not', { get: () => expect(actual, true) });
  return api;
}

// Artifacts (MULTI_STEP, BROWSER): files a script saves with artifact(name) land in the run's artifacts
// folder, which the agent hands to the job's artifacts once the script is gone.
const SAFE_ARTIFACT = /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/;
function artifact(name) {
  if (!input.artifactsDir) throw new Error('artifact() is only available in MULTI_STEP and BROWSER scripts');
  const n = String(name);
  if (!SAFE_ARTIFACT.test(n) || n === '.' || n === '..') throw new Error('artifact name ' + JSON.stringify(n) + ' is not a plain file name (letters, digits, . _ -, at most 100)');
  return require('node:path').join(input.artifactsDir, n);
}
// Browsers launched through chromium.launch(): at a failure, every page still open is screenshotted (once).
const browsers = [];
const failureShots = [];
let failureShotsTaken = false;
async function screenshotFailure() {
  if (failureShotsTaken || !input.artifactsDir) return;
  failureShotsTaken = true;
  let n = 0;
  for (const browser of browsers) {
    if (typeof browser.isConnected === 'function' && !browser.isConnected()) continue;
    for (const context of browser.contexts()) {
      for (const page of context.pages()) {
        if (n >= ${FAILURE_SCREENSHOTS_MAX} || page.isClosed()) continue;
        const name = 'failure-' + ++n + '.png';
        try {
          await page.screenshot({ path: artifact(name), timeout: ${FAILURE_SCREENSHOT_TIMEOUT_MS} });
          failureShots.push({ name, url: page.url() });
        } catch (error) {
          failureShots.push({ name, url: page.url(), error: error && error.message ? String(error.message).split('\n')[0] : String(error) });
        }
      }
    }
  }
}

const steps = [];
const requests = [];
let current = null;
async function step(name, fn) {
  const s = { name: String(name), passed: true, error: null, durationMs: 0 };
  steps.push(s);
  const previous = current;
  current = s;
  const started = performance.now();
  try {
    return await fn();
  } catch (error) {
    s.passed = false;
    s.error = error && error.message ? String(error.message).split('\n')[0] : String(error);
    if (error && typeof error === 'object' && !error.outpostStep) {
      error.outpostStep = s.name;
      // The page as the failing step left it (before a finally block closes the browser).
      await screenshotFailure();
    }
    throw error;
  } finally {
    s.durationMs = Math.round(performance.now() - started);
    current = previous;
  }
}

// Requests made through playwright-core's API contexts are recorded (outermost call only).
const inner = new AsyncLocalStorage();
function instrument(context) {
  for (const m of ['fetch', 'get', 'post', 'put', 'patch', 'delete', 'head']) {
    const original = context[m];
    if (typeof original !== 'function') continue;
    context[m] = function (target, options) {
      if (inner.getStore()) return original.call(context, target, options);
      return inner.run(true, async () => {
        const opts = options || {};
        const record = {
          step: current ? current.name : null,
          method: (m === 'fetch' ? opts.method || 'GET' : m).toUpperCase(),
          url: typeof target === 'string' ? target : target && typeof target.url === 'function' ? target.url() : String(target),
          headers: opts.headers || {},
          status: null, statusText: null, durationMs: 0, passed: false, error: null,
        };
        const started = performance.now();
        try {
          const res = await original.call(context, target, options);
          record.status = res.status();
          record.statusText = res.statusText();
          record.url = res.url();
          record.passed = res.ok();
          return res;
        } catch (error) {
          record.error = error && error.message ? String(error.message).split('\n')[0] : String(error);
          throw error;
        } finally {
          record.durationMs = Math.round(performance.now() - started);
          requests.push(record);
        }
      });
    };
  }
  return context;
}
if (input.kind === 'MULTI_STEP' || input.kind === 'BROWSER') {
  try {
    const pw = require('playwright-core');
    const newContext = pw.request.newContext.bind(pw.request);
    pw.request.newContext = async (...args) => instrument(await newContext(...args));
    if (input.kind === 'BROWSER') {
      // The agent's Chromium, headless, without a sandbox (an unprivileged container has none to give).
      const launch = pw.chromium.launch.bind(pw.chromium);
      const flags = ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'];
      pw.chromium.launch = (options) => {
        const opts = Object.assign({ headless: true }, options || {});
        if (!opts.executablePath && process.env.OUTPOST_BROWSER_PATH) opts.executablePath = process.env.OUTPOST_BROWSER_PATH;
        opts.args = flags.concat(opts.args || []);
        return launch(opts).then((browser) => {
          browsers.push(browser);
          return browser;
        });
      };
    }
  } catch {
    // Without playwright-core the script fails where it requires it, with a clear error.
  }
}

globalThis.request = input.request;
globalThis.response = input.response;
globalThis.environment = input.environment;
globalThis.step = step;
globalThis.expect = expect;
if (input.artifactsDir) globalThis.artifact = artifact;

function lineOf(error) {
  const stack = error && typeof error.stack === 'string' ? error.stack : '';
  const at = stack.indexOf(scriptFile + ':');
  if (at < 0) return null;
  const m = /^:(\d+)/.exec(stack.slice(at + scriptFile.length));
  return m ? Number(m[1]) : null;
}

(async () => {
  let out = { ok: true };
  try {
    const run = require(scriptFile);
    await run();
  } catch (error) {
    const isError = error instanceof Error || (error && typeof error === 'object' && 'message' in error);
    out = {
      ok: false,
      error: isError ? String(error.message).split('\n')[0] : 'thrown: ' + show(error),
      errorName: isError && error.name ? String(error.name) : null,
      assertion: Boolean(isError && (error.name === 'ExpectationError' || error.code === 'ERR_ASSERTION')),
      moduleNotFound: Boolean(isError && error.code === 'MODULE_NOT_FOUND'),
      line: lineOf(error),
      step: (error && error.outpostStep) || null,
    };
    await screenshotFailure();
  }
  out.request = globalThis.request;
  out.environment = globalThis.environment;
  out.steps = steps;
  out.requests = requests;
  out.failureShots = failureShots;
  fs.writeFileSync(outputFile, JSON.stringify(out));
  process.exit(0);
})();
`;

/** The user's code as a CommonJS module exporting one async function; line numbers are kept (the wrapper opens on line 1). */
export function wrapUserScript(code: string): string {
  return `module.exports = async function outpostScript() {${code}\n};\n`;
}
