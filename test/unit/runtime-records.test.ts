// runtimes/<name>/: the service's Runtime record (runtime.json) and the npm
// project that installs it (package.json + package-lock.json) must say the same.

import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO } from '../support/agent-process.js';

const RUNTIMES_DIR = path.join(REPO, 'runtimes');
const STAGES = ['ALPHA', 'BETA', 'CURRENT', 'DEPRECATED', 'REMOVED', 'STABLE'];
const EXACT_VERSION = /^\d+\.\d+\.\d+$/;

interface RuntimeRecord {
  name: string;
  multiStepSupport: boolean;
  nodeJsVersion: string;
  dependencies: Record<string, string>;
  stage: string;
  runtimeEndOfLife: string;
  description: string;
}

const readJson = <T>(file: string): T => JSON.parse(readFileSync(file, 'utf8')) as T;

/**
 * Besides the record's packages, a runtime may pin the package managers that install PLAYWRIGHT suites'
 * own dependencies (src/checks/scripted/dependencies/install.ts): tools, not packages the record offers.
 */
const PACKAGE_MANAGERS = ['npm', 'pnpm', 'yarn'];
/** yarn's preinstall only matters for `npm install -g yarn` (it removes a Corepack shim); skipped, it changes nothing. */
const HARMLESS_INSTALL_SCRIPTS = ['node_modules/yarn'];
/** What package.json pins: the record's packages, and the package managers it adds. */
function pinned(pkg: Record<string, string> | undefined, record: RuntimeRecord): { records: Record<string, string>; managers: Record<string, string> } {
  const entries = Object.entries(pkg ?? {});
  return {
    records: Object.fromEntries(entries.filter(([name]) => !PACKAGE_MANAGERS.includes(name) || name in record.dependencies)),
    managers: Object.fromEntries(entries.filter(([name]) => PACKAGE_MANAGERS.includes(name) && !(name in record.dependencies))),
  };
}

const names = readdirSync(RUNTIMES_DIR).filter((n) => statSync(path.join(RUNTIMES_DIR, n)).isDirectory());
const runtimes = names.map((name) => ({ name, dir: path.join(RUNTIMES_DIR, name) }));

/** "04/30/2027" → a real calendar date, or null. */
function monthDayYear(text: string): Date | null {
  const m = /^(\d{2})\/(\d{2})\/(\d{4})$/.exec(text);
  if (!m) return null;
  const [month, day, year] = [Number(m[1]), Number(m[2]), Number(m[3])];
  const date = new Date(Date.UTC(year, month - 1, day));
  return date.getUTCMonth() === month - 1 && date.getUTCDate() === day ? date : null;
}

describe('runtimes', () => {
  it('has the runtimes the images bundle', () => {
    expect(names).toEqual(expect.arrayContaining(['2024-09', '2025-04', '2026-04']));
  });

  it('has exactly one CURRENT runtime, and it is the newest', () => {
    const records = runtimes.map((r) => readJson<RuntimeRecord>(path.join(r.dir, 'runtime.json')));
    const current = records.filter((r) => r.stage === 'CURRENT');
    expect(current.map((r) => r.name)).toEqual(['2026-04']);
    expect([...names].sort().at(-1)).toBe(current[0]?.name);
  });

  describe.each(runtimes)('$name', ({ name, dir }) => {
    const record = readJson<RuntimeRecord>(path.join(dir, 'runtime.json'));

    it('runtime.json is a complete Runtime record', () => {
      expect(Object.keys(record).sort()).toEqual(
        ['dependencies', 'description', 'multiStepSupport', 'name', 'nodeJsVersion', 'runtimeEndOfLife', 'stage'].sort(),
      );
      expect(record.name).toBe(name);
      expect(typeof record.multiStepSupport).toBe('boolean');
      expect(record.nodeJsVersion).toMatch(/^\d+$/);
      expect(STAGES).toContain(record.stage);
      expect(monthDayYear(record.runtimeEndOfLife), `runtimeEndOfLife ${record.runtimeEndOfLife} is MM/DD/YYYY`).not.toBeNull();
      expect(record.description.length).toBeGreaterThan(20);
      expect(Object.keys(record.dependencies)).toContain('playwright-core');
      for (const [dep, version] of Object.entries(record.dependencies)) {
        expect(version, `${dep} is pinned to one exact version`).toMatch(EXACT_VERSION);
      }
    });

    it('package.json installs exactly the record\'s dependencies, and nothing runs at install', () => {
      const pkg = readJson<{ private?: boolean; dependencies?: Record<string, string>; devDependencies?: unknown; scripts?: unknown }>(
        path.join(dir, 'package.json'),
      );
      expect(pkg.private).toBe(true);
      const { records, managers } = pinned(pkg.dependencies, record);
      expect(records).toEqual(record.dependencies);
      for (const [manager, version] of Object.entries(managers)) expect(version, `${manager} is pinned to one exact version`).toMatch(EXACT_VERSION);
      expect(pkg.devDependencies).toBeUndefined();
      expect(pkg.scripts).toBeUndefined();
    });

    it('package-lock.json locks the same top-level versions', () => {
      const lockFile = path.join(dir, 'package-lock.json');
      expect(existsSync(lockFile), `${lockFile} exists (npm install --package-lock-only --ignore-scripts)`).toBe(true);
      const lock = readJson<{
        lockfileVersion: number;
        packages: Record<string, { version?: string; dependencies?: Record<string, string>; hasInstallScript?: boolean }>;
      }>(lockFile);
      expect(lock.lockfileVersion).toBeGreaterThanOrEqual(2);
      const { records, managers } = pinned(lock.packages['']?.dependencies, record);
      expect(records).toEqual(record.dependencies);
      for (const [dep, version] of Object.entries({ ...record.dependencies, ...managers })) {
        expect(lock.packages[`node_modules/${dep}`]?.version, `${dep} in the lockfile`).toBe(version);
      }
      // Nothing runs at install (no browser download, nothing compiled): installs use --ignore-scripts
      // anyway, and a package that needs its install script would not work.
      const withScripts = Object.entries(lock.packages)
        .filter(([name, entry]) => entry.hasInstallScript && !HARMLESS_INSTALL_SCRIPTS.includes(name))
        .map(([name]) => name);
      expect(withScripts).toEqual([]);
    });
  });
});
