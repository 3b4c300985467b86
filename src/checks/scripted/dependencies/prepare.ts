// A PLAYWRIGHT suite's own dependencies, ready before its run: the runtime's
// pinned package manager for the suite's lockfile, the cache entry for its
// key (installed now, or a hit), and what the result says about it. The
// suite's run then sees the entry's node_modules (src/checks/scripted/runner.ts).

import { stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { type FilteringProxy, sharedFilteringProxy } from '../../../net/filtering-proxy.js';
import type { DependencySettings, ExecutionContext } from '../../executor.js';
import { releaseRunUid, scriptIsolation, takeRunUid, usesRunUid } from '../isolation.js';
import type { Runtime } from '../runtimes.js';
import { type CacheLease, dependencyCache } from './cache.js';
import { managerIn, runInstall } from './install.js';
import { dependencyKey, type SuiteDependencies } from './lockfile.js';

/** Without settings (an executor called directly, not through src/config.ts): these. */
export const DEFAULT_DEPENDENCY_SETTINGS: DependencySettings = {
  cacheDir: path.join(tmpdir(), 'outpost-dependency-cache'),
  maxBytes: 2048 * 1024 * 1024,
  installTimeoutMs: 120_000,
};

/** The longest DEPENDENCY_INSTALL_TIMEOUT_SECONDS (src/config.ts): a PLAYWRIGHT job's cap leaves room for it. */
export const DEPENDENCY_INSTALL_TIMEOUT_MAX_MS = 300_000;

/** The result's `dependencies` field (browserCheckResult of a PLAYWRIGHT check with a package.json). */
export interface DependencyReport {
  packageManager: string;
  packageManagerVersion: string | null;
  lockfile: string;
  /** True when nothing was installed for this run: the cache had the lockfile's packages. */
  cacheHit: boolean;
  /** The install's time (0 on a hit). */
  installMs: number;
  /** The first 12 hex digits of the cache key. */
  key: string | null;
}

export type Prepared = { ok: true; lease: CacheLease; report: DependencyReport } | { ok: false; error: string; report: DependencyReport };

/** `inner` is `outer` or inside it. */
function isWithin(inner: string, outer: string): boolean {
  const relative = path.relative(outer, inner);
  return relative === '' || (!relative.startsWith('..') && !path.isAbsolute(relative));
}

/**
 * The first existing folder on the way to `dir` that others may not pass, or null. Not `dir` itself (the
 * cache makes it 0755), nor `covered` folders and what is below them (a namespace's tmpfs, made there 0755).
 */
async function closedFolder(dir: string, covered: string[]): Promise<string | null> {
  const folders: string[] = [];
  for (let at = path.dirname(path.resolve(dir)); ; at = path.dirname(at)) {
    folders.unshift(at);
    if (at === path.dirname(at)) break;
  }
  for (const folder of folders) {
    if (covered.some((hidden) => isWithin(folder, hidden))) return null;
    const info = await stat(folder).catch(() => null);
    // Not made yet: the cache makes it 0755.
    if (!info) return null;
    if ((info.mode & 0o001) === 0) return folder;
  }
  return null;
}

/**
 * Under a network policy the installer goes out through the agent's filtering proxy, which judges every
 * registry and tarball address (a lockfile names its own URLs) and then goes on through the agent's proxy,
 * if it has one: a suite's lockfile must not reach what its checks may not (docs/network-policy.md).
 */
async function installerSettings(settings: DependencySettings, ctx: ExecutionContext): Promise<{ settings: DependencySettings; filter?: FilteringProxy }> {
  const policy = ctx.settings.networkPolicy;
  if (!policy) return { settings };
  const filter = await sharedFilteringProxy(policy, settings.httpsProxy ?? settings.httpProxy);
  const { noProxy: _everythingThroughTheFilter, ...rest } = settings;
  return { settings: { ...rest, httpProxy: filter.url, httpsProxy: filter.url }, filter };
}

export async function prepareDependencies(deps: SuiteDependencies, runtime: Runtime, ctx: ExecutionContext): Promise<Prepared> {
  const { settings, filter } = await installerSettings(ctx.settings.dependencies ?? DEFAULT_DEPENDENCY_SETTINGS, ctx);
  const report: DependencyReport = {
    packageManager: deps.manager,
    packageManagerVersion: null,
    lockfile: deps.lockfile,
    cacheHit: false,
    installMs: 0,
    key: null,
  };
  const manager = managerIn(runtime.nodeModules, deps.manager);
  if (!manager)
    return {
      ok: false,
      report,
      error: `Runtime ${runtime.name} has no ${deps.manager}, which installs a suite with ${deps.lockfile} (runtime 2026-04 and later pin npm, pnpm and yarn)`,
    };
  report.packageManagerVersion = manager.version;
  const isolation = await scriptIsolation();
  // A lifecycle script is the suite's code: it must not run where it could read the agent's environment.
  if (deps.allowScripts && isolation.mechanism !== 'uid-pidns' && isolation.mechanism !== 'userns' && isolation.mechanism !== 'off') {
    return {
      ok: false,
      report,
      error: `allowInstallScripts needs scripts isolated in namespaces of their own (uid-pidns or userns); this agent isolates with ${isolation.mechanism}`,
    };
  }
  if (isolation.mechanism === 'none')
    return {
      ok: false,
      report,
      error: `The suite's dependencies were not installed: no way to isolate the installer from the agent works here (${isolation.detail})`,
    };
  // A run's own uid reaches the entry through the real path, but for the folders a namespace covers (made there 0755).
  const unreachable = usesRunUid(isolation) ? await closedFolder(settings.cacheDir, isolation.hidden ?? []) : null;
  if (unreachable)
    return {
      ok: false,
      report,
      error: `DEPENDENCY_CACHE_DIR ${settings.cacheDir} is out of scripts' reach: ${unreachable} is not searchable by other users (chmod o+x), and scripts run under uids of their own`,
    };
  const key = dependencyKey(deps, manager.version);
  report.key = key.slice(0, 12);
  const cache = dependencyCache(settings.cacheDir, settings.maxBytes);
  let failure: string | undefined;
  let installMs = 0;
  let lease: CacheLease | null;
  try {
    lease = await cache.acquire(
      key,
      async (scratch) => {
        ctx.jobLog.push(
          `Installing the suite's dependencies from ${deps.lockfile} with ${manager.manager} ${manager.version} (cache key ${report.key}, install scripts ${deps.allowScripts ? 'allowed' : 'off'})`,
        );
        const uid = deps.allowScripts && usesRunUid(isolation) ? takeRunUid() : undefined;
        let result: Awaited<ReturnType<typeof runInstall>>;
        const refusedBefore = filter?.refused ?? 0;
        try {
          result = await runInstall({
            deps,
            manager,
            scratch,
            settings,
            isolation,
            signal: ctx.signal,
            ...(ctx.settings.extraCaCerts ? { extraCaCerts: ctx.settings.extraCaCerts } : {}),
            ...(uid !== undefined ? { uid } : {}),
          });
        } finally {
          if (uid !== undefined) releaseRunUid(uid);
        }
        installMs = result.durationMs;
        ctx.jobLog.push(...result.lines);
        if (!result.ok) {
          // A package manager shows the filtering proxy's refusal as a bare 403: say what it was.
          const refusal = filter && filter.refused > refusedBefore ? filter.lastRefusal : undefined;
          failure = refusal ? `${result.error} (${refusal})` : result.error;
          return null;
        }
        return {
          manager: manager.manager,
          managerVersion: manager.version,
          lockfile: deps.lockfile,
        };
      },
      ctx.signal,
    );
  } catch (error) {
    return {
      ok: false,
      report,
      error: `The suite's dependencies could not be cached in ${settings.cacheDir}: ${(error as Error).message}`,
    };
  }
  report.installMs = installMs;
  if (!lease) {
    const reason = ctx.signal.reason;
    const error =
      failure ??
      (ctx.signal.aborted
        ? `Waiting for the suite's dependencies was stopped: ${reason instanceof Error ? reason.message : 'the job was aborted'}`
        : `Another job's install of the same ${deps.lockfile} failed; this run was not started`);
    return { ok: false, report, error };
  }
  report.cacheHit = lease.hit;
  ctx.jobLog.push(
    lease.hit
      ? `Dependencies: cache hit for ${deps.lockfile} (${manager.manager} ${manager.version}, key ${report.key}): nothing installed`
      : `Dependencies: installed from ${deps.lockfile} with ${manager.manager} ${manager.version} in ${installMs} ms (key ${report.key}), now cached`,
  );
  return { ok: true, lease, report };
}
