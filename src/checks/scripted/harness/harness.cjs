// @ts-check
// The harness that runs a user's script inside the child Node process (src/checks/scripted/runner.ts
// copies this folder's files into the run's folder and starts this one). It is never loaded in the
// agent itself. It reads its input as JSON from a file (HarnessInput below: the run, and the limits the
// agent sets in src/checks/scripted/harness.ts), exposes the documented globals (`request`, `response`,
// `environment`, `step`, `expect`), records the requests made through playwright-core's
// `request.newContext()` contexts, and writes what the script left behind (request, environment,
// steps, requests, error) as JSON to an output file. MULTI_STEP and BROWSER scripts also get
// `artifact(name)` (a path in the run's artifacts folder), and a BROWSER script that fails leaves a
// screenshot of every page still open there (failure-<n>.png) and the network log of each browser
// context (failure-network-<n>.har). A BROWSER script's pages' uncaught errors and console messages are
// recorded too. A watchdog thread (watchdog.cjs) ends the run's process group if the agent dies first.
'use strict';
const fs = require('node:fs');
const { AsyncLocalStorage } = require('node:async_hooks');
const { performance } = require('node:perf_hooks');
const path = require('node:path');
const { ANSI_SGR, PID_NAME, SAFE_ARTIFACT, descendants } = require('./shared.cjs');
const { expect, show } = require('./expect.cjs');

/**
 * What the agent writes to the input file (src/checks/scripted/runner.ts).
 * @typedef {object} HarnessInput
 * @property {'MULTI_STEP' | 'BROWSER' | 'PLAYWRIGHT' | 'setupScript' | 'tearDownScript'} kind
 * @property {unknown} request
 * @property {unknown} response
 * @property {Record<string, string>} environment
 * @property {string | null} artifactsDir MULTI_STEP, BROWSER and PLAYWRIGHT with an artifact writer.
 * @property {number | null} softDeadlineMs The time limit the harness stops itself at, or null.
 * @property {number} spawnedAt When the agent started the run (ms since the epoch).
 * @property {number} evidenceMs How long past the limit it may keep its evidence.
 * @property {{ cli: string, specs: string[], shimDir: string, timeoutMs: number, memoryMb: number } | null} suite PLAYWRIGHT.
 * @property {HarnessLimits} limits
 */
/**
 * The limits the agent sets (HARNESS_LIMITS in src/checks/scripted/harness.ts).
 * @typedef {object} HarnessLimits
 * @property {number} failureScreenshotsMax
 * @property {number} failureScreenshotTimeoutMs
 * @property {number} failureScreenshotsBudgetMs
 * @property {number} pageEventsMax
 * @property {number} pageEventTextMax
 * @property {number} harCloseTimeoutMs
 * @property {number} orphanPollMs
 */
/** @typedef {{ name: string, passed: boolean, error: string | null, durationMs: number, parent?: Step | null }} Step */
/** @typedef {{ error: unknown, step: Step }} Failure */
/** @typedef {{ file: string | null, url: string, error?: string }} Shot */
/** @typedef {{ owner: Failure | typeof END_OF_RUN, shots: Shot[] }} ShotSet */
/** @typedef {Error & { outpostTimeout?: boolean, outpostStep?: string | null }} TimeLimitError */
/** What the harness writes to the output file (HarnessOutput in src/checks/scripted/runner.ts). @typedef {Record<string, unknown> & { ok: boolean }} HarnessOutput */

const [inputFile, outputFile, scriptFile] = /** @type {[string, string, string]} */ (process.argv.slice(2));
/** @type {HarnessInput} */
const input = JSON.parse(fs.readFileSync(inputFile, 'utf8'));
fs.unlinkSync(inputFile);
const limits = input.limits;

// If the agent dies first, the watchdog removes the run's folder and ends its process group (watchdog.cjs).
{
  const { Worker } = require('node:worker_threads');
  const watchdog = new Worker(path.join(__dirname, 'watchdog.cjs'), {
    workerData: { parent: process.ppid, group: process.pid, dir: path.dirname(scriptFile), pollMs: limits.orphanPollMs },
  });
  watchdog.unref();
}

