// Local mode as server mode with an in-process agent, as a real process:
// results in STATE_DIR/outpost.db, the read API on 127.0.0.1:API_PORT (no key
// unless OUTPOST_API_KEY is set), a taken API_PORT only a warning, history
// kept across a restart, and the fallback on a Node.js without node:sqlite.

import { existsSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { CheckResultEntry } from '../../src/core/result-entry.js';
import { type AgentProcess, cleanEnv, startAgent, tempDir } from '../support/agent-process.js';
import { useHarness } from '../support/harness.js';
import { nodeWithoutSqlite } from '../support/old-node.js';

const h = useHarness();
const KEY = 'local-mode-test-key-0123';

type Check = Record<string, unknown>;

const urlCheck = (id: string, route: string, extra: Check = {}): Check => ({
  id,
  name: `check ${id}`,
  checkType: 'URL',
  frequency: 1,
  request: { url: `${h.target.url}${route}` },
  ...extra,
});

function writeChecks(body: Record<string, unknown>, dir = tempDir()): string {
  const file = path.join(dir, 'checks.json');
  writeFileSync(file, JSON.stringify(body));
  return file;
}

const running: AgentProcess[] = [];
afterEach(async () => {
  for (const proc of running.splice(0)) {
    proc.kill('SIGKILL');
    await proc.exit;
  }
});

function local(file: string, env: Record<string, string>): AgentProcess {
  const proc = h.start(['local', file], env);
  running.push(proc);
  return proc;
}

const results = (proc: AgentProcess): CheckResultEntry[] => proc.stdoutLines.map((line) => JSON.parse(line) as CheckResultEntry);

async function until(condition: () => boolean, timeoutMs: number, what: string, proc: AgentProcess): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; stderr: ${proc.stderr().slice(-2000)}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** The read API's port, from the start line (API_PORT=0 in tests). */
async function apiPort(proc: AgentProcess): Promise<number> {
  const line = await proc.waitForLog((l) => l.msg === 'outpost local mode started', 30_000, 'the start line');
  expect(line.apiPort, 'the read API is served').toEqual(expect.any(Number));
  return line.apiPort as number;
}

// biome-ignore lint/suspicious/noExplicitAny: answers are checked field by field
async function get(port: number, route: string, token?: string): Promise<{ status: number; body: any }> {
  const response = await fetch(`http://127.0.0.1:${port}${route}`, { headers: token ? { authorization: `Bearer ${token}` } : {} });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : undefined };
}

