// PLAYWRIGHT suites with their own package.json and lockfile (pnpm, yarn 1,
// npm), installed by the real agent in once mode from a private registry the
// test serves itself (test/support/npm-registry.ts: packages it packs, one
// with a dependency), through tinyproxy as the agent's HTTP_PROXY. A second
// run on the same DEPENDENCY_CACHE_DIR installs nothing and reports the cache
// hit; lockfiles that cannot install give error results that say which
// package and why. Also: two jobs with one lockfile at once install once; a
// suite cannot change its cached packages under uid-pidns, userns (the agent
// as nobody, cache in STATE_DIR) and uid; the registry over TLS with a
// private CA (NODE_EXTRA_CA_CERTS), tunnelled by the proxy. The suites' tests
// need no browser.

import { execFile } from 'node:child_process';
import { chmodSync, chownSync, readdirSync, readFileSync, realpathSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CheckResultEntry } from '../../src/core/result-entry.js';
import { cleanEnv, startAgent, tempDir } from '../support/agent-process.js';
import { type NpmRegistry, startNpmRegistry } from '../support/npm-registry.js';
import { installRuntime, RUNTIME, RUNTIME_DIR } from '../support/scripted-run.js';
import { startTinyproxy, type Tinyproxy } from '../support/tinyproxy.js';
import { createTestPki, type TestPki } from '../support/tls.js';

const run = promisify(execFile);

type Manager = 'npm' | 'pnpm' | 'yarn';
const LOCKFILE: Record<Manager, string> = {
  npm: 'package-lock.json',
  pnpm: 'pnpm-lock.yaml',
  yarn: 'yarn.lock',
};
const CLI: Record<Manager, string> = {
  npm: 'npm/bin/npm-cli.js',
  pnpm: 'pnpm/bin/pnpm.cjs',
  yarn: 'yarn/bin/yarn.js',
};

interface Report {
  packageManager: string;
  packageManagerVersion: string | null;
  lockfile: string;
  cacheHit: boolean;
  installMs: number;
  key: string | null;
}
interface Detail {
  requestError: string | null;
  jobLog: string[];
  steps: Array<{ name: string; passed: boolean; error: string | null }>;
  dependencies?: Report;
}

/** Every suite: package.json asks for `greeter` (which needs left-pad-lite); the spec imports it. */
const PACKAGE_JSON = JSON.stringify(
  {
    name: 'suite',
    version: '1.0.0',
    private: true,
    dependencies: { greeter: '^2.0.0' },
  },
  null,
  2,
);
const SPEC = `import { test, expect } from '@playwright/test';
import greet from 'greeter';
test('greets with its own dependency', () => {
  expect(greet('you')).toBe('hello, you');
});
`;

/** The lockfile the manager writes for PACKAGE_JSON against the registry (directly, not through the proxy). */
async function lockfileFor(manager: Manager, registry: string, packageJson = PACKAGE_JSON): Promise<string> {
  const dir = tempDir(`outpost-lock-${manager}-`);
  writeFileSync(path.join(dir, 'package.json'), packageJson);
  writeFileSync(path.join(dir, '.npmrc'), `registry=${registry}\n`);
  const cli = path.join(RUNTIME_DIR, 'node_modules', CLI[manager]);
  const args =
    manager === 'npm'
      ? ['install', '--package-lock-only', '--ignore-scripts', '--no-audit', '--no-fund']
      : manager === 'pnpm'
        ? ['install', '--lockfile-only', '--ignore-scripts']
        : ['install', '--ignore-scripts', '--non-interactive', '--registry', registry];
  await run(process.execPath, [cli, ...args], {
    cwd: dir,
    env: {
      PATH: path.dirname(process.execPath),
      HOME: dir,
      npm_config_registry: registry,
      YARN_CACHE_FOLDER: path.join(dir, 'yarn-cache'),
      CI: 'true',
    },
    timeout: 60_000,
  });
  return readFileSync(path.join(dir, LOCKFILE[manager]), 'utf8');
}

const BUILDER_JSON = JSON.stringify({ name: 'built-suite', version: '1.0.0', private: true, dependencies: { builder: '1.0.0' } });
/** A suite that expects `builder`'s postinstall to have run, or not. */
const builtSpec = (expected: boolean) => `import { test, expect } from '@playwright/test';
import built from 'builder';
test('postinstall ${expected ? 'ran' : 'did not run'}', () => {
  expect(built).toBe(${expected});
});
`;

