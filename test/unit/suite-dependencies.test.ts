// A PLAYWRIGHT suite's own dependencies (src/checks/scripted/dependencies/): which package manager a
// suite's files ask for and every way they are refused (also through the check's parsing, naming the
// field); the cache key; the line an installer's failure is summed up in, from each manager's real
// wording; the cache's one install per key, failed installs left out, and least-recently-used eviction
// that spares entries in use; the installer's process (a stand-in for the package manager): its
// environment and folders, its time limit and its bounded output.

import { readFileSync } from 'node:fs';
import { mkdir, readdir, utimes, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { DefinitionError, Fields } from '../../src/checks/fields.js';
import { parseSuiteRequest } from '../../src/checks/scripted/executors.js';
import { DependencyCache, ENTRY_MARK, folderSize } from '../../src/checks/scripted/dependencies/cache.js';
import { type ManagerInstall, runInstall, whyInstallFailed } from '../../src/checks/scripted/dependencies/install.js';
import { dependencyKey, type SuiteDependencies, suiteDependencies } from '../../src/checks/scripted/dependencies/lockfile.js';
import { useTempTrees } from '../support/temp-tree.js';

const PACKAGE_JSON = '{"name":"suite","dependencies":{"greeter":"^2.0.0"}}';
const file = (p: string, content = 'x') => ({ path: p, content });

describe('which package manager a suite asks for', () => {
  it('reads it from the one lockfile beside package.json', () => {
    expect(suiteDependencies([file('package.json', PACKAGE_JSON), file('pnpm-lock.yaml', "lockfileVersion: '9.0'\n")], false)).toMatchObject({
      manager: 'pnpm',
      lockfile: 'pnpm-lock.yaml',
      allowScripts: false,
    });
    expect(suiteDependencies([file('package.json', PACKAGE_JSON), file('yarn.lock', '# yarn lockfile v1\n')], true)).toMatchObject({ manager: 'yarn', allowScripts: true });
    expect(suiteDependencies([file('package.json', PACKAGE_JSON), file('package-lock.json', '{}')], false)).toMatchObject({ manager: 'npm' });
    expect(suiteDependencies([file('helpers/pages.ts')], false)).toBeNull();
    // A package.json that asks for nothing (or is not JSON) is only a file of the suite, as before.
    expect(suiteDependencies([file('package.json', '{"name":"suite","dependencies":{}}')], false)).toBeNull();
    expect(suiteDependencies([file('package.json', 'not json')], false)).toBeNull();
    // Only at the top of the suite.
    expect(suiteDependencies([file('fixtures/package.json', PACKAGE_JSON), file('fixtures/yarn.lock')], false)).toBeNull();
  });

  it('refuses what cannot be installed frozen, saying why', () => {
    expect(suiteDependencies([file('package.json', PACKAGE_JSON)], false)).toMatch(/^package\.json needs a lockfile beside it/);
    expect(suiteDependencies([file('package.json', '{"devDependencies":{"x":"1.0.0"}}')], false)).toMatch(/^package\.json needs a lockfile beside it/);
    expect(suiteDependencies([file('package.json', PACKAGE_JSON.replace('{"name"', '{"type":"module","name"')), file('yarn.lock')], false)).toMatch(/"type": "module": suites with dependencies run as CommonJS/);
    expect(suiteDependencies([file('yarn.lock')], false)).toBe('yarn.lock needs a package.json beside it');
    expect(suiteDependencies([file('package.json', PACKAGE_JSON), file('yarn.lock'), file('package-lock.json')], false)).toMatch(/has yarn\.lock and package-lock\.json: keep only/);
    expect(suiteDependencies([file('package.json', '{nope'), file('yarn.lock')], false)).toMatch(/^package\.json is not valid JSON/);
    expect(suiteDependencies([file('package.json', '[]'), file('yarn.lock')], false)).toBe('package.json must hold a JSON object');
    expect(suiteDependencies([file('package.json', PACKAGE_JSON), file('yarn.lock', '__metadata:\n  version: 8\n')], false)).toMatch(/Yarn 2 or later \(berry\)/);
  });

  it('refuses through the check, naming the field, and reads allowInstallScripts', () => {
    const parse = (check: Record<string, unknown>) => {
      const root = Fields.root(check, '$');
      const request = parseSuiteRequest(root.object('request'), root);
      root.assertValid();
      return request;
    };
    const problems = (check: Record<string, unknown>): string[] => {
      try {
        parse(check);
        return [];
      } catch (error) {
        if (error instanceof DefinitionError) return error.issues.map((i) => `${i.path}: ${i.problem}`);
        throw error;
      }
    };
    expect(problems({ script: 't', files: [file('package.json', PACKAGE_JSON)] })).toEqual([expect.stringMatching(/^\$\.files: package\.json needs a lockfile beside it/)]);
    expect(problems({ script: 't', files: [file('package.json', PACKAGE_JSON), file('yarn.lock'), file('node_modules/x/index.js')] })).toEqual([
      '$.files[2].path: node_modules is made from package.json and the lockfile: it cannot be given as files',
    ]);
    expect(problems({ script: 't', allowInstallScripts: 'yes', files: [file('package.json', PACKAGE_JSON), file('yarn.lock')] })).toEqual([expect.stringMatching(/^\$\.allowInstallScripts: /)]);
    expect(parse({ script: 't', allowInstallScripts: true, files: [file('package.json', PACKAGE_JSON), file('yarn.lock')] }).dependencies).toMatchObject({ manager: 'yarn', allowScripts: true });
    expect(parse({ script: 't', request: { allowInstallScripts: true }, files: [file('package.json', PACKAGE_JSON), file('yarn.lock')] }).dependencies?.allowScripts).toBe(true);
    expect(parse({ script: 't', files: [file('package.json', PACKAGE_JSON), file('yarn.lock')] }).dependencies?.allowScripts).toBe(false);
    expect(parse({ script: 't' }).dependencies).toBeUndefined();
  });
});

describe('the cache key', () => {
  const deps = suiteDependencies([file('package.json', PACKAGE_JSON), file('pnpm-lock.yaml', 'lock')], false) as SuiteDependencies;
  it('is the same for the same install and differs with anything that changes what is installed', () => {
    const key = dependencyKey(deps, '10.34.9', '137');
    expect(key).toMatch(/^[0-9a-f]{64}$/);
    expect(dependencyKey({ ...deps }, '10.34.9', '137')).toBe(key);
    for (const other of [
      dependencyKey({ ...deps, lockfileContent: 'lock2' }, '10.34.9', '137'),
      dependencyKey({ ...deps, packageJson: '{}' }, '10.34.9', '137'),
      dependencyKey({ ...deps, allowScripts: true }, '10.34.9', '137'),
      dependencyKey(deps, '10.35.0', '137'),
      dependencyKey(deps, '10.34.9', '127'),
      dependencyKey({ ...deps, manager: 'yarn', lockfile: 'yarn.lock' }, '10.34.9', '137'),
    ]) {
      expect(other).not.toBe(key);
    }
  });
});

describe('why an install failed', () => {
  it('takes the line each package manager says it in, with URL credentials masked', () => {
    expect(
      whyInstallFailed('pnpm', [
        'Progress: resolved 1, reused 0, downloaded 0, added 0',
        ' ERR_PNPM_FETCH_404  GET https://user:pw@registry.example/ghost/-/ghost-1.0.0.tgz: Not Found - 404',
        'No authorization header was set for the request.',
      ]),
    ).toBe('ERR_PNPM_FETCH_404  GET https://*****@registry.example/ghost/-/ghost-1.0.0.tgz: Not Found - 404');
    expect(
      whyInstallFailed('npm', [
        'npm error code E404',
        'npm error 404 Not Found - GET https://registry.example/ghost - Not found',
        "npm error 404  'ghost@1.0.0' is not in this registry.",
        'npm error A complete log of this run can be found in: /tmp/x.log',
      ]),
    ).toBe("404 Not Found - GET https://registry.example/ghost - Not found — 404  'ghost@1.0.0' is not in this registry.");
    expect(
      whyInstallFailed('yarn', [
        'yarn install v1.22.22',
        '[1/4] Resolving packages...',
        'error Your lockfile needs to be updated, but yarn was run with `--frozen-lockfile`.',
        'info Visit https://yarnpkg.com/en/docs/cli/install for documentation about this command.',
      ]),
    ).toBe('Your lockfile needs to be updated, but yarn was run with `--frozen-lockfile`.');
    expect(whyInstallFailed('yarn', ['something odd', 'last words'])).toBe('last words');
    expect(whyInstallFailed('npm', [])).toBe('the installer printed nothing');
  });
});

describe('the dependency cache', () => {
  const tree = useTempTrees('outpost-dependency-cache-unit-');
  const never = new AbortController().signal;

  /** An install that writes `bytes` into node_modules, counting its calls. */
  function installer(bytes: number, calls: { count: number }, ok = true) {
    return async (scratch: string) => {
      calls.count++;
      await new Promise((resolve) => setTimeout(resolve, 20));
      if (!ok) return null;
      await mkdir(path.join(scratch, 'project', 'node_modules', 'pkg'), { recursive: true });
      await writeFile(path.join(scratch, 'project', 'node_modules', 'pkg', 'index.js'), 'x'.repeat(bytes));
      return { manager: 'pnpm', managerVersion: '10.34.9', lockfile: 'pnpm-lock.yaml' };
    };
  }

  it('installs a key once for jobs that ask at the same time, and then hits', async () => {
    const cache = new DependencyCache(tree({}), 10 * 1024 * 1024);
    const calls = { count: 0 };
    const [a, b] = await Promise.all([cache.acquire('k1', installer(100, calls), never), cache.acquire('k1', installer(100, calls), never)]);
    expect(calls.count).toBe(1);
    expect([a?.hit, b?.hit].sort()).toEqual([false, true]);
    expect(a?.dir).toBe(b?.dir);
    const again = await cache.acquire('k1', installer(100, calls), never);
    expect(again?.hit).toBe(true);
    expect(calls.count).toBe(1);
    expect(await readdir(path.join(cache.root, 'installs'))).toEqual([]);
    expect(await readdir(path.join(a?.dir as string, 'node_modules'))).toEqual(['pkg']);
  });

  it('does not keep a failed install, and tries again next time', async () => {
    const cache = new DependencyCache(tree({}), 10 * 1024 * 1024);
    const calls = { count: 0 };
    expect(await cache.acquire('bad', installer(100, calls, false), never)).toBeNull();
    expect(await readdir(path.join(cache.root, 'entries'))).toEqual([]);
    expect(await readdir(path.join(cache.root, 'installs'))).toEqual([]);
    expect(await cache.acquire('bad', installer(100, calls, false), never)).toBeNull();
    expect(calls.count).toBe(2);
  });

  it('removes the least recently used entries past its bound, never one in use', async () => {
    const cache = new DependencyCache(tree({}), 25_000);
    const calls = { count: 0 };
    const old = await cache.acquire('old', installer(10_000, calls), never);
    const used = await cache.acquire('used', installer(10_000, calls), never);
    old?.release();
    // `used` stays leased (a suite is running on it) and is the older of the two by its mark.
    const longAgo = new Date(Date.now() - 3_600_000);
    await utimes(path.join(cache.root, 'entries', 'used', ENTRY_MARK), longAgo, longAgo);
    const lastHour = new Date(Date.now() - 1_800_000);
    await utimes(path.join(cache.root, 'entries', 'old', ENTRY_MARK), lastHour, lastHour);
    const fresh = await cache.acquire('fresh', installer(10_000, calls), never);
    expect((await readdir(path.join(cache.root, 'entries'))).sort()).toEqual(['fresh', 'used']);
    used?.release();
    fresh?.release();
    // Now nothing is in use: the oldest (`used`) goes first.
    expect(await cache.evict()).toEqual(['used']);
    expect(await readdir(path.join(cache.root, 'entries'))).toEqual(['fresh']);
    expect(await readdir(path.join(cache.root, 'installs'))).toEqual([]);
  });

  it('measures an entry without following links', async () => {
    const dir = tree({ 'a/b.js': 'x'.repeat(1000), 'c.js': 'y'.repeat(500) });
    expect(await folderSize(dir)).toBeGreaterThanOrEqual(1500);
  });

  it("stops waiting for another job's install when its own job is aborted", async () => {
    const cache = new DependencyCache(tree({}), 10 * 1024 * 1024);
    let finish: () => void = () => undefined;
    const slow = (scratch: string) =>
      new Promise<null>((resolve) => {
        finish = () => resolve(null);
        void scratch;
      });
    const first = cache.acquire('slow', slow, never);
    await new Promise((resolve) => setTimeout(resolve, 50));
    const controller = new AbortController();
    const second = cache.acquire('slow', slow, controller.signal);
    controller.abort(new Error('lease lost'));
    expect(await second).toBeNull();
    finish();
    expect(await first).toBeNull();
  });
});

describe('an install', () => {
  const tree = useTempTrees('outpost-dependency-install-unit-');
  const deps = suiteDependencies([file('package.json', PACKAGE_JSON), file('pnpm-lock.yaml', 'lock')], false) as SuiteDependencies;
  const settings = { cacheDir: '/unused', maxBytes: 1, installTimeoutMs: 20_000, registry: 'http://registry.test/', httpProxy: 'http://user:pw@proxy.test:3128', noProxy: 'internal.test' };
  /** A package manager that runs `body` (CommonJS) with the arguments it was given. */
  const standIn = (body: string): ManagerInstall => {
    const dir = tree({ 'cli.js': body });
    return { manager: 'pnpm', cli: path.join(dir, 'cli.js'), version: '10.34.9' };
  };
  const install = (manager: ManagerInstall, extra: Partial<typeof settings> = {}, signal = new AbortController().signal) =>
    runInstall({ deps, manager, scratch: tree({}), settings: { ...settings, ...extra }, isolation: { mechanism: 'off', detail: 'test' }, signal, extraCaCerts: '/etc/ssl/ca.pem' });

  it('gets only the environment it is given, frozen and without scripts, with every folder in its scratch folder', async () => {
    const manager = standIn(`const fs = require('node:fs');
fs.writeFileSync('../seen.json', JSON.stringify({ env: process.env, args: process.argv.slice(2), cwd: process.cwd(), npmrc: fs.readFileSync(process.env.HOME + '/.npmrc', 'utf8') }));
console.log('proxy ' + process.env.HTTP_PROXY);
fs.mkdirSync('node_modules/pkg', { recursive: true });`);
    const scratch = tree({});
    const result = await runInstall({ deps, manager, scratch, settings, isolation: { mechanism: 'off', detail: 'test' }, signal: new AbortController().signal, extraCaCerts: '/etc/ssl/ca.pem' });
    expect(result.ok).toBe(true);
    const seen = JSON.parse(readFileSync(path.join(scratch, 'seen.json'), 'utf8')) as { env: Record<string, string>; args: string[]; cwd: string; npmrc: string };
    expect(seen.cwd).toBe(path.join(scratch, 'project'));
    expect(seen.args.slice(0, 3)).toEqual(['install', '--frozen-lockfile', '--ignore-scripts']);
    expect(
      Object.keys(seen.env)
        .filter((k) => !k.startsWith('XDG_') && !k.startsWith('npm_config_'))
        .sort(),
    ).toEqual(
      [
        'CI',
        'HOME',
        'HTTPS_PROXY',
        'HTTP_PROXY',
        'NODE_EXTRA_CA_CERTS',
        'NO_PROXY',
        'PATH',
        'PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD',
        'TMPDIR',
        'YARN_CACHE_FOLDER',
        'http_proxy',
        'https_proxy',
        'no_proxy',
      ].sort(),
    );
    for (const key of ['HOME', 'TMPDIR', 'XDG_CACHE_HOME', 'XDG_CONFIG_HOME', 'XDG_DATA_HOME', 'XDG_STATE_HOME', 'YARN_CACHE_FOLDER', 'npm_config_userconfig']) {
      expect(seen.env[key]?.startsWith(`${scratch}/`), `${key}=${seen.env[key]}`).toBe(true);
    }
    expect([seen.env.HTTP_PROXY, seen.env.HTTPS_PROXY, seen.env.NO_PROXY, seen.env.NODE_EXTRA_CA_CERTS, seen.env.npm_config_registry]).toEqual([
      'http://user:pw@proxy.test:3128',
      'http://user:pw@proxy.test:3128',
      'internal.test',
      '/etc/ssl/ca.pem',
      'http://registry.test/',
    ]);
    expect(seen.npmrc).toContain('registry=http://registry.test/\n');
    expect(seen.npmrc).toContain('https-proxy=http://user:pw@proxy.test:3128\n');
    // The proxy's credentials never reach the jobLog.
    expect(result.lines).toEqual(['[pnpm] proxy http://*****@proxy.test:3128']);
  });

  it('allows install scripts only when the check does', async () => {
    const manager = standIn("console.log(process.argv.slice(2).join(' '));");
    const allowed = await runInstall({
      deps: { ...deps, allowScripts: true },
      manager,
      scratch: tree({}),
      settings,
      isolation: { mechanism: 'off', detail: 'test' },
      signal: new AbortController().signal,
    });
    expect(allowed.lines[0]).not.toContain('--ignore-scripts');
    expect(allowed.lines[0]).toContain('--config.dangerously-allow-all-builds=true');
  });

  it('is stopped at its time limit, with what it printed', async () => {
    const result = await install(standIn("console.log('resolving'); setInterval(() => {}, 1000);"), { installTimeoutMs: 1_000 });
    expect(result.ok).toBe(false);
    expect(result.error).toMatch(/^Installing the suite's dependencies from pnpm-lock\.yaml with pnpm 10\.34\.9 was stopped: it ran past DEPENDENCY_INSTALL_TIMEOUT_SECONDS \(1 s\)$/);
    expect(result.lines).toEqual(['[pnpm] resolving']);
  });

  it('is stopped when the job is aborted', async () => {
    const controller = new AbortController();
    setTimeout(() => controller.abort(new Error('the lease was lost')), 300);
    const result = await install(standIn('setInterval(() => {}, 1000);'), {}, controller.signal);
    expect(result.error).toMatch(/was stopped: the lease was lost$/);
  });

  it('keeps a bounded part of a noisy installer, cut at a full line, and says why it failed', async () => {
    const result = await install(
      standIn(
        "for (let i = 0; i < 5000; i++) console.log('line ' + i + ' ' + 'x'.repeat(40)); console.error(' ERR_PNPM_FETCH_404  GET http://registry.test/ghost: Not Found - 404'); process.exitCode = 1;",
      ),
    );
    expect(result.ok).toBe(false);
    expect(result.lines.length).toBeLessThan(2_000);
    expect(result.lines.at(-1)).toMatch(/^\[pnpm\] \[output truncated: \d+ more bytes, cut at the last full line\]$/);
    // The line that says why came after the limit: the last line kept is what the error quotes.
    expect(result.error).toMatch(/^Installing the suite's dependencies from pnpm-lock\.yaml with pnpm 10\.34\.9 failed \(exit code 1\): /);
  });
});
