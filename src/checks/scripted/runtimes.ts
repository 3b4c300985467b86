// Runtimes on disk: runtimes/<name>/ holds the service's Runtime
// record (runtime.json) and the npm project (package.json + lockfile) whose
// node_modules scripted checks may require. The directory is RUNTIMES_DIR,
// by default <package root>/runtimes (where the images put them).

import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const RUNTIME_STAGES = ['CURRENT', 'DEPRECATED', 'REMOVED'] as const;
export type RuntimeStage = (typeof RUNTIME_STAGES)[number];

export interface Runtime {
  name: string;
  stage: RuntimeStage;
  multiStepSupport: boolean;
  nodeJsVersion: string;
  runtimeEndOfLife: string;
  description: string;
  dependencies: Record<string, string>;
  /** The runtime's folder. */
  dir: string;
  /** Its node_modules, installed (npm ci) or not. */
  nodeModules: string;
  installed: boolean;
}

/** <package root>: two levels above this file (src/runtimes or dist/runtimes). */
const PACKAGE_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');

/** RUNTIMES_DIR (`given`, from src/config.ts), else <package root>/runtimes. */
export function runtimesDir(given?: string): string {
  return given ? path.resolve(given) : path.join(PACKAGE_ROOT, 'runtimes');
}

/** Reads one runtime folder; a problem is returned as text, never thrown. */
export function readRuntime(dir: string): Runtime | string {
  const file = path.join(dir, 'runtime.json');
  let raw: Record<string, unknown>;
  try {
    raw = JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>;
  } catch (error) {
    return `${file}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`;
  }
  const name = typeof raw.name === 'string' ? raw.name : path.basename(dir);
  const stage = RUNTIME_STAGES.includes(raw.stage as RuntimeStage) ? (raw.stage as RuntimeStage) : undefined;
  if (stage === undefined) return `${file}: stage must be one of ${RUNTIME_STAGES.join(', ')}`;
  const nodeModules = path.join(dir, 'node_modules');
  const dependencies = raw.dependencies && typeof raw.dependencies === 'object' ? (raw.dependencies as Record<string, string>) : {};
  // Installed: every dependency the record names has a package.json under node_modules.
  const installed = Object.keys(dependencies).every((dep) => existsSync(path.join(nodeModules, dep, 'package.json')));
  return {
    name,
    stage,
    multiStepSupport: raw.multiStepSupport === true,
    nodeJsVersion: String(raw.nodeJsVersion ?? ''),
    runtimeEndOfLife: String(raw.runtimeEndOfLife ?? ''),
    description: String(raw.description ?? ''),
    dependencies,
    dir,
    nodeModules,
    installed,
  };
}

/** Every runtime folder under `dir` (sorted by name); unreadable ones as problems. */
export function listRuntimes(dir: string = runtimesDir()): { runtimes: Runtime[]; problems: string[] } {
  const runtimes: Runtime[] = [];
  const problems: string[] = [];
  let names: string[];
  try {
    names = readdirSync(dir).sort();
  } catch {
    return { runtimes, problems };
  }
  for (const name of names) {
    const sub = path.join(dir, name);
    try {
      if (!statSync(sub).isDirectory() || !existsSync(path.join(sub, 'runtime.json'))) continue;
    } catch {
      continue;
    }
    const runtime = readRuntime(sub);
    if (typeof runtime === 'string') problems.push(runtime);
    else runtimes.push(runtime);
  }
  return { runtimes, problems };
}

export class RuntimeError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RuntimeError';
  }
}

/**
 * The runtime a scripted check runs on: `runtimeId`, or the CURRENT runtime
 * when the check names none. Throws RuntimeError with a message for the result.
 */
export function resolveRuntime(runtimeId: string | undefined, dir: string = runtimesDir()): Runtime {
  const { runtimes } = listRuntimes(dir);
  const usable = runtimes.filter((r) => r.stage !== 'REMOVED' && r.installed).map((r) => r.name);
  const available = usable.length > 0 ? usable.join(', ') : 'none';
  const runtime = runtimeId === undefined ? runtimes.find((r) => r.stage === 'CURRENT') : runtimes.find((r) => r.name === runtimeId);
  if (!runtime) {
    throw new RuntimeError(
      runtimeId === undefined
        ? `No runtimeId given and no CURRENT runtime is installed in ${dir} (available: ${available})`
        : `Runtime ${runtimeId} is not installed on this agent (available: ${available})`,
    );
  }
  if (runtime.stage === 'REMOVED') throw new RuntimeError(`Runtime ${runtime.name} has been REMOVED: move the check to a current runtime (available: ${available})`);
  if (!runtime.installed) throw new RuntimeError(`Runtime ${runtime.name} is present but its packages are not installed (run npm ci --ignore-scripts in ${runtime.dir})`);
  return runtime;
}

/** The package PLAYWRIGHT checks run their suites with. */
export const SUITE_RUNNER_PACKAGE = '@playwright/test';

/** The runtime lists @playwright/test and has it installed. */
export function hasSuiteRunner(runtime: Runtime): boolean {
  return SUITE_RUNNER_PACKAGE in runtime.dependencies && existsSync(path.join(runtime.nodeModules, SUITE_RUNNER_PACKAGE, 'cli.js'));
}

/** Runtimes a claim may advertise: installed and not REMOVED. */
export function usableRuntimeNames(dir: string | undefined): string[] {
  return listRuntimes(runtimesDir(dir))
    .runtimes.filter((r) => r.stage !== 'REMOVED' && r.installed)
    .map((r) => r.name);
}

/** The Chromium that BROWSER checks launch: BROWSER_PATH (`given`), else Debian's chromium; undefined when there is none. */
export function browserPath(given?: string): string | undefined {
  if (given) return existsSync(given) ? given : undefined;
  return ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((candidate) => existsSync(candidate));
}
