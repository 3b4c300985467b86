// Local and once modes as a real process against the small target server:
// results on stdout (JSON lines on a pipe) and in a JSONL file, summary and
// logs on stderr, the health server, hanging-job warnings and shutdown.

import { spawn } from 'node:child_process';
import { closeSync, existsSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type { CheckResultEntry } from '../../src/core/result-entry.js';
import { type AgentProcess, cleanEnv, exitWithin, probe, REPO, tempDir } from '../support/agent-process.js';
import { useHarness } from '../support/harness.js';
import { startTargetServer } from '../support/target-server.js';

const h = useHarness();

type Check = Record<string, unknown>;

function urlCheck(id: string, route: string, extra: Check = {}): Check {
  return { id, name: `check ${id}`, checkType: 'URL', request: { url: `${h.target.url}${route}` }, ...extra };
}

function writeChecks(checks: Check[], dir = tempDir()): string {
  const file = path.join(dir, 'checks.json');
  writeFileSync(file, JSON.stringify({ checks }));
  return file;
}

const start = (args: string[], env: Record<string, string> = {}): AgentProcess => h.start(args, env);

/** Every stdout line, each of which must be a result. */
function results(proc: AgentProcess): CheckResultEntry[] {
  return proc.stdoutLines.map((line) => JSON.parse(line) as CheckResultEntry);
}

function readJsonl(file: string): CheckResultEntry[] {
  const text = readFileSync(file, 'utf8');
  expect(text.endsWith('\n')).toBe(true);
  return text
    .split('\n')
    .filter((l) => l.length > 0)
    .map((l) => JSON.parse(l) as CheckResultEntry);
}

async function until(condition: () => boolean, timeoutMs: number, what: string, proc?: AgentProcess): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) {
      throw new Error(`timed out waiting for ${what}${proc ? `; stderr: ${proc.stderr().slice(-2000)}; stdout: ${proc.stdout().slice(-2000)}` : ''}`);
    }
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** Resolves once the target has received `n` more requests than `before` (the job is running). */
function targetHit(before: number, proc: AgentProcess, n = 1): Promise<void> {
  return until(() => h.target.hits() >= before + n, 15_000, 'the check to reach the target', proc);
}

