// Runs one user script (an API check's setup/teardown script, a MULTI_STEP
// script) in its own child Node process:
//
// - `process.execPath` with `--max-old-space-size` (SCRIPT_MEMORY_MB), in a
//   fresh temporary directory, `detached` so that its whole process group is
//   killed on the time limit, on an abort (cap, lease lost, shutdown), and
//   after it finished;
// - the runtime's node_modules on NODE_PATH, so `require('playwright-core')`
//   resolves to the runtime's packages and nothing else;
// - an environment holding only the job's variables (with the agent's
//   OUTPOST_SECRET_* ones), the service environment (OUTPOST, CI), the check
//   proxy (CHECK_PROXY as HTTP(S)_PROXY, NO_PROXY; under a network policy the
//   agent's filtering proxy instead, src/net/filtering-proxy.ts), NODE_EXTRA_CA_CERTS, and
//   NODE_PATH/HOME/TMPDIR; not PATH, not the agent's API_KEY or anything else;
//   OUTPOST_SCRIPT_RUN tags every process of the run, so that what left the
//   group (playwright starts browsers in a group of their own) is killed too;
// - stdout and stderr captured up to SCRIPT_OUTPUT_LIMIT_BYTES into the
//   jobLog (results are scrubbed as they leave the queue);
// - at most SCRIPT_CONCURRENCY scripts at once, agent-wide.
//
// The user's code is only ever evaluated in the child: the agent writes it to
// a file that the harness (harness/harness.cjs, copied into the run's folder)
// requires.

