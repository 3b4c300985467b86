// Heartbeat checks against the real server (dist/main.js, docs/server.md
// "Heartbeat monitors"): a check pinged at /ping/{token} goes FAILING when
// pings stop and PASSING on the next ping, also while the checks file is
// reloaded all the time; GET, POST and HEAD are pings, an
// unknown token is a 404; the events route answers the ratios of a scripted
// ping history (seeded with explicit times through the heartbeat store, on the
// server's own database file); local mode serves pings too; and no token ever
// appears in what the processes print.

import { randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CheckResultEntry } from '../../src/core/result-entry.js';
import { type AgentProcess, cleanEnv, startAgent, tempDir } from '../support/agent-process.js';
import { READY_DEADLINE_MS, retryUntil } from '../support/daemon.js';
import { openStateStores } from '../support/postgres.js';

const API_KEY = 'heartbeat-public-api-key-0123';
const FAST_TOKEN = 'fast-token-Zq8xW2vB7nLp4Kd9';
const STATS_TOKEN = 'stats-token-Mx3Jr6Tq1Yh8Wc5';
const LOCAL_TOKEN = 'local-token-Pf2Gs9Vb4Nk7Xd1';
const HOUR_MS = 3_600_000;
const processes: AgentProcess[] = [];
let server: AgentProcess;
let stateDir: string;
let port: number;

async function call(route: string, init: RequestInit = {}, at = port): Promise<{ status: number; body: unknown; text: string }> {
  const response = await fetch(`http://127.0.0.1:${at}${route}`, init);
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : undefined, text };
}

async function finals(checkId: string, at = port): Promise<CheckResultEntry[]> {
  const { status, body } = await call(`/v2/check-results/${checkId}?limit=100&resultType=FINAL`, { headers: { authorization: `Bearer ${API_KEY}` } }, at);
  expect(status, JSON.stringify(body)).toBe(200);
  return (body as { entries: CheckResultEntry[] }).entries;
}

/** The check's status as its newest FINAL result says (newest first). */
async function status(checkId: string, at = port): Promise<'PASSING' | 'FAILING' | 'NONE'> {
  const newest = (await finals(checkId, at))[0];
  if (!newest) return 'NONE';
  return newest.hasFailures ? 'FAILING' : 'PASSING';
}

function printed(proc: AgentProcess): string {
  return `${proc.stdout()}\n${proc.stderr()}`;
}

beforeAll(async () => {
  stateDir = tempDir('outpost-heartbeat-');
  const file = path.join(stateDir, 'checks.json');
  writeFileSync(
    file,
    JSON.stringify({
      environmentVariables: [
        { key: 'FAST_TOKEN', value: FAST_TOKEN, secret: true },
        { key: 'STATS_TOKEN', value: STATS_TOKEN, secret: true },
      ],
      privateLocations: [{ id: 'lab', name: 'Lab' }],
      checks: [
        { id: 'hb-fast', name: 'Fast heartbeat', checkType: 'HEARTBEAT', heartbeat: { period: 2, grace: 1, token: '{{FAST_TOKEN}}' } },
        { id: 'hb-stats', name: 'Hourly job', checkType: 'HEARTBEAT', heartbeat: { period: 3600, grace: 60, token: '{{STATS_TOKEN}}' } },
      ],
    }),
  );
  server = startAgent(['server', file], cleanEnv({ OUTPOST_API_KEY: API_KEY, API_HOST: '127.0.0.1', STATE_DIR: stateDir, LOG_LEVEL: 'debug' }));
  processes.push(server);
  const started = await server.waitForLog((l) => l.msg === 'outpost server started', READY_DEADLINE_MS, 'the server to start');
  port = Number(started.apiPort);
  expect(started.heartbeatChecks).toBe(2);
});

afterAll(async () => {
  for (const proc of processes) {
    proc.kill('SIGTERM');
    await proc.exit;
  }
});