/** Resolves once readiness answers 503: the agent has begun to drain. */
async function draining(port: number, proc: AgentProcess): Promise<void> {
  const deadline = Date.now() + 5_000;
  while ((await probe(port, '/-/readiness')).status !== 503) {
    if (Date.now() > deadline) throw new Error(`readiness never turned 503; stderr: ${proc.stderr().slice(-2000)}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

describe('once mode', () => {
  it('prints one JSON result per check on stdout, a summary on stderr, and exits 0 when all pass', async () => {
    const file = writeChecks([
      urlCheck('ok', '/ok'),
      urlCheck('redirect', '/redirect/2'),
      urlCheck('no-content', '/status/204', { assertions: [{ source: 'STATUS_CODE', comparison: 'EQUALS', target: 204 }] }),
      { id: 'closed', checkType: 'URL', shouldFail: true, request: { url: 'http://127.0.0.1:9/' } },
    ]);
    const proc = start(['once', file]);
    const { code } = await proc.exit;
    expect(code, proc.stderr()).toBe(0);

    const list = results(proc);
    expect(list.map((r) => r.checkId).sort()).toEqual(['closed', 'no-content', 'ok', 'redirect']);
    for (const r of list) {
      expect(r).toMatchObject({ resultType: 'FINAL', hasFailures: false, hasErrors: false, runLocation: 'local', checkType: 'URL', attempts: 1 });
    }
    const byId = Object.fromEntries(list.map((r) => [r.checkId, r]));
    expect(byId.ok?.apiCheckResult?.response).toMatchObject({ status: 200 });
    expect(byId.redirect?.apiCheckResult?.response).toMatchObject({ status: 200, redirects: 2 });
    expect(byId.closed?.apiCheckResult?.requestError).toContain('connection refused');
    expect(byId['no-content']?.apiCheckResult?.assertions).toMatchObject([{ actual: 204, passed: true }]);

    expect(proc.stderr()).toContain('outpost once: 4 checks: 4 passed, 0 degraded, 0 failed, 0 errors\n');
  });

  it('exits 1 when one check fails, and counts it in the summary', async () => {
    const file = writeChecks([urlCheck('ok', '/ok'), urlCheck('broken', '/status/500')]);
    const proc = start(['once', file]);
    const { code } = await proc.exit;
    expect(code, proc.stderr()).toBe(1);
    const byId = Object.fromEntries(results(proc).map((r) => [r.checkId, r]));
    expect(byId.ok?.hasFailures).toBe(false);
    expect(byId.broken).toMatchObject({ hasFailures: true, hasErrors: false });
    expect(byId.broken?.apiCheckResult?.response).toMatchObject({ status: 500 });
    expect(proc.stderr()).toContain('outpost once: 2 checks: 1 passed, 0 degraded, 1 failed, 0 errors\n');
  });

  it('exits 1 when a check has an error (connection refused)', async () => {
    const file = writeChecks([{ id: 'refused', checkType: 'URL', request: { url: 'http://127.0.0.1:9/' } }]);
    const proc = start(['once', file]);
    expect((await proc.exit).code).toBe(1);
    expect(results(proc)[0]).toMatchObject({ checkId: 'refused', hasErrors: true });
    expect(proc.stderr()).toContain('outpost once: 1 check: 0 passed, 0 degraded, 0 failed, 1 error\n');
  });

  it('counts FINAL results only: a check that fails its first attempt and passes on retry is one passed check and one retry, exit 0', async () => {
    let requests = 0;
    const flaky = http.createServer((_req, res) => {
      requests++;
      res.writeHead(requests === 1 ? 503 : 200).end();
    });
    await new Promise<void>((resolve) => flaky.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = flaky.address() as net.AddressInfo;
      const file = writeChecks([
        { id: 'flaky', checkType: 'URL', request: { url: `http://127.0.0.1:${port}/` }, retryStrategy: { type: 'FIXED', baseBackoffSeconds: 0, maxRetries: 2 } },
      ]);
      const proc = start(['once', file]);
      expect((await proc.exit).code, proc.stderr()).toBe(0);
      expect(requests).toBe(2);
      expect(results(proc).map((r) => [r.resultType, r.hasFailures])).toEqual([
        ['ATTEMPT', true],
        ['FINAL', false],
      ]);
      expect(proc.stderr()).toContain('outpost once: 1 check: 1 passed, 0 degraded, 0 failed, 0 errors (1 retry)\n');
    } finally {
      await new Promise((resolve) => flaky.close(resolve));
    }
  });

  it('--results writes the same lines to a JSONL file', async () => {
    const dir = tempDir();
    const resultsFile = path.join(dir, 'results.jsonl');
    const file = writeChecks([urlCheck('a', '/ok'), urlCheck('b', '/status/404'), urlCheck('c', '/ok')], dir);
    const proc = start(['once', file, '--results', resultsFile]);
    expect((await proc.exit).code).toBe(1);
    expect(proc.stdoutLines).toHaveLength(3);
    expect(readFileSync(resultsFile, 'utf8')).toBe(proc.stdout());
    expect(readJsonl(resultsFile).map((r) => r.checkId).sort()).toEqual(['a', 'b', 'c']);
  });

  it('runs checks concurrently, up to JOB_CONCURRENCY and no more', async () => {
    const own = await startTargetServer();
    try {
      const file = writeChecks(
        ['s1', 's2', 's3', 's4', 's5'].map((id) => ({ id, checkType: 'URL', request: { url: `${own.url}/slow/300` } })),
      );
      const proc = start(['once', file], { JOB_CONCURRENCY: '2' });
      expect((await proc.exit).code, proc.stderr()).toBe(0);
      expect(results(proc)).toHaveLength(5);
      expect(own.hits()).toBe(5);
      expect(own.maxConcurrent()).toBe(2);
    } finally {
      await own.close();
    }
  });
});

