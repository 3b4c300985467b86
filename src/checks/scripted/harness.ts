// The harness that runs a user's script inside the child Node process
// (src/checks/scripted/runner.ts writes it next to the script and starts it). It is
// CommonJS text, never evaluated in the agent itself. It reads its input as
// JSON from a file, exposes the documented globals (`request`, `response`,
// `environment`, `step`, `expect`), records the requests made through
// playwright-core's `request.newContext()` contexts, and writes what the
// script left behind (request, environment, steps, requests, error) as JSON
// to an output file. MULTI_STEP and BROWSER scripts also get `artifact(name)`
// (a path in the run's artifacts folder), and a BROWSER script that fails
// leaves a screenshot of every page still open there (failure-<n>.png) and
// the network log of each browser context (failure-network-<n>.har). A BROWSER
// script's pages' uncaught errors and console messages are recorded too.
// A watchdog thread ends the run's process group if the agent dies first.

/** At most this many pages are screenshotted at a failure. */
export const FAILURE_SCREENSHOTS_MAX = 3;
/** Each failure screenshot gets at most this long (inside the script's time limit). */
export const FAILURE_SCREENSHOT_TIMEOUT_MS = 5_000;
/** All failure screenshots of a run together get at most this long. */
export const FAILURE_SCREENSHOTS_BUDGET_MS = 20_000;
/** At most this many page errors, and this many console messages, are kept; the rest are counted. */
export const PAGE_EVENTS_MAX = 100;
/** A page error's message or a console message's text is cut to this many characters. */
export const PAGE_EVENT_TEXT_MAX = 1_000;
/** Closing a context to write its HAR at a failure gets at most this long. */
export const HAR_CLOSE_TIMEOUT_MS = 5_000;
/** After its time limit a BROWSER run has this long to save screenshots and HARs before the agent kills it. */
export const BROWSER_TIMEOUT_GRACE_MS = 15_000;
/** A MULTI_STEP run's time to write what it did after its time limit. */
export const MULTI_STEP_TIMEOUT_GRACE_MS = 2_000;
/** How often the watchdog looks whether the agent is still the harness's parent. */
export const ORPHAN_POLL_MS = 500;