import { spawn } from 'node:child_process';
import { constants as fsConstants } from 'node:fs';
import { copyFile, lstat, mkdir, mkdtemp, readdir, readFile, realpath, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { StringDecoder } from 'node:string_decoder';
import { jobScrubber, scrubArtifactText } from '../../artifacts/scrub.js';
import { browserPath, type Runtime } from './runtimes.js';
import { sharedFilteringProxy } from '../../net/filtering-proxy.js';
import { redactHar } from '../../secrets/har.js';
import { type DetectedSecret, SecretDetector } from '../../secrets/detection.js';
import type { ExecutionContext } from '../executor.js';
import { giveToRunUid, isolatedCommand, isRunUid, releaseRunUid, type ScriptIsolation, scriptIsolation, takeRunUid, usesRunUid } from './isolation.js';
import { BROWSER_TIMEOUT_GRACE_MS, HARNESS_FILES, HARNESS_LIMITS, type HarnessSources, harnessSources, MULTI_STEP_TIMEOUT_GRACE_MS, PAGE_EVENTS_MAX, SUITE_SHIM_FILE, shared, wrapUserScript } from './harness.js';

export const SCRIPT_CAP_MS = 240_000;
export const DEFAULT_SCRIPT_MEMORY_MB = 256;
export const DEFAULT_SCRIPT_CONCURRENCY = 2;
export const SCRIPT_OUTPUT_LIMIT_BYTES = 1024 * 1024;

/** Files a script run may hand to the job's artifacts (the rest are named in the jobLog). */
export const SCRIPT_ARTIFACTS_MAX = 10;
/** The largest single file a script run may hand over. */
export const SCRIPT_ARTIFACT_MAX_BYTES = 10 * 1024 * 1024;
/** All of a run's files together. */
export const SCRIPT_ARTIFACTS_TOTAL_BYTES = 25 * 1024 * 1024;

export type ScriptKind = 'MULTI_STEP' | 'BROWSER' | 'PLAYWRIGHT' | 'setupScript' | 'tearDownScript';

/** A file of a PLAYWRIGHT suite besides its spec (`script`): a helper, a fixture, test data, more specs. */
export interface SuiteFile {
  /** Relative, plain segments (checked when the check is parsed). */
  path: string;
  content: string;
}

/** The spec a PLAYWRIGHT check's `script` becomes; files named like specs run too. */
export const SUITE_SPEC_FILE = 'check.spec.ts';
/** Playwright's own default testMatch. */
export const SUITE_SPEC_PATTERN = /\.(spec|test)\.(c|m)?[jt]sx?$/;

export interface ScriptStep {
  name: string;
  passed: boolean;
  error: string | null;
  durationMs: number;
  /** PLAYWRIGHT (a step is a test): passed, failed, timedOut, skipped, interrupted. */
  status?: string;
  /** PLAYWRIGHT: where the test failed, or where it is (`check.spec.ts:12`). */
  location?: string;
}

/** PLAYWRIGHT: the runner's count of tests by outcome. */
export interface SuiteCounts {
  expected: number;
  unexpected: number;
  flaky: number;
  skipped: number;
}

export interface ScriptRequestRecord {
  step: string | null;
  method: string;
  url: string;
  headers: Record<string, string>;
  status: number | null;
  statusText: string | null;
  durationMs: number;
  passed: boolean;
  error: string | null;
}

/** An uncaught error in a page of a BROWSER script's browser. */
export interface PageError {
  step: string | null;
  url: string;
  name: string;
  message: string;
}

/** A console message of a page of a BROWSER script's browser. */
export interface ConsoleMessage {
  step: string | null;
  /** log, debug, info, error, warning, … (playwright's names). */
  type: string;
  text: string;
  url: string;
  line: number | null;
}

export interface ScriptRun {
  /** The script completed without throwing. */
  ok: boolean;
  /** Why not: one line, naming the step and script line when known. */
  error?: string;
  /** The script failed an `expect` or node:assert assertion (a failure, not an error). */
  assertion: boolean;
  /** Killed: time or memory limit, or aborted. */
  killed?: 'timeout' | 'memory' | 'aborted';
  step?: string;
  line?: number;
  request?: unknown;
  environment?: Record<string, string>;
  steps: ScriptStep[];
  requests: ScriptRequestRecord[];
  /** BROWSER only. */
  pageErrors?: PageError[];
  /** BROWSER only. */
  consoleMessages?: ConsoleMessage[];
  /** PLAYWRIGHT only. */
  tests?: SuiteCounts;
  /** With `detectSecrets`: each kind of undeclared credential found in each output (never the values). */
  detectedSecrets?: DetectedSecret[];
  durationMs: number;
  startedAt: Date;
  stoppedAt: Date;
}

export interface ScriptOptions {
  kind: ScriptKind;
  code: string;
  runtime: Runtime;
  /** Wall-clock limit (capped at SCRIPT_CAP_MS). */
  timeoutMs: number;
  request?: unknown;
  response?: unknown;
  environment: Record<string, string>;
  /** PLAYWRIGHT: files of the suite besides `code` (the spec). */
  files?: SuiteFile[];
  /**
   * Search the run's outputs for values that look like credentials (src/secrets/detection.ts), register
   * them as the job's secrets before anything is scrubbed or handed over, and report them.
   */
  detectSecrets?: boolean;
  /** PLAYWRIGHT: the cache entry whose node_modules the suite gets (src/checks/scripted/dependencies/). */
  dependencies?: string;
}

/** A counting semaphore: SCRIPT_CONCURRENCY scripts at once, agent-wide. */
class Semaphore {
  private active = 0;
  private readonly waiting: Array<() => void> = [];
  constructor(public limit: number) {}

  async acquire(signal: AbortSignal): Promise<boolean> {
    if (this.active < this.limit) {
      this.active++;
      return true;
    }
    return new Promise<boolean>((resolve) => {
      const grant = () => {
        signal.removeEventListener('abort', cancel);
        this.active++;
        resolve(true);
      };
      const cancel = () => {
        const i = this.waiting.indexOf(grant);
        if (i >= 0) this.waiting.splice(i, 1);
        resolve(false);
      };
      if (signal.aborted) return resolve(false);
      this.waiting.push(grant);
      signal.addEventListener('abort', cancel, { once: true });
    });
  }

  release(): void {
    this.active--;
    const next = this.waiting.shift();
    if (next) next();
  }
}

const semaphore = new Semaphore(DEFAULT_SCRIPT_CONCURRENCY);

/** Variables that the agent sets for the child and that the job's variables may not replace. */
const RESERVED = new Set(['OUTPOST_SCRIPT_RUN', 'NODE_PATH', 'NODE_OPTIONS', 'HOME', 'TMPDIR', 'NODE_EXTRA_CA_CERTS', 'HTTP_PROXY', 'HTTPS_PROXY', 'NO_PROXY', 'http_proxy', 'https_proxy', 'no_proxy', 'NODE_USE_ENV_PROXY', 'OUTPOST_POLICY_PROXY']);

/**
 * `policyProxy`: the filtering proxy's URL under a network policy. It replaces
 * CHECK_PROXY (which it chains to) and NO_PROXY: nothing bypasses it.
 */
function childEnvironment(options: ScriptOptions, ctx: ExecutionContext, dir: string, policyProxy?: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(options.environment)) {
    // A name with '=' or NUL, or a value with NUL, cannot be an environment variable: it stays in `environment` only.
    if (!RESERVED.has(key) && /^[^=\0]+$/.test(key) && !String(value).includes('\0')) env[key] = String(value);
  }
  Object.assign(env, ctx.serviceEnv ?? { OUTPOST: 'true' });
  const proxy = ctx.settings.checkProxy;
  if (policyProxy) {
    env.HTTP_PROXY = policyProxy;
    env.HTTPS_PROXY = policyProxy;
    env.http_proxy = policyProxy;
    env.https_proxy = policyProxy;
    // Node 24's fetch and http honour HTTP(S)_PROXY only with this; the harness points playwright-core at it.
    env.NODE_USE_ENV_PROXY = '1';
    env.OUTPOST_POLICY_PROXY = policyProxy;
  } else if (proxy) {
    env.HTTP_PROXY = proxy;
    env.HTTPS_PROXY = proxy;
    if (ctx.settings.noProxy) env.NO_PROXY = ctx.settings.noProxy;
  }
  if (ctx.settings.extraCaCerts) env.NODE_EXTRA_CA_CERTS = ctx.settings.extraCaCerts;
  env.NODE_PATH = options.runtime.nodeModules;
  env[RUN_TAG] = dir;
  env.HOME = dir;
  env.TMPDIR = dir;
  // playwright-core never downloads a browser on its own (API only here).
  env.PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD = '1';
  if (options.kind === 'BROWSER' || options.kind === 'PLAYWRIGHT') {
    const browser = browserPath(ctx.settings.browserPath);
    if (browser) env.OUTPOST_BROWSER_PATH = browser;
  }
  return env;
}

/** Marks every process of a run (they inherit it): how leftovers are found after the script's group is gone. */
const RUN_TAG = 'OUTPOST_SCRIPT_RUN';