describe('heartbeat checks on the server', () => {
  it('goes FAILING when pings stop and PASSING on the next ping', async () => {
    const first = await call(`/ping/${FAST_TOKEN}`);
    expect(first.status).toBe(200);
    expect(first.body).toEqual({ id: expect.any(String) });
    expect(await status('hb-fast')).toBe('PASSING');

    // Period 2 s + grace 1 s without a ping: the watcher stores a failing FINAL result.
    let seen = '';
    const failed = await retryUntil(
      30_000,
      async () => {
        seen = await status('hb-fast');
        return seen === 'FAILING';
      },
      200,
    );
    expect(failed, `hb-fast went FAILING (is ${seen})`).toBe(true);
    // The badge reads the same results (filed under the server's heartbeat location, not a private one).
    expect(await (await fetch(`http://127.0.0.1:${port}/v1/badges/checks/hb-fast`)).text()).toMatch(/<title>[^<]*: failing<\/title>/);
    const failing = (await finals('hb-fast'))[0] as CheckResultEntry & { heartbeatCheckResult: { error: string } };
    expect(failing).toMatchObject({ checkType: 'HEARTBEAT', runLocation: 'heartbeat', resultType: 'FINAL', hasFailures: true });
    expect(failing.heartbeatCheckResult.error).toMatch(/No ping received/);
    // Prometheus sees it as any check: probe_success 0 under the check's labels, the location the results are filed under.
    const series = 'probe_success{check_id="hb-fast",check_name="Fast heartbeat",check_type="HEARTBEAT",location="heartbeat"}';
    const health = await server.healthPort();
    const metrics = async () => (await fetch(`http://127.0.0.1:${health}/metrics`)).text();
    expect(await metrics()).toContain(`${series} 0`);
    await server.waitForLog((l) => l.msg === 'heartbeat check missed its deadline: FAILING' && l.checkId === 'hb-fast', 10_000, 'the FAILING log line');

    const again = await call(`/ping/${FAST_TOKEN}`, { method: 'POST', body: 'job output', headers: { 'user-agent': 'backup-script/1.0' } });
    expect(again.status).toBe(200);
    expect(await status('hb-fast')).toBe('PASSING');
    expect(await metrics()).toContain(`${series} 1`);
    expect(await (await fetch(`http://127.0.0.1:${port}/v1/badges/checks/hb-fast`)).text()).toMatch(/<title>[^<]*: passing<\/title>/);
    // A ping has no response time to show: no "| 0 ms".
    expect(await (await fetch(`http://127.0.0.1:${port}/v1/badges/checks/hb-fast?responseTime=true`)).text()).toMatch(/<title>[^<]*: passing<\/title>/);
    const event = await call(`/v1/checks/heartbeats/hb-fast/events/${(again.body as { id: string }).id}`, { headers: { authorization: `Bearer ${API_KEY}` } });
    expect(event.status, event.text).toBe(200);
    expect((event.body as { event: unknown }).event).toEqual({
      id: (again.body as { id: string }).id,
      state: 'RECEIVED',
      timestamp: expect.any(String),
      source: 'POST 127.0.0.1',
      userAgent: 'backup-script/1.0',
    });
  });

  it('goes FAILING on time however often the checks file is reloaded (a reload moves no unchanged deadline)', async () => {
    const health = await server.healthPort();
    expect((await call(`/ping/${FAST_TOKEN}`)).status).toBe(200);
    expect(await status('hb-fast')).toBe('PASSING');
    // Reloads every 500 ms, well inside period 2 s + grace 1 s: before, each restarted the deadline.
    let reloading = true;
    const reloads = (async () => {
      while (reloading) {
        expect((await fetch(`http://127.0.0.1:${health}/-/reload`, { method: 'POST' })).status).toBe(200);
        await new Promise((resolve) => setTimeout(resolve, 500));
      }
    })();
    try {
      const failed = await retryUntil(10_000, async () => (await status('hb-fast')) === 'FAILING', 200);
      expect(failed, 'hb-fast went FAILING while the file was reloaded every 500 ms').toBe(true);
    } finally {
      reloading = false;
      await reloads;
    }
  });

  it('takes GET, POST and HEAD without credentials and answers 404 for an unknown token', async () => {
    for (const method of ['GET', 'POST', 'HEAD']) {
      const response = await fetch(`http://127.0.0.1:${port}/ping/${STATS_TOKEN}`, { method });
      expect(response.status, method).toBe(200);
      if (method !== 'HEAD') expect(await response.json()).toEqual({ id: expect.any(String) });
      else expect(await response.text()).toBe('');
    }
    const unknown = await call('/ping/not-a-token-of-any-check-0000');
    expect(unknown.status).toBe(404);
    expect(unknown.body).toMatchObject({ statusCode: 404, error: 'Not Found' });
    expect(unknown.text).not.toContain('not-a-token');
    const put = await fetch(`http://127.0.0.1:${port}/ping/${STATS_TOKEN}`, { method: 'PUT' });
    expect(put.status).toBe(405);
    // The events route is the public API's: a key is needed.
    expect((await call('/v1/checks/heartbeats/hb-stats/events/x')).status).toBe(401);
    expect((await call('/v1/checks/heartbeats/hb-stats/events/unknown', { headers: { authorization: `Bearer ${API_KEY}` } })).status).toBe(404);
    expect((await call('/v1/checks/heartbeats/no-such-check/events/x', { headers: { authorization: `Bearer ${API_KEY}` } })).status).toBe(404);
  });

  it('answers the success ratios of a scripted ping history', async () => {
    // A second connection to the server's database (SQLite's WAL, or the PostgreSQL pass's database): the history is written with explicit times.
    const stores = await openStateStores(stateDir);
    const { heartbeats } = stores;
    // The test before pinged hb-stats three times (GET, POST, HEAD): they are in the newest slot, which the history fills anyway.
    const now = Date.now();
    // Slot k of the current window is [now - (k+1) h, now - k h); pings in the middle of slots keep the test clear of a few seconds' drift.
    const at = (slot: number) => new Date(now - (slot + 0.5) * HOUR_MS).toISOString();
    const slots: number[] = [];
    for (let k = 0; k < 18; k++) slots.push(k); // 18 of the 24 slots of the last 24 hours
    slots.push(0); // a second ping in one slot counts as an entity, not as a second period
    for (let k = 24; k < 48; k += 2) slots.push(k); // 12 of the 24 slots of the 24 hours before
    for (let k = 48; k < 168; k += 2) slots.push(k); // 60 of the other 120 slots of the last 7 days
    slots.push(170, 200); // the 7 days before: tracked from the earliest event (slot 200), so 33 slots expected, 2 met
    let firstId = '';
    for (const slot of slots) {
      const id = randomUUID();
      if (slot === 5) firstId = id;
      await heartbeats.addEvent('hb-stats', { id, state: 'RECEIVED', timestamp: at(slot), source: 'GET 192.0.2.1', userAgent: 'curl/8' });
    }
    await stores.close();
    const { status: code, body, text } = await call(`/v1/checks/heartbeats/hb-stats/events/${firstId}`, { headers: { authorization: `Bearer ${API_KEY}` } });
    expect(code, text).toBe(200);
    const answer = body as {
      event: { id: string; timestamp: string; state: string; source: string; userAgent: string };
      stats: Record<'last24Hours' | 'last7Days', { successRatio: { previousPeriod: number; currentPeriod: number }; totalEntitiesCurrentPeriod: number }>;
    };
    expect(answer.event).toEqual({ id: firstId, state: 'RECEIVED', timestamp: at(5), source: 'GET 192.0.2.1', userAgent: 'curl/8' });
    // The three real pings of the test before are in slot 0 as well: entities, not periods.
    expect(answer.stats.last24Hours.successRatio.currentPeriod).toBeCloseTo(18 / 24, 10);
    expect(answer.stats.last24Hours.successRatio.previousPeriod).toBeCloseTo(12 / 24, 10);
    expect(answer.stats.last24Hours.totalEntitiesCurrentPeriod).toBe(19 + 3);
    expect(answer.stats.last7Days.successRatio.currentPeriod).toBeCloseTo((18 + 12 + 60) / 168, 10);
    expect(answer.stats.last7Days.successRatio.previousPeriod).toBeCloseTo(2 / 33, 10);
    expect(answer.stats.last7Days.totalEntitiesCurrentPeriod).toBe(19 + 3 + 12 + 60);
  });

  it('serves pings in local mode too', async () => {
    const dir = tempDir('outpost-heartbeat-local-');
    const file = path.join(dir, 'checks.json');
    writeFileSync(
      file,
      JSON.stringify({
        environmentVariables: [{ key: 'HB', value: LOCAL_TOKEN, secret: true }],
        checks: [{ id: 'hb-local', checkType: 'HEARTBEAT', heartbeat: { period: 1, grace: 1, token: '{{HB}}' } }],
      }),
    );
    const local = startAgent(['local', file], cleanEnv({ STATE_DIR: dir, OUTPOST_API_KEY: API_KEY, LOG_LEVEL: 'debug' }));
    processes.push(local);
    const started = await local.waitForLog((l) => l.msg === 'outpost local mode started', READY_DEADLINE_MS, 'local mode to start');
    const localPort = Number(started.apiPort);
    expect((await call(`/ping/${LOCAL_TOKEN}`, {}, localPort)).status).toBe(200);
    expect(await status('hb-local', localPort)).toBe('PASSING');
    const failed = await retryUntil(30_000, async () => (await status('hb-local', localPort)) === 'FAILING', 200);
    expect(failed, 'hb-local went FAILING').toBe(true);
    expect((await call(`/ping/${LOCAL_TOKEN}`, { method: 'HEAD' }, localPort)).status).toBe(200);
    expect(await status('hb-local', localPort)).toBe('PASSING');
    expect(printed(local)).not.toContain(LOCAL_TOKEN);
  });

  it('never prints a token', () => {
    const output = printed(server);
    expect(output).toContain('heartbeat check missed its deadline');
    for (const token of [FAST_TOKEN, STATS_TOKEN]) expect(output).not.toContain(token);
  });
});
