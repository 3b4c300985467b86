// The images, built with podman and started with testcontainers (and, for the
// README's `docker run` line and one-shot runs, with the podman CLI as a user
// would): probes, shutdown, the user, ICMP without root, what each image holds.
// .ci/run prepares podman, its socket and the local base images; the builds
// themselves happen here, once per run, on podman's layer cache.

import { readFileSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { GenericContainer, type StartedTestContainer, Wait } from 'testcontainers';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RECOMMENDED_NODE_OPTIONS } from '../../src/node-options.js';
import { REPO, tempDir } from '../support/agent-process.js';
import { ControlPlane } from '../support/control-plane.js';
import { startTargetServer, type TargetServer } from '../support/target-server.js';
import {
  BUILD_ORDER,
  type Built,
  buildImage,
  type Forward,
  forward,
  IMAGES,
  type ImageKey,
  inspectImage,
  exposedPorts,
  lockContainerTests,
  podman,
  holdPodmanBridge,
  readmeDockerRunLine,
  requirePodman,
  shellWords,
  withoutSystemdNoise,
} from './support/images.js';

const pkg = JSON.parse(readFileSync(path.join(REPO, 'package.json'), 'utf8')) as { version: string };
const WIDE_PING_GROUPS = 'net.ipv4.ping_group_range=0 2147483647';

const built = {} as Record<ImageKey, Built>;
let cp: ControlPlane;
let target: TargetServer;
let cpForward: Forward;
let targetForward: Forward;
/** URLs as containers see the test's servers (through the forwarders on podman's bridge). */
let cpUrl: string;
let targetUrl: string;
let unlock: (() => void) | undefined;
let bridge: { gateway: string; release(): Promise<void> } | undefined;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function status(url: string): Promise<number | 'closed'> {
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(5_000) });
    await response.arrayBuffer();
    return response.status;
  } catch {
    return 'closed';
  }
}

async function until<T>(what: string, timeoutMs: number, probe: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(100);
  }
}

function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen(port, () => server.close(() => resolve(true)));
  });
}

/** A checks file in a fresh directory, for `-v file:/checks/…:ro`. */
function checksFile(checks: unknown[]): string {
  const file = path.join(tempDir('outpost-containers-'), 'checks.json');
  writeFileSync(file, JSON.stringify({ checks }), { mode: 0o644 });
  return file;
}

type ResultLine = Record<string, unknown> & { hasErrors: boolean; hasFailures: boolean; icmpCheckResult?: Record<string, unknown> };

function resultLines(stdout: string): ResultLine[] {
  return stdout
    .split('\n')
    .filter((l) => l.startsWith('{"resultType"'))
    .map((l) => JSON.parse(l) as ResultLine);
}

/** `podman run --rm <flags> <image> once /checks/checks.json` with the file mounted read-only. */
function runOnce(image: string, file: string, flags: string[] = []) {
  return podman(['run', '--rm', ...flags, '-v', `${file}:/checks/checks.json:ro`, image, 'once', '/checks/checks.json'], { timeoutMs: 120_000 });
}

beforeAll(async () => {
  await requirePodman();
  const waitStarted = Date.now();
  unlock = await lockContainerTests(25 * 60_000);
  if (Date.now() - waitStarted > 2_000) console.log(`waited ${Math.round((Date.now() - waitStarted) / 1000)} s for another run of the container tests`);
  for (const key of BUILD_ORDER) built[key] = await buildImage(key);
  const rows = BUILD_ORDER.map(
    (key) =>
      `  ${IMAGES[key].tag.padEnd(36)} ${(built[key].size / 1e6).toFixed(0).padStart(5)} MB   built in ${String(built[key].seconds).padStart(6)} s (${built[key].cached}/${built[key].steps} steps cached)`,
  );
  console.log(`Outpost images:\n${rows.join('\n')}`);
  bridge = await holdPodmanBridge();
  const { gateway } = bridge;
  cp = await ControlPlane.start();
  target = await startTargetServer();
  cpForward = await forward(cp.port, gateway);
  targetForward = await forward(Number(new URL(target.url).port), gateway);
  cpUrl = `http://host.containers.internal:${cpForward.port}`;
  targetUrl = `http://host.containers.internal:${targetForward.port}`;
}, 55 * 60_000);