/** A suite that tries to change the installed package it imports: the cache entry is not its to change. */
const TAMPER_SPEC = `import { test, expect } from '@playwright/test';
import fs from 'node:fs';
import path from 'node:path';
import greet from 'greeter';
const code = (f: () => void) => { try { f(); return 'written'; } catch (e) { return String((e as NodeJS.ErrnoException).code); } };
test('cannot change its cached dependencies', () => {
  const file = require.resolve('greeter');
  expect(code(() => fs.writeFileSync(file, 'module.exports = () => "poisoned";'))).toMatch(/^(EROFS|EACCES|EPERM)$/);
  expect(code(() => fs.mkdirSync(path.join(path.dirname(file), 'added')))).toMatch(/^(EROFS|EACCES|EPERM)$/);
  expect(greet('you')).toBe('hello, you');
});
`;

function suiteCheck(id: string, files: Array<{ path: string; content: string }>, script = SPEC): object {
  return { id, checkType: 'PLAYWRIGHT', runtimeId: RUNTIME, maxResponseTime: 60_000, script, files };
}

/** An unprivileged user for the agent (scripts are then isolated with userns): what the images' uid 10001 is. */
const NOBODY = 65534;
const AS_NOBODY = ['/usr/bin/setpriv', `--reuid=${NOBODY}`, `--regid=${NOBODY}`, '--clear-groups', '--'];

/** A temporary directory like /tmp (1777): under `uid`, each run's own uid makes its folder there. */
function openDir(prefix: string): string {
  const dir = tempDir(prefix);
  chmodSync(dir, 0o1777);
  return dir;
}

/** Root, but `unshare` fails (bound over with /bin/false): scripts are isolated with `uid`. */
const WITHOUT_UNSHARE = ['/usr/bin/unshare', '--mount', '--', '/bin/sh', '-c', 'mount --bind /bin/false /usr/bin/unshare && exec "$@"', 'sh'];

/** A folder the agent, whoever it runs as, may write. */
function agentDir(prefix: string): string {
  const dir = tempDir(prefix);
  chownSync(dir, NOBODY, NOBODY);
  return dir;
}

