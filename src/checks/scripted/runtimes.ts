// Runtimes on disk: runtimes/<name>/ holds the service's Runtime
// record (runtime.json) and the npm project (package.json + lockfile) whose
// node_modules scripted checks may require. The directory is RUNTIMES_DIR,
// by default <package root>/runtimes (where the images put them).

import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** Every stage the service gives a runtime. ALPHA and BETA are previews, STABLE a released runtime besides the CURRENT one. */
export const RUNTIME_STAGES = ['ALPHA', 'BETA', 'CURRENT', 'DEPRECATED', 'REMOVED', 'STABLE'] as const;
export type RuntimeStage = (typeof RUNTIME_STAGES)[number];

/** A runtime this close to its end of life gets a warning line in each result's jobLog. */
export const END_OF_LIFE_WARNING_DAYS = 30;
const DAY_MS = 86_400_000;

/**
 * A runtimeEndOfLife (month/day/year, `04/30/2028`) as the first instant of that day in UTC, or
 * null when the text is not a real calendar date in that form.
 */
export function endOfLifeDate(text: string): Date | null {
  const m = /^(\d{1,2})\/(\d{1,2})\/(\d{4})$/.exec(text);
  if (!m) return null;
  const [month, day, year] = [Number(m[1]), Number(m[2]), Number(m[3])];
  const date = new Date(Date.UTC(year, month - 1, day));
  return date.getUTCFullYear() === year && date.getUTCMonth() === month - 1 && date.getUTCDate() === day ? date : null;
}

/**
 * Whether checks may not run on the runtime: its stage is REMOVED, or its end of life has come (the
 * record's date is the day it is removed, so from 00:00 UTC that day it counts as REMOVED).
 */
export function isRemoved(runtime: Pick<Runtime, 'stage' | 'endOfLife'>, now: Date = new Date()): boolean {
  return runtime.stage === 'REMOVED' || (runtime.endOfLife !== null && now.getTime() >= runtime.endOfLife.getTime());
}

/** Whole days from `now` until the runtime's end of life (rounded up), or null without one. */
export function daysToEndOfLife(runtime: Pick<Runtime, 'endOfLife'>, now: Date = new Date()): number | null {
  return runtime.endOfLife === null ? null : Math.ceil((runtime.endOfLife.getTime() - now.getTime()) / DAY_MS);
}

/**
 * The jobLog lines a run on this runtime starts with: a preview stage (ALPHA, BETA), DEPRECATED, an end of
 * life within END_OF_LIFE_WARNING_DAYS. Empty for a CURRENT or STABLE runtime far from its end.
 */
export function runtimeNotices(runtime: Runtime, now: Date = new Date()): string[] {
  const lines: string[] = [];
  if (runtime.stage === 'ALPHA' || runtime.stage === 'BETA') {
    lines.push(`Runtime ${runtime.name} is ${runtime.stage}: a preview, whose packages may still change before it becomes STABLE`);
  }
  if (runtime.stage === 'DEPRECATED') lines.push(`Runtime ${runtime.name} is DEPRECATED (end of life ${runtime.runtimeEndOfLife})`);
  const days = daysToEndOfLife(runtime, now);
  if (days !== null && days > 0 && days <= END_OF_LIFE_WARNING_DAYS) {
    lines.push(`Runtime ${runtime.name} reaches its end of life on ${runtime.runtimeEndOfLife} (in ${days} day${days === 1 ? '' : 's'}): from then on checks on it are refused; move them to a current runtime`);
  }
  return lines;
}

export interface Runtime {
  name: string;
  stage: RuntimeStage;
  multiStepSupport: boolean;
  nodeJsVersion: string;
  runtimeEndOfLife: string;
  /** runtimeEndOfLife as a date (00:00 UTC that day), or null when the record gives none. */
  endOfLife: Date | null;
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
  const runtimeEndOfLife = typeof raw.runtimeEndOfLife === 'string' ? raw.runtimeEndOfLife : '';
  const endOfLife = runtimeEndOfLife === '' ? null : endOfLifeDate(runtimeEndOfLife);
  if (runtimeEndOfLife !== '' && endOfLife === null) return `${file}: runtimeEndOfLife must be a month/day/year date such as 04/30/2028`;
  const nodeModules = path.join(dir, 'node_modules');
  const dependencies = raw.dependencies && typeof raw.dependencies === 'object' ? (raw.dependencies as Record<string, string>) : {};
  // Installed: every dependency the record names has a package.json under node_modules.
  const installed = Object.keys(dependencies).every((dep) => existsSync(path.join(nodeModules, dep, 'package.json')));
  return {
    name,
    stage,
    multiStepSupport: raw.multiStepSupport === true,
    nodeJsVersion: String(raw.nodeJsVersion ?? ''),
    runtimeEndOfLife,
    endOfLife,
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
export function resolveRuntime(runtimeId: string | undefined, dir: string = runtimesDir(), now: Date = new Date()): Runtime {
  const { runtimes } = listRuntimes(dir);
  const usable = runtimes.filter((r) => !isRemoved(r, now) && r.installed).map((r) => r.name);
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
  if (isRemoved(runtime, now)) {
    throw new RuntimeError(
      `Runtime ${runtime.name} reached its end of life on ${runtime.runtimeEndOfLife} and is treated as REMOVED: move the check to a current runtime (available: ${available})`,
    );
  }
  if (!runtime.installed) throw new RuntimeError(`Runtime ${runtime.name} is present but its packages are not installed (run npm ci --ignore-scripts in ${runtime.dir})`);
  return runtime;
}

/** The package PLAYWRIGHT checks run their suites with. */
export const SUITE_RUNNER_PACKAGE = '@playwright/test';

/** The runtime lists @playwright/test and has it installed. */
export function hasSuiteRunner(runtime: Runtime): boolean {
  return SUITE_RUNNER_PACKAGE in runtime.dependencies && existsSync(path.join(runtime.nodeModules, SUITE_RUNNER_PACKAGE, 'cli.js'));
}

/** Runtimes a claim may advertise: installed, not REMOVED and not past their end of life. */
export function usableRuntimeNames(dir: string | undefined): string[] {
  return listRuntimes(runtimesDir(dir))
    .runtimes.filter((r) => !isRemoved(r) && r.installed)
    .map((r) => r.name);
}

/** The packages of the runtime's record that have no package.json under its node_modules. */
export function missingPackages(runtime: Runtime): string[] {
  return Object.keys(runtime.dependencies).filter((dep) => !existsSync(path.join(runtime.nodeModules, dep, 'package.json')));
}

/** The Chromium that BROWSER checks launch: BROWSER_PATH (`given`), else Debian's chromium; undefined when there is none. */
export function browserPath(given?: string): string | undefined {
  if (given) return existsSync(given) ? given : undefined;
  return ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((candidate) => existsSync(candidate));
}