afterAll(async () => {
  await cpForward?.close();
  await targetForward?.close();
  await cp?.close();
  await target?.close();
  await bridge?.release();
  unlock?.();
});

describe('the images', () => {
  it.each(BUILD_ORDER)('%s: user 10001, the state volume, probe port, SIGTERM, liveness healthcheck, NODE_OPTIONS and labels', async (key) => {
    const image = await inspectImage(IMAGES[key].tag);
    expect(image.Config.User).toBe('10001:10001');
    expect(image.Config.Env).toContain(`NODE_OPTIONS=${RECOMMENDED_NODE_OPTIONS}`);
    expect(image.Config.Env).toContain('STATE_DIR=/var/lib/outpost');
    expect(Object.keys(image.Config.Volumes)).toEqual(['/var/lib/outpost']);
    expect(Object.keys(image.Config.ExposedPorts)).toEqual(['8081/tcp']);
    expect(image.Config.StopSignal).toBe('SIGTERM');
    expect(image.Config.Entrypoint).toEqual(['/usr/bin/tini', '--', 'node', '/app/dist/main.js']);
    expect(image.Config.Cmd).toEqual(['agent']);
    expect(image.Healthcheck?.Test.join(' ')).toContain('/-/liveness');
    expect(image.Config.Labels['org.opencontainers.image.version']).toBe(pkg.version);
    expect(image.Config.Labels['io.outpost.runtimes']).toBe(IMAGES[key].runtimes.join(','));
  });

  it.each(BUILD_ORDER)('%s: ping without file capabilities, tcpdump with cap_net_raw only, the trace tools, no downloaded browser, Debian\'s chromium except in uptime', async (key) => {
    const script = [
      'getcap /usr/bin/ping; echo "ping-mode $(stat -c %a /usr/bin/ping)"',
      'getcap /usr/bin/tcpdump',
      'for t in tracepath traceroute tcpdump ip tini node chromium; do command -v $t >/dev/null && echo "has $t"; done',
      'ls -d /var/lib/outpost/.cache/ms-playwright /root/.cache/ms-playwright 2>/dev/null; echo "uid $(id -u) gid $(id -g)"',
      'echo "node $(node --version)"',
    ].join('; ');
    const run = await podman(['run', '--rm', '--entrypoint', 'sh', IMAGES[key].tag, '-c', script]);
    expect(run.code, withoutSystemdNoise(run.stderr)).toBe(0);
    const lines = run.stdout.trim().split('\n');
    expect(lines).not.toContainEqual(expect.stringMatching(/^\/usr\/bin\/ping /));
    expect(lines).toContain('ping-mode 755');
    expect(lines).toContain('/usr/bin/tcpdump cap_net_raw=ep');
    for (const tool of ['tracepath', 'traceroute', 'tcpdump', 'ip', 'tini', 'node']) expect(lines).toContain(`has ${tool}`);
    // BROWSER checks: Debian's chromium in the full, dev and migration images only; playwright's own download nowhere.
    if (key === 'uptime') expect(lines).not.toContain('has chromium');
    else expect(lines).toContain('has chromium');
    expect(lines).not.toContainEqual(expect.stringMatching(/ms-playwright/));
    expect(lines).toContain('uid 10001 gid 10001');
    // The Node.js line the runtimes declare (Node 20, this machine's, reached its end of life in April 2026).
    const declared = (JSON.parse(readFileSync(path.join(REPO, 'runtimes', '2026-04', 'runtime.json'), 'utf8')) as { nodeJsVersion: string }).nodeJsVersion;
    expect(lines).toContainEqual(expect.stringMatching(new RegExp(`^node v${declared}\\.`)));
  });

  it.each(['full', 'dev', 'migration'] as const)('%s: its runtimes are installed exactly as runtime.json and the lockfile say', async (key) => {
    // Each dependency's installed version, and where playwright-core would look for a browser (it must not be there).
    const script = `
      const fs = require('node:fs');
      const out = {};
      for (const name of fs.readdirSync('/app/runtimes')) {
        const dir = '/app/runtimes/' + name;
        const record = JSON.parse(fs.readFileSync(dir + '/runtime.json', 'utf8'));
        const installed = {};
        for (const dep of Object.keys(record.dependencies)) installed[dep] = require(dir + '/node_modules/' + dep + '/package.json').version;
        const chromium = require(dir + '/node_modules/playwright-core').chromium.executablePath();
        out[name] = { record, installed, browserPresent: fs.existsSync(chromium) };
      }
      console.log(JSON.stringify(out));`;
    const run = await podman(['run', '--rm', '--entrypoint', 'node', IMAGES[key].tag, '-e', script]);
    expect(run.code, withoutSystemdNoise(run.stderr)).toBe(0);
    const found = JSON.parse(run.stdout) as Record<string, { record: { dependencies: Record<string, string> }; installed: Record<string, string>; browserPresent: boolean }>;
    expect(Object.keys(found).sort()).toEqual([...IMAGES[key].runtimes]);
    for (const [name, runtime] of Object.entries(found)) {
      const repoRecord = JSON.parse(readFileSync(path.join(REPO, 'runtimes', name, 'runtime.json'), 'utf8')) as unknown;
      expect(runtime.record).toEqual(repoRecord);
      expect(runtime.installed).toEqual(runtime.record.dependencies);
      expect(runtime.browserPresent).toBe(false);
    }
  });

  it('uptime: no runtimes, no npm, no compiler', async () => {
    const run = await podman(['run', '--rm', '--entrypoint', 'sh', IMAGES.uptime.tag, '-c', 'ls /app; for t in npm npx gcc make python3; do command -v $t && echo "has $t"; done; true']);
    expect(run.code).toBe(0);
    expect(run.stdout.split('\n').filter(Boolean).sort()).toEqual(['dist', 'examples', 'node_modules', 'package.json']);
  });

  it('uptime: less than half the size of the full image (which carries Chromium)', () => {
    expect(built.uptime.size * 2, `uptime ${built.uptime.size} bytes, full ${built.full.size} bytes`).toBeLessThan(built.full.size);
  });

  it('dev: compiles C and C++ as uid 10001, with make and python3 for node-gyp', async () => {
    const script = `cd /tmp && printf 'int main(void){return 0;}\\n' > a.c && gcc a.c -o a && ./a && printf 'int main(){return 0;}\\n' > b.cc && g++ b.cc -o b && ./b && make --version >/dev/null && python3 -c 'print("ok")'`;
    const run = await podman(['run', '--rm', '--entrypoint', 'sh', IMAGES.dev.tag, '-c', script], { timeoutMs: 120_000 });
    expect(run.code, withoutSystemdNoise(run.stderr)).toBe(0);
    expect(run.stdout.trim()).toBe('ok');
  });
});