describe('once mode interrupted', () => {
  it('SIGINT aborts the running check, reports it as an error and exits 1 with an interrupted summary', async () => {
    const file = writeChecks([urlCheck('long', '/slow/10000')]);
    const before = h.target.hits();
    const proc = start(['once', file]);
    await targetHit(before, proc);
    proc.kill('SIGINT');
    const { code } = await proc.exit;
    expect(code, proc.stderr()).toBe(1);
    const [result] = results(proc);
    expect(result).toMatchObject({ checkId: 'long', hasErrors: true });
    expect(result?.apiCheckResult?.requestError).toBe('Aborted: interrupted');
    expect(proc.stderr()).toContain('outpost once: 1 check: 0 passed, 0 degraded, 0 failed, 1 error (interrupted)\n');
  });

  it('SIGINT with checks still queued behind the running one never exits 0, and prints the summary', async () => {
    // JOB_CONCURRENCY=1: "b" and "c" wait in the queue while "a" runs. A CI
    // pipeline must never read an interrupted run as a pass.
    const file = writeChecks([urlCheck('a', '/slow/10000'), urlCheck('b', '/slow/10000'), urlCheck('c', '/slow/10000')]);
    const before = h.target.hits();
    const proc = start(['once', file], { JOB_CONCURRENCY: '1' });
    await targetHit(before, proc);
    proc.kill('SIGINT');
    const { code } = await proc.exit;
    expect(code, `stderr: ${proc.stderr()}`).not.toBe(0);
    expect(code).toBe(1);
    // Checks not yet started (once mode submits a check only when a slot is free) still end with a result each.
    expect(results(proc).map((r) => r.checkId).sort()).toEqual(['a', 'b', 'c']);
    expect(results(proc).every((r) => r.hasErrors)).toBe(true);
    expect(proc.stderr()).toContain('outpost once: 3 checks: 0 passed, 0 degraded, 0 failed, 3 errors (interrupted)\n');
  });
});

