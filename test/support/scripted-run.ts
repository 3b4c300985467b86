// What the scripted-check integration files (test/integration/scripted-*.test.ts)
// share: runtime 2026-04 installed from its lockfile (no browser download), a
// small local target, a page served here for Chromium to click, a runtimes
// folder with a DEPRECATED and a REMOVED runtime beside the real one, and one
// `outpost once` run of a file's checks whose FINAL results its tests read.
// Each file starts its own run, so vitest may run any of them alone or in
// parallel.

import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import { readRuntime } from '../../src/checks/scripted/runtimes.js';
import type { CheckResultEntry } from '../../src/core/result-entry.js';
import { cleanEnv, REPO, startAgent, tempDir } from './agent-process.js';
import { startTargetServer, type TargetServer } from './target-server.js';

export interface StepDetail {
  name: string;
  passed: boolean;
  error: string | null;
}
export interface RequestRecord {
  step: string | null;
  method: string;
  url: string;
  status: number | null;
  passed: boolean;
  durationMs: number;
  headers: Record<string, string>;
}
export interface MultiStepDetail {
  requestError: string | null;
  failingStep: string | null;
  steps: StepDetail[];
  requests: RequestRecord[];
  jobLog: string[];
}
export interface ApiDetail {
  requestError: string | null;
  response: { status: number; body: string } | null;
  assertions: Array<{ source: string; passed: boolean; error?: string }>;
  jobLog: string[];
}
export interface Asset {
  name: string;
  url: string;
  size: number;
  contentType: string;
}
export interface BrowserDetail extends MultiStepDetail {
  pageErrors: Array<{ step: string | null; url: string; name: string; message: string }>;
  consoleMessages: Array<{ step: string | null; type: string; text: string; url: string; line: number | null }>;
}
export interface SuiteDetail extends MultiStepDetail {
  steps: Array<StepDetail & { status: string; location: string; durationMs: number }>;
  tests: { expected: number; unexpected: number; flaky: number; skipped: number } | null;
}

export const RUNTIME = '2026-04';
export const RUNTIME_DIR = path.join(REPO, 'runtimes', RUNTIME);
export const SIGNING_KEY = 'signing-key-0123456789';
export const SECRET_TOKEN = 'tok-very-secret-4711';
export const AGENT_SECRET = 'agent-held-secret-9876';
/** Begins with a two-byte character: a pipe chunk may end inside it. */
export const UMLAUT_SECRET = 'ä-geheim-5150';

/** One machine-wide lock: files running in parallel must not run `npm ci` in the same folder at once. */
const INSTALL_LOCK = path.join(tmpdir(), 'outpost-runtime-install.lock');