describe('the README docker run line (full image)', () => {
  it('starts the agent: probes on 8081, every process uid 10001, healthy, ICMP allowed; SIGTERM turns readiness 503 at once, drains a slow job, exits 0', async () => {
    const words = shellWords(readmeDockerRunLine());
    expect(words.slice(0, 2)).toEqual(['docker', 'run']);
    expect(words.at(-1), 'the line runs the image built as `outpost`').toBe('outpost');
    const volume = words[words.indexOf('-v') + 1]?.split(':')[0] as string;
    await until('port 8081 of this host to be free for the line\'s -p 8081:8081', 60_000, async () => ((await portFree(8081)) ? true : undefined));
    const volumeExisted = (await podman(['volume', 'exists', volume])).code === 0;
    // Readiness waits for the control plane's first answer, a long poll held up to CLAIM_WAIT_SECONDS (25 s)
    // when no job is ready: a job waiting for the agent makes it answer at once.
    const first = await cp.addJob({ id: 'first-in-container', name: 'ok', checkType: 'URL', request: { url: `${targetUrl}/ok` } });
    // The line runs as written, with podman for docker; -e API_KEY and -e API_URL take the values from this environment.
    const started = await podman(words.slice(1), { env: { API_KEY: cp.apiKey, API_URL: cpUrl } });
    expect(started.code, withoutSystemdNoise(started.stderr)).toBe(0);
    const id = started.stdout.trim();
    try {
      await until('readiness 200 on port 8081', 60_000, async () => ((await status('http://127.0.0.1:8081/-/readiness')) === 200 ? true : undefined));
      expect(await status('http://127.0.0.1:8081/-/liveness')).toBe(200);
      await cp.waitFor(() => cp.resultsFor(first).length === 1, 30_000, 'the first job\'s result');
      expect(cp.resultsFor(first)[0]?.result.hasFailures).toBe(false);

      // Every process in the container (tini as PID 1, node) runs as 10001.
      const uids = await podman(['exec', id, 'node', '-e', `
        const fs = require('node:fs');
        for (const pid of fs.readdirSync('/proc').filter((p) => /^\\d+$/.test(p))) {
          // The program (Node 24 renames its main thread "MainThread", so not /proc/<pid>/status's Name).
          try { const s = fs.readFileSync('/proc/' + pid + '/status', 'utf8'); console.log(pid, /^Uid:\\s+(\\d+)/m.exec(s)[1], require('node:path').basename(fs.readlinkSync('/proc/' + pid + '/exe'))); } catch {}
        }`]);
      const processes = uids.stdout.trim().split('\n').map((l) => l.split(' '));
      expect(processes.find(([pid]) => pid === '1')?.[2]).toBe('tini');
      expect(processes.some(([, , name]) => name === 'node')).toBe(true);
      for (const [pid, uid, name] of processes) expect(uid, `pid ${pid} (${name})`).toBe('10001');

      // Docker's HEALTHCHECK as the engine runs it.
      const health = await podman(['healthcheck', 'run', id]);
      expect(health.code, withoutSystemdNoise(health.stdout + health.stderr)).toBe(0);
      // The line's --sysctl lets uid 10001 ping without any capability.
      const ping = await podman(['exec', id, 'ping', '-n', '-c', '1', '-W', '2', '127.0.0.1']);
      expect(ping.code, ping.stdout + ping.stderr).toBe(0);

      // A slow job is running when SIGTERM arrives (podman stop sends the image's STOPSIGNAL).
      const jobId = await cp.addJob({ id: 'slow-in-container', name: 'slow', checkType: 'URL', request: { url: `${targetUrl}/slow/4000` } });
      await cp.waitFor(() => cp.jobs.get(jobId)?.state === 'leased', 30_000, 'the claim of the slow job');
      await sleep(300);
      const polls: Array<{ at: number; readiness: number | 'closed'; liveness: number | 'closed' }> = [];
      const stopping = podman(['stop', '--time', '120', id], { timeoutMs: 150_000 });
      let stopped = false;
      stopping.then(() => {
        stopped = true;
      });
      while (!stopped) {
        const at = Date.now();
        const [readiness, liveness] = await Promise.all([status('http://127.0.0.1:8081/-/readiness'), status('http://127.0.0.1:8081/-/liveness')]);
        polls.push({ at, readiness, liveness });
        await sleep(50);
      }
      const stop = await stopping;
      expect(stop.code, withoutSystemdNoise(stop.stderr)).toBe(0);
      const state = JSON.parse((await podman(['inspect', '--format', '{{json .State}}', id])).stdout) as { ExitCode: number; Status: string };
      expect(state.Status).toBe('exited');
      expect(state.ExitCode).toBe(0);

      // Every probe sent after the handler ran (its log line's time) got readiness 503 and liveness 200; the first 503 came
      // promptly (a generous bound: a busy CI machine stretches the probe loop, and the order above is the real claim).
      const logs = (await podman(['logs', id])).stdout.split('\n').filter((l) => l.startsWith('{"level"'));
      const drain = logs.map((l) => JSON.parse(l) as { time: number; msg: string }).find((l) => l.msg.startsWith('shutting down'));
      expect(drain, logs.slice(-20).join('\n')).toBeDefined();
      // Up to the health server's close at exit: a poll then may get one answer of its two and not the other.
      const closedAt = polls.findIndex((p) => p.readiness === 'closed' || p.liveness === 'closed');
      const beforeClose = closedAt === -1 ? polls : polls.slice(0, closedAt);
      // …and once closed, it stays closed: a close mid-drain is no exit.
      expect(polls.slice(beforeClose.length).filter((p) => p.readiness !== 'closed' && p.liveness !== 'closed')).toEqual([]);
      const afterSignal = beforeClose.filter((p) => p.at > (drain?.time ?? 0));
      expect(afterSignal.length).toBeGreaterThan(5);
      const wrong = afterSignal.filter((p) => p.readiness !== 503 || p.liveness !== 200);
      expect(wrong, `of ${afterSignal.length} polls after the signal`).toEqual([]);
      const first503 = polls.find((p) => p.readiness === 503);
      expect((first503?.at ?? Number.POSITIVE_INFINITY) - (drain?.time ?? 0)).toBeLessThan(5_000);
      // The slow job finished normally and its result reached the control plane before the exit.
      const [result] = cp.resultsFor(jobId);
      expect(result?.result.hasErrors, JSON.stringify(result?.result)).toBe(false);
      expect(result?.result.apiCheckResult?.response).toMatchObject({ status: 200 });
    } finally {
      await podman(['rm', '-f', id]);
      if (!volumeExisted) await podman(['volume', 'rm', '-f', volume]);
    }
  }, 240_000);
});