describe('local mode', () => {
  it('reports each check on its frequency, serves health, readiness and metrics, and exits 0 on SIGINT', async () => {
    const dir = tempDir();
    const resultsFile = path.join(dir, 'results.jsonl');
    const file = writeChecks(
      [urlCheck('fast', '/ok', { frequency: 1 }), urlCheck('teapot', '/status/418', { frequency: 2 }), urlCheck('slowish', '/slow/100', { frequency: 1 })],
      dir,
    );
    const proc = start(['local', file, '--results', resultsFile]);
    const port = await proc.healthPort();
    const count = (id: string) => results(proc).filter((r) => r.checkId === id).length;
    await until(() => count('fast') >= 3 && count('teapot') >= 2 && count('slowish') >= 3, 20_000, 'repeated results', proc);

    const byId = (id: string) => results(proc).filter((r) => r.checkId === id);
    for (const r of byId('fast')) expect(r).toMatchObject({ hasFailures: false, runLocation: 'local', checkType: 'URL' });
    for (const r of byId('teapot')) expect(r).toMatchObject({ hasFailures: true, hasErrors: false });
    // Every run is a fresh result.
    const ids = results(proc).map((r) => r.id);
    expect(new Set(ids).size).toBe(ids.length);

    const health = await probe(port, '/health');
    expect(health.status).toBe(200);
    expect(health.body).toMatchObject({ mode: 'local', ready: true, shuttingDown: false, spooled: 0 });
    expect((await probe(port, '/-/readiness')).status).toBe(200);
    expect((await probe(port, '/-/liveness')).status).toBe(200);
    expect((await probe(port, '/nope')).status).toBe(404);
    const metrics = (await probe(port, '/metrics')).text;
    expect(metrics).toContain('outpost_jobs_total');
    expect(metrics).toMatch(/outpost_jobs_total\{check_type="URL",outcome="passed"\} [1-9]/);
    expect(metrics).toMatch(/outpost_jobs_total\{check_type="URL",outcome="failed"\} [1-9]/);

    proc.kill('SIGINT');
    const { code } = await proc.exit;
    expect(code, proc.stderr()).toBe(0);
    // The file is complete: every line parses, and it holds exactly what stdout showed.
    const fromFile = readJsonl(resultsFile);
    expect(fromFile.map((r) => r.id)).toEqual(results(proc).map((r) => r.id));
    expect(proc.logs.some((l) => l.msg === 'outpost local mode stopped')).toBe(true);
  });

  it('on SIGINT turns readiness to 503, keeps liveness, finishes the running check and writes its result', async () => {
    const dir = tempDir();
    const resultsFile = path.join(dir, 'results.jsonl');
    const file = writeChecks([urlCheck('long', '/slow/3000', { frequency: 60 })], dir);
    const before = h.target.hits();
    const proc = start(['local', file, '--results', resultsFile]);
    const port = await proc.healthPort();
    await targetHit(before, proc);
    expect(results(proc)).toHaveLength(0);
    expect((await probe(port, '/-/readiness')).status).toBe(200);

    proc.kill('SIGINT');
    await draining(port, proc);
    expect((await probe(port, '/-/liveness')).status).toBe(200);
    const health = await probe(port, '/health');
    expect(health.body).toMatchObject({ shuttingDown: true, ready: false, inFlight: 1 });

    const { code } = await proc.exit;
    expect(code, proc.stderr()).toBe(0);
    const fromFile = readJsonl(resultsFile);
    expect(fromFile).toHaveLength(1);
    expect(fromFile[0]).toMatchObject({ checkId: 'long', hasFailures: false, hasErrors: false });
    expect(fromFile[0]?.apiCheckResult?.response).toMatchObject({ status: 200 });
  });

  it('aborts running checks at the end of the shutdown grace and reports them as errors, then exits 0', async () => {
    const dir = tempDir();
    const resultsFile = path.join(dir, 'results.jsonl');
    const file = writeChecks([urlCheck('stuck', '/slow/20000', { frequency: 60 })], dir);
    const before = h.target.hits();
    const proc = start(['local', file, '--results', resultsFile], { SHUTDOWN_GRACE_SECONDS: '0' });
    await targetHit(before, proc);
    proc.kill('SIGINT');
    const { code } = await proc.exit;
    expect(code, proc.stderr()).toBe(0);
    const fromFile = readJsonl(resultsFile);
    expect(fromFile).toHaveLength(1);
    expect(fromFile[0]).toMatchObject({ checkId: 'stuck', hasErrors: true, hasFailures: true });
    expect(fromFile[0]?.apiCheckResult?.requestError).toBe('Aborted: the agent shut down before the check finished');
  });

  it('SIGTERM ends a retry\'s backoff wait at once: no attempt after the signal, the FINAL result an error before attempt 2, exit 0', async () => {
    const dir = tempDir();
    const resultsFile = path.join(dir, 'results.jsonl');
    // A 5-minute wait before attempt 2, and the default grace of 280 s: only the drain's start can end it.
    const file = writeChecks([urlCheck('retrying', '/status/500', { frequency: 60, retryStrategy: { type: 'FIXED', baseBackoffSeconds: 300, maxRetries: 1 } })], dir);
    const before = h.target.hits();
    const proc = start(['local', file, '--results', resultsFile]);
    await until(() => results(proc).some((r) => r.resultType === 'ATTEMPT'), 15_000, 'the first attempt\'s ATTEMPT result', proc);
    proc.kill('SIGTERM');
    const { code } = await exitWithin(proc, 20_000, 'the drain waited out the retry\'s backoff');
    expect(code, proc.stderr()).toBe(0);
    expect(h.target.hits() - before).toBe(1);
    const fromFile = readJsonl(resultsFile);
    expect(fromFile.map((r) => [r.resultType, r.attempts])).toEqual([
      ['ATTEMPT', 1],
      ['FINAL', 2],
    ]);
    expect(fromFile[1]).toMatchObject({ checkId: 'retrying', hasErrors: true });
    expect(fromFile[1]?.apiCheckResult?.requestError).toBe('Aborted: the agent shut down before the check finished (before attempt 2)');
  });

  it('a second SIGINT exits at once, without waiting for the running check', async () => {
    const dir = tempDir();
    const resultsFile = path.join(dir, 'results.jsonl');
    const file = writeChecks([urlCheck('stuck', '/slow/20000', { frequency: 60 })], dir);
    const before = h.target.hits();
    const proc = start(['local', file, '--results', resultsFile]);
    const port = await proc.healthPort();
    await targetHit(before, proc);
    proc.kill('SIGINT');
    await draining(port, proc);
    const drainLine = await proc.waitForLog((l) => String(l.msg).startsWith('shutting down'), 5_000, 'the drain line');
    expect(drainLine.msg).toBe('shutting down: finishing running checks (a second SIGINT or SIGTERM exits at once)');
    proc.kill('SIGINT');
    const { code } = await proc.exit;
    expect(code, proc.stderr()).toBe(130);
    // The running check never finished, so nothing was reported.
    expect(proc.stdoutLines).toEqual([]);
    expect(readFileSync(resultsFile, 'utf8')).toBe('');
  });

  it('warns once about a job running past maxResponseTime, with its identity, and marks the result over max', async () => {
    const file = writeChecks([
      urlCheck('hang', '/slow/1500', { frequency: 60, maxResponseTime: 200 }),
      urlCheck('quick', '/ok', { frequency: 60 }),
    ]);
    const proc = start(['local', file]);
    await until(() => results(proc).some((r) => r.checkId === 'hang') && results(proc).some((r) => r.checkId === 'quick'), 20_000, 'both results', proc);

    const warnings = proc.logs.filter((l) => l.msg === 'job is running past its expected time');
    expect(warnings).toHaveLength(1);
    const warning = warnings[0] as Record<string, unknown>;
    expect(warning).toMatchObject({ level: 40, checkId: 'hang', checkType: 'URL', target: `${h.target.url}/slow/1500`, expectedMs: 200 });
    expect(typeof warning.jobId).toBe('string');
    expect(warning.jobId).toMatch(/^[0-9a-f-]{36}$/);
    expect(typeof warning.elapsedMs).toBe('number');
    expect(warning.elapsedMs as number).toBeGreaterThanOrEqual(200);

    const hang = results(proc).find((r) => r.checkId === 'hang');
    expect(hang).toMatchObject({ overMaxResponseTime: true, hasFailures: true, hasErrors: false, isDegraded: false });
    expect(hang?.responseTime).toBeGreaterThan(200);
    expect(results(proc).find((r) => r.checkId === 'quick')).toMatchObject({ overMaxResponseTime: false, hasFailures: false });

    proc.kill('SIGINT');
    expect((await proc.exit).code).toBe(0);
    // Still exactly one warning for that job after shutdown.
    expect(proc.logs.filter((l) => l.msg === 'job is running past its expected time' && l.jobId === warning.jobId)).toHaveLength(1);
  });

  it('runs the bundled examples (npm start) and every example check passes', async () => {
    const port = await freePort();
    const dir = tempDir();
    const original = readFileSync(path.join(REPO, 'docs/examples/checks.json'), 'utf8');
    expect(original).toContain('127.0.0.1:8081');
    const file = path.join(dir, 'checks.json');
    writeFileSync(file, original.replaceAll('127.0.0.1:8081', `127.0.0.1:${port}`));
    const exampleIds = (JSON.parse(original) as { checks: Array<{ id: string }> }).checks.map((c) => c.id);

    const proc = start(['local', file], { AGENT_HEALTH_PORT: String(port) });
    expect(await proc.healthPort()).toBe(port);
    await until(() => exampleIds.every((id) => results(proc).some((r) => r.checkId === id)), 15_000, 'a result for every example', proc);
    for (const id of exampleIds) {
      const first = results(proc).find((r) => r.checkId === id);
      expect(first, id).toMatchObject({ hasFailures: false, hasErrors: false });
    }

    proc.kill('SIGINT');
    const { code } = await proc.exit;
    expect(code, proc.stderr()).toBe(0);
  });
});