// Every process this run started, found by parent links while this process is alive (shared.cjs).
function killDescendants() {
  let pids;
  try { pids = fs.readdirSync('/proc').filter((name) => PID_NAME.test(name)); } catch { return; }
  /** @type {Array<[string, string]>} */
  const stats = [];
  for (const pid of pids) {
    try { stats.push([pid, fs.readFileSync(`/proc/${pid}/stat`, 'utf8')]); } catch {}
  }
  for (const pid of descendants(stats, String(process.pid))) { try { process.kill(Number(pid), 'SIGKILL'); } catch {} }
}

// Artifacts (MULTI_STEP, BROWSER): files a script saves with artifact(name) land in the run's artifacts
// folder, which the agent hands to the job's artifacts once the script is gone.
function artifact(name) {
  if (!input.artifactsDir) throw new Error('artifact() is only available in MULTI_STEP and BROWSER scripts');
  const n = String(name);
  if (!SAFE_ARTIFACT.test(n) || n === '.' || n === '..') throw new Error(`artifact name ${JSON.stringify(n)} is not a plain file name (letters, digits, . _ -, at most 100)`);
  return require('node:path').join(input.artifactsDir, n);
}
// Contexts of browsers launched through chromium. At every new failure (a step's, as it ends and before
// a finally block can close the browser; or the run's own at its end or time limit) the pages still open
// are screenshotted into a set of that failure's, outside the artifacts. A failing run keeps the set of
// the failure it ends with (failure-<n>.png), or, when that one found no page open, the latest set that
// has a picture; a passing run keeps none. Screenshots share a time budget, so that a retry loop on a
// hung page cannot spend the run on them.
/** @type {any[]} */
const contexts = [];
/** @type {Array<{ name: string, url: string, error?: string }>} */
const failureShots = [];
/** @type {ShotSet[]} */
const shotSets = [];
let shotBudgetMs = limits.failureScreenshotsBudgetMs;
const END_OF_RUN = { end: true };
/** @param {ShotSet['owner']} owner */
async function takeShots(owner) {
  if (!input.artifactsDir) return;
  /** @type {ShotSet} */
  const set = { owner, shots: [] };
  const folder = path.join(path.dirname(input.artifactsDir), 'shots', String(shotSets.length + 1));
  for (const context of contexts) {
    for (const page of context.pages()) {
      if (set.shots.length >= limits.failureScreenshotsMax || page.isClosed() || shotBudgetMs <= 0) continue;
      fs.mkdirSync(folder, { recursive: true, mode: 0o700 });
      const file = path.join(folder, `${set.shots.length + 1}.png`);
      const started = performance.now();
      try {
        await page.screenshot({ path: file, timeout: Math.max(1, Math.min(limits.failureScreenshotTimeoutMs, shotBudgetMs)) });
        set.shots.push({ file, url: page.url() });
      } catch (/** @type {any} */ error) {
        set.shots.push({ file: null, url: page.url(), error: error?.message ? errorText(error.message) : String(error) });
      }
      shotBudgetMs -= performance.now() - started;
    }
  }
  if (set.shots.length > 0) shotSets.push(set);
}
const hasPicture = (set) => set.shots.some((shot) => shot.file);
function keepShots(owner) {
  // Else the latest set with a picture; else the owner's, to say why its screenshots failed.
  const set = shotSets.find((s) => s.owner === owner && hasPicture(s)) || [...shotSets].reverse().find(hasPicture) || shotSets.find((s) => s.owner === owner);
  if (!set) return;
  set.shots.forEach((shot, i) => {
    const name = `failure-${i + 1}.png`;
    if (!shot.file) {
      failureShots.push({ name, url: shot.url, error: shot.error });
      return;
    }
    try {
      fs.copyFileSync(shot.file, artifact(name));
      failureShots.push({ name, url: shot.url });
    } catch (/** @type {any} */ error) {
      failureShots.push({ name, url: shot.url, error: errorText(error?.message ? error.message : error) });
    }
  });
}