describe('BROWSER checks (full image)', () => {
  it('runs a page script on Debian\'s chromium as uid 10001, headless, with every capability dropped, and passes', async () => {
    const file = checksFile([
      {
        id: 'browser-in-container',
        name: 'page',
        checkType: 'BROWSER',
        runtimeId: '2026-04',
        maxResponseTime: 90_000,
        script: `const { chromium } = require('playwright-core');
const browser = await chromium.launch();
const page = await browser.newPage();
await step('open the target', async () => {
  const res = await page.goto(${JSON.stringify(`${targetUrl}/ok`)});
  expect(res.status()).toBe(200);
  expect(await page.textContent('body')).toContain('ok');
});
await step('render a page with text', async () => {
  await page.setContent('<title>Outpost</title><h1 style="font-family: sans-serif">Outpost</h1>');
  expect(await page.title()).toBe('Outpost');
  const png = await page.screenshot();
  expect(png.length > 1000).toBe(true);
  console.log('chromium ' + browser.version() + ', screenshot ' + png.length + ' bytes');
});
await browser.close();`,
      },
    ]);
    // As the image runs by default (uid 10001, no capabilities) nothing can isolate scripts (docs/script-isolation.md):
    // the operator's opt-in runs them.
    const run = await runOnce(IMAGES.full.tag, file, ['--cap-drop', 'ALL', '-e', 'SCRIPT_ISOLATION=off']);
    const [result] = resultLines(run.stdout);
    expect(run.code, `${run.stdout}\n${withoutSystemdNoise(run.stderr)}`).toBe(0);
    expect(result, run.stdout).toMatchObject({ checkType: 'BROWSER', hasErrors: false, hasFailures: false });
    const detail = result?.browserCheckResult as { steps: Array<{ name: string; passed: boolean }>; requestError: unknown };
    expect(detail.steps.map((s) => [s.name, s.passed])).toEqual([
      ['open the target', true],
      ['render a page with text', true],
    ]);
    expect(detail.requestError ?? null).toBeNull();
  }, 180_000);

  it('runs a @playwright/test suite (PLAYWRIGHT) with its helper file as uid 10001, every capability dropped', async () => {
    const file = checksFile([
      {
        id: 'suite-in-container',
        name: 'suite',
        checkType: 'PLAYWRIGHT',
        runtimeId: '2026-04',
        maxResponseTime: 90_000,
        script: `import { test, expect } from '@playwright/test';
import { target } from './helpers/target';
test('the target answers', async ({ page }) => {
  const res = await page.goto(target('/ok'));
  expect(res?.status()).toBe(200);
  await expect(page.locator('body')).toContainText('ok');
});`,
        files: [{ path: 'helpers/target.ts', content: `export const target = (path: string) => ${JSON.stringify(targetUrl)} + path;\n` }],
      },
    ]);
    // As the image runs by default (uid 10001, no capabilities) nothing can isolate scripts (docs/script-isolation.md):
    // the operator's opt-in runs them.
    const run = await runOnce(IMAGES.full.tag, file, ['--cap-drop', 'ALL', '-e', 'SCRIPT_ISOLATION=off']);
    const [result] = resultLines(run.stdout);
    expect(run.code, `${run.stdout}\n${withoutSystemdNoise(run.stderr)}`).toBe(0);
    expect(result, run.stdout).toMatchObject({ checkType: 'PLAYWRIGHT', hasErrors: false, hasFailures: false });
    const detail = result?.browserCheckResult as { steps: Array<{ name: string; passed: boolean }>; tests: unknown };
    expect(detail.steps.map((s) => [s.name, s.passed])).toEqual([['check.spec.ts › the target answers', true]]);
    expect(detail.tests).toEqual({ expected: 1, unexpected: 0, flaky: 0, skipped: 0 });
  }, 180_000);
});