/** Installs the runtime's packages from its lockfile, once (idempotent), without install scripts or a browser. */
export async function installRuntime(): Promise<void> {
  const installed = () => {
    const runtime = readRuntime(RUNTIME_DIR);
    // Also what package.json pins besides the record's packages (npm, pnpm, yarn for suites' dependencies).
    const pinned = Object.keys((JSON.parse(readFileSync(path.join(RUNTIME_DIR, 'package.json'), 'utf8')) as { dependencies?: Record<string, string> }).dependencies ?? {});
    return typeof runtime !== 'string' && runtime.installed && pinned.every((name) => existsSync(path.join(RUNTIME_DIR, 'node_modules', name, 'package.json')));
  };
  if (installed()) return;
  const deadline = Date.now() + 300_000;
  for (;;) {
    try {
      mkdirSync(INSTALL_LOCK);
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      if (Date.now() > deadline) throw new Error(`${INSTALL_LOCK} is still held after 300 s; remove it if no test run is installing`);
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
  }
  try {
    if (installed()) return;
    execFileSync('npm', ['ci', '--ignore-scripts', '--no-audit', '--no-fund'], {
      cwd: RUNTIME_DIR,
      env: { ...process.env, PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD: '1' },
      stdio: 'ignore',
    });
  } finally {
    rmSync(INSTALL_LOCK, { recursive: true, force: true });
  }
}

export const CLICK_PAGE = `<!doctype html>
<html><head><title>Outpost click test</title></head>
<body style="font: 32px sans-serif">
<p id="status">Waiting</p>
<button id="go" onclick="document.getElementById('status').textContent = 'Clicked'; setTimeout(() => { throw new RangeError('late click handler'); })">Go</button>
<script>console.log('page ready'); console.warn('deprecated thing');</script>
</body></html>`;

/** Lists `ps -eo args`: the tests look for processes a run may have left behind. */
export const processes = (): string => execFileSync('ps', ['-eo', 'args'], { encoding: 'utf8' });

/** A runtime record without packages, for `ScriptedRunOptions.runtimes`. */
export interface ExtraRuntime {
  name: string;
  stage: string;
  runtimeEndOfLife: string;
}

/** A runtimes folder with the real 2026-04, a DEPRECATED 2025-10 without packages, a REMOVED 2023-02, and `extra`. */
function makeRuntimesDir(extra: readonly ExtraRuntime[] = []): string {
  const dir = tempDir('outpost-runtimes-');
  for (const { name, stage, runtimeEndOfLife } of extra) {
    mkdirSync(path.join(dir, name, 'node_modules'), { recursive: true });
    writeFileSync(
      path.join(dir, name, 'runtime.json'),
      JSON.stringify({ name, stage, multiStepSupport: true, nodeJsVersion: '24', runtimeEndOfLife, description: 'no packages', dependencies: {} }),
    );
  }
  symlinkSync(RUNTIME_DIR, path.join(dir, RUNTIME));
  // One without @playwright/test (its packages, none, are installed).
  mkdirSync(path.join(dir, '2025-10', 'node_modules'), { recursive: true });
  writeFileSync(
    path.join(dir, '2025-10', 'runtime.json'),
    JSON.stringify({ name: '2025-10', stage: 'DEPRECATED', multiStepSupport: true, nodeJsVersion: '20', runtimeEndOfLife: '10/31/2027', description: 'no packages', dependencies: {} }),
  );
  mkdirSync(path.join(dir, '2023-02'));
  writeFileSync(
    path.join(dir, '2023-02', 'runtime.json'),
    JSON.stringify({ name: '2023-02', stage: 'REMOVED', multiStepSupport: true, nodeJsVersion: '18', runtimeEndOfLife: '01/31/2025', description: 'an old one', dependencies: {} }),
  );
  return dir;
}

export interface ScriptedRun {
  readonly target: TargetServer;
  /** CLICK_PAGE's address: a button that changes the text of #status. */
  readonly pageUrl: string;
  readonly runtimesDir: string;
  /** The agent's TMPDIR: its scripts' folders are made here, so a process left behind would name it. */
  readonly scriptsTmp: string;
  readonly stdout: string;
  readonly stderr: string;
  readonly exitCode: number | null;
  final(id: string): CheckResultEntry;
  multi(id: string): MultiStepDetail;
  api(id: string): ApiDetail;
  browserDetail(id: string): BrowserDetail;
  suite(id: string): SuiteDetail;
  /** jobAssets of a BROWSER or PLAYWRIGHT check. */
  assets(id: string): Asset[];
}

/**
 * Starts the target and the page server in beforeAll, then runs `outpost once` on the checks
 * `makeChecks` returns (with BASE, PAGE and the secret API_TOKEN and UMLAUT_SECRET as file variables)
 * and keeps their FINAL results; closes both servers in afterAll. `extraEnv` is added to the agent's environment.
 */
export interface ScriptedRunOptions {
  /** More agent environment (SECRET_DETECTION, …). */
  env?: Record<string, string>;
  /** More runtimes (records without packages) in the run's runtimes folder. */
  runtimes?: readonly ExtraRuntime[];
}

export function useScriptedRun(makeChecks: (at: { target: TargetServer; pageUrl: string }) => object[], options: ScriptedRunOptions = {}): ScriptedRun {
  let target: TargetServer | undefined;
  let pageServer: Server | undefined;
  let pageUrl = '';
  let runtimesDir = '';
  let scriptsTmp = '';
  let stdout = '';
  let stderr = '';
  let exitCode: number | null = null;
  const results = new Map<string, CheckResultEntry>();

  beforeAll(async () => {
    await installRuntime();
    target = await startTargetServer();
    const server = createServer((req, res) => {
      if (new URL(req.url ?? '/', 'http://page').pathname !== '/page') return void res.writeHead(404).end();
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(CLICK_PAGE);
    });
    pageServer = server;
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    pageUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/page`;
    runtimesDir = makeRuntimesDir(options.runtimes);
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
        checks: makeChecks({ target, pageUrl }),
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
      cleanEnv({ TMPDIR: scriptsTmp, STATE_DIR: tempDir('outpost-scripted-state-'), JOB_CONCURRENCY: '4', RUNTIMES_DIR: runtimesDir, SCRIPT_MEMORY_MB: '64', OUTPOST_SECRET_AGENT: AGENT_SECRET, UNRELATED_AGENT_SETTING: 'x', ...options.env }),
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

  const final = (id: string) => {
    const entry = results.get(id);
    if (!entry) throw new Error(`no FINAL result for ${id}; stderr: ${stderr.slice(-2000)}`);
    return entry;
  };
  return {
    get target() {
      if (!target) throw new Error('the target server starts in beforeAll');
      return target;
    },
    get pageUrl() {
      return pageUrl;
    },
    get runtimesDir() {
      return runtimesDir;
    },
    get scriptsTmp() {
      return scriptsTmp;
    },
    get stdout() {
      return stdout;
    },
    get stderr() {
      return stderr;
    },
    get exitCode() {
      return exitCode;
    },
    final,
    multi: (id) => final(id).multiStepCheckResult as unknown as MultiStepDetail,
    api: (id) => final(id).apiCheckResult as unknown as ApiDetail,
    browserDetail: (id) => final(id).browserCheckResult as unknown as BrowserDetail,
    suite: (id) => final(id).browserCheckResult as unknown as SuiteDetail,
    assets: (id) => (final(id).browserCheckResult as unknown as { jobAssets: Asset[] }).jobAssets,
  };
}