// What the pages of launched browsers report: uncaught errors and console messages (bounded).
const pageErrors = [];
const consoleMessages = [];
const pageEventsDropped = { pageErrors: 0, consoleMessages: 0 };
const cut = (text) => { const t = String(text); return t.length > limits.pageEventTextMax ? `${t.slice(0, limits.pageEventTextMax - 3)}...` : t; };
function keep(list, key, entry) {
  if (list.length >= limits.pageEventsMax) pageEventsDropped[key]++;
  else list.push(entry);
}
const watchedPages = new WeakSet();
function keepPageError(step, url, error) {
  keep(pageErrors, 'pageErrors', {
    step,
    url,
    name: error?.name ? String(error.name) : 'Error',
    message: cut(error && error.message !== undefined ? error.message : error),
  });
}
function keepConsoleMessage(step, pageUrl, type, text, location) {
  const at = location || {};
  keep(consoleMessages, 'consoleMessages', {
    step,
    type: String(type),
    text: cut(text),
    url: at.url || pageUrl,
    // 1-based like script errors' lines; the browser's 0:0 means no position (a failed resource load).
    line: typeof at.lineNumber === 'number' && (at.lineNumber > 0 || at.columnNumber > 0) ? at.lineNumber + 1 : null,
  });
}
function watchPage(page) {
  if (watchedPages.has(page)) return;
  watchedPages.add(page);
  page.on('pageerror', (error) => keepPageError(stepName(), page.url(), error));
  page.on('console', (message) => keepConsoleMessage(stepName(), page.url(), message.type(), message.text(), message.location()));
}
// Every context of a launched browser: its pages watched, and (unless the script asks for its own) its
// network recorded into a HAR outside the artifacts folder, handed over only if the script fails.
const harDir = input.artifactsDir ? path.join(path.dirname(input.artifactsDir), 'har') : null;
const hars = [];
// Under a network policy every context's HTTP(S) goes through the agent's filtering proxy
// (src/net/filtering-proxy.ts); a proxy the script names itself is replaced, never added to.
const policyProxy = process.env.OUTPOST_POLICY_PROXY ? { server: process.env.OUTPOST_POLICY_PROXY } : null;
// Node.js itself sends http, https and fetch through HTTP(S)_PROXY with NODE_USE_ENV_PROXY=1 (24.5 and later);
// axios, which reads the same variables and proxies by itself, would then go through the proxy twice and fail.
if (policyProxy) {
  const [major = 0, minor = 0] = process.versions.node.split('.').map(Number);
  if (major > 24 || (major === 24 && minor >= 5)) {
    try {
      // @ts-expect-error: the runtime's package (on the run's NODE_PATH), not the agent's: no types here.
      require('axios').defaults.proxy = false;
    } catch {
      // No axios in this runtime.
    }
  }
}
function proxyOption(options) {
  return policyProxy ? Object.assign({}, options || {}, { proxy: policyProxy }) : options;
}
function harOption(options) {
  const opts = Object.assign({}, proxyOption(options) || {});
  if (harDir && !opts.recordHar) {
    fs.mkdirSync(harDir, { recursive: true, mode: 0o700 });
    const name = `network-${hars.length + 1}.har`;
    hars.push(name);
    opts.recordHar = { path: path.join(harDir, name), content: 'omit' };
  }
  return opts;
}
function watchContext(context) {
  contexts.push(context);
  for (const page of context.pages()) watchPage(page);
  context.on('page', watchPage);
  return context;
}
function watchBrowser(browser) {
  const newContext = browser.newContext.bind(browser);
  // browser.newPage() makes its context through this too.
  browser.newContext = async (options) => watchContext(await newContext(harOption(options)));
  // A HAR is written when its context closes, not when the browser does.
  const close = browser.close.bind(browser);
  browser.close = async (options) => {
    await closeContexts(browser.contexts());
    return close(options);
  };
  return browser;
}
function closeContexts(list) {
  return Promise.race([
    Promise.all(list.map((c) => c.close().catch(() => undefined))),
    new Promise((resolve) => setTimeout(resolve, limits.harCloseTimeoutMs).unref()),
  ]);
}
// At a failure: the open contexts are closed so that their HARs are written, then moved to the artifacts.
async function keepHars() {
  if (!harDir) return;
  await closeContexts(contexts);
  for (const name of hars) {
    // Without replacing a file the script saved under that name.
    try { fs.linkSync(path.join(harDir, name), path.join(/** @type {string} */ (input.artifactsDir), `failure-${name}`)); } catch {}
  }
}