describe('stdout that fails', () => {
  /** What stderr says beside pino's JSON lines and the summary: a crash would show up here. */
  const crashSigns = (proc: AgentProcess) => ({ uncaught: proc.stderr().includes('uncaught exception'), stack: /\n\s+at /.test(proc.stderr()) });
  const stdoutGone = (proc: AgentProcess) => proc.logs.filter((l) => String(l.msg).startsWith('stdout cannot be written'));

  it('once mode whose stdout reader is gone (EPIPE) runs every check, writes every result to --results, says so in one line and exits on its verdict', async () => {
    const dir = tempDir();
    const resultsFile = path.join(dir, 'results.jsonl');
    const ids = Array.from({ length: 20 }, (_, i) => `c${i}`);
    const file = writeChecks(
      ids.map((id) => urlCheck(id, '/ok')),
      dir,
    );
    const proc = start(['once', file, '--results', resultsFile]);
    // Like `| head -1` having read its line: the read end closes, every write after it gets EPIPE.
    proc.proc.stdout?.destroy();
    const { code } = await exitWithin(proc, 30_000, 'once mode with a closed stdout');
    expect(crashSigns(proc), proc.stderr()).toEqual({ uncaught: false, stack: false });
    expect(code, proc.stderr()).toBe(0);
    expect(readJsonl(resultsFile).map((r) => r.checkId).sort()).toEqual([...ids].sort());
    expect(stdoutGone(proc).map((l) => [l.level, l.msg])).toEqual([[40, `stdout cannot be written (EPIPE): results are no longer printed; they still go to --results ${resultsFile}`]]);
    expect(proc.stderr()).toContain('outpost once: 20 checks: 20 passed, 0 degraded, 0 failed, 0 errors\n');
  });

  it('once mode with stdout on a full disk (/dev/full, ENOSPC) exits on its verdict, not 70, with one line saying so', async () => {
    const dir = tempDir();
    const resultsFile = path.join(dir, 'results.jsonl');
    const file = writeChecks([urlCheck('a', '/ok'), urlCheck('b', '/status/418')], dir);
    const full = openSync('/dev/full', 'w');
    let stderr = '';
    const child = spawn(process.execPath, [path.join(REPO, 'dist/main.js'), 'once', file, '--results', resultsFile], {
      env: cleanEnv({ STATE_DIR: dir }),
      stdio: ['ignore', full, 'pipe'],
    });
    closeSync(full);
    child.stderr?.on('data', (chunk: Buffer) => {
      stderr += chunk;
    });
    const code = await new Promise<number | null>((resolve) => child.on('close', (c) => resolve(c)));
    expect(stderr.includes('uncaught exception') || /\n\s+at /.test(stderr), stderr).toBe(false);
    // 'b' fails (418): the verdict, not the full disk, decides.
    expect(code, stderr).toBe(1);
    expect(readJsonl(resultsFile).map((r) => r.checkId).sort()).toEqual(['a', 'b']);
    const gone = stderr.split('\n').filter((l) => l.includes('stdout cannot be written'));
    expect(gone, stderr).toHaveLength(1);
    expect(gone[0]).toContain('stdout cannot be written (ENOSPC)');
    expect(stderr).toContain('outpost once: 2 checks: 1 passed, 0 degraded, 1 failed, 0 errors\n');
  });

  it('local mode whose stdout reader is gone keeps running its checks into --results, and drains and exits 0 on SIGTERM', async () => {
    const dir = tempDir();
    const resultsFile = path.join(dir, 'results.jsonl');
    const file = writeChecks([urlCheck('fast', '/ok', { frequency: 1 })], dir);
    const proc = start(['local', file, '--results', resultsFile]);
    proc.proc.stdout?.destroy();
    const lines = () => (existsSync(resultsFile) ? readFileSync(resultsFile, 'utf8').split('\n').filter(Boolean).length : 0);
    await until(() => lines() >= 3, 20_000, 'three results in --results after stdout closed', proc);
    expect(stdoutGone(proc)).toHaveLength(1);
    expect(String(stdoutGone(proc)[0]?.msg)).toBe(`stdout cannot be written (EPIPE): results are no longer printed; they still go to --results ${resultsFile} and the store`);
    proc.kill('SIGTERM');
    const { code } = await exitWithin(proc, 20_000, 'local mode with a closed stdout after SIGTERM');
    expect(crashSigns(proc), proc.stderr()).toEqual({ uncaught: false, stack: false });
    expect(code, proc.stderr()).toBe(0);
    expect(proc.logs.some((l) => l.msg === 'outpost local mode stopped')).toBe(true);
  });
});