/**
 * Kills what a run left behind outside its process group: a browser that
 * playwright started in a group of its own, its zygotes, a crash handler that
 * daemonized. They carry the run's tag in their environment, or the run's
 * folder in their command line (Chromium rewrites its environment area for
 * its process titles, so the tag alone is not enough). Linux /proc; elsewhere
 * a no-op. Scans again while it finds something, a few times at most.
 */
async function killTagged(dir: string): Promise<void> {
  const tag = Buffer.from(`${RUN_TAG}=${dir}\0`);
  const folder = Buffer.from(`${dir}/`);
  for (let round = 0; round < 5; round++) {
    let pids: string[];
    try {
      pids = (await readdir('/proc')).filter((name) => shared.PID_NAME.test(name) && Number(name) !== process.pid);
    } catch {
      return;
    }
    const found = await Promise.all(
      pids.map(async (pid) => {
        try {
          const [environ, cmdline] = await Promise.all([readFile(`/proc/${pid}/environ`).catch(() => Buffer.alloc(0)), readFile(`/proc/${pid}/cmdline`)]);
          if (!environ.includes(tag) && !cmdline.includes(folder)) return false;
          process.kill(Number(pid), 'SIGKILL');
          return true;
        } catch {
          return false; // Gone, or not ours.
        }
      }),
    );
    if (!found.includes(true)) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** A run's folder older than this is left from an agent that died (no run lives longer than ~4.5 min). */
const STALE_RUN_MS = 10 * 60_000;
let sweptStaleRuns = false;

/**
 * Once per agent process: removes run folders (`outpost-script-*`, this user's) that an agent killed
 * with SIGKILL may have left in the temporary directory when its watchdog could not remove them.
 */
async function sweepStaleRuns(root: string): Promise<void> {
  if (sweptStaleRuns) return;
  sweptStaleRuns = true;
  let names: string[];
  try {
    names = (await readdir(root)).filter((name) => name.startsWith('outpost-script-'));
  } catch {
    return;
  }
  const now = Date.now();
  await Promise.all(
    names.map(async (name) => {
      const dir = path.join(root, name);
      try {
        const info = await lstat(dir);
        // This user's, or (an agent running as root) a run uid's.
        const ours = info.uid === process.getuid?.() || (process.getuid?.() === 0 && isRunUid(info.uid));
        if (!info.isDirectory() || !ours || now - info.mtimeMs < STALE_RUN_MS) return;
        await rm(dir, { recursive: true, force: true });
      } catch {
        // Gone, or not ours.
      }
    }),
  );
}

/** How long the output pipes may stay open after the script's process ended. */
const OUTPUT_CLOSE_WAIT_MS = 2_000;

/** Kills every descendant of `pid` (found by the parent links in /proc, read without blocking); a no-op elsewhere. */
async function killDescendants(pid: number | undefined): Promise<void> {
  if (pid === undefined) return;
  let entries: string[];
  try {
    entries = (await readdir('/proc')).filter((name) => shared.PID_NAME.test(name));
  } catch {
    return;
  }
  const stats: Array<[string, string]> = [];
  await Promise.all(
    entries.map(async (entry) => {
      try {
        stats.push([entry, await readFile(`/proc/${entry}/stat`, 'utf8')]);
      } catch {
        // Gone meanwhile.
      }
    }),
  );
  for (const child of shared.descendants(stats, String(pid))) {
    try {
      process.kill(Number(child), 'SIGKILL');
    } catch {
      // Gone meanwhile.
    }
  }
}

function killGroup(pid: number | undefined): void {
  if (pid === undefined) return;
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // Already gone.
  }
}

const { ANSI_SGR, SAFE_ARTIFACT } = shared;

/** Bounded capture of the child's output into jobLog lines. */
export class OutputCapture {
  private bytes = 0;
  private dropped = 0;
  private truncated = false;
  private readonly text: string[] = [];
  // One decoder for the stream: a character split across two chunks is still one character (and a
  // secret that contains it is still found by the scrubber).
  private readonly decoder = new StringDecoder('utf8');
  constructor(private readonly limit: number) {}

  push(chunk: Buffer): void {
    const room = this.limit - this.bytes;
    if (room <= 0) {
      this.dropped += chunk.length;
      this.truncated = true;
      return;
    }
    const kept = chunk.length > room ? chunk.subarray(0, room) : chunk;
    this.dropped += chunk.length - kept.length;
    this.bytes += kept.length;
    this.text.push(this.decoder.write(kept));
    if (kept.length < chunk.length) this.truncated = true;
  }

  /** The output kept, and how many bytes were not (counting those cut back to the last full line). */
  private kept(): { text: string; dropped: number } {
    let text = this.text.join('') + (this.truncated ? '' : this.decoder.end());
    let dropped = this.dropped;
    if (this.truncated) {
      // Cut output ends at its last full line: a secret the limit cut in two would not be found.
      const end = text.lastIndexOf('\n') + 1;
      dropped += Buffer.byteLength(text.slice(end));
      text = text.slice(0, end);
    }
    return { text, dropped };
  }

  /** The output as text, without terminal colour codes (Playwright's reporters and expect print them). */
  get all(): string {
    return this.kept().text.replace(ANSI_SGR, '');
  }

  lines(): string[] {
    const { dropped } = this.kept();
    const lines = this.all.split('\n');
    if (lines.at(-1) === '') lines.pop();
    if (dropped > 0) lines.push(`[output truncated: ${dropped} more bytes, cut at the last full line]`);
    return lines;
  }
}

export async function runScript(given: ScriptOptions, ctx: ExecutionContext): Promise<ScriptRun> {
  // The packages' real path: a run's own uid may not pass a private folder that links to them.
  const nodeModules = await realpath(given.runtime.nodeModules).catch(() => given.runtime.nodeModules);
  const options = nodeModules === given.runtime.nodeModules ? given : { ...given, runtime: { ...given.runtime, nodeModules } };
  const limit = ctx.settings.scriptConcurrency ?? DEFAULT_SCRIPT_CONCURRENCY;
  if (semaphore.limit !== limit) semaphore.limit = limit;
  const queuedAt = new Date();
  const aborted = (): ScriptRun => {
    const reason = ctx.signal.reason;
    const now = new Date();
    return {
      ok: false,
      error: `${options.kind} aborted: ${reason instanceof Error ? reason.message : 'the job was aborted'}`,
      assertion: false,
      killed: 'aborted',
      steps: [],
      requests: [],
      durationMs: 0,
      startedAt: queuedAt,
      stoppedAt: now,
    };
  };
  const isolation = await scriptIsolation();
  if (isolation.mechanism === 'none') {
    const now = new Date();
    return { ok: false, error: `${options.kind} was not run: ${ISOLATION_REFUSAL} (${isolation.detail})`, assertion: false, steps: [], requests: [], durationMs: 0, startedAt: queuedAt, stoppedAt: now };
  }
  if (!(await semaphore.acquire(ctx.signal))) return aborted();
  void sweepStaleRuns(tmpdir());
  let dir: string | undefined;
  let uid: number | undefined;
  try {
    uid = usesRunUid(isolation) ? takeRunUid() : undefined;
    // 0700: the input file holds the job's variables, secrets included, until the harness has read it.
    dir = await mkdtemp(path.join(tmpdir(), 'outpost-script-'));
    const detector = options.detectSecrets ? new SecretDetector({ isKnown: knownSecret(ctx) }) : undefined;
    const run = await runChild(options, ctx, dir, isolation, uid, detector);
    return detector ? { ...run, detectedSecrets: detector.detections } : run;
  } finally {
    semaphore.release();
    if (dir) await rm(dir, { recursive: true, force: true }).catch(() => undefined);
    if (uid !== undefined) releaseRunUid(uid);
  }
}

/** Why scripts are refused when no isolation works, and how an operator may run them anyway. */
export const ISOLATION_REFUSAL =
  'scripts cannot be isolated from the agent here, so a script could read its API_KEY and other jobs\' secrets; set SCRIPT_ISOLATION=off to run them anyway (docs/script-isolation.md)';

async function runChild(
  options: ScriptOptions,
  ctx: ExecutionContext,
  dir: string,
  isolation: ScriptIsolation,
  uid: number | undefined,
  detector: SecretDetector | undefined,
): Promise<ScriptRun> {
  const memoryMb = ctx.settings.scriptMemoryMb ?? DEFAULT_SCRIPT_MEMORY_MB;
  const timeoutMs = Math.max(1, Math.min(options.timeoutMs, SCRIPT_CAP_MS));
  const graceMs = timeoutGraceMs(options.kind);
  // The harness's files in a folder of their own, beside the script's.
  const harnessDir = path.join(dir, 'harness');
  const harness = path.join(harnessDir, 'harness.cjs');
  const scriptFile = path.join(dir, 'script.js');
  const inputFile = path.join(dir, 'input.json');
  const outputFile = path.join(dir, 'output.json');
  // MULTI_STEP and BROWSER scripts save files here (artifact(name), failure screenshots); handed over after the run.
  const artifactsDir = collectsArtifacts(options.kind, ctx) ? path.join(dir, 'artifacts') : null;
  if (artifactsDir) await mkdir(artifactsDir, { mode: 0o700 });
  const sources = await harnessSources();
  const suite = options.kind === 'PLAYWRIGHT' ? await writeSuite(dir, options, sources) : null;
  await mkdir(harnessDir, { mode: 0o700 });
  await Promise.all([
    ...HARNESS_FILES.map((name) => writeFile(path.join(harnessDir, name), sources[name])),
    writeFile(scriptFile, suite ? '' : wrapUserScript(options.code)),
    writeFile(path.join(dir, 'package.json'), '{"type":"commonjs"}\n'),
    writeFile(
      inputFile,
      JSON.stringify({
        kind: options.kind,
        request: options.request ?? null,
        response: options.response ?? null,
        environment: options.environment,
        artifactsDir,
        // The harness stops at the limit itself and keeps its evidence; the agent kills it graceMs later.
        // (A suite's runner stops itself: its global timeout is the limit.)
        softDeadlineMs: graceMs > 0 && !suite ? timeoutMs : null,
        spawnedAt: Date.now(),
        suite: suite && { ...suite, timeoutMs, memoryMb },
        evidenceMs: Math.max(0, graceMs - 1_000),
        limits: HARNESS_LIMITS,
      }),
    ),
  ]);
  // The run's uid owns its folder (0700): no other run's uid can look in.
  if (uid !== undefined) await giveToRunUid(dir, uid);
  const policy = ctx.settings.networkPolicy;
  const policyProxy = policy ? (await sharedFilteringProxy(policy, ctx.settings.checkProxy)).url : undefined;
  if (policyProxy) ctx.jobLog.push(`Network policy: the script's HTTP(S) goes through the agent's filtering proxy (${policyProxy})`);
  const command = isolatedCommand(isolation, { dir, ...(uid !== undefined ? { uid } : {}), ...(options.dependencies ? { shared: options.dependencies } : {}) }, process.execPath, [`--max-old-space-size=${memoryMb}`, harness, inputFile, outputFile, scriptFile]);
  const startedAt = new Date();
  const started = performance.now();
  const output = new OutputCapture(SCRIPT_OUTPUT_LIMIT_BYTES);
  let killed: ScriptRun['killed'];
  // The sweep for processes that left the group, started as soon as the script's process is gone.
  let sweep: Promise<void> | undefined;
  const exit = await new Promise<{ code: number | null; signal: NodeJS.Signals | null; spawnError?: Error }>((resolve) => {
    let child: ReturnType<typeof spawn>;
    try {
      child = spawn(command.file, command.args, {
        cwd: dir,
        env: childEnvironment(options, ctx, dir, policyProxy),
        detached: true,
        // 3: the harness's lifeline (its watchdog ends the run when the agent's end closes).
        stdio: ['ignore', 'pipe', 'pipe', 'pipe'],
      });
    } catch (error) {
      resolve({ code: null, signal: null, spawnError: error as Error });
      return;
    }
    let exited = false;
    const kill = (why: NonNullable<ScriptRun['killed']>) => {
      killed ??= why;
      // Once the harness is gone its pid may be another process's: only the tag sweep is safe then.
      if (exited) return void killTagged(dir);
      // While the harness lives, what it started is found by parent links, wherever it went: so
      // those first, then the group (killing the harness first would orphan them).
      void killDescendants(child.pid).then(() => {
        if (!exited) killGroup(child.pid);
      });
    };
    const timer = setTimeout(() => kill('timeout'), timeoutMs + graceMs);
    const onAbort = () => kill('aborted');
    if (ctx.signal.aborted) onAbort();
    ctx.signal.addEventListener('abort', onAbort, { once: true });
    child.stdout?.on('data', (chunk: Buffer) => output.push(chunk));
    child.stderr?.on('data', (chunk: Buffer) => output.push(chunk));
    let settled = false;
    const done = (value: { code: number | null; signal: NodeJS.Signals | null; spawnError?: Error }) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      ctx.signal.removeEventListener('abort', onAbort);
      // Whatever the script started in its group goes with it (at its exit that was done already; the
      // group's number may be free by now).
      if (!exited) killGroup(child.pid);
      child.stdio[3]?.destroy();
      resolve(value);
    };
    // Processes that left the group (a browser) may hold the output pipes open: kill them as soon as the script is gone.
    child.on('exit', (code, signal) => {
      killGroup(child.pid);
      exited = true;
      sweep = killTagged(dir);
      // Something that escaped every sweep may hold the output pipes open: never wait for it for long.
      setTimeout(() => {
        if (settled) return;
        ctx.jobLog.push('A process the script started kept its output open after the script ended; its output was cut there');
        child.stdout?.destroy();
        child.stderr?.destroy();
        done({ code, signal });
      }, OUTPUT_CLOSE_WAIT_MS).unref();
    });
    child.on('error', (error) => done({ code: null, signal: null, spawnError: error }));
    child.on('close', (code, signal) => done({ code, signal }));
  });
  // One sweep per run: the one begun at the script's exit (it scans again while it finds something).
  await (sweep ?? killTagged(dir));
  const stoppedAt = new Date();
  const durationMs = Math.round(performance.now() - started);
  const text = output.all;
  let out: HarnessOutput | null = null;
  try {
    out = JSON.parse(await readFile(path.join(dir, 'output.json'), 'utf8')) as HarnessOutput;
  } catch {
    out = null;
  }
  // Before anything is scrubbed or handed over: a value found in one output is then scrubbed in all.
  if (detector) await detectSecrets(detector, text, out, artifactsDir, ctx);
  // Nothing of the run is alive any more: its files cannot change while they are handed over.
  const artifactLines = artifactsDir ? await handOverArtifacts(artifactsDir, ctx) : [];
  const lines = output.lines();
  // A V8 heap exhaustion prints its own dump: keep the jobLog short, say it once.
  const outOfMemory = /heap out of memory|Reached heap limit|Allocation failed/i.test(text);
  if (outOfMemory) killed ??= 'memory';
  for (const line of outOfMemory ? lines.filter((l) => !/Mark-Compact|Scavenge|<---|FATAL ERROR|Native stack|^\s*\d+: |^\s*$/.test(l)).slice(0, 20) : lines) {
    ctx.jobLog.push(line);
  }
  if (detector) ctx.jobLog.push(...detectionLines(detector));
  const base = { assertion: false, steps: [], requests: [], durationMs, startedAt, stoppedAt };
  // After the script's own output, also when it was killed: what it saved before is kept.
  for (const shot of Array.isArray(out?.failureShots) ? out.failureShots : []) {
    ctx.jobLog.push(shot.error ? `Failure screenshot ${shot.name} of ${shot.url} could not be taken: ${shot.error}` : `Failure screenshot ${shot.name}: ${shot.url}`);
  }
  ctx.jobLog.push(...artifactLines);
  const dropped = out?.pageEventsDropped;
  if (dropped?.pageErrors) ctx.jobLog.push(`${dropped.pageErrors} more page errors were not kept (at most ${PAGE_EVENTS_MAX})`);
  if (dropped?.consoleMessages) ctx.jobLog.push(`${dropped.consoleMessages} more console messages were not kept (at most ${PAGE_EVENTS_MAX})`);
  if (killed === 'timeout' || out?.timedOut === true) {
    const at = out?.step ? ` at ${stepWord(options.kind)} "${out.step}"` : '';
    return { ...evidence(out, base), ok: false, killed: 'timeout', error: `${options.kind} was stopped${at}: it ran past its time limit of ${timeoutMs} ms` };
  }
  if (killed === 'memory') return { ...base, ok: false, killed, error: `${options.kind} was killed: it exceeded its memory limit of ${memoryMb} MB` };
  if (killed === 'aborted') {
    const reason = ctx.signal.reason;
    return { ...base, ok: false, killed, error: `${options.kind} was killed: ${reason instanceof Error ? reason.message : 'the job was aborted'}` };
  }
  if (exit.spawnError) return { ...base, ok: false, error: `${options.kind} could not start: ${exit.spawnError.message}` };
  if (!out) {
    const how = exit.signal ? `signal ${exit.signal}` : `exit code ${exit.code}`;
    return { ...base, ok: false, error: `${options.kind} ended without a result (${how})` };
  }
  const run: ScriptRun = {
    ...evidence(out, base),
    ok: out.ok,
    assertion: out.assertion === true,
    ...(out.request !== undefined ? { request: out.request } : {}),
    ...(out.environment && typeof out.environment === 'object' ? { environment: out.environment } : {}),
    ...(typeof out.line === 'number' ? { line: out.line } : {}),
  };
  if (!out.ok) {
    let message = out.error ?? 'failed';
    if (out.moduleNotFound) {
      message += ` (runtime ${options.runtime.name} provides: ${Object.keys(options.runtime.dependencies).join(', ')}, and Node.js built-ins)`;
    }
    const where = [
      out.step ? `${stepWord(options.kind)} "${out.step}"` : undefined,
      typeof out.line === 'number' ? `line ${out.line}` : out.location ? out.location : undefined,
    ]
      .filter(Boolean)
      .join(', ');
    run.error = `${options.kind} failed${where ? ` at ${where}` : ''}: ${message}`;
  }
  return run;
}