export const HARNESS_SOURCE = String.raw`'use strict';
const fs = require('node:fs');
const { AsyncLocalStorage } = require('node:async_hooks');
const { performance } = require('node:perf_hooks');
const path = require('node:path');
const [inputFile, outputFile, scriptFile] = process.argv.slice(2);
const input = JSON.parse(fs.readFileSync(inputFile, 'utf8'));
fs.unlinkSync(inputFile);

// If the agent dies (kill -9), nobody kills this run at its limit or removes its folder (a HAR there
// may hold a secret): a thread of its own, which a busy script cannot starve, removes the folder and
// ends the run's process group (this process leads it, unless an isolation wrapper does) once the agent
// is gone. It knows by the lifeline, descriptor 3, whose other end only the agent holds: it ends when
// the agent does. (In a PID namespace the parent is never the agent.) It watches the parent too. It
// marks the folder (.outpost-agent-gone) and empties it entry by entry: isolated, the folder is a mount
// point, which rmdir refuses, and a browser may still write there; the namespace's first process then
// kills what is left and removes the folder (src/checks/scripted/isolation.ts).
{
  const { Worker } = require('node:worker_threads');
  const watchdog = new Worker(
    'const { workerData } = require("node:worker_threads"); const fs = require("node:fs");' +
      'const end = () => { const gone = require("node:path").join(workerData.dir, ".outpost-agent-gone"); try { fs.writeFileSync(gone, ""); } catch {}' +
      ' try { for (const name of fs.readdirSync(workerData.dir)) if (name !== ".outpost-agent-gone") fs.rmSync(require("node:path").join(workerData.dir, name), { recursive: true, force: true }); } catch {} try { fs.rmSync(gone); fs.rmdirSync(workerData.dir); } catch { try { fs.writeFileSync(gone, ""); } catch {} }' +
      ' try { process.kill(-workerData.group, "SIGKILL"); } catch {} process.kill(workerData.group, "SIGKILL"); };' +
      'let lifeline = null; try { if (fs.fstatSync(3).isSocket()) lifeline = new (require("node:net").Socket)({ fd: 3, readable: true, writable: false }); } catch {}' +
      'if (lifeline) { lifeline.on("end", end); lifeline.on("error", end); lifeline.resume(); lifeline.unref(); }' +
      'setInterval(() => { if (process.ppid !== workerData.parent) end(); }, ${ORPHAN_POLL_MS});',
    { eval: true, workerData: { parent: process.ppid, group: process.pid, dir: path.dirname(scriptFile) } },
  );
  watchdog.unref();
}

// Every process this run started, found by parent links while this process is alive: also those that
// left its process group and dropped its environment (spawn(..., { detached: true, env: {} })).
function killDescendants() {
  let pids;
  try { pids = fs.readdirSync('/proc').filter((name) => /^\d+$/.test(name)); } catch { return; }
  const children = new Map();
  for (const pid of pids) {
    try {
      const stat = fs.readFileSync('/proc/' + pid + '/stat', 'utf8');
      const ppid = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1];
      if (!children.has(ppid)) children.set(ppid, []);
      children.get(ppid).push(pid);
    } catch {}
  }
  const found = [];
  const queue = [String(process.pid)];
  while (queue.length > 0) {
    for (const child of children.get(queue.shift()) || []) {
      found.push(child);
      queue.push(child);
    }
  }
  for (const pid of found) { try { process.kill(Number(pid), 'SIGKILL'); } catch {} }
}

class ExpectationError extends Error {
  constructor(message) { super(message); this.name = 'ExpectationError'; }
}
const show = (v) => { try { const t = JSON.stringify(v); return t === undefined ? String(v) : (t.length > 200 ? t.slice(0, 197) + '...' : t); } catch { return String(v); } };
// Structural equality as toEqual means it: key order ignored, undefined properties ignored, NaN equal
// to NaN; plain objects equal whatever their prototype (Object's or none), instances of a class only
// to instances of the same class; Errors by name and message, URLs by href, Dates by time, Maps and Sets
// by entries (members matched structurally), typed arrays by bytes. A pair already being compared
// further up the same path (a cycle) counts as equal.
function same(a, b, path) {
  if (Object.is(a, b)) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  path = path || [];
  if (path.some(([x, y]) => x === a && y === b)) return true;
  path.push([a, b]);
  try {
    const plainObject = (v) => { const proto = Object.getPrototypeOf(v); return proto === Object.prototype || proto === null; };
    const kind = (v) => (Array.isArray(v) ? 'array' : v instanceof Date ? 'date' : v instanceof RegExp ? 'regexp' : v instanceof Map ? 'map' : v instanceof Set ? 'set' : ArrayBuffer.isView(v) ? 'bytes' : v instanceof Error ? 'error' : v instanceof URL ? 'url' : plainObject(v) ? 'object' : 'instance');
    if (kind(a) !== kind(b)) return false;
    if (kind(a) === 'instance' && Object.getPrototypeOf(a) !== Object.getPrototypeOf(b)) return false;
    switch (kind(a)) {
      case 'error': if (a.name !== b.name || a.message !== b.message) return false; break;
      case 'url': return a.href === b.href;
      case 'date': return Object.is(a.getTime(), b.getTime());
      case 'regexp': return String(a) === String(b);
      case 'bytes': return a.byteLength === b.byteLength && Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(Buffer.from(b.buffer, b.byteOffset, b.byteLength));
      case 'map': return a.size === b.size && [...a].every(([k, v]) => b.has(k) && same(v, b.get(k), path));
      case 'set': {
        const rest = [...b];
        return a.size === b.size && [...a].every((v) => {
          const i = rest.findIndex((w) => same(v, w, path));
          return i >= 0 && rest.splice(i, 1).length === 1;
        });
      }
      case 'array': return a.length === b.length && a.every((v, i) => same(v, b[i], path));
    }
    const keys = (o) => Object.keys(o).filter((k) => o[k] !== undefined);
    const ka = keys(a);
    const kb = keys(b);
    return ka.length === kb.length && ka.every((k) => Object.prototype.hasOwnProperty.call(b, k) && same(a[k], b[k], path));
  } finally {
    path.pop();
  }
}
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
// Contexts of browsers launched through chromium. At every new failure (a step's, as it ends and before
// a finally block can close the browser; or the run's own at its end or time limit) the pages still open
// are screenshotted into a set of that failure's, outside the artifacts. A failing run keeps the set of
// the failure it ends with (failure-<n>.png), or, when that one found no page open, the latest set that
// has a picture; a passing run keeps none. Screenshots share a time budget, so that a retry loop on a
// hung page cannot spend the run on them.
const contexts = [];
const failureShots = [];
const shotSets = [];
let shotBudgetMs = ${FAILURE_SCREENSHOTS_BUDGET_MS};
const END_OF_RUN = { end: true };
async function takeShots(owner) {
  if (!input.artifactsDir) return;
  const set = { owner, shots: [] };
  const folder = path.join(path.dirname(input.artifactsDir), 'shots', String(shotSets.length + 1));
  for (const context of contexts) {
    for (const page of context.pages()) {
      if (set.shots.length >= ${FAILURE_SCREENSHOTS_MAX} || page.isClosed() || shotBudgetMs <= 0) continue;
      fs.mkdirSync(folder, { recursive: true, mode: 0o700 });
      const file = path.join(folder, set.shots.length + 1 + '.png');
      const started = performance.now();
      try {
        await page.screenshot({ path: file, timeout: Math.max(1, Math.min(${FAILURE_SCREENSHOT_TIMEOUT_MS}, shotBudgetMs)) });
        set.shots.push({ file, url: page.url() });
      } catch (error) {
        set.shots.push({ file: null, url: page.url(), error: error && error.message ? errorText(error.message) : String(error) });
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
    const name = 'failure-' + (i + 1) + '.png';
    if (!shot.file) return failureShots.push({ name, url: shot.url, error: shot.error });
    try {
      fs.copyFileSync(shot.file, artifact(name));
      failureShots.push({ name, url: shot.url });
    } catch (error) {
      failureShots.push({ name, url: shot.url, error: errorText(error && error.message ? error.message : error) });
    }
  });
}

// What the pages of launched browsers report: uncaught errors and console messages (bounded).
const pageErrors = [];
const consoleMessages = [];
const pageEventsDropped = { pageErrors: 0, consoleMessages: 0 };
const cut = (text) => { const t = String(text); return t.length > ${PAGE_EVENT_TEXT_MAX} ? t.slice(0, ${PAGE_EVENT_TEXT_MAX - 3}) + '...' : t; };
function keep(list, key, entry) {
  if (list.length >= ${PAGE_EVENTS_MAX}) pageEventsDropped[key]++;
  else list.push(entry);
}
const watchedPages = new WeakSet();
function keepPageError(step, url, error) {
  keep(pageErrors, 'pageErrors', {
    step,
    url,
    name: error && error.name ? String(error.name) : 'Error',
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
function harOption(options) {
  const opts = Object.assign({}, options || {});
  if (harDir && !opts.recordHar) {
    fs.mkdirSync(harDir, { recursive: true, mode: 0o700 });
    const name = 'network-' + (hars.length + 1) + '.har';
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
    new Promise((resolve) => setTimeout(resolve, ${HAR_CLOSE_TIMEOUT_MS}).unref()),
  ]);
}
// At a failure: the open contexts are closed so that their HARs are written, then moved to the artifacts.
async function keepHars() {
  if (!harDir) return;
  await closeContexts(contexts);
  for (const name of hars) {
    // Without replacing a file the script saved under that name.
    try { fs.linkSync(path.join(harDir, name), path.join(input.artifactsDir, 'failure-' + name)); } catch {}
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
let shootingFor = null;
let shooting = null;
async function step(name, fn) {
  const s = { name: String(name), passed: true, error: null, durationMs: 0 };
  // Not part of the output: the enclosing step, for nesting.
  Object.defineProperty(s, 'parent', { value: stepContext.getStore() || null, enumerable: false });
  steps.push(s);
  const started = performance.now();
  stepStarts.set(s, started);
  try {
    return await stepContext.run(s, fn);
  } catch (error) {
    // A step the time limit already ended stays as the deadline marked it.
    if (!stepStarts.has(s)) throw error;
    stepStarts.delete(s);
    s.passed = false;
    s.error = error && error.message ? errorText(error.message) : String(error);
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
    context[m] = function (target, options) {
      if (inner.getStore()) return original.call(context, target, options);
      return inner.run(true, async () => {
        const opts = options || {};
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
        } catch (error) {
          record.error = error && error.message ? errorText(error.message) : String(error);
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
      const withDefaults = (options) => {
        const opts = Object.assign({ headless: true }, options || {});
        if (!opts.executablePath && process.env.OUTPOST_BROWSER_PATH) opts.executablePath = process.env.OUTPOST_BROWSER_PATH;
        opts.args = CHROMIUM_FLAGS.concat(opts.args || []);
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

globalThis.request = input.request;
globalThis.response = input.response;
globalThis.environment = input.environment;
globalThis.step = step;
globalThis.expect = expect;
if (input.artifactsDir) globalThis.artifact = artifact;

// A message over several lines (node:assert's "Expected values to be strictly equal: · 1 !== 2", playwright's
// with its call log, require's with its stack) is kept up to that log, its lines joined, at most 500 characters.
function errorText(message) {
  const lines = String(message).replace(/\u001b\[[0-9;]*m/g, '').split('\n');
  const end = lines.findIndex((l) => /^\s*(Call log|Require stack):/.test(l));
  const text = (end < 0 ? lines : lines.slice(0, end)).map((l) => l.trim().replace(/\s+/g, ' ')).filter(Boolean).join(' · ');
  return text.length > 500 ? text.slice(0, 497) + '...' : text;
}

function lineOf(error) {
  const stack = error && typeof error.stack === 'string' ? error.stack : '';
  const at = stack.indexOf(scriptFile + ':');
  if (at < 0) return null;
  const m = /^:(\d+)/.exec(stack.slice(at + scriptFile.length));
  return m ? Number(m[1]) : null;
}

// BROWSER and MULTI_STEP runs stop themselves at their time limit, keeping what shows why (steps so far,
// screenshots of the pages as they hung, HARs) within input.evidenceMs; the agent kills the run only after that.
// The limit counts from the agent's spawn (input.spawnedAt), as the agent's own kill timer does.
let deadlineTimer = null;
const deadline = input.softDeadlineMs
  ? new Promise((_, reject) => {
      deadlineTimer = setTimeout(() => {
        const error = new Error('ran past its time limit of ' + input.softDeadlineMs + ' ms');
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
      }, Math.max(0, (input.spawnedAt || Date.now()) + input.softDeadlineMs - Date.now()));
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
      s.error = error && error.message ? errorText(error.message) : String(error);
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
    request: globalThis.request, environment: globalThis.environment, steps, requests,
  });
});

// PLAYWRIGHT: the suite the agent wrote into suite/ runs under @playwright/test's own runner (a child in
// this process group), with a configuration of ours: one worker, no retries, the check's time limit as
// the global timeout, the agent's Chromium, a screenshot of each failing test; its JSON report becomes
// the output (one step per test).
// Messages name the suite's files relative to the suite, not by the run's temporary path.
const plain = (text) => String(text).replace(/\u001b\[[0-9;]*m/g, '').split(suiteDir + path.sep).join('');
function summary(message) {
  // "expect(locator).toHaveText(expected) failed · Expected: "Done" · Received: "Clicked"", without the call log.
  return errorText(plain(message)).replace(/^Error: /, '');
}
function collectTests(suite, titles, stoppedAtLimit, into) {
  for (const spec of suite.specs || []) {
    for (const test of spec.tests || []) {
      const result = (test.results || [])[(test.results || []).length - 1] || {};
      const error = result.error || (result.errors || [])[0];
      const at = (error && error.location) || { file: spec.file, line: spec.line };
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
        location: (path.isAbsolute(file) ? path.relative(suiteDir, file) : file) + ':' + (at.line || spec.line),
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
async function runSuite() {
  const base = path.dirname(scriptFile);
  const report = path.join(base, 'report.json');
  const config = path.join(base, 'playwright.config.cjs');
  const launchOptions = { args: CHROMIUM_FLAGS };
  if (process.env.OUTPOST_BROWSER_PATH) launchOptions.executablePath = process.env.OUTPOST_BROWSER_PATH;
  fs.writeFileSync(config, 'module.exports = ' + JSON.stringify({
    testDir: suiteDir,
    testMatch: input.suite.specs,
    workers: 1,
    retries: 0,
    timeout: input.suite.timeoutMs,
    globalTimeout: input.suite.timeoutMs,
    reporter: [['list'], ['json', { outputFile: report }]],
    outputDir: path.join(base, 'test-results'),
    use: { headless: true, screenshot: 'only-on-failure', trace: 'off', video: 'off', launchOptions },
  }) + ';\n');
  const { spawn } = require('node:child_process');
  // The runner and its worker get the script's heap limit too; their output (the list reporter's) is the jobLog.
  // The suite's '@playwright/test' is the shim first on NODE_PATH (see SUITE_SHIM_SOURCE).
  const events = path.join(base, 'page-events.jsonl');
  const hars = path.join(base, 'suite-hars');
  fs.mkdirSync(hars, { mode: 0o700 });
  const env = Object.assign({}, process.env, {
    FORCE_COLOR: '0',
    NODE_OPTIONS: '--max-old-space-size=' + input.suite.memoryMb,
    NODE_PATH: input.suite.shimDir + path.delimiter + process.env.NODE_PATH,
    OUTPOST_PW_TEST: path.join(path.dirname(input.suite.cli), 'index.js'),
    OUTPOST_PW_EVENTS: events,
    OUTPOST_PW_HARS: hars,
    OUTPOST_PW_EVENTS_MAX: String(${PAGE_EVENTS_MAX}),
  });
  const runner = spawn(process.execPath, [input.suite.cli, 'test', '--config', config], { cwd: suiteDir, env, stdio: ['ignore', 'inherit', 'inherit'] });
  const exit = await new Promise((resolve) => {
    runner.on('error', (error) => resolve({ error }));
    runner.on('exit', (code, signal) => resolve({ code, signal }));
  });
  let parsed = null;
  try { parsed = JSON.parse(fs.readFileSync(report, 'utf8')); } catch {}
  if (!parsed) {
    const how = exit.error ? exit.error.message : exit.signal ? 'signal ' + exit.signal : 'exit code ' + exit.code;
    return { ok: false, error: 'the Playwright runner ended without a report (' + how + ')' };
  }
  // A load error's first line says it ("SyntaxError: check.spec.ts: Unexpected token (2:24)"); its code frame is in the jobLog.
  const globalErrors = (parsed.errors || []).map((e) => plain(e.message || e.value || '').split('\n')[0]);
  const timedOut = globalErrors.find((e) => /^Timed out waiting .* for the (test suite|entire test run) to run/.test(e));
  const tests = [];
  for (const suite of parsed.suites || []) collectTests(suite, [suite.title], Boolean(timedOut), tests);
  let shot = 0;
  for (const test of tests) {
    for (const file of test.screenshots) {
      if (shot >= ${FAILURE_SCREENSHOTS_MAX}) break;
      const name = 'failure-' + ++shot + '.png';
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
      .filter((f) => f.startsWith(test.id + '-') && f.endsWith('.har'))
      .sort((a, b) => Number(a.slice(test.id.length + 1, -4)) - Number(b.slice(test.id.length + 1, -4)));
    for (const file of own) {
      if (har >= ${FAILURE_SCREENSHOTS_MAX}) break;
      try { fs.copyFileSync(path.join(hars, file), artifact('failure-network-' + (har + 1) + '.har')); har++; } catch {}
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
    const out = await runSuite().catch((error) => ({ ok: false, error: errorText(error && error.message ? error.message : error) }));
    out.environment = globalThis.environment;
    out.steps = steps;
    out.requests = [];
    out.failureShots = failureShots;
    out.pageErrors = pageErrors;
    out.consoleMessages = consoleMessages;
    out.pageEventsDropped = pageEventsDropped;
    finish(out);
    return;
  }
  let out = { ok: true };
  try {
    const run = require(scriptFile);
    await Promise.race(deadline ? [run(), failedOutside, deadline] : [run(), failedOutside]);
  } catch (thrown) {
    // A step's failure that the time limit overtook while its screenshots were being taken is still that failure.
    const overtaken = thrown && thrown.outpostTimeout && shootingFor;
    const error = overtaken ? shootingFor.error : thrown;
    const isError = error instanceof Error || (error && typeof error === 'object' && 'message' in error);
    const failure = failureOf(error);
    const failed = failure ? failure.step : null;
    out = {
      ok: false,
      error: isError ? errorText(error.message) : 'thrown: ' + show(error),
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
  out.request = globalThis.request;
  out.environment = globalThis.environment;
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
`;