describe('stderr that fails', () => {
  // Local and once modes log on stderr. A log stream that fails must neither stop the checks nor wedge the process.
  interface Spawned {
    child: ReturnType<typeof spawn>;
    results: () => CheckResultEntry[];
    exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  }
  function spawnWith(args: string[], stderr: 'pipe' | number, dir: string): Spawned {
    const child = spawn(process.execPath, [path.join(REPO, 'dist/main.js'), ...args], { env: cleanEnv({ STATE_DIR: dir }), stdio: ['ignore', 'pipe', stderr] });
    let stdout = '';
    child.stdout?.on('data', (chunk: Buffer) => {
      stdout += chunk;
    });
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.on('close', (code, signal) => resolve({ code, signal })));
    const results = () => stdout.split('\n').filter((l) => l.length > 0).map((l) => JSON.parse(l) as CheckResultEntry);
    return { child, results, exited };
  }
  const within = <T>(promise: Promise<T>, ms: number, what: string): Promise<T> =>
    Promise.race([promise, new Promise<T>((_, reject) => setTimeout(() => reject(new Error(`timed out: ${what}`)), ms).unref())]);
  async function resultsAtLeast(proc: Spawned, n: number, what: string): Promise<void> {
    const deadline = Date.now() + 20_000;
    while (proc.results().length < n) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${n} results: ${what}`);
      await new Promise((r) => setTimeout(r, 25));
    }
  }

  it('local mode with stderr on a full disk (/dev/full, ENOSPC) runs its checks and drains and exits 0 on SIGTERM', async () => {
    const dir = tempDir();
    const full = openSync('/dev/full', 'w');
    const proc = spawnWith(['local', writeChecks([urlCheck('fast', '/ok', { frequency: 1 })], dir)], full, dir);
    closeSync(full);
    await resultsAtLeast(proc, 2, 'local mode logging to /dev/full');
    proc.child.kill('SIGTERM');
    expect(await within(proc.exited, 20_000, 'local mode logging to /dev/full after SIGTERM')).toEqual({ code: 0, signal: null });
  });

  it('local mode whose stderr reader goes away mid-run keeps running its checks and exits 0 on SIGTERM', async () => {
    const dir = tempDir();
    const proc = spawnWith(['local', writeChecks([urlCheck('fast', '/ok', { frequency: 1 })], dir)], 'pipe', dir);
    // The reader reads the first lines, then goes (a log shipper that died): every later write gets EPIPE.
    await new Promise((resolve) => proc.child.stderr?.once('data', resolve));
    proc.child.stderr?.destroy();
    const before = proc.results().length;
    await resultsAtLeast(proc, before + 3, 'local mode after its stderr reader went');
    proc.child.kill('SIGTERM');
    expect(await within(proc.exited, 20_000, 'local mode with a closed stderr after SIGTERM')).toEqual({ code: 0, signal: null });
  });

  it('once mode whose stderr is closed before it starts exits on its verdict, every result on stdout', async () => {
    const dir = tempDir();
    const ids = ['a', 'b', 'c'];
    const proc = spawnWith(['once', writeChecks([...ids.map((id) => urlCheck(id, '/ok')), urlCheck('teapot', '/status/418')], dir)], 'pipe', dir);
    proc.child.stderr?.destroy();
    // 'teapot' fails: the verdict (1), not the closed stderr (an uncaught EPIPE would be 70), decides.
    expect(await within(proc.exited, 30_000, 'once mode with a closed stderr')).toEqual({ code: 1, signal: null });
    expect(proc.results().map((r) => r.checkId).sort()).toEqual([...ids, 'teapot'].sort());
  });
});

describe('stdout nobody reads', () => {
  // Each result carries its check's 400-character name: a few dozen fill the pipe (64 KiB on Linux), and then no
  // write to stdout ever completes, since the test pauses its end of the pipe before the agent writes anything.
  const longName = (id: string) => `${id} ${'n'.repeat(400)}`;

  it('local mode stops claiming while results cannot be handed on, and SIGTERM still exits 0 within the grace plus the final-report bound', async () => {
    const dir = tempDir();
    const stateDir = path.join(dir, 'state');
    const resultsFile = path.join(dir, 'results.jsonl');
    const file = writeChecks(
      Array.from({ length: 20 }, (_, i) => ({ ...urlCheck(`c${i}`, '/ok', { frequency: 1 }), name: longName(`c${i}`) })),
      dir,
    );
    const proc = start(['local', file, '--results', resultsFile], { STATE_DIR: stateDir, SHUTDOWN_GRACE_SECONDS: '1' });
    proc.proc.stdout?.pause();
    // Backpressure: once stdout is stuck, the scheduler's jobs stay queued in the store instead of being claimed and run.
    const { DatabaseSync } = await import('node:sqlite');
    const queued = () => {
      if (!existsSync(path.join(stateDir, 'outpost.db'))) return 0;
      let db: InstanceType<typeof DatabaseSync> | undefined;
      try {
        db = new DatabaseSync(path.join(stateDir, 'outpost.db'), { readOnly: true });
        return Number((db.prepare("SELECT count(*) AS n FROM jobs WHERE status = 'QUEUED'").get() as { n: number }).n);
      } catch {
        // The file exists before its migrations made the tables (no such table), or a write holds it a moment: not yet.
        return 0;
      } finally {
        db?.close();
      }
    };
    // Jobs queue up on a machine too busy to run them too: stuck means the results file (written beside stdout)
    // has also stopped growing, for longer than a busy machine pauses a running agent.
    let lines = -1;
    let changedAt = Date.now();
    const resultLines = () => (existsSync(resultsFile) ? readFileSync(resultsFile, 'utf8').split('\n').length - 1 : 0);
    const stuck = () => {
      const now = resultLines();
      if (now !== lines) {
        lines = now;
        changedAt = Date.now();
      }
      return lines > 0 && Date.now() - changedAt >= 3_000 && queued() >= 15;
    };
    await until(stuck, 60_000, 'jobs left queued in the store, and no result written for 3 s, while stdout is stuck', proc);
    proc.kill('SIGTERM');
    // 1 s of grace, then at most 10 s for the last results (docs/configuration.md "Shutdown"), and a margin for a loaded machine.
    const { code } = await exitWithin(proc, 30_000, 'shutdown waited for a stdout nobody reads');
    expect(code, proc.stderr()).toBe(0);
    const warning = proc.logs.find((l) => String(l.msg).includes('not handed on within 10 s'));
    expect(warning, proc.stderr().slice(-2000)).toMatchObject({ level: 40 });
    expect(proc.logs.some((l) => l.msg === 'outpost local mode stopped')).toBe(true);
  });

  it('once mode interrupted while stdout is stuck prints its summary and exits 1 within the final-report bound', async () => {
    const dir = tempDir();
    const resultsFile = path.join(dir, 'results.jsonl');
    const ids = Array.from({ length: 100 }, (_, i) => `c${i}`);
    const file = writeChecks(
      ids.map((id) => ({ ...urlCheck(id, '/ok'), name: longName(id) })),
      dir,
    );
    const proc = start(['once', file, '--results', resultsFile]);
    proc.proc.stdout?.pause();
    const lines = () => (existsSync(resultsFile) ? readFileSync(resultsFile, 'utf8').split('\n').filter(Boolean).length : 0);
    // Every check has run and is in --results; far from all of it fits in the pipe, so stdout's writes are pending.
    await until(() => lines() === ids.length, 30_000, 'every result in --results', proc);
    proc.kill('SIGINT');
    const { code } = await exitWithin(proc, 30_000, 'once mode waited for a stdout nobody reads after SIGINT');
    expect(code, proc.stderr()).toBe(1);
    expect(proc.logs.some((l) => String(l.msg).startsWith('results not written within 10 s of the interrupt'))).toBe(true);
    expect(proc.stderr()).toContain('outpost once: 100 checks: 100 passed, 0 degraded, 0 failed, 0 errors (interrupted)\n');
  });
});

describe('signals while starting', () => {
  // The first log line comes once the configuration is read, well before the mode has started and installed its own
  // handlers: a signal sent then reaches the process while it starts.
  const starting = (proc: AgentProcess) => proc.waitForLog(() => true, 15_000, 'the first log line');

  it('once mode ignores a SIGHUP that comes while it starts, runs its checks and exits on its verdict', async () => {
    const file = writeChecks([urlCheck('a', '/ok'), urlCheck('b', '/ok')]);
    // Two check workers: once mode waits for them to come up after its first log line, so the signal comes while it starts.
    const proc = start(['once', file], { CHECK_WORKERS: '2' });
    await starting(proc);
    proc.kill('SIGHUP');
    const { code, signal } = await exitWithin(proc, 30_000, 'once mode after SIGHUP');
    expect({ code, signal }, proc.stderr()).toEqual({ code: 0, signal: null });
    expect(results(proc).map((r) => r.checkId).sort()).toEqual(['a', 'b']);
    expect(proc.stderr()).toContain('outpost once: 2 checks: 2 passed, 0 degraded, 0 failed, 0 errors\n');
  });

  it('local mode ignores a SIGHUP that comes while it starts and runs on; SIGTERM then drains and exits 0', async () => {
    const file = writeChecks([urlCheck('fast', '/ok', { frequency: 1 })]);
    const proc = start(['local', file]);
    await starting(proc);
    proc.kill('SIGHUP');
    await until(() => results(proc).length >= 2, 20_000, 'results after SIGHUP', proc);
    proc.kill('SIGTERM');
    const { code, signal } = await exitWithin(proc, 30_000, 'local mode after SIGTERM');
    expect({ code, signal }, proc.stderr()).toEqual({ code: 0, signal: null });
    expect(proc.logs.some((l) => l.msg === 'outpost local mode stopped')).toBe(true);
  });

  it('local mode stopped by SIGTERM while it starts drains and exits 0, as it would once started', async () => {
    const file = writeChecks([urlCheck('fast', '/ok', { frequency: 60 })]);
    const proc = start(['local', file]);
    await starting(proc);
    proc.kill('SIGTERM');
    const { code, signal } = await exitWithin(proc, 30_000, 'local mode after SIGTERM while starting');
    expect({ code, signal }, proc.stderr()).toEqual({ code: 0, signal: null });
    expect(proc.logs.some((l) => String(l.msg).startsWith('shutting down'))).toBe(true);
    expect(proc.logs.some((l) => l.msg === 'outpost local mode stopped')).toBe(true);
  });
});