describe('script isolation in the full image', () => {
  it('refuses a BROWSER check as the image runs by default (uid 10001, no capabilities), naming the reason and the opt-in', async () => {
    const file = checksFile([{ id: 'page', name: 'page', checkType: 'BROWSER', runtimeId: '2026-04', script: 'console.log(1)' }]);
    const run = await runOnce(IMAGES.full.tag, file, ['--cap-drop', 'ALL']);
    expect(run.code, `${run.stdout}\n${withoutSystemdNoise(run.stderr)}`).toBe(78);
    expect(resultLines(run.stdout)).toEqual([]);
    expect(run.stderr).toContain('SCRIPT_ISOLATION=off');
  }, 180_000);
});

describe('uptime image', () => {
  let agent: StartedTestContainer | undefined;
  afterAll(async () => {
    await agent?.stop({ timeout: 10_000 });
  });

  it('answers its probes on AGENT_HEALTH_PORT=9090, runs URL jobs and leaves scripted jobs unclaimed', async () => {
    agent = await new GenericContainer(IMAGES.uptime.tag)
      .withEnvironment({ API_URL: cpUrl, API_KEY: cp.apiKey, AGENT_HEALTH_PORT: '9090', CLAIM_WAIT_SECONDS: '1' })
      .withExposedPorts(...exposedPorts(9090))
      .withWaitStrategy(Wait.forHttp('/-/readiness', 9090).forStatusCode(200))
      .withStartupTimeout(90_000)
      .start();
    const base = `http://${agent.getHost()}:${agent.getMappedPort(9090)}`;
    expect(await status(`${base}/-/liveness`)).toBe(200);
    const health = (await (await fetch(`${base}/health`)).json()) as { mode: string; ready: boolean };
    expect(health).toMatchObject({ mode: 'agent', ready: true });
    // The image's HEALTHCHECK follows AGENT_HEALTH_PORT.
    const check = await podman(['healthcheck', 'run', agent.getId()]);
    expect(check.code, withoutSystemdNoise(check.stdout + check.stderr)).toBe(0);
    const urlJob = await cp.addJob({ id: 'url-from-uptime', name: 'ok', checkType: 'URL', request: { url: `${targetUrl}/ok` } });
    await cp.waitFor(() => cp.resultsFor(urlJob).length === 1, 30_000, 'the URL result');
    expect(cp.resultsFor(urlJob)[0]?.result.hasFailures).toBe(false);
    // A scripted job, with the agent idle and claiming.
    const scripted = await cp.addJob({ id: 'multi-step', name: 'scripted', checkType: 'MULTI_STEP', runtimeId: '2026-04', script: 'console.log(1)' });
    const claims = cp.claims.length;
    await cp.waitFor(() => cp.claims.length >= claims + 2, 30_000, 'two more claims');
    await agent.stop({ timeout: 10_000 });
    agent = undefined;
    // It advertises only the types it runs, so the scripted job was never handed to it.
    expect(cp.jobs.get(scripted)?.state).toBe('ready');
    expect(cp.jobs.get(scripted)?.claims).toBe(0);
    expect(cp.violations).toEqual([]);
  }, 180_000);

  it('refuses a scripted check of a checks file with one clear line and exit 78', async () => {
    const file = checksFile([{ id: 'login-flow', name: 'Log in', checkType: 'MULTI_STEP', runtimeId: '2026-04', script: 'await page.goto("/")' }]);
    const run = await runOnce(IMAGES.uptime.tag, file);
    expect(run.code).toBe(78);
    const supported = /MULTI_STEP is not supported by this agent \(supported: ([A-Z_, ]+)\)/.exec(run.stderr)?.[1]?.split(', ');
    expect(supported, run.stderr).toEqual(expect.arrayContaining(['URL', 'API', 'TCP', 'DNS', 'ICMP']));
    expect(supported).not.toContain('MULTI_STEP');
    expect(run.stderr).not.toMatch(/\n\s+at /);
  }, 120_000);

  it('has no Chromium, so a BROWSER check of a checks file is refused the same way', async () => {
    const file = checksFile([{ id: 'page', name: 'page', checkType: 'BROWSER', runtimeId: '2026-04', script: 'console.log(1)' }]);
    const run = await runOnce(IMAGES.uptime.tag, file);
    expect(run.code, `${run.stdout}\n${withoutSystemdNoise(run.stderr)}`).toBe(78);
    const supported = /BROWSER is not supported by this agent \(supported: ([A-Z_, ]+)\)/.exec(run.stderr)?.[1]?.split(', ');
    expect(supported, run.stderr).toEqual(expect.arrayContaining(['URL', 'API', 'TCP', 'DNS', 'ICMP']));
    expect(supported).not.toContain('BROWSER');
  }, 120_000);
});