/**
 * Writes a PLAYWRIGHT suite into `dir/suite`: the spec (`check.spec.ts`) and its files, and the
 * '@playwright/test' shim into `dir/shim`. Returns the runner's path in the runtime, the specs to run
 * and the shim's folder.
 */
async function writeSuite(dir: string, options: ScriptOptions, sources: HarnessSources): Promise<{ cli: string; specs: string[]; shimDir: string }> {
  const suiteDir = path.join(dir, 'suite');
  await mkdir(suiteDir, { mode: 0o700 });
  await writeFile(path.join(suiteDir, SUITE_SPEC_FILE), options.code);
  const specs = [SUITE_SPEC_FILE];
  for (const file of options.files ?? []) {
    const target = path.join(suiteDir, file.path);
    await mkdir(path.dirname(target), { recursive: true, mode: 0o700 });
    await writeFile(target, file.content, { flag: 'wx' });
    if (SUITE_SPEC_PATTERN.test(file.path)) specs.push(file.path);
  }
  const shimDir = path.join(dir, 'shim');
  await mkdir(path.join(shimDir, '@playwright', 'test'), { recursive: true, mode: 0o700 });
  await writeFile(path.join(shimDir, '@playwright', 'test', 'index.js'), sources[SUITE_SHIM_FILE]);
  if (options.dependencies) {
    // The suite's imports find its installed packages in the run's node_modules (a link to the cache
    // entry, one folder up) — but '@playwright/test' first in suite/node_modules: the runner's own,
    // through the shim, whatever version the suite's lockfile holds.
    await symlink(path.join(options.dependencies, 'node_modules'), path.join(dir, 'node_modules'));
    await mkdir(path.join(suiteDir, 'node_modules', '@playwright', 'test'), { recursive: true, mode: 0o700 });
    await writeFile(path.join(suiteDir, 'node_modules', '@playwright', 'test', 'index.js'), sources[SUITE_SHIM_FILE], { flag: 'wx' });
    // CommonJS even when the suite's package.json says "type": "module".
    await writeFile(path.join(suiteDir, 'node_modules', '@playwright', 'test', 'package.json'), '{"type":"commonjs","main":"index.js"}\n', { flag: 'wx' });
  }
  return { cli: path.join(options.runtime.nodeModules, '@playwright', 'test', 'cli.js'), specs, shimDir };
}