// The agent's Chromium runs headless, without a sandbox (an unprivileged container has none to give).
const CHROMIUM_FLAGS = ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'];

const steps = [];
const requests = [];
// The step a piece of code runs in follows its async context, so that steps run in parallel
// (Promise.all) each keep their own; page events, which come from playwright's connection, are put
// in the step started last of those still running.
const stepContext = new AsyncLocalStorage();
const stepStarts = new Map();
const isWithin = (inner, outer) => {
  for (let s = inner; s; s = s.parent) if (s === outer) return true;
  return false;
};
const currentStep = () => {
  const own = stepContext.getStore();
  if (own && stepStarts.has(own)) return own;
  let last = null;
  for (const s of stepStarts.keys()) last = s;
  return last;
};
const stepName = () => { const s = currentStep(); return s ? s.name : null; };
// Every failure, with the step it began in. An outer step rethrowing what a step inside it threw is the
// same failure; the same value thrown again elsewhere (a string) is a new one.
const failures = [];
const failureOf = (error) => failures.findLast((f) => Object.is(f.error, error));
// The failure whose screenshots are being taken (the time limit may overtake them), and that work.
/** @type {Failure | null} */
let shootingFor = null;
/** @type {Promise<void> | null} */
let shooting = null;
/**
 * @template T
 * @param {unknown} name
 * @param {() => T | Promise<T>} fn
 * @returns {Promise<T>}
 */
async function step(name, fn) {
  /** @type {Step} */
  const s = { name: String(name), passed: true, error: null, durationMs: 0 };
  // Not part of the output: the enclosing step, for nesting.
  Object.defineProperty(s, 'parent', { value: stepContext.getStore() || null, enumerable: false });
  steps.push(s);
  const started = performance.now();
  stepStarts.set(s, started);
  try {
    return await stepContext.run(s, fn);
  } catch (/** @type {any} */ error) {
    // A step the time limit already ended stays as the deadline marked it.
    if (!stepStarts.has(s)) throw error;
    stepStarts.delete(s);
    s.passed = false;
    s.error = error?.message ? errorText(error.message) : String(error);
    s.durationMs = Math.round(performance.now() - started);
    const prior = failureOf(error);
    if (!(prior && isWithin(prior.step, s))) {
      const failure = { error, step: s };
      failures.push(failure);
      // The pages as the failing step left them (before a finally block closes the browser).
      shootingFor = failure;
      shooting = takeShots(failure);
      await shooting;
      shootingFor = null;
      shooting = null;
    }
    throw error;
  } finally {
    if (stepStarts.delete(s)) s.durationMs = Math.round(performance.now() - started);
  }
}