describe('NODE_EXTRA_CA_CERTS at run time', () => {
  it('is read from a mounted file, and a missing file is one clear line and exit 78', async () => {
    const file = checksFile([{ id: 'ok', name: 'ok', checkType: 'URL', request: { url: `${targetUrl}/ok` } }]);
    const ca = process.env.NODE_EXTRA_CA_CERTS ?? '/etc/ssl/certs/ca-certificates.crt';
    const trusted = await runOnce(IMAGES.uptime.tag, file, ['-v', `${ca}:/etc/outpost/ca.pem:ro`, '-e', 'NODE_EXTRA_CA_CERTS=/etc/outpost/ca.pem']);
    expect(trusted.code, `${trusted.stdout}\n${withoutSystemdNoise(trusted.stderr)}`).toBe(0);
    expect(resultLines(trusted.stdout)[0]).toMatchObject({ hasErrors: false, hasFailures: false });
    const missing = await runOnce(IMAGES.uptime.tag, file, ['-e', 'NODE_EXTRA_CA_CERTS=/etc/outpost/missing.pem']);
    expect(missing.code).toBe(78);
    expect(missing.stderr).toContain('NODE_EXTRA_CA_CERTS="/etc/outpost/missing.pem" is invalid: must be a readable PEM file');
  }, 120_000);
});

