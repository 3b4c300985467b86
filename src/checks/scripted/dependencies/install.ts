// Runs one install of a suite's dependencies: the runtime's pinned npm, pnpm
// or yarn (runtimes/<id>/package.json) on the agent's Node.js, frozen to the
// lockfile, install scripts off unless the check allows them, in a scratch
// folder of its own: HOME, the package manager's cache and store, TMPDIR and
// its configuration (registry, proxies) all live there, and its environment
// is built here (proxies, NODE_EXTRA_CA_CERTS), never inherited. It runs under
// the scripts' isolation (src/checks/scripted/isolation.ts), in a process
// group of its own, killed at its time limit or when the job is aborted; its
// output is kept up to DEPENDENCY_OUTPUT_LIMIT_BYTES.

import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { lchown, lstat, mkdir, readdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import type { DependencySettings } from '../../executor.js';
import { giveToRunUid, isolatedCommand, type ScriptIsolation } from '../isolation.js';
import { OutputCapture } from '../runner.js';
import type { PackageManager, SuiteDependencies } from './lockfile.js';

/** The installer's output kept for the jobLog. */
export const DEPENDENCY_OUTPUT_LIMIT_BYTES = 64 * 1024;

/** Each package manager's command-line entry point inside a runtime's node_modules. */
const CLI: Readonly<Record<PackageManager, string>> = {
  npm: 'npm/bin/npm-cli.js',
  pnpm: 'pnpm/bin/pnpm.cjs',
  yarn: 'yarn/bin/yarn.js',
};

export interface ManagerInstall {
  manager: PackageManager;
  cli: string;
  version: string;
}

/** The runtime's copy of the package manager; null when the runtime does not pin it. */
export function managerIn(nodeModules: string, manager: PackageManager): ManagerInstall | null {
  const cli = path.join(nodeModules, CLI[manager]);
  try {
    const { version } = JSON.parse(readFileSync(path.join(nodeModules, manager, 'package.json'), 'utf8')) as { version?: unknown };
    if (typeof version !== 'string' || !existsSync(cli)) return null;
    return { manager, cli, version };
  } catch {
    return null;
  }
}

export interface InstallRequest {
  deps: SuiteDependencies;
  manager: ManagerInstall;
  /** An empty folder of this install's own; the packages end up in `<scratch>/project/node_modules`. */
  scratch: string;
  settings: DependencySettings;
  extraCaCerts?: string;
  isolation: ScriptIsolation;
  signal: AbortSignal;
  /**
   * A run uid to install as (install scripts allowed, agent as root): the scratch folder is handed to it
   * before, and what it installed back to the agent after, so no run uid owns a cache entry.
   */
  uid?: number;
}

export interface InstallResult {
  ok: boolean;
  /** The installer's output, one jobLog line each (bounded). */
  lines: string[];
  /** Why it failed, one line naming the package when the installer did. */
  error?: string;
  durationMs: number;
}

/** The folder the installed project is in, inside an install's scratch folder. */
export function projectDir(scratch: string): string {
  return path.join(scratch, 'project');
}

/** `//user:password@` in a URL becomes `//*****@`: a proxy's or registry's credentials stay out of the jobLog. */
function maskCredentials(text: string): string {
  return text.replace(/\/\/[^/?#\s]*@/g, '//*****@');
}

/** One config value on one line: a newline in it would add settings of its own. */
const oneLine = (value: string): string => value.replace(/[\r\n]/g, '');

function managerArgs(manager: PackageManager, allowScripts: boolean, scratch: string): string[] {
  const scripts = allowScripts ? [] : ['--ignore-scripts'];
  switch (manager) {
    case 'npm':
      return ['ci', ...scripts, '--no-audit', '--no-fund', '--no-update-notifier', '--no-progress', '--cache', path.join(scratch, 'cache'), '--loglevel=warn'];
    case 'pnpm':
      return [
        'install',
        '--frozen-lockfile',
        ...scripts,
        '--reporter=append-only',
        '--store-dir',
        path.join(scratch, 'store'),
        '--config.update-notifier=false',
        '--config.manage-package-manager-versions=false',
        '--config.package-manager-strict=false',
        // pnpm 10 builds no dependency unless told which: allowing scripts allows them all.
        ...(allowScripts ? ['--config.dangerously-allow-all-builds=true'] : []),
      ];
    case 'yarn':
      return ['install', '--frozen-lockfile', '--non-interactive', ...scripts, '--no-progress', '--cache-folder', path.join(scratch, 'cache')];
  }
}

/** ~/.npmrc (all three read it) and ~/.yarnrc: the registry and the agent's proxies, in HOME, not in the installed project. */
function configFiles(settings: DependencySettings): {
  npmrc: string;
  yarnrc: string;
} {
  const npm: string[] = ['update-notifier=false', 'fund=false', 'audit=false'];
  const yarn: string[] = ['disable-self-update-check true'];
  if (settings.registry) {
    npm.push(`registry=${oneLine(settings.registry)}`);
    yarn.push(`registry ${JSON.stringify(oneLine(settings.registry))}`);
  }
  const http = settings.httpProxy;
  const https = settings.httpsProxy ?? settings.httpProxy;
  if (http) {
    npm.push(`proxy=${oneLine(http)}`);
    yarn.push(`proxy ${JSON.stringify(oneLine(http))}`);
  }
  if (https) {
    npm.push(`https-proxy=${oneLine(https)}`);
    yarn.push(`https-proxy ${JSON.stringify(oneLine(https))}`);
  }
  if (settings.noProxy) npm.push(`noproxy=${oneLine(settings.noProxy)}`);
  return { npmrc: `${npm.join('\n')}\n`, yarnrc: `${yarn.join('\n')}\n` };
}

function installerEnvironment(request: InstallRequest): Record<string, string> {
  const { scratch, settings } = request;
  const home = path.join(scratch, 'home');
  const env: Record<string, string> = {
    // Lifecycle scripts (when allowed) call `node` and `sh`: the agent's Node.js first.
    PATH: [path.dirname(process.execPath), '/usr/local/bin', '/usr/bin', '/bin'].join(path.delimiter),
    HOME: home,
    TMPDIR: path.join(scratch, 'tmp'),
    XDG_CACHE_HOME: path.join(scratch, 'cache'),
    XDG_CONFIG_HOME: path.join(home, '.config'),
    XDG_DATA_HOME: path.join(home, '.local', 'share'),
    XDG_STATE_HOME: path.join(home, '.local', 'state'),
    npm_config_userconfig: path.join(home, '.npmrc'),
    YARN_CACHE_FOLDER: path.join(scratch, 'cache'),
    CI: 'true',
    // A suite's packages never download a browser: the agent's Chromium is used.
    PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD: '1',
  };
  const http = settings.httpProxy;
  const https = settings.httpsProxy ?? settings.httpProxy;
  if (http) env.HTTP_PROXY = env.http_proxy = http;
  if (https) env.HTTPS_PROXY = env.https_proxy = https;
  if (settings.noProxy) env.NO_PROXY = env.no_proxy = settings.noProxy;
  if (request.extraCaCerts) env.NODE_EXTRA_CA_CERTS = request.extraCaCerts;
  if (settings.registry) env.npm_config_registry = settings.registry;
  return env;
}

/** The most files an install as a run uid may leave (each is handed back to the agent). */
const TAKE_BACK_MAX_ENTRIES = 500_000;

/** Hands what a run uid installed back to the agent's uid (links themselves, not what they point to); false past the bound. */
async function takeBack(dir: string): Promise<boolean> {
  const uid = process.getuid?.() ?? 0;
  const gid = process.getgid?.() ?? 0;
  const stack = [dir];
  let seen = 0;
  while (stack.length > 0) {
    const current = stack.pop() as string;
    await lchown(current, uid, gid);
    if (!(await lstat(current)).isDirectory()) continue;
    for (const name of await readdir(current)) {
      if (++seen > TAKE_BACK_MAX_ENTRIES) return false;
      stack.push(path.join(current, name));
    }
  }
  return true;
}

/** The lines that say why an install failed, as each package manager prints them; the last line otherwise. */
export function whyInstallFailed(manager: PackageManager, lines: string[]): string {
  const text = lines.map((l) => l.trim()).filter(Boolean);
  let telling: string[] = [];
  if (manager === 'pnpm') {
    const at = text.findIndex((l) => /ERR_PNPM_\w+/.test(l));
    if (at >= 0) telling = [text[at] as string];
  } else if (manager === 'npm') {
    telling = text
      .filter((l) => /^npm (error|ERR!)/.test(l))
      .map((l) => l.replace(/^npm (error|ERR!)\s*/, ''))
      .filter((l) => l && !/^(code|errno|syscall) |^A complete log|^\s*$|^Log files were not written/.test(l))
      .slice(0, 2);
  } else {
    telling = text
      .filter((l) => /^error /.test(l) && !/^error Command failed/.test(l))
      .slice(0, 2)
      .map((l) => l.replace(/^error /, ''));
  }
  const chosen = telling.length > 0 ? telling : text.slice(-1);
  return maskCredentials(chosen.join(' — ')).slice(0, 1_000) || 'the installer printed nothing';
}

/** Runs the install; never throws for what the installer does (a bug in the agent aside). */
export async function runInstall(request: InstallRequest): Promise<InstallResult> {
  const { deps, manager, scratch, settings } = request;
  const project = projectDir(scratch);
  const home = path.join(scratch, 'home');
  await Promise.all([project, home, path.join(scratch, 'cache'), path.join(scratch, 'tmp')].map((dir) => mkdir(dir, { recursive: true, mode: 0o755 })));
  const config = configFiles(settings);
  await Promise.all([
    writeFile(path.join(project, 'package.json'), deps.packageJson),
    writeFile(path.join(project, deps.lockfile), deps.lockfileContent),
    writeFile(path.join(home, '.npmrc'), config.npmrc, { mode: 0o600 }),
    writeFile(path.join(home, '.yarnrc'), config.yarnrc, { mode: 0o600 }),
  ]);
  // Without scripts, the package manager's own code runs: the agent's uid, and namespaces still apply. With
  // them, the suite's code runs: as root's run uid (never uid 0, which owns the agent's files), else the agent's.
  if (request.uid !== undefined) await giveToRunUid(scratch, request.uid);
  const command = isolatedCommand(request.isolation, { dir: scratch, ...(request.uid !== undefined ? { uid: request.uid } : {}) }, process.execPath, [
    manager.cli,
    ...managerArgs(manager.manager, deps.allowScripts, scratch),
  ]);
  const output = new OutputCapture(DEPENDENCY_OUTPUT_LIMIT_BYTES);
  const started = performance.now();
  let killed: 'timeout' | 'aborted' | undefined;
  const exit = await new Promise<{
    code: number | null;
    signal: NodeJS.Signals | null;
    error?: Error;
  }>((resolve) => {
    let child: ReturnType<typeof spawn>;
    try {
      child = spawn(command.file, command.args, {
        cwd: project,
        env: installerEnvironment(request),
        detached: true,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
    } catch (error) {
      resolve({ code: null, signal: null, error: error as Error });
      return;
    }
    const killGroup = () => {
      try {
        if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
      } catch {
        // Gone already.
      }
    };
    const kill = (why: 'timeout' | 'aborted') => {
      killed ??= why;
      killGroup();
    };
    const timer = setTimeout(() => kill('timeout'), settings.installTimeoutMs);
    const onAbort = () => kill('aborted');
    if (request.signal.aborted) onAbort();
    request.signal.addEventListener('abort', onAbort, { once: true });
    child.stdout?.on('data', (chunk: Buffer) => output.push(chunk));
    child.stderr?.on('data', (chunk: Buffer) => output.push(chunk));
    let settled = false;
    const done = (value: { code: number | null; signal: NodeJS.Signals | null; error?: Error }) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      request.signal.removeEventListener('abort', onAbort);
      killGroup();
      resolve(value);
    };
    // What the installer left running (a lifecycle script's daemon) goes with it, and never holds the pipes open for long.
    child.on('exit', (code, signal) => {
      killGroup();
      setTimeout(() => {
        child.stdout?.destroy();
        child.stderr?.destroy();
        done({ code, signal });
      }, 2_000).unref();
    });
    child.on('error', (error) => done({ code: null, signal: null, error }));
    child.on('close', (code, signal) => done({ code, signal }));
  });
  const durationMs = Math.round(performance.now() - started);
  const lines = output.lines().map((line) => maskCredentials(`[${manager.manager}] ${line}`));
  const what = `Installing the suite's dependencies from ${deps.lockfile} with ${manager.manager} ${manager.version}`;
  if (killed === 'timeout')
    return {
      ok: false,
      lines,
      durationMs,
      error: `${what} was stopped: it ran past DEPENDENCY_INSTALL_TIMEOUT_SECONDS (${Math.round(settings.installTimeoutMs / 1000)} s)`,
    };
  if (killed === 'aborted') {
    const reason = request.signal.reason;
    return {
      ok: false,
      lines,
      durationMs,
      error: `${what} was stopped: ${reason instanceof Error ? reason.message : 'the job was aborted'}`,
    };
  }
  if (exit.error)
    return {
      ok: false,
      lines,
      durationMs,
      error: `${what} could not start: ${exit.error.message}`,
    };
  if (exit.code !== 0) {
    const how = exit.signal ? `signal ${exit.signal}` : `exit code ${exit.code}`;
    return {
      ok: false,
      lines,
      durationMs,
      error: `${what} failed (${how}): ${whyInstallFailed(manager.manager, output.lines())}`,
    };
  }
  // A package.json without dependencies installs nothing, and some managers then make no folder.
  await mkdir(path.join(project, 'node_modules'), {
    recursive: true,
    mode: 0o755,
  });
  if (request.uid !== undefined && !(await takeBack(project))) return { ok: false, lines, durationMs, error: `${what} left more than ${TAKE_BACK_MAX_ENTRIES} files` };
  return { ok: true, lines, durationMs };
}