/** What a PLAYWRIGHT result's steps are. */
function stepWord(kind: ScriptKind): string {
  return kind === 'PLAYWRIGHT' ? 'test' : 'step';
}

/** How long after its time limit a run may take to keep its evidence before the agent kills it. */
export function timeoutGraceMs(kind: ScriptKind): number {
  if (kind === 'BROWSER' || kind === 'PLAYWRIGHT') return BROWSER_TIMEOUT_GRACE_MS;
  if (kind === 'MULTI_STEP') return MULTI_STEP_TIMEOUT_GRACE_MS;
  return 0;
}

type RunBase = Pick<ScriptRun, 'assertion' | 'steps' | 'requests' | 'durationMs' | 'startedAt' | 'stoppedAt'>;

/** What a run recorded (steps, requests, its pages' errors and console), also when it stopped at its limit. */
function evidence(out: HarnessOutput | null, base: RunBase): RunBase & Pick<ScriptRun, 'step' | 'pageErrors' | 'consoleMessages' | 'tests'> {
  if (!out) return base;
  return {
    ...base,
    steps: Array.isArray(out.steps) ? out.steps : [],
    requests: Array.isArray(out.requests) ? out.requests : [],
    ...(out.step ? { step: out.step } : {}),
    ...(Array.isArray(out.pageErrors) ? { pageErrors: out.pageErrors } : {}),
    ...(Array.isArray(out.consoleMessages) ? { consoleMessages: out.consoleMessages } : {}),
    ...(out.tests && typeof out.tests === 'object' ? { tests: out.tests } : {}),
  };
}