describe('ICMP without root', () => {
  let peer: StartedTestContainer | undefined;
  let peerAddress = '';
  beforeAll(async () => {
    // A second container to ping: another agent (local mode on the example checks).
    peer = await new GenericContainer(IMAGES.uptime.tag)
      .withCommand(['local', '/app/examples/checks.json'])
      .withExposedPorts(...exposedPorts())
      .withWaitStrategy(Wait.forHttp('/-/liveness', 8081))
      .start();
    peerAddress = peer.getIpAddress(peer.getNetworkNames()[0] as string);
  }, 120_000);
  afterAll(async () => {
    await peer?.stop({ timeout: 1_000 });
  });

  const icmp = () => checksFile([{ id: 'peer', name: 'peer container', checkType: 'ICMP', request: { hostname: peerAddress, pingCount: 3 } }]);

  it('pings another container as uid 10001 with every capability dropped, given the ping_group_range sysctl', async () => {
    const run = await runOnce(IMAGES.uptime.tag, icmp(), ['--cap-drop', 'ALL', '--sysctl', WIDE_PING_GROUPS]);
    const [result] = resultLines(run.stdout);
    expect(run.code, `${run.stdout}\n${withoutSystemdNoise(run.stderr)}`).toBe(0);
    expect(result).toMatchObject({ hasErrors: false, hasFailures: false });
    expect(result?.icmpCheckResult?.requestError).toBeNull();
    expect(JSON.stringify(result?.icmpCheckResult?.response)).toContain(peerAddress);
  }, 120_000);

  it("says what to set when the runtime's ping_group_range excludes the agent's group (podman's default \"0 0\")", async () => {
    const run = await runOnce(IMAGES.uptime.tag, icmp(), ['--cap-drop', 'ALL', '--sysctl', 'net.ipv4.ping_group_range=0 0']);
    const [result] = resultLines(run.stdout);
    expect(run.code).toBe(1);
    expect(result?.hasErrors).toBe(true);
    expect(String(result?.icmpCheckResult?.requestError)).toContain('net.ipv4.ping_group_range');
  }, 120_000);
});

describe('packet capture needs NET_RAW', () => {
  it('tcpdump captures as uid 10001 with --cap-add NET_RAW and cannot even start without it', async () => {
    const script = 'timeout 5 tcpdump -i lo -c 1 -n -w /dev/null icmp & sleep 1; ping -c 2 -W 1 127.0.0.1 >/dev/null; wait $!';
    const flags = ['--rm', '--sysctl', WIDE_PING_GROUPS, '--entrypoint', 'sh'];
    const allowed = await podman(['run', ...flags, '--cap-drop', 'ALL', '--cap-add', 'NET_RAW', IMAGES.full.tag, '-c', script]);
    expect(allowed.code, withoutSystemdNoise(allowed.stderr)).toBe(0);
    expect(allowed.stderr).toContain('1 packet captured');
    const refused = await podman(['run', ...flags, '--cap-drop', 'ALL', IMAGES.full.tag, '-c', 'tcpdump -i lo -c 1 -n -w /dev/null']);
    expect(refused.code).not.toBe(0);
    expect(withoutSystemdNoise(refused.stderr)).toMatch(/operation not permitted/i);
  }, 120_000);
});