describe('PLAYWRIGHT suites with their own dependencies', () => {
  let registry: NpmRegistry;
  let proxy: Tinyproxy;
  const cacheDir = tempDir('outpost-dependency-cache-');
  let checksFile = '';
  const runs: Array<Map<string, CheckResultEntry>> = [];
  const registryAsked: string[][] = [];
  let asNobody = new Map<string, CheckResultEntry>();
  let asRunUid = new Map<string, CheckResultEntry>();
  let behindClosed = new Map<string, CheckResultEntry>();
  let closedCache = '';
  let overTls = new Map<string, CheckResultEntry>();
  let pki: TestPki;
  /** The script isolation each agent run chose. */
  const mechanisms: string[] = [];

  /** `cache` null: the default, STATE_DIR/dependency-cache (which the namespace mechanisms cover, then bind the entry back). */
  async function once(file = checksFile, cache: string | null = cacheDir, prefix: string[] = [], env: Record<string, string> = {}): Promise<Map<string, CheckResultEntry>> {
    const before = registry.requests.length;
    const agent = startAgent(
      ['once', file],
      cleanEnv({
        STATE_DIR: agentDir('outpost-deps-state-'),
        TMPDIR: openDir('outpost-deps-tmp-'),
        JOB_CONCURRENCY: '4',
        SCRIPT_MEMORY_MB: '128',
        HTTP_PROXY: proxy.url,
        HTTPS_PROXY: proxy.url,
        DEPENDENCY_REGISTRY: registry.url,
        ...(cache ? { DEPENDENCY_CACHE_DIR: cache } : {}),
        DEPENDENCY_INSTALL_TIMEOUT_SECONDS: '60',
        ...env,
      }),
      prefix,
    );
    await agent.exit;
    const results = new Map<string, CheckResultEntry>();
    for (const line of agent.stdoutLines.filter(Boolean)) {
      const r = JSON.parse(line) as CheckResultEntry;
      if (r.resultType === 'FINAL') results.set(r.checkId as string, r);
    }
    if (results.size === 0) throw new Error(`no results; stderr: ${agent.stderr().slice(-3000)}`);
    registryAsked.push(registry.requests.slice(before));
    mechanisms.push(String(agent.logs.find((l) => typeof l.scriptIsolation === 'string')?.scriptIsolation));
    return results;
  }

  const detail = (runIndex: number, id: string): Detail => {
    const result = runs[runIndex]?.get(id);
    if (!result) throw new Error(`no FINAL result for ${id} in run ${runIndex + 1}`);
    return result.browserCheckResult as unknown as Detail;
  };
  const result = (runIndex: number, id: string): CheckResultEntry => runs[runIndex]?.get(id) as CheckResultEntry;

  beforeAll(async () => {
    await installRuntime();
    pki = createTestPki();
    registry = await startNpmRegistry(
      [
        {
          name: 'left-pad-lite',
          version: '1.0.0',
          files: { 'index.js': "module.exports = (s) => ', ' + s;\n" },
        },
        // Its postinstall leaves built.txt beside it; it exports whether that is there.
        {
          name: 'builder',
          version: '1.0.0',
          // It notes the uid it ran as.
          scripts: { postinstall: "node -e \"require('fs').writeFileSync('built.txt', String(process.getuid()))\"" },
          files: { 'index.js': "module.exports = require('fs').existsSync(require('path').join(__dirname, 'built.txt'));\n" },
        },
        {
          name: 'greeter',
          version: '2.1.0',
          dependencies: { 'left-pad-lite': '^1.0.0' },
          files: {
            'index.js': "const pad = require('left-pad-lite');\nmodule.exports = (name) => 'hello' + pad(name);\nmodule.exports.default = module.exports;\n",
          },
        },
      ],
      pki.valid,
    );
    proxy = await startTinyproxy();
    const [npmLock, pnpmLock, yarnLock] = await Promise.all((['npm', 'pnpm', 'yarn'] as const).map((m) => lockfileFor(m, registry.url)));
    const builderLock = await lockfileFor('pnpm', registry.url, BUILDER_JSON);
    // A lockfile that names a package the registry does not have.
    const ghostLock = (pnpmLock as string).replaceAll('greeter', 'ghost-greeter');
    // A yarn.lock that package.json has moved on from (it now also asks for left-pad-lite 1.0.0 itself).
    const movedOn = JSON.stringify({
      name: 'suite',
      version: '1.0.0',
      private: true,
      dependencies: { greeter: '^2.0.0', 'left-pad-lite': '1.0.0' },
    });
    // Its own cache entry (another package.json): it installs for itself.
    const tamperPackage = { path: 'package.json', content: PACKAGE_JSON.replace('"suite"', '"tamper"') };
    const dir = agentDir('outpost-deps-checks-');
    checksFile = path.join(dir, 'checks.json');
    writeFileSync(
      checksFile,
      JSON.stringify({
        checks: [
          suiteCheck('with-pnpm', [
            { path: 'package.json', content: PACKAGE_JSON },
            { path: 'pnpm-lock.yaml', content: pnpmLock as string },
          ]),
          // The same suite at the same time: one install, the other job waits for it.
          suiteCheck('with-pnpm-too', [
            { path: 'package.json', content: PACKAGE_JSON },
            { path: 'pnpm-lock.yaml', content: pnpmLock as string },
          ]),
          suiteCheck('tamper', [tamperPackage, { path: 'pnpm-lock.yaml', content: pnpmLock as string }], TAMPER_SPEC),
          // Install scripts: off by default, run when the check allows them.
          suiteCheck(
            'scripts-off',
            [
              { path: 'package.json', content: BUILDER_JSON },
              { path: 'pnpm-lock.yaml', content: builderLock },
            ],
            builtSpec(false),
          ),
          {
            ...suiteCheck(
              'scripts-on',
              [
                { path: 'package.json', content: BUILDER_JSON },
                { path: 'pnpm-lock.yaml', content: builderLock },
              ],
              builtSpec(true),
            ),
            allowInstallScripts: true,
          },
          suiteCheck('with-yarn', [
            { path: 'package.json', content: PACKAGE_JSON },
            { path: 'yarn.lock', content: yarnLock as string },
          ]),
          suiteCheck('with-npm', [
            { path: 'package.json', content: PACKAGE_JSON },
            { path: 'package-lock.json', content: npmLock as string },
          ]),
          suiteCheck('ghost-package', [
            {
              path: 'package.json',
              content: PACKAGE_JSON.replace('greeter', 'ghost-greeter'),
            },
            { path: 'pnpm-lock.yaml', content: ghostLock },
          ]),
          suiteCheck('stale-yarn-lock', [
            { path: 'package.json', content: movedOn },
            { path: 'yarn.lock', content: yarnLock as string },
          ]),
        ],
      }),
    );
    runs.push(await once());
    runs.push(await once());
    // The agent as an unprivileged user (userns), the cache in STATE_DIR, which scripts' namespaces cover:
    // the installer's folder and the entry are bound back, the entry read-only.
    const nobodyFile = path.join(agentDir('outpost-deps-nobody-'), 'checks.json');
    writeFileSync(nobodyFile, JSON.stringify({ checks: [suiteCheck('tamper', [tamperPackage, { path: 'pnpm-lock.yaml', content: pnpmLock as string }], TAMPER_SPEC)] }));
    chownSync(nobodyFile, NOBODY, NOBODY);
    asNobody = await once(nobodyFile, null, AS_NOBODY);
    // Root without namespaces (unshare fails: the `uid` mechanism): runs reach the entry by its real path,
    // which must be open to them; a cache folder behind a closed one is refused, naming it.
    const openCache = tempDir('outpost-deps-uid-cache-');
    chmodSync(openCache, 0o755);
    asRunUid = await once(nobodyFile, path.join(openCache, 'cache'), WITHOUT_UNSHARE);
    closedCache = tempDir('outpost-deps-closed-');
    behindClosed = await once(nobodyFile, path.join(closedCache, 'cache'), WITHOUT_UNSHARE);
    // The registry over TLS with a private CA: only NODE_EXTRA_CA_CERTS makes it trusted; the proxy tunnels (CONNECT).
    const tlsFile = path.join(agentDir('outpost-deps-tls-'), 'checks.json');
    writeFileSync(
      tlsFile,
      JSON.stringify({
        checks: [
          suiteCheck('over-tls', [
            { path: 'package.json', content: PACKAGE_JSON.replace('"suite"', '"over-tls"') },
            { path: 'pnpm-lock.yaml', content: pnpmLock as string },
          ]),
        ],
      }),
    );
    overTls = await once(tlsFile, cacheDir, [], { DEPENDENCY_REGISTRY: registry.httpsUrl as string, NODE_EXTRA_CA_CERTS: pki.caCert });
  }, 240_000);

  afterAll(async () => {
    await proxy?.stop();
    await registry?.stop();
  });

  it.each(['pnpm', 'yarn', 'npm'] as const)('a suite with a %s lockfile installs through the proxy, runs, and hits the cache the second time', (manager) => {
    // pnpm's suite runs twice at once in the first run: whichever installed.
    const id = manager === 'pnpm' && detail(0, 'with-pnpm').dependencies?.cacheHit ? 'with-pnpm-too' : `with-${manager}`;
    const first = detail(0, id);
    expect(result(0, id).hasFailures, first.requestError ?? first.jobLog.join('\n')).toBe(false);
    expect(first.steps).toEqual([
      expect.objectContaining({
        name: 'check.spec.ts › greets with its own dependency',
        passed: true,
      }),
    ]);
    expect(first.dependencies).toMatchObject({
      packageManager: manager,
      lockfile: LOCKFILE[manager],
      cacheHit: false,
    });
    expect(first.dependencies?.packageManagerVersion).toMatch(/^\d+\.\d+\.\d+$/);
    expect(first.jobLog.some((l) => l.startsWith(`Dependencies: installed from ${LOCKFILE[manager]} with ${manager}`))).toBe(true);

    const second = detail(1, id);
    expect(result(1, id).hasFailures, second.requestError ?? second.jobLog.join('\n')).toBe(false);
    expect(second.steps).toEqual([expect.objectContaining({ passed: true })]);
    expect(second.dependencies).toMatchObject({
      packageManager: manager,
      cacheHit: true,
      installMs: 0,
      key: first.dependencies?.key,
    });
    expect(second.jobLog.some((l) => l.startsWith(`Dependencies: cache hit for ${LOCKFILE[manager]}`))).toBe(true);
    expect(second.jobLog.some((l) => l.startsWith(`[${manager}]`))).toBe(false);
  });

  it('went through the proxy to the registry for the packuments and tarballs, and not at all the second time', () => {
    const log = proxy.log();
    const port = new URL(registry.url).port;
    for (const wanted of ['greeter/-/greeter-2.1.0.tgz', 'left-pad-lite/-/left-pad-lite-1.0.0.tgz']) {
      expect(log).toMatch(new RegExp(`GET http://127\\.0\\.0\\.1:${port}/${wanted.replaceAll('.', '\\.')}`));
    }
    // Three installs fetched each tarball (yarn, npm and pnpm keep no cache between runs of the agent: their caches live in each install's own folder).
    expect(registryAsked[0]?.filter((p) => p === '/greeter/-/greeter-2.1.0.tgz').length).toBeGreaterThanOrEqual(3);
    // The second run installed only what failed the first time (ghost-greeter again), never greeter.
    expect(registryAsked[1]?.filter((p) => p.startsWith('/greeter'))).toEqual([]);
    expect(registryAsked[1]).toContain('/ghost-greeter/-/ghost-greeter-2.1.0.tgz');
  });

  it('runs install scripts only when the check allows them (and caches the two installs apart)', () => {
    const off = detail(0, 'scripts-off');
    const on = detail(0, 'scripts-on');
    expect(off.steps, off.requestError ?? off.jobLog.join('\n')).toEqual([expect.objectContaining({ name: 'check.spec.ts › postinstall did not run', passed: true })]);
    expect(on.steps, on.requestError ?? on.jobLog.join('\n')).toEqual([expect.objectContaining({ name: 'check.spec.ts › postinstall ran', passed: true })]);
    expect(off.jobLog).toContainEqual(expect.stringMatching(/install scripts off\)$/));
    expect(on.jobLog).toContainEqual(expect.stringMatching(/install scripts allowed\)$/));
    expect(off.dependencies?.key).not.toBe(on.dependencies?.key);
    expect([detail(1, 'scripts-off').dependencies?.cacheHit, detail(1, 'scripts-on').dependencies?.cacheHit]).toEqual([true, true]);
    // Under uid-pidns the scripts ran as a run uid, not as root; what they left is the agent's now.
    const entry = readdirSync(path.join(cacheDir, 'entries')).find((name) => name.startsWith(on.dependencies?.key as string)) as string;
    const built = path.join(realpathSync(path.join(cacheDir, 'entries', entry, 'node_modules', 'builder')), 'built.txt');
    expect(Number(readFileSync(built, 'utf8'))).toBeGreaterThanOrEqual(50_000);
    expect(statSync(built).uid).toBe(process.getuid?.());
    expect(detail(1, 'scripts-on').steps).toEqual([expect.objectContaining({ passed: true })]);
  });

  it('installs once for two jobs that need the same lockfile at the same time', () => {
    const twins = [detail(0, 'with-pnpm'), detail(0, 'with-pnpm-too')];
    expect(twins.map((d) => d.dependencies?.cacheHit).sort()).toEqual([false, true]);
    expect(twins.filter((d) => d.jobLog.some((l) => l.startsWith("Installing the suite's dependencies"))).length).toBe(1);
    expect(twins.every((d) => d.steps.length === 1 && d.steps[0]?.passed)).toBe(true);
    expect(twins[0]?.dependencies?.key).toBe(twins[1]?.dependencies?.key);
  });

  it.each([
    ['root (uid-pidns: a uid of its own per run)', 0, 'uid-pidns', () => detail(0, 'tamper')],
    ['an unprivileged user (userns: the entry bound back read-only)', 2, 'userns', () => asNobody.get('tamper')?.browserCheckResult as unknown as Detail],
    ["root without namespaces (uid: the entry reached by its path, not the run uid's)", 3, 'uid', () => asRunUid.get('tamper')?.browserCheckResult as unknown as Detail],
  ] as const)('a suite cannot change its cached dependencies, the agent running as %s', (_as, runIndex, mechanism, get) => {
    expect(mechanisms[runIndex]).toBe(mechanism);
    const d = get();
    expect(d.steps, d.requestError ?? d.jobLog.join('\n')).toEqual([expect.objectContaining({ passed: true })]);
    expect(d.dependencies).toMatchObject({ packageManager: 'pnpm', cacheHit: false });
  });

  it('under uid, a cache behind a folder runs cannot pass is an error result that names the folder', () => {
    expect(mechanisms[4]).toBe('uid');
    const r = behindClosed.get('tamper') as CheckResultEntry;
    expect(r.hasErrors).toBe(true);
    expect((r.browserCheckResult as unknown as Detail).requestError).toBe(
      `DEPENDENCY_CACHE_DIR ${closedCache}/cache is out of scripts' reach: ${closedCache} is not searchable by other users (chmod o+x), and scripts run under uids of their own`,
    );
  });

  it('installs from a registry over TLS through the proxy, trusting it by NODE_EXTRA_CA_CERTS', () => {
    const d = overTls.get('over-tls')?.browserCheckResult as unknown as Detail;
    expect(d.steps, d.requestError ?? d.jobLog.join('\n')).toEqual([expect.objectContaining({ passed: true })]);
    expect(d.dependencies).toMatchObject({ packageManager: 'pnpm', cacheHit: false });
    expect(proxy.log()).toMatch(new RegExp(`CONNECT 127\\.0\\.0\\.1:${new URL(registry.httpsUrl as string).port}`));
  });

  it('keeps one entry per lockfile in the cache folder', () => {
    expect(readdirSync(path.join(cacheDir, 'entries')).length).toBe(7);
    expect(readdirSync(path.join(cacheDir, 'installs'))).toEqual([]);
  });

  it('a lockfile naming a package the registry lacks is an error result that names it and says why', () => {
    const d = detail(0, 'ghost-package');
    expect(result(0, 'ghost-package').hasErrors).toBe(true);
    expect(d.requestError).toMatch(/^Installing the suite's dependencies from pnpm-lock\.yaml with pnpm [\d.]+ failed \(exit code 1\): .*ghost-greeter/);
    expect(d.requestError).toMatch(/404|Not Found/i);
    expect(d.dependencies).toMatchObject({
      packageManager: 'pnpm',
      cacheHit: false,
    });
    expect(d.steps).toEqual([]);
    // Not cached: the second run tried again, and failed the same way.
    expect(detail(1, 'ghost-package').requestError).toMatch(/ghost-greeter/);
  });

  it('a yarn.lock that package.json has moved on from is an error result, not a fresh resolve', () => {
    const d = detail(0, 'stale-yarn-lock');
    expect(result(0, 'stale-yarn-lock').hasErrors).toBe(true);
    expect(d.requestError).toMatch(/^Installing the suite's dependencies from yarn\.lock with yarn 1\.22\.\d+ failed \(exit code 1\): .*lockfile needs to be updated/);
  });

  it('under a network policy the installer goes through the filtering proxy: a registry in a blocked network is never asked', { timeout: 120_000 }, async () => {
    const onlyPnpm = path.join(agentDir('outpost-deps-policy-'), 'checks.json');
    const suite = (JSON.parse(readFileSync(checksFile, 'utf8')) as { checks: Array<{ id: string }> }).checks.find((c) => c.id === 'with-pnpm');
    writeFileSync(onlyPnpm, JSON.stringify({ checks: [suite] }));
    const before = registry.requests.length;
    const registryPort = new URL(registry.url).port;
    const blocked = await once(onlyPnpm, tempDir('outpost-dependency-cache-blocked-'), [], { BLOCKED_NETWORKS: `127.0.0.1:${registryPort}` });
    const refused = blocked.get('with-pnpm');
    expect(refused?.hasErrors).toBe(true);
    expect(JSON.stringify(refused?.browserCheckResult)).toContain('blocked by network policy');
    expect(registry.requests.length).toBe(before);
  });

  it('a package.json without a lockfile is refused when the check is read, naming the field', async () => {
    const file = path.join(tempDir('outpost-deps-nolock-'), 'checks.json');
    writeFileSync(
      file,
      JSON.stringify({
        checks: [suiteCheck('no-lockfile', [{ path: 'package.json', content: PACKAGE_JSON }])],
      }),
    );
    const agent = startAgent(
      ['once', file],
      cleanEnv({
        STATE_DIR: tempDir('outpost-deps-state-'),
        DEPENDENCY_CACHE_DIR: cacheDir,
      }),
    );
    expect((await agent.exit).code).toBe(78);
    expect(agent.stderr()).toMatch(/check "no-lockfile" at \$\.checks\[0\]\.files: package\.json needs a lockfile beside it \(package-lock\.json, pnpm-lock\.yaml, yarn\.lock\)/);
  });
});