/** What the harness writes to output.json. */
interface HarnessOutput {
  ok: boolean;
  error?: string;
  assertion?: boolean;
  moduleNotFound?: boolean;
  timedOut?: boolean;
  line?: number | null;
  step?: string | null;
  request?: unknown;
  environment?: Record<string, string>;
  steps?: ScriptStep[];
  requests?: ScriptRequestRecord[];
  failureShots?: FailureShot[];
  pageErrors?: PageError[];
  consoleMessages?: ConsoleMessage[];
  pageEventsDropped?: { pageErrors?: number; consoleMessages?: number };
  /** PLAYWRIGHT: where the first failing test failed. */
  location?: string;
  tests?: SuiteCounts;
}

interface FailureShot {
  name: string;
  url: string;
  error?: string;
}

/** What the harness reported, by the name a detection gives its place. */
function reportedOutputs(out: HarnessOutput | null): Array<[string, string]> {
  if (!out) return [];
  const list = <T>(value: T[] | undefined): T[] => (Array.isArray(value) ? value : []);
  const join = (parts: unknown[]) => parts.filter((part) => typeof part === 'string' && part.length > 0).join('\n');
  return [
    ['errors', join([out.error, ...list(out.steps).map((step) => step?.error)])],
    ['consoleMessages', join(list(out.consoleMessages).flatMap((m) => [m?.text, m?.url]))],
    ['pageErrors', join(list(out.pageErrors).flatMap((e) => [e?.name, e?.message, e?.url]))],
    [
      'requests',
      join(list(out.requests).flatMap((r) => [r?.url, r?.error, ...Object.entries(r?.headers ?? {}).map(([name, value]) => `${name}: ${String(value)}`)])),
    ],
  ];
}