// Requests made through playwright-core's API contexts are recorded (outermost call only).
const inner = new AsyncLocalStorage();
function instrument(context) {
  for (const m of ['fetch', 'get', 'post', 'put', 'patch', 'delete', 'head']) {
    const original = context[m];
    if (typeof original !== 'function') continue;
    context[m] = (target, options) => {
      if (inner.getStore()) return original.call(context, target, options);
      return inner.run(true, async () => {
        const opts = options || {};
        /** @type {{ step: string | null, method: string, url: string, headers: Record<string, string>, status: number | null, statusText: string | null, durationMs: number, passed: boolean, error: string | null }} */
        const record = {
          step: stepName(),
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
        } catch (/** @type {any} */ error) {
          record.error = error?.message ? errorText(error.message) : String(error);
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
    // @ts-expect-error: the runtime's package (on the run's NODE_PATH), not the agent's: no types here.
    const pw = require('playwright-core');
    const newContext = pw.request.newContext.bind(pw.request);
    pw.request.newContext = async (options) => instrument(await newContext(proxyOption(options)));
    if (input.kind === 'BROWSER') {
      const withDefaults = (options) => {
        const opts = Object.assign({ headless: true }, options || {});
        if (!opts.executablePath && process.env.OUTPOST_BROWSER_PATH) opts.executablePath = process.env.OUTPOST_BROWSER_PATH;
        opts.args = CHROMIUM_FLAGS.concat(opts.args || []);
        // Playwright adds <-loopback> to the bypass list itself: loopback goes through the proxy too.
        if (policyProxy) opts.proxy = policyProxy;
        return opts;
      };
      const launch = pw.chromium.launch.bind(pw.chromium);
      pw.chromium.launch = (options) => launch(withDefaults(options)).then(watchBrowser);
      const launchPersistent = pw.chromium.launchPersistentContext.bind(pw.chromium);
      pw.chromium.launchPersistentContext = (userDataDir, options) => launchPersistent(userDataDir, harOption(withDefaults(options))).then(watchContext);
    }
  } catch {
    // Without playwright-core the script fails where it requires it, with a clear error.
  }
}

// The script's globals; it may replace request and environment, which the output carries back.
const scriptGlobals = /** @type {Record<string, any>} */ (globalThis);
scriptGlobals.request = input.request;
scriptGlobals.response = input.response;
scriptGlobals.environment = input.environment;
scriptGlobals.step = step;
scriptGlobals.expect = expect;
if (input.artifactsDir) scriptGlobals.artifact = artifact;

// A message over several lines (node:assert's "Expected values to be strictly equal: · 1 !== 2", playwright's
// with its call log, require's with its stack) is kept up to that log, its lines joined, at most 500 characters.
function errorText(message) {
  const lines = String(message).replace(ANSI_SGR, '').split('\n');
  const end = lines.findIndex((l) => /^\s*(Call log|Require stack):/.test(l));
  const text = (end < 0 ? lines : lines.slice(0, end)).map((l) => l.trim().replace(/\s+/g, ' ')).filter(Boolean).join(' · ');
  return text.length > 500 ? `${text.slice(0, 497)}...` : text;
}

function lineOf(error) {
  const stack = error && typeof error.stack === 'string' ? error.stack : '';
  const at = stack.indexOf(`${scriptFile}:`);
  if (at < 0) return null;
  const m = /^:(\d+)/.exec(stack.slice(at + scriptFile.length));
  return m ? Number(m[1]) : null;
}

// BROWSER and MULTI_STEP runs stop themselves at their time limit, keeping what shows why (steps so far,
// screenshots of the pages as they hung, HARs) within input.evidenceMs; the agent kills the run only after that.
// The limit counts from the agent's spawn (input.spawnedAt), as the agent's own kill timer does.
/** @type {NodeJS.Timeout | undefined} */
let deadlineTimer;
const deadline = input.softDeadlineMs
  ? new Promise((_, reject) => {
      deadlineTimer = setTimeout(() => {
        /** @type {TimeLimitError} */
        const error = new Error(`ran past its time limit of ${input.softDeadlineMs} ms`);
        error.outpostTimeout = true;
        // The step started last of those still running (the innermost) is the one the limit ended.
        const running = [...stepStarts.keys()];
        error.outpostStep = running.length > 0 ? running[running.length - 1].name : null;
        const now = performance.now();
        for (const s of running) {
          s.passed = false;
          s.error = 'the time limit was reached during this step';
          s.durationMs = Math.round(now - stepStarts.get(s));
          stepStarts.delete(s);
        }
        reject(error);
      }, Math.max(0, (input.spawnedAt || Date.now()) + /** @type {number} */ (input.softDeadlineMs) - Date.now()));
    })
  : null;

// A promise the script left floating that rejects, or an exception thrown in a callback, fails the
// run like an exception of the script itself (Node would otherwise end the process without a result).
let uncaught;
const failedOutside = new Promise((_, reject) => {
  uncaught = (error) => {
    // The steps running then fail with it; the first of them is the run's failing step.
    const running = [...stepStarts.keys()];
    const now = performance.now();
    for (const s of running) {
      s.passed = false;
      s.error = error?.message ? errorText(error.message) : String(error);
      s.durationMs = Math.round(now - stepStarts.get(s));
      stepStarts.delete(s);
    }
    if (running.length > 0) failures.push({ error, step: running[running.length - 1] });
    reject(error);
  };
});
failedOutside.catch(() => undefined);
process.on('unhandledRejection', (reason) => uncaught(reason));
process.on('uncaughtException', (error) => uncaught(error));

// Also when the script calls process.exit() itself.
process.on('exit', killDescendants);

// Writes the output and exits (ending whatever the run started).
function finish(out) {
  fs.writeFileSync(outputFile, JSON.stringify(out));
  process.exit(0);
}

// An API script awaiting a promise that never settles leaves nothing to run: Node would exit without a word.
process.once('beforeExit', () => {
  finish({
    ok: false,
    error: 'the script ended while still awaiting a promise that never settles',
    request: scriptGlobals.request, environment: scriptGlobals.environment, steps, requests,
  });
});

// PLAYWRIGHT: the suite the agent wrote into suite/ runs under @playwright/test's own runner (a child in
// this process group), with a configuration of ours: one worker, no retries, the check's time limit as
// the global timeout, the agent's Chromium, a screenshot of each failing test; its JSON report becomes
// the output (one step per test).
// Messages name the suite's files relative to the suite, not by the run's temporary path.
const plain = (text) => String(text).replace(ANSI_SGR, '').split(suiteDir + path.sep).join('');
function summary(message) {
  // "expect(locator).toHaveText(expected) failed · Expected: "Done" · Received: "Clicked"", without the call log.
  return errorText(plain(message)).replace(/^Error: /, '');
}
function collectTests(suite, titles, stoppedAtLimit, into) {
  for (const spec of suite.specs || []) {
    for (const test of spec.tests || []) {
      const result = (test.results || [])[(test.results || []).length - 1] || {};
      const error = result.error || (result.errors || [])[0];
      const at = error?.location || { file: spec.file, line: spec.line };
      const file = String(at.file || spec.file || '');
      // At the global timeout the runner reports the test it interrupted, and those it never started, as
      // skipped: they did not pass. (A test the suite itself skips carries a skip annotation.)
      const skippedOnPurpose = (test.annotations || []).concat(result.annotations || []).some((a) => a.type === 'skip' || a.type === 'fixme');
      const interrupted = result.status === 'interrupted' || (stoppedAtLimit && test.status === 'skipped' && !skippedOnPurpose);
      into.push({
        id: spec.id,
        name: titles.concat(spec.title).filter(Boolean).join(' › '),
        passed: !interrupted && (test.status === 'expected' || test.status === 'flaky' || test.status === 'skipped'),
        status: interrupted ? 'interrupted' : result.status || test.status,
        error: error ? summary(error.message || error.value || '') : interrupted ? 'the time limit was reached before this test finished' : null,
        durationMs: Math.round(result.duration || 0),
        location: `${path.isAbsolute(file) ? path.relative(suiteDir, file) : file}:${at.line || spec.line}`,
        screenshots: (result.attachments || []).filter((a) => a.name === 'screenshot' && a.path).map((a) => a.path),
      });
    }
  }
  for (const child of suite.suites || []) collectTests(child, titles.concat(child.title), stoppedAtLimit, into);
}
const suiteDir = path.join(path.dirname(scriptFile), 'suite');
// What the shim in the runner's worker wrote: the pages' errors and console messages, by test.
function readSuiteEvents(file) {
  let text = '';
  try { text = fs.readFileSync(file, 'utf8'); } catch { return; }
  for (const line of text.split('\n')) {
    let e;
    try { e = JSON.parse(line); } catch { continue; }
    if (e.kind === 'pageError') keepPageError(e.test, e.url, { name: e.name, message: e.message });
    else if (e.kind === 'console') keepConsoleMessage(e.test, e.url, e.type, e.text, e.location);
    else if (e.kind === 'dropped') {
      pageEventsDropped.pageErrors += e.pageErrors || 0;
      pageEventsDropped.consoleMessages += e.consoleMessages || 0;
    }
  }
}
/** @returns {Promise<HarnessOutput>} */
async function runSuite() {
  const given = /** @type {NonNullable<HarnessInput["suite"]>} */ (input.suite);
  const base = path.dirname(scriptFile);
  const report = path.join(base, 'report.json');
  const config = path.join(base, 'playwright.config.cjs');
  const launchOptions = { args: CHROMIUM_FLAGS };
  if (process.env.OUTPOST_BROWSER_PATH) launchOptions.executablePath = process.env.OUTPOST_BROWSER_PATH;
  fs.writeFileSync(config, `module.exports = ${JSON.stringify({
    testDir: suiteDir,
    testMatch: given.specs,
    workers: 1,
    retries: 0,
    timeout: given.timeoutMs,
    globalTimeout: given.timeoutMs,
    reporter: [['list'], ['json', { outputFile: report }]],
    outputDir: path.join(base, 'test-results'),
    use: { headless: true, screenshot: 'only-on-failure', trace: 'off', video: 'off', launchOptions, ...(policyProxy ? { proxy: policyProxy } : {}) },
  })};\n`);
  const { spawn } = require('node:child_process');
  // The runner and its worker get the script's heap limit too; their output (the list reporter's) is the jobLog.
  // The suite's '@playwright/test' is the shim first on NODE_PATH (shim.cjs).
  const events = path.join(base, 'page-events.jsonl');
  const hars = path.join(base, 'suite-hars');
  fs.mkdirSync(hars, { mode: 0o700 });
  const env = Object.assign({}, process.env, {
    FORCE_COLOR: '0',
    NODE_OPTIONS: `--max-old-space-size=${given.memoryMb}`,
    NODE_PATH: given.shimDir + path.delimiter + process.env.NODE_PATH,
    OUTPOST_PW_TEST: path.join(path.dirname(given.cli), 'index.js'),
    OUTPOST_PW_EVENTS: events,
    OUTPOST_PW_HARS: hars,
    OUTPOST_PW_EVENTS_MAX: String(limits.pageEventsMax),
    OUTPOST_PW_HAR_CLOSE_MS: String(limits.harCloseTimeoutMs),
  });
  const runner = spawn(process.execPath, [given.cli, 'test', '--config', config], { cwd: suiteDir, env, stdio: ['ignore', 'inherit', 'inherit'] });
  const exit = await new Promise((resolve) => {
    runner.on('error', (error) => resolve({ error }));
    runner.on('exit', (code, signal) => resolve({ code, signal }));
  });
  let parsed = null;
  try { parsed = JSON.parse(fs.readFileSync(report, 'utf8')); } catch {}
  if (!parsed) {
    const how = exit.error ? exit.error.message : exit.signal ? `signal ${exit.signal}` : `exit code ${exit.code}`;
    return { ok: false, error: `the Playwright runner ended without a report (${how})` };
  }
  // A load error's first line says it ("SyntaxError: check.spec.ts: Unexpected token (2:24)"); its code frame is in the jobLog.
  const globalErrors = (parsed.errors || []).map((e) => plain(e.message || e.value || '').split('\n')[0]);
  const timedOut = globalErrors.find((e) => /^Timed out waiting .* for the (test suite|entire test run) to run/.test(e));
  const tests = [];
  for (const suite of parsed.suites || []) collectTests(suite, [suite.title], Boolean(timedOut), tests);
  let shot = 0;
  for (const test of tests) {
    for (const file of test.screenshots) {
      if (shot >= limits.failureScreenshotsMax) break;
      const name = `failure-${++shot}.png`;
      try { fs.copyFileSync(file, artifact(name)); failureShots.push({ name, url: test.name }); } catch {}
    }
    delete test.screenshots;
  }
  steps.push(...tests);
  readSuiteEvents(events);
  // Each failing test's network, one HAR per context, as a failing BROWSER run's: failure-network-<n>.har.
  let harFiles = [];
  try { harFiles = fs.readdirSync(hars); } catch {}
  let har = 0;
  for (const test of tests) {
    if (test.passed || !test.id) continue;
    const own = harFiles
      .filter((f) => f.startsWith(`${test.id}-`) && f.endsWith('.har'))
      .sort((a, b) => Number(a.slice(test.id.length + 1, -4)) - Number(b.slice(test.id.length + 1, -4)));
    for (const file of own) {
      if (har >= limits.failureScreenshotsMax) break;
      try { fs.copyFileSync(path.join(hars, file), artifact(`failure-network-${har + 1}.har`)); har++; } catch {}
    }
  }
  for (const test of tests) delete test.id;
  const stats = parsed.stats || {};
  const counts = { expected: stats.expected || 0, unexpected: stats.unexpected || 0, flaky: stats.flaky || 0, skipped: stats.skipped || 0 };
  const failed = tests.find((t) => !t.passed);
  if (timedOut) return { ok: false, timedOut: true, error: timedOut, step: failed ? failed.name : null, tests: counts };
  if (globalErrors.length > 0) return { ok: false, error: globalErrors[0], moduleNotFound: /Cannot find module/.test(globalErrors[0]), tests: counts };
  if (failed) return { ok: false, assertion: true, error: failed.error || failed.status, step: failed.name, line: null, location: failed.location, tests: counts };
  if (tests.length === 0) return { ok: false, error: 'the suite has no tests', tests: counts };
  return { ok: true, tests: counts };
}

(async () => {
  if (input.kind === 'PLAYWRIGHT') {
    /** @type {HarnessOutput} */
    const out = await runSuite().catch((error) => ({ ok: false, error: errorText(error?.message ? error.message : error) }));
    out.environment = scriptGlobals.environment;
    out.steps = steps;
    out.requests = [];
    out.failureShots = failureShots;
    out.pageErrors = pageErrors;
    out.consoleMessages = consoleMessages;
    out.pageEventsDropped = pageEventsDropped;
    finish(out);
    return;
  }
  /** @type {HarnessOutput} */
  let out = { ok: true };
  try {
    const run = require(scriptFile);
    await Promise.race(deadline ? [run(), failedOutside, deadline] : [run(), failedOutside]);
  } catch (/** @type {any} */ thrown) {
    // A step's failure that the time limit overtook while its screenshots were being taken is still that failure.
    const overtaken = thrown?.outpostTimeout && shootingFor;
    const error = overtaken ? overtaken.error : thrown;
    const isError = error instanceof Error || (error && typeof error === 'object' && 'message' in error);
    const failure = failureOf(error);
    const failed = failure ? failure.step : null;
    out = {
      ok: false,
      error: isError ? errorText(error.message) : `thrown: ${show(error)}`,
      errorName: isError && error.name ? String(error.name) : null,
      assertion: Boolean(isError && (error.name === 'ExpectationError' || error.code === 'ERR_ASSERTION')),
      moduleNotFound: Boolean(isError && error.code === 'MODULE_NOT_FOUND'),
      timedOut: Boolean(isError && error.outpostTimeout),
      line: isError && error.outpostTimeout ? null : lineOf(error),
      step: failed ? failed.name : (isError && error.outpostStep) || null,
    };
    const evidence = (async () => {
      if (overtaken) await shooting;
      // The pages as the run ends, unless the failing step tried already (a page that would not paint
      // then will not now).
      const tried = failure && shotSets.some((set) => set.owner === failure);
      if (!tried) await takeShots(END_OF_RUN);
      keepShots(tried ? failure : END_OF_RUN);
      await keepHars();
    })();
    // Past the time limit, evidence gets what is left of the grace before the agent's kill, whatever the failure.
    const left = input.softDeadlineMs ? (input.spawnedAt || Date.now()) + input.softDeadlineMs + input.evidenceMs - Date.now() : null;
    await (left === null ? evidence : Promise.race([evidence, new Promise((resolve) => setTimeout(resolve, Math.max(0, left)))]));
  }
  clearTimeout(deadlineTimer);
  out.request = scriptGlobals.request;
  out.environment = scriptGlobals.environment;
  out.steps = steps;
  out.requests = requests;
  out.failureShots = failureShots;
  if (input.kind === 'BROWSER') {
    out.pageErrors = pageErrors;
    out.consoleMessages = consoleMessages;
    out.pageEventsDropped = pageEventsDropped;
  }
  finish(out);
})();