/** The user's code as a CommonJS module exporting one async function; line numbers are kept (the wrapper opens on line 1). */
export function wrapUserScript(code: string): string {
  return `module.exports = async function outpostScript() {${code}\n};\n`;
}

/**
 * PLAYWRIGHT: the module a suite gets for '@playwright/test' (first on its NODE_PATH): the real one, with
 * `test` extended. Every context a test makes (its `page`'s, and `browser.newContext()`'s) goes through
 * the wrapped `browser.newContext`: it records a HAR of its own (`<testId>-<n>.har`, unless the suite
 * asks for its own), and its pages report their errors and console messages (appended to
 * OUTPOST_PW_EVENTS, at most OUTPOST_PW_EVENTS_MAX of each, the rest counted). One worker runs the tests
 * one after another, so the test running is the one an auto fixture last named. Subpaths
 * (`@playwright/test/reporter`) resolve to the real package.
 */
export const SUITE_SHIM_SOURCE = String.raw`'use strict';
const fs = require('node:fs');
const path = require('node:path');
const real = require(process.env.OUTPOST_PW_TEST);
const events = process.env.OUTPOST_PW_EVENTS;
const max = Number(process.env.OUTPOST_PW_EVENTS_MAX) || 100;
const counts = { pageError: 0, console: 0 };
const dropped = { pageErrors: 0, consoleMessages: 0 };
function write(kind, entry) {
  if (counts[kind] >= max) {
    dropped[kind === 'pageError' ? 'pageErrors' : 'consoleMessages']++;
    return;
  }
  counts[kind]++;
  try { fs.appendFileSync(events, JSON.stringify(Object.assign({ kind }, entry)) + '\n'); } catch {}
}
process.on('exit', () => {
  if (dropped.pageErrors || dropped.consoleMessages) {
    try { fs.appendFileSync(events, JSON.stringify(Object.assign({ kind: 'dropped' }, dropped)) + '\n'); } catch {}
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
  page.on('pageerror', (error) => write('pageError', { test: name, url: page.url(), name: error && error.name, message: error && error.message !== undefined ? String(error.message) : String(error) }));
  page.on('console', (message) => write('console', { test: name, url: page.url(), type: message.type(), text: message.text(), location: message.location() }));
}
const test = real.test.extend({
  browser: [async ({ browser }, use) => {
    const newContext = browser.newContext.bind(browser);
    browser.newContext = async (options) => {
      const own = options && options.recordHar;
      const har = { path: path.join(process.env.OUTPOST_PW_HARS, testId + '-' + ++contextsOfTest + '.har'), content: 'omit' };
      const context = await newContext(own ? options : Object.assign({}, options, { recordHar: har }));
      context.on('page', watchPage);
      made.push(context);
      return context;
    };
    await use(browser);
    // A HAR is written when its context closes. Contexts left open (a failing test never reaches its own
    // close(); a later test may still have been using one) are closed after the last test, at most 5 s.
    await Promise.race([Promise.all(made.map((c) => c.close().catch(() => undefined))), new Promise((resolve) => setTimeout(resolve, 5000))]);
  }, { scope: 'worker', timeout: 0 }],
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
`;