/**
 * Searches everything the run produced (its output, what the harness reported, its text artifacts as
 * the hand-over will take them) and registers what is found as the job's secrets. Never throws.
 */
async function detectSecrets(detector: SecretDetector, text: string, out: HarnessOutput | null, artifactsDir: string | null, ctx: ExecutionContext): Promise<void> {
  detector.scan(text, 'jobLog');
  for (const [where, value] of reportedOutputs(out)) detector.scan(value, where);
  if (artifactsDir) {
    // The files the hand-over will take (the same order and limits), each read once more: holding them
    // all until the hand-over would keep up to SCRIPT_ARTIFACTS_TOTAL_BYTES in memory.
    let count = 0;
    let total = 0;
    for (const name of await artifactNames(artifactsDir)) {
      if (count >= SCRIPT_ARTIFACTS_MAX) break;
      const file = path.join(artifactsDir, name);
      try {
        const info = await lstat(file);
        if (!info.isFile() || !SAFE_ARTIFACT.test(name) || info.size > SCRIPT_ARTIFACT_MAX_BYTES || total + info.size > SCRIPT_ARTIFACTS_TOTAL_BYTES) continue;
        count++;
        total += info.size;
        const content = asText(await readFile(file));
        if (content !== null) detector.scan(content, `artifact ${name}`);
      } catch {
        // Gone, or unreadable: the hand-over says so.
      }
    }
  }
  for (const value of detector.values) ctx.secrets?.add(value, 'a value found by secret detection');
}

/** Whether the job's scrubber would touch the value: a declared secret, or a value holding one in any form. */
function knownSecret(ctx: ExecutionContext): (value: string) => boolean {
  return (value) => {
    const scrubber = jobScrubber(ctx.secrets);
    return scrubber !== undefined && scrubber.secretCount > 0 && scrubber.scrubText(value) !== value;
  };
}

/** The jobLog lines of a run's detection: kinds and places, and what a limit left out; never a value. */
function detectionLines(detector: SecretDetector): string[] {
  const found = detector.detections;
  const lines =
    found.length === 0
      ? ['Secret detection: nothing that looks like a credential was found']
      : [`Secret detection: values that look like credentials were masked (${found.map((d) => `${d.kind} in ${d.where}`).join(', ')}); declare them secret`];
  return [...lines, ...detector.notes.map((note) => `Secret detection: ${note}`)];
}

/** A run's artifact files in hand-over order: failure screenshots first, then by name. */
async function artifactNames(folder: string): Promise<string[]> {
  try {
    if (!(await lstat(folder)).isDirectory()) return [];
    return sortArtifactNames(await readdir(folder));
  } catch {
    return [];
  }
}

