// Which package manager installs a PLAYWRIGHT suite's own dependencies, read
// from the suite's files: a package.json at the suite's top and exactly one
// lockfile beside it (package-lock.json: npm, pnpm-lock.yaml: pnpm,
// yarn.lock: yarn 1). Installs are frozen to the lockfile, so a package.json
// without one is refused rather than resolved afresh. Also the cache key:
// what decides which packages an install puts on disk.

import { createHash } from 'node:crypto';

export type PackageManager = 'npm' | 'pnpm' | 'yarn';

export const LOCKFILES: Readonly<Record<string, PackageManager>> = {
  'package-lock.json': 'npm',
  'pnpm-lock.yaml': 'pnpm',
  'yarn.lock': 'yarn',
};

/** What a suite's dependencies are: its manifest, its lockfile and who installs them. */
export interface SuiteDependencies {
  manager: PackageManager;
  lockfile: string;
  lockfileContent: string;
  packageJson: string;
  /** The check's `allowInstallScripts`: lifecycle scripts run only when it is true. */
  allowScripts: boolean;
}

/** The package.json fields that make an install. */
const DEPENDENCY_FIELDS = ['dependencies', 'devDependencies', 'optionalDependencies'];

const hasEntries = (value: unknown): boolean => value !== null && typeof value === 'object' && Object.keys(value).length > 0;

/** Bumped when the layout of a cache entry changes: old entries are then never hit again (and age out). */
const ENTRY_FORMAT = 1;

/**
 * The suite's dependencies from its files (top-level package.json and lockfile); null when it has
 * no package.json and no lockfile; a one-line problem when they do not make an install.
 */
export function suiteDependencies(files: ReadonlyArray<{ path: string; content: string }>, allowScripts: boolean): SuiteDependencies | null | string {
  const manifest = files.find((f) => f.path === 'package.json');
  const lockfiles = files.filter((f) => f.path in LOCKFILES);
  if (!manifest) return lockfiles.length > 0 ? `${lockfiles[0]?.path} needs a package.json beside it` : null;
  let parsed: unknown;
  try {
    parsed = JSON.parse(manifest.content);
  } catch (error) {
    return lockfiles.length === 0 ? null : `package.json is not valid JSON (${(error as Error).message})`;
  }
  const manifestObject = parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : null;
  if (lockfiles.length === 0) {
    // A package.json that asks for no package is only a file of the suite (as before suites could install).
    if (!manifestObject || !DEPENDENCY_FIELDS.some((field) => hasEntries(manifestObject[field]))) return null;
    return `package.json needs a lockfile beside it (${Object.keys(LOCKFILES).join(', ')}): dependencies are installed exactly as it locks them`;
  }
  if (lockfiles.length > 1) return `the suite has ${lockfiles.map((f) => f.path).join(' and ')}: keep only the lockfile of the package manager to install with`;
  if (!manifestObject) return 'package.json must hold a JSON object';
  // The runner's '@playwright/test' module, which the suite imports, is CommonJS (src/checks/scripted/harness/shim.cjs).
  if (manifestObject.type === 'module') return 'package.json says "type": "module": suites with dependencies run as CommonJS (import syntax and TypeScript still work); remove "type"';
  const lock = lockfiles[0] as { path: string; content: string };
  const manager = LOCKFILES[lock.path] as PackageManager;
  // Yarn 2+ writes `__metadata:` at the top of its yarn.lock; its install would need Yarn 2+ itself.
  if (manager === 'yarn' && /^__metadata:/m.test(lock.content)) return 'yarn.lock was written by Yarn 2 or later (berry); only Yarn 1 lockfiles ("# yarn lockfile v1") are supported';
  return {
    manager,
    lockfile: lock.path,
    lockfileContent: lock.content,
    packageJson: manifest.content,
    allowScripts,
  };
}

/**
 * The cache key (hex SHA-256): the lockfile and package.json as written, the package manager and its
 * version, whether install scripts ran, and the Node.js ABI (a package built by a script is built for it).
 */
export function dependencyKey(deps: SuiteDependencies, managerVersion: string, nodeAbi: string = process.versions.modules): string {
  return createHash('sha256')
    .update(JSON.stringify([ENTRY_FORMAT, deps.manager, managerVersion, deps.allowScripts, nodeAbi, deps.lockfile, deps.lockfileContent, deps.packageJson]))
    .digest('hex');
}
