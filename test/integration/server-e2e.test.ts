// `outpost server` end to end (docs/server.md): the real server and two real
// agents, one per private location, keys made through the keys route. A
// check in both locations yields sessions with a FINAL from each; the read
// API pages through every result once; an agent never gets another
// location's job; a result holding a lone surrogate is stored (U+FFFD in its
// place) without holding up the agent's others; and after kill -9 of the
// server and of an agent mid-run, no accepted result is missing and none is
// duplicated.

import { writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CheckResultEntry } from '../../src/core/result-entry.js';
import { type AgentProcess, cleanEnv, probe, startAgent, tempDir } from '../support/agent-process.js';
import { READY_DEADLINE_MS, retryUntil } from '../support/daemon.js';

const API_KEY = 'e2e-public-api-key-0123456789';
const processes: AgentProcess[] = [];
let target: Server;
let targetUrl: string;
/** Requests the target is answering right now. */
let inFlight = 0;
let checksFile: string;
let serverState: string;
let port: number;
let server: AgentProcess;
const agentState: Record<'a' | 'b', string> = { a: '', b: '' };
const agents: Partial<Record<'a' | 'b', AgentProcess>> = {};
const keys: Partial<Record<'a' | 'b', string>> = {};

interface Page {
  length: number;
  entries: CheckResultEntry[];
  nextId: string | null;
}