function sortArtifactNames(names: string[]): string[] {
  return names.sort((a, b) => Number(b.startsWith('failure-')) - Number(a.startsWith('failure-')) || (a < b ? -1 : a > b ? 1 : 0));
}

function collectsArtifacts(kind: ScriptKind, ctx: ExecutionContext): boolean {
  return (kind === 'MULTI_STEP' || kind === 'BROWSER' || kind === 'PLAYWRIGHT') && ctx.artifacts !== undefined;
}

const CONTENT_TYPES: Record<string, string> = {
  '.png': 'image/png',
  '.jpg': 'image/jpeg',
  '.jpeg': 'image/jpeg',
  '.webp': 'image/webp',
  '.pdf': 'application/pdf',
  '.zip': 'application/zip',
  '.webm': 'video/webm',
  '.har': 'application/json',
  '.json': 'application/json',
  '.txt': 'text/plain',
  '.log': 'text/plain',
  '.csv': 'text/csv',
  '.html': 'text/html',
  '.xml': 'application/xml',
};
// ignoreBOM: a byte-order mark stays in the file as it was.
const UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** The file's text when it is UTF-8 without NUL bytes, else null (an image, an archive, …). */
function asText(bytes: Buffer): string | null {
  if (bytes.includes(0)) return null;
  try {
    return UTF8.decode(bytes);
  } catch {
    return null;
  }
}

/**
 * Hands the files a script run left in its artifacts folder to the attempt's
 * artifact writer (then published like diagnostics' files: uploaded, or kept
 * locally). Plain files only (no links, no folders), failure screenshots
 * first, then by name; at most SCRIPT_ARTIFACTS_MAX files,
 * SCRIPT_ARTIFACT_MAX_BYTES each and SCRIPT_ARTIFACTS_TOTAL_BYTES in all.
 * Returns jobLog lines for what was left out. Never throws.
 */
async function handOverArtifacts(folder: string, ctx: ExecutionContext): Promise<string[]> {
  const writer = ctx.artifacts;
  if (!writer) return [];
  const lines: string[] = [];
  let names: string[];
  try {
    // The folder itself, not a link the script put in its place.
    if (!(await lstat(folder)).isDirectory()) return [`Artifacts were left out: the script replaced its artifacts folder`];
    names = await readdir(folder);
  } catch {
    return [];
  }
  sortArtifactNames(names);
  const scrubber = jobScrubber(ctx.secrets);
  let count = 0;
  let total = 0;
  for (const name of names) {
    const file = path.join(folder, name);
    try {
      const info = await lstat(file);
      if (!info.isFile() || !SAFE_ARTIFACT.test(name)) {
        lines.push(`Artifact ${JSON.stringify(name)} was left out: only plain files with plain names are kept`);
        continue;
      }
      if (writer.files.some((f) => f.name === name)) {
        lines.push(`Artifact ${name} was left out: the attempt has a file of that name already`);
        continue;
      }
      if (count >= SCRIPT_ARTIFACTS_MAX) {
        lines.push(`Artifact ${name} (${info.size.toLocaleString('en-US')} bytes) was left out: a script run keeps at most ${SCRIPT_ARTIFACTS_MAX} files`);
        continue;
      }
      if (info.size > SCRIPT_ARTIFACT_MAX_BYTES || total + info.size > SCRIPT_ARTIFACTS_TOTAL_BYTES) {
        const why = info.size > SCRIPT_ARTIFACT_MAX_BYTES ? `over the ${SCRIPT_ARTIFACT_MAX_BYTES.toLocaleString('en-US')}-byte limit per file` : `the run's files would pass ${SCRIPT_ARTIFACTS_TOTAL_BYTES.toLocaleString('en-US')} bytes`;
        lines.push(`Artifact ${name} (${info.size.toLocaleString('en-US')} bytes) was left out: ${why}`);
        continue;
      }
      // What a file is decides how it is scrubbed, not its name: text (UTF-8 without NUL bytes) is
      // scrubbed; in any other file a secret found verbatim keeps the file out.
      const bytes = await readFile(file);
      const text = asText(bytes);
      const contentType = CONTENT_TYPES[path.extname(name).toLowerCase()] ?? (text === null ? 'application/octet-stream' : 'text/plain');
      if (text === null && scrubber && scrubber.secretCount > 0 && scrubber.scrubBuffer(bytes) !== bytes) {
        lines.push(`Artifact ${name} was left out: it holds one of the job's secrets and is not text, so it cannot be scrubbed`);
        continue;
      }
      const target = await writer.pathFor(name);
      if (text !== null) {
        let scrubbed = text;
        if (path.extname(name).toLowerCase() === '.har') {
          const redacted = redactHar(text);
          if (redacted === null) lines.push(`Artifact ${name} is not valid JSON: kept with the job's secrets scrubbed, but its headers could not be redacted`);
          else scrubbed = redacted;
        }
        await writeFile(target, scrubArtifactText(scrubbed, scrubber), { mode: 0o600, flag: 'wx' });
      } else {
        await copyFile(file, target, fsConstants.COPYFILE_EXCL);
      }
      const attached = await writer.attach(name, contentType);
      count++;
      total += attached.size;
    } catch (error) {
      lines.push(`Artifact ${name} was left out: ${(error as Error)?.message ?? String(error)}`);
    }
  }
  return lines;
}
