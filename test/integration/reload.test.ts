// Reload without restart, on the built dist/main.js: in local mode a change
// of the checks file (an editor's rename or an in-place write), SIGHUP and
// POST /-/reload on the health port re-read it; a valid file adds and removes
// checks, an invalid one is refused with every problem logged while the
// running checks go on at their pace. In server mode a reload adds a check
// that agents then claim.

import { renameSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { CheckResultEntry } from '../../src/core/result-entry.js';
import { startHealthServer } from '../../src/health/server.js';
import { type AgentProcess, cleanEnv, probe, startAgent, tempDir } from '../support/agent-process.js';
import { agentCall } from '../support/agent-api-server.js';
import { READY_DEADLINE_MS, retryUntil } from '../support/daemon.js';
import { apiCall, serverReady, startServerProcess } from '../support/server-process.js';
import { Registry } from 'prom-client';
import { useHarness } from '../support/harness.js';

const h = useHarness();

/** Requests the target received, per path. */
const hits = new Map<string, number>();
let target: Server;
let targetUrl: string;

beforeAll(async () => {
  target = createServer((req, res) => {
    const route = (req.url ?? '/').split('?')[0] ?? '/';
    hits.set(route, (hits.get(route) ?? 0) + 1);
    res.end('ok');
  });
  await new Promise<void>((resolve) => target.listen(0, '127.0.0.1', resolve));
  targetUrl = `http://127.0.0.1:${(target.address() as AddressInfo).port}`;
});
afterAll(async () => {
  target.closeAllConnections();
  await new Promise((resolve) => target.close(resolve));
});

const running: AgentProcess[] = [];
afterEach(async () => {
  for (const proc of running.splice(0)) {
    proc.kill('SIGKILL');
    await proc.exit;
  }
});

const DEADLINE_MS = 30_000;

const check = (id: string, frequency: number, extra: Record<string, unknown> = {}) => ({
  id,
  name: `check ${id}`,
  checkType: 'URL',
  frequency,
  request: { url: `${targetUrl}/${id}` },
  ...extra,
});

const finals = (proc: AgentProcess, checkId: string): CheckResultEntry[] =>
  proc.stdoutLines
    .map((line) => JSON.parse(line) as CheckResultEntry)
    .filter((r) => r.resultType === 'FINAL' && r.checkId === checkId);

async function until(what: string, proc: AgentProcess, condition: () => boolean | Promise<boolean>): Promise<void> {
  const ok = await retryUntil(DEADLINE_MS, async () => {
    if (proc.proc.exitCode !== null || proc.proc.signalCode !== null) throw new Error(`outpost exited while waiting for ${what}; stderr: ${proc.stderr().slice(-2000)}`);
    return condition();
  });
  if (!ok) throw new Error(`timed out waiting for ${what}; stderr: ${proc.stderr().slice(-3000)}`);
}

async function postReload(port: number): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(`http://127.0.0.1:${port}/-/reload`, { method: 'POST' });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

describe('reload in local mode', () => {
  it('adds, removes and refuses checks on a file change, SIGHUP and POST /-/reload, the unchanged check running at its pace throughout', async () => {
    const dir = tempDir();
    const file = path.join(dir, 'checks.json');
    const write = (checks: unknown[]) => writeFileSync(file, JSON.stringify({ checks }));
    // As editors do: a new file renamed over the old one (a watch on the file itself would end here).
    const replace = (checks: unknown[]) => {
      const temporary = path.join(dir, '.checks.json.swp');
      writeFileSync(temporary, JSON.stringify({ checks }));
      renameSync(temporary, file);
    };
    const kept = check('kept', 2);
    write([kept, check('removed', 1)]);
    // The database beside the checks file: its writes, events in the watched directory, must not hold a reload back.
    const proc = startAgent(['local', file], cleanEnv({ STATE_DIR: dir }));
    running.push(proc);
    await proc.waitForLog((l) => l.msg === 'outpost local mode started', READY_DEADLINE_MS, 'the start line');
    const health = await proc.healthPort();
    await until('both checks to run', proc, () => finals(proc, 'kept').length >= 2 && finals(proc, 'removed').length >= 2);

    // A file change: one check added, one removed.
    replace([kept, check('added', 1)]);
    await proc.waitForLog((l) => l.msg === 'checks file reloaded' && l.trigger === 'file change', DEADLINE_MS, 'the reload on the file change');
    const removedAtReload = finals(proc, 'removed').length;
    await until('the added check to run', proc, () => finals(proc, 'added').length >= 2);
    // Removed: at most the run under way when the file changed still ends, then nothing.
    let keptNow = finals(proc, 'kept').length;
    await until('two more runs of the kept check', proc, () => finals(proc, 'kept').length >= keptNow + 2);
    const removedAfter = finals(proc, 'removed').length;
    const removedHits = hits.get('/removed') ?? 0;
    expect(removedAfter).toBeLessThanOrEqual(removedAtReload + 1);
    keptNow = finals(proc, 'kept').length;
    await until('two more runs of the kept check', proc, () => finals(proc, 'kept').length >= keptNow + 2);
    expect(finals(proc, 'removed').length).toBe(removedAfter);
    expect(hits.get('/removed') ?? 0).toBe(removedHits);

    // A broken file, written in place: refused with every problem, the checks in force go on.
    writeFileSync(file, JSON.stringify({ checks: [kept, { ...check('broken', 1), frequency: 'often' }, { ...check('broken-too', 1), checkType: 'NOPE' }] }));
    const refused = await proc.waitForLog((l) => l.msg.startsWith('checks file refused') && l.trigger === 'file change', DEADLINE_MS, 'the refusal');
    const problems = refused.problems as string[];
    expect(problems.length, JSON.stringify(problems)).toBeGreaterThanOrEqual(2);
    expect(problems.join('\n')).toMatch(/frequency/);
    expect(problems.join('\n')).toMatch(/checkType/);
    keptNow = finals(proc, 'kept').length;
    const addedNow = finals(proc, 'added').length;
    await until('the kept and added checks to go on running', proc, () => finals(proc, 'kept').length >= keptNow + 2 && finals(proc, 'added').length >= addedNow + 2);

    // POST /-/reload and SIGHUP on the broken file: refused alike, and SIGHUP no longer ends the process.
    const post = await postReload(health);
    expect(post.status).toBe(400);
    expect(post.body.reloaded).toBe(false);
    expect(post.body.problems).toEqual(problems);
    proc.kill('SIGHUP');
    await proc.waitForLog((l) => l.msg.startsWith('checks file refused') && l.trigger === 'SIGHUP', DEADLINE_MS, 'the refusal on SIGHUP');
    expect((await probe(health, '/-/readiness')).status).toBe(200);

    // Fixed, through POST /-/reload, with the added check changed; then SIGHUP reloads it (no change, no harm).
    const fixed = [kept, check('added', 1, { request: { url: `${targetUrl}/added-changed` } }), check('fixed', 1)];
    write(fixed);
    const ok = await postReload(health);
    expect(ok).toEqual({ status: 200, body: { reloaded: true, checks: 3 } });
    await until('the fixed file’s new check to run', proc, () => finals(proc, 'fixed').length >= 2);
    await until('the changed check to run its new definition', proc, () => (hits.get('/added-changed') ?? 0) >= 2);
    proc.kill('SIGHUP');
    await proc.waitForLog((l) => l.msg === 'checks file reloaded' && l.trigger === 'SIGHUP', DEADLINE_MS, 'the reload on SIGHUP');
    keptNow = finals(proc, 'kept').length;
    await until('two more runs of the kept check', proc, () => finals(proc, 'kept').length >= keptNow + 2);
    expect(proc.proc.exitCode).toBeNull();

    // The check in every file ran once per slot: no run doubled by a reload (spacing under half its
    // frequency) and none missed (a gap of several frequencies).
    const starts = finals(proc, 'kept')
      .map((r) => Date.parse(r.startedAt))
      .sort((a, b) => a - b);
    const gaps = starts.slice(1).map((t, i) => t - (starts[i] as number));
    expect(Math.min(...gaps), JSON.stringify(gaps)).toBeGreaterThanOrEqual(1_000);
    expect(Math.max(...gaps), JSON.stringify(gaps)).toBeLessThan(6_000);
    expect(hits.get('/broken') ?? 0).toBe(0);

    proc.kill('SIGTERM');
    expect((await proc.exit).code).toBe(0);
  }, 180_000);

  it('GET /-/reload is 405; where nothing reloads, POST /-/reload is 404', async () => {
    const handle = await startHealthServer(0, {
      registry: new Registry(),
      isReady: () => true,
      status: () => {
        throw new Error('not asked');
      },
      reload: () => undefined,
    });
    try {
      const get = await fetch(`http://127.0.0.1:${handle.port}/-/reload`);
      expect(get.status).toBe(405);
      expect(get.headers.get('allow')).toBe('POST');
      expect((await fetch(`http://127.0.0.1:${handle.port}/-/reload`, { method: 'POST' })).status).toBe(404);
    } finally {
      await handle.close();
    }
  });
});

describe('reload in server mode', () => {
  it('POST /-/reload adds a check that the location’s agents then claim', async () => {
    const dir = tempDir();
    const file = path.join(dir, 'checks.json');
    const apiKey = 'reload-test-public-key-0123';
    const privateLocations = [{ id: 'loc', name: 'Location' }];
    writeFileSync(file, JSON.stringify({ privateLocations, checks: [check('first', 60)] }));
    const proc = startServerProcess({ checksFile: file, stateDir: path.join(dir, 'state'), apiKey });
    running.push(proc);
    const port = await serverReady(proc);
    const health = await proc.healthPort();
    const made = await apiCall(port, apiKey, 'POST', '/v1/private-locations/loc/keys');
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    const agentKey = (made.body as { rawKey: string }).rawKey;
    const claimed = new Set<string>();
    const claim = async () => {
      const answer = await agentCall(`http://127.0.0.1:${port}`, '/v1/agent/claim', agentKey, {
        max: 10,
        waitSeconds: 1,
        agent: { id: 'agent-1', version: '0.1.0', checkTypes: ['URL'], runtimes: [] },
      });
      expect(answer.status, JSON.stringify(answer.body)).toBe(200);
      for (const job of (answer.body as { jobs: Array<{ check: { id: string } }> }).jobs) claimed.add(job.check.id);
    };
    await until('the first check’s job', proc, async () => {
      await claim();
      return claimed.has('first');
    });

    writeFileSync(path.join(dir, 'unrelated.txt'), 'a file beside the checks file changes nothing');
    writeFileSync(file, JSON.stringify({ privateLocations, checks: [check('first', 60), check('second', 60)] }));
    const answer = await postReload(health);
    expect(answer).toEqual({ status: 200, body: { reloaded: true, checks: 2 } });
    await until('the added check’s job', proc, async () => {
      await claim();
      return claimed.has('second');
    });
  }, 120_000);
});

describe('agent keys in server mode', () => {
  it('are listed masked and revoked at once; a location removed and added back does not bring its keys back', async () => {
    const dir = tempDir();
    const file = path.join(dir, 'checks.json');
    const apiKey = 'reload-test-public-key-0123';
    const withLocation = JSON.stringify({ privateLocations: [{ id: 'loc', name: 'Location' }], checks: [check('first', 60)] });
    writeFileSync(file, withLocation);
    const proc = startServerProcess({ checksFile: file, stateDir: path.join(dir, 'state'), apiKey });
    running.push(proc);
    const port = await serverReady(proc);
    const health = await proc.healthPort();
    const make = async () => (await apiCall(port, apiKey, 'POST', '/v1/private-locations/loc/keys')).body as { id: string; rawKey: string; maskedKey: string };
    const kept = await make();
    const revoked = await make();
    const claim = async (key: string) =>
      (
        await agentCall(`http://127.0.0.1:${port}`, '/v1/agent/claim', key, {
          max: 1,
          waitSeconds: 0,
          agent: { id: 'agent-1', version: '0.1.0', checkTypes: ['URL'], runtimes: [] },
        })
      ).status;
    expect(await claim(revoked.rawKey)).toBe(200);

    const listed = await apiCall(port, apiKey, 'GET', '/v1/private-locations/loc/keys');
    expect(listed.status).toBe(200);
    expect((listed.body as Array<{ id: string }>).map((k) => k.id).sort()).toEqual([kept.id, revoked.id].sort());
    expect(JSON.stringify(listed.body)).not.toContain(kept.rawKey);
    expect((listed.body as Array<Record<string, unknown>>).every((k) => Object.keys(k).sort().join() === 'created_at,id,maskedKey,updated_at')).toBe(true);

    expect((await apiCall(port, apiKey, 'DELETE', `/v1/private-locations/loc/keys/${revoked.id}`)).status).toBe(204);
    expect(await claim(revoked.rawKey)).toBe(401);
    expect(await claim(kept.rawKey)).toBe(200);
    expect((await apiCall(port, apiKey, 'DELETE', `/v1/private-locations/loc/keys/${revoked.id}`)).status).toBe(404);

    // The location leaves the file and comes back: its keys stay revoked.
    writeFileSync(file, JSON.stringify({ privateLocations: [{ id: 'other', name: 'Other' }], checks: [check('first', 60)] }));
    expect((await postReload(health)).status).toBe(200);
    expect(await claim(kept.rawKey)).toBe(401);
    writeFileSync(file, withLocation);
    expect((await postReload(health)).status).toBe(200);
    expect(await claim(kept.rawKey)).toBe(401);
    expect((await apiCall(port, apiKey, 'GET', '/v1/private-locations/loc/keys')).body).toEqual([]);
  }, 120_000);
});

describe('SIGHUP in agent mode', () => {
  it('is logged and ignored: the agent stays up and ready, and has no /-/reload', async () => {
    const cp = await h.server();
    const agent = h.agent(cp);
    const health = await agent.healthPort();
    expect(await retryUntil(READY_DEADLINE_MS, async () => (await probe(health, '/-/readiness')).status === 200)).toBe(true);
    agent.kill('SIGHUP');
    await agent.waitForLog((l) => l.msg.startsWith('SIGHUP ignored'), DEADLINE_MS, 'the SIGHUP line');
    expect((await probe(health, '/-/readiness')).status).toBe(200);
    expect((await fetch(`http://127.0.0.1:${health}/-/reload`, { method: 'POST' })).status).toBe(404);
    agent.kill('SIGTERM');
    expect((await agent.exit).code, agent.stderr()).toBe(0);
  }, 120_000);
});