async function api(pathAndQuery: string, init: RequestInit = {}, token = API_KEY): Promise<{ status: number; body: unknown; headers: Headers }> {
  const response = await fetch(`http://127.0.0.1:${port}${pathAndQuery}`, {
    ...init,
    headers: { authorization: `Bearer ${token}`, ...(init.headers ?? {}) },
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : undefined, headers: response.headers };
}

async function page(checkId: string, query: string): Promise<Page> {
  const { status, body } = await api(`/v2/check-results/${checkId}?${query}`);
  expect(status, JSON.stringify(body)).toBe(200);
  return body as Page;
}

/** Every result of a check, newest first, paged with nextId. */
async function all(checkId: string, query: string, limit = 100): Promise<CheckResultEntry[]> {
  const entries: CheckResultEntry[] = [];
  let next: string | null = null;
  for (let pages = 0; pages < 1000; pages++) {
    const got = await page(checkId, `${query}&limit=${limit}${next ? `&nextId=${next}` : ''}`);
    entries.push(...got.entries);
    next = got.nextId;
    if (next === null) return entries;
  }
  throw new Error('more than 1000 pages');
}

function startServer(apiPort: number): AgentProcess {
  const proc = startAgent(['server', checksFile], cleanEnv({
      OUTPOST_API_KEY: API_KEY,
      API_PORT: String(apiPort),
      API_HOST: '127.0.0.1',
      STATE_DIR: serverState,
      // The job a killed agent held goes back to the queue after this: short, so the test need not wait a minute.
      LEASE_SECONDS: '8',
    }));
  processes.push(proc);
  return proc;
}

async function serverReady(proc: AgentProcess): Promise<number> {
  const started = await proc.waitForLog((l) => l.msg === 'outpost server started', READY_DEADLINE_MS, 'the server to start');
  const health = await proc.healthPort();
  const ready = await retryUntil(READY_DEADLINE_MS, async () => (await probe(health, '/-/readiness')).status === 200);
  expect(ready, 'the server became ready').toBe(true);
  return Number(started.apiPort);
}

function startLocationAgent(location: 'a' | 'b'): AgentProcess {
  const proc = startAgent(
    ['agent'],
    cleanEnv({
      API_URL: `http://127.0.0.1:${port}`,
      API_KEY: keys[location] as string,
      STATE_DIR: agentState[location],
      JOB_CONCURRENCY: '4',
      CLAIM_WAIT_SECONDS: '5',
      // Every job it runs is logged ('job finished', with its checkId).
      LOG_LEVEL: 'debug',
    }),
  );
  processes.push(proc);
  agents[location] = proc;
  return proc;
}

async function finals(checkId: string, location: string): Promise<CheckResultEntry[]> {
  return all(checkId, `resultType=FINAL&location=${location}`);
}

async function waitForFinals(checkId: string, location: string, atLeast: number): Promise<void> {
  let count = 0;
  const reached = await retryUntil(
    120_000,
    async () => {
      count = (await finals(checkId, location)).length;
      return count >= atLeast;
    },
    250,
  );
  expect(reached, `${checkId} reached ${atLeast} FINAL results in location ${location} (has ${count})`).toBe(true);
}

beforeAll(async () => {
  target = createServer((req, res) => {
    // Some runs take a moment, so that a kill -9 can land while one is in flight.
    const delay = req.url === '/slow' ? 700 : 0;
    inFlight++;
    setTimeout(() => {
      inFlight--;
      // A lone surrogate in JSON escape form: the assertion's actual carries it to the server (src/core/nul.ts).
      if (req.url === '/surrogate') res.end('{"name":"caf\\ud800"}');
      else res.end('ok');
    }, delay);
  });
  await new Promise<void>((resolve) => target.listen(0, '127.0.0.1', resolve));
  targetUrl = `http://127.0.0.1:${(target.address() as AddressInfo).port}`;
  const dir = tempDir('outpost-server-e2e-');
  serverState = path.join(dir, 'server');
  agentState.a = path.join(dir, 'agent-a');
  agentState.b = path.join(dir, 'agent-b');
  checksFile = path.join(dir, 'checks.json');
  writeFileSync(
    checksFile,
    JSON.stringify({
      privateLocations: [
        { id: 'a', name: 'Network A' },
        { id: 'b', name: 'Network B' },
      ],
      checks: [
        { id: 'both', name: 'Both networks', checkType: 'URL', frequency: 2, request: { url: `${targetUrl}/slow` } },
        { id: 'only-b', name: 'Network B only', checkType: 'URL', frequency: 2, request: { url: `${targetUrl}/b` }, locations: ['b'] },
        {
          id: 'surrogate',
          name: 'Lone surrogate',
          checkType: 'API',
          frequency: 2,
          request: { url: `${targetUrl}/surrogate` },
          assertions: [{ source: 'JSON_BODY', property: '$.name', comparison: 'EQUALS', target: 'cafe' }],
          locations: ['b'],
        },
      ],
    }),
  );
  server = startServer(0);
  port = await serverReady(server);
  for (const location of ['a', 'b'] as const) {
    const made = await api(`/v1/private-locations/${location}/keys`, { method: 'POST' });
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    keys[location] = (made.body as { rawKey: string }).rawKey;
  }
  startLocationAgent('a');
  startLocationAgent('b');
}, 180_000);

afterAll(async () => {
  for (const proc of processes) proc.kill('SIGKILL');
  await Promise.all(processes.map((p) => p.exit));
  await new Promise((resolve) => target?.close(resolve));
});

describe('outpost server with two agents', () => {
  it('runs a check in both locations: sessions end PASSED with a FINAL from each', { timeout: 180_000 }, async () => {
    await waitForFinals('both', 'a', 2);
    await waitForFinals('both', 'b', 2);
    const sessionId = (await finals('both', 'a')).at(-1)?.sequenceId as string;
    let session: { status: string; runLocations: string[]; results: CheckResultEntry[] } | undefined;
    const finished = await retryUntil(60_000, async () => {
      const got = await api(`/v1/check-sessions/${sessionId}`);
      session = got.body as typeof session;
      return got.status === 200 && session?.status === 'PASSED';
    });
    expect(finished, `session ${sessionId}: ${JSON.stringify(session)}`).toBe(true);
    expect([...(session?.runLocations ?? [])].sort()).toEqual(['a', 'b']);
    const finalLocations = (session?.results ?? []).filter((r) => r.resultType === 'FINAL').map((r) => r.runLocation);
    expect(finalLocations.sort()).toEqual(['a', 'b']);

    // The results it received are per-check series on the server's /metrics, one per location.
    const metrics = (await probe(await server.healthPort(), '/metrics')).text;
    for (const location of ['a', 'b']) expect(metrics).toMatch(new RegExp(`^probe_success\\{check_id="both",[^}]*location="${location}"\\} 1$`, 'm'));
  });

  it("labels /metrics from the checks file: a result's body cannot add a series or rename one", { timeout: 120_000 }, async () => {
    await waitForFinals('both', 'a', 1);
    const [stored] = await finals('both', 'a');
    if (!stored) throw new Error('no FINAL of check both at a');
    // A re-send of a stored result is accepted again (idempotent), whatever its body now says.
    const forged = { ...stored, checkId: 'forged-series', name: 'Forged', checkType: 'TCP', runLocation: 'b', hasFailures: true };
    const response = await fetch(`http://127.0.0.1:${port}/v1/agent/results`, {
      method: 'POST',
      headers: { authorization: `Bearer ${keys.a}`, 'x-agent-id': 'forger', 'content-type': 'application/json' },
      body: JSON.stringify({ results: [{ jobId: 'any-job', resultId: stored.id, result: forged }] }),
    });
    expect(await response.json()).toEqual({ accepted: [stored.id], rejected: [] });
    const metrics = (await probe(await server.healthPort(), '/metrics')).text;
    expect(metrics).not.toContain('forged-series');
    expect(metrics).not.toContain('Forged');
    expect(metrics).toMatch(/^probe_success\{check_id="both",[^}]*location="a"\} 1$/m);
  });

  it('pages through every result exactly once with nextId, and filters by location and resultType', { timeout: 120_000 }, async () => {
    const snapshot = await all('both', 'resultType=ALL');
    const paged = await all('both', 'resultType=ALL', 2);
    const ids = paged.map((e) => e.id);
    expect(new Set(ids).size, 'no result twice').toBe(ids.length);
    for (const entry of snapshot) expect(ids, `result ${entry.id} is in the paged listing`).toContain(entry.id);
    for (const entry of await finals('both', 'a')) {
      expect(entry.runLocation).toBe('a');
      expect(entry.resultType).toBe('FINAL');
    }
    const wrong = await api('/v2/check-results/both?limit=101');
    expect(wrong.status).toBe(400);
    expect(wrong.body).toMatchObject({ statusCode: 400, error: 'Bad Request', attributes: { parameter: 'limit' } });
  });

  it("never gives an agent a job of another location's check", { timeout: 120_000 }, async () => {
    await waitForFinals('only-b', 'b', 2);
    expect(await finals('only-b', 'a')).toEqual([]);
    const ran = (location: 'a' | 'b') => (agents[location] as AgentProcess).logs.filter((l) => l.msg === 'job finished').map((l) => l.checkId);
    expect(ran('b')).toContain('only-b');
    expect(ran('a')).toContain('both');
    expect(ran('a')).not.toContain('only-b');
  });

  it("stores a result whose assertion holds a lone surrogate, with U+FFFD there, on either store; the agent's other results follow", { timeout: 120_000 }, async () => {
    await waitForFinals('surrogate', 'b', 2);
    const [latest] = await finals('surrogate', 'b');
    expect(latest?.hasFailures).toBe(true);
    expect((latest?.apiCheckResult as { assertions?: unknown[] } | undefined)?.assertions?.[0]).toMatchObject({ source: 'JSON_BODY', actual: 'caf\ufffd', passed: false });
    await waitForFinals('only-b', 'b', 2);
  });

  it('refuses a wrong token with the service body', async () => {
    const refused = await api('/v2/check-results/both', {}, 'not-the-key');
    expect(refused.status).toBe(401);
    expect(refused.body).toEqual({ statusCode: 401, error: 'Unauthorized', message: 'bad token', attributes: {} });
  });

  it('loses and duplicates nothing across kill -9 of the server and of an agent mid-run', { timeout: 240_000 }, async () => {
    const before = [...(await all('both', 'resultType=ALL')), ...(await all('only-b', 'resultType=ALL'))];
    expect(before.length).toBeGreaterThan(0);
    // While a run is in flight: both die at once.
    expect(await retryUntil(30_000, async () => inFlight > 0, 20), 'a run is in flight').toBe(true);
    server.kill('SIGKILL');
    (agents.a as AgentProcess).kill('SIGKILL');
    await Promise.all([server.exit, (agents.a as AgentProcess).exit]);
    server = startServer(port);
    expect(await serverReady(server)).toBe(port);
    // The same state directory: the killed agent's spool is sent again on start.
    startLocationAgent('a');
    const finalsBefore = { a: (await finals('both', 'a')).length, b: (await finals('both', 'b')).length };
    await waitForFinals('both', 'a', finalsBefore.a + 2);
    await waitForFinals('both', 'b', finalsBefore.b + 2);

    const after = [...(await all('both', 'resultType=ALL')), ...(await all('only-b', 'resultType=ALL'))];
    const afterIds = after.map((e) => e.id);
    expect(new Set(afterIds).size, 'no result stored twice').toBe(afterIds.length);
    for (const entry of before) expect(afterIds, `result ${entry.id}, accepted before the kill, is still there`).toContain(entry.id);
    // One FINAL per session and location, however often a spool re-sent it.
    const perSessionLocation = new Map<string, number>();
    for (const entry of after.filter((e) => e.resultType === 'FINAL')) {
      const key = `${entry.sequenceId}/${entry.runLocation}`;
      perSessionLocation.set(key, (perSessionLocation.get(key) ?? 0) + 1);
    }
    expect([...perSessionLocation].filter(([, n]) => n > 1)).toEqual([]);
  });
});