describe('local mode with its store and read API', () => {
  it('stores results in STATE_DIR/outpost.db and serves them on 127.0.0.1 without a key', async () => {
    const stateDir = tempDir();
    const proc = local(writeChecks({ checks: [urlCheck('ok', '/ok'), urlCheck('teapot', '/status/418')] }), { STATE_DIR: stateDir });
    const port = await apiPort(proc);
    await until(() => results(proc).filter((r) => r.checkId === 'ok').length >= 2 && results(proc).some((r) => r.checkId === 'teapot'), 20_000, 'results', proc);
    expect(existsSync(path.join(stateDir, 'outpost.db'))).toBe(true);

    const page = await get(port, '/v2/check-results/ok');
    expect(page.status).toBe(200);
    expect(page.body.entries.length).toBeGreaterThanOrEqual(2);
    for (const entry of page.body.entries) expect(entry).toMatchObject({ checkId: 'ok', runLocation: 'local', resultType: 'FINAL', hasFailures: false });
    // Every result printed is the stored one, by id.
    const printed = new Set(results(proc).map((r) => r.id));
    expect(page.body.entries.every((e: CheckResultEntry) => printed.has(e.id))).toBe(true);

    const teapot = await get(port, '/v2/check-results/teapot');
    expect(teapot.body.entries[0]).toMatchObject({ checkId: 'teapot', hasFailures: true });
    const session = await get(port, `/v1/check-sessions/${teapot.body.entries[0].sequenceId}`);
    expect(session.status).toBe(200);
    expect(session.body).toMatchObject({ checkId: 'teapot', runLocations: ['local'], status: 'FAILED' });

    proc.kill('SIGINT');
    expect((await proc.exit).code, proc.stderr()).toBe(0);
    expect(proc.logs.some((l) => l.msg === 'outpost local mode stopped')).toBe(true);
  });

  it('requires OUTPOST_API_KEY on the read API when it is set', async () => {
    const proc = local(writeChecks({ checks: [urlCheck('ok', '/ok')] }), { OUTPOST_API_KEY: KEY });
    const port = await apiPort(proc);
    await until(() => results(proc).length >= 1, 20_000, 'a result', proc);
    expect((await get(port, '/v2/check-results/ok')).status).toBe(401);
    expect((await get(port, '/v2/check-results/ok', 'wrong-key-0123456789')).status).toBe(401);
    const page = await get(port, '/v2/check-results/ok', KEY);
    expect(page.status).toBe(200);
    expect(page.body.entries.length).toBeGreaterThanOrEqual(1);
  });

  it('a taken API_PORT is a warning naming it; checks still run and print', async () => {
    const blocker = net.createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    const taken = (blocker.address() as net.AddressInfo).port;
    try {
      const proc = local(writeChecks({ checks: [urlCheck('ok', '/ok')] }), { API_PORT: String(taken) });
      const warning = await proc.waitForLog((l) => l.level === 40 && String(l.msg).startsWith('the read API is not served'), 30_000, 'the warning');
      expect(warning.msg).toContain(`API_PORT=${taken}`);
      expect(warning.msg).toContain('EADDRINUSE');
      await until(() => results(proc).length >= 2, 20_000, 'results', proc);
      const started = proc.logs.find((l) => l.msg === 'outpost local mode started');
      expect(started?.apiPort).toBeNull();
      proc.kill('SIGINT');
      expect((await proc.exit).code, proc.stderr()).toBe(0);
    } finally {
      await new Promise((resolve) => blocker.close(resolve));
    }
  });

  it('keeps history across a restart: the first run’s results are readable after the second start', async () => {
    const stateDir = tempDir();
    const file = writeChecks({ checks: [urlCheck('ok', '/ok')] });
    const first = local(file, { STATE_DIR: stateDir });
    await until(() => results(first).length >= 2, 20_000, 'results of the first run', first);
    first.kill('SIGINT');
    expect((await first.exit).code, first.stderr()).toBe(0);
    const before = results(first).map((r) => r.id);

    const second = local(file, { STATE_DIR: stateDir });
    const port = await apiPort(second);
    const page = await get(port, '/v2/check-results/ok?limit=100');
    expect(page.status).toBe(200);
    const stored = new Set(page.body.entries.map((e: CheckResultEntry) => e.id));
    for (const id of before) expect(stored.has(id), id).toBe(true);
    await until(() => results(second).length >= 1, 20_000, 'results of the second run', second);
    for (const r of results(second)) expect(before).not.toContain(r.id);
  });

  it('lines about a job its store no longer takes carry jobId, checkId and checkType', async () => {
    const stateDir = tempDir();
    const file = writeChecks({ checks: [urlCheck('slow', '/slow/3000', { frequency: 60 })] });
    const proc = local(file, { STATE_DIR: stateDir });
    await apiPort(proc);
    const health = await proc.healthPort();
    const before = h.target.hits();
    await until(() => h.target.hits() > before, 20_000, 'the slow check to reach the target', proc);
    // The check leaves the file while its job runs: the store refuses the job's result.
    writeFileSync(file, JSON.stringify({ checks: [urlCheck('other', '/ok', { frequency: 60 })] }));
    expect((await fetch(`http://127.0.0.1:${health}/-/reload`, { method: 'POST' })).status).toBe(200);
    const line = await proc.waitForLog((l) => l.msg === 'the store did not keep a result', 20_000, 'the refused result line');
    expect(line).toMatchObject({ jobId: expect.any(String), checkId: 'slow', checkType: 'URL' });
  });

  it('declared private locations: checks without locations run here; others are scheduled but not run here', async () => {
    const file = writeChecks({
      privateLocations: [{ id: 'lab', name: 'Lab' }],
      checks: [urlCheck('here', '/ok'), urlCheck('both', '/ok', { locations: ['local', 'lab'] }), urlCheck('elsewhere', '/ok', { locations: ['lab'] })],
    });
    const proc = local(file, {});
    await until(() => results(proc).some((r) => r.checkId === 'here') && results(proc).some((r) => r.checkId === 'both'), 20_000, 'results', proc);
    await new Promise((r) => setTimeout(r, 1_500));
    expect(results(proc).some((r) => r.checkId === 'elsewhere')).toBe(false);
    expect(proc.logs.find((l) => l.msg === 'outpost local mode started')).toMatchObject({ checks: 2, otherLocations: 1 });
  });
});


const old = nodeWithoutSqlite();

describe.skipIf(!old)('local mode on a Node.js without node:sqlite', () => {
  it('warns once why it runs without store and API, and still runs the checks', async () => {
    const stateDir = tempDir();
    const file = writeChecks({ checks: [urlCheck('ok', '/ok')] });
    const proc = startAgent(['local', file], cleanEnv({ STATE_DIR: stateDir }), [], old);
    running.push(proc);
    await until(() => results(proc).length >= 2, 20_000, 'results', proc);
    const warnings = proc.logs.filter((l) => l.level === 40 && String(l.msg).includes('node:sqlite'));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]?.msg).toContain('local mode runs without its store and read API');
    expect(existsSync(path.join(stateDir, 'outpost.db'))).toBe(false);
    // No reload without the store: SIGHUP says so and the process runs on.
    proc.kill('SIGHUP');
    await proc.waitForLog((l) => String(l.msg).includes('cannot reload the checks file'), 20_000, 'the no-reload line');
    const before = results(proc).length;
    await until(() => results(proc).length > before, 20_000, 'more results', proc);
    proc.kill('SIGINT');
    expect((await proc.exit).code, proc.stderr()).toBe(0);
  });
});

describe.skipIf(!old)('server mode on a Node.js without node:sqlite', () => {
  it('exits 78 with one line saying what to run instead, before its health server listens', async () => {
    const file = writeChecks({ checks: [urlCheck('ok', '/ok')] });
    const proc = startAgent(['server', file], cleanEnv({ STATE_DIR: tempDir(), OUTPOST_API_KEY: 'k'.repeat(24) }), [], old);
    running.push(proc);
    expect((await proc.exit).code).toBe(78);
    expect(proc.stderr()).toContain("the server's database needs Node.js 22.13 or newer (node:sqlite)");
    expect(proc.stderr()).toContain('npx outpost server');
    expect(proc.logs.some((l) => l.msg === 'health server listening')).toBe(false);
  });
});
