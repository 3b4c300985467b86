// What one location's agent key can make the built `outpost server` store
// (docs/server.md, "Write limits"): a job's ATTEMPT results are as many as
// its check's retryStrategy lets a run send, and past
// LOCATION_WRITE_BYTES_PER_MINUTE a location's results and events get 429
// with Retry-After, are not stored and not logged, while other locations
// carry on. The calls are an agent's, made by hand so that they can be
// hostile; the honest agent behind a small budget is in
// server-agent-api.test.ts ("write budget").

import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Job } from '../../src/core/protocol.js';
import type { CheckResultEntry } from '../../src/core/result-entry.js';
import { MAX_LOGGED_PER_MINUTE } from '../../src/server/event-log.js';
import { type AgentProcess, tempDir } from '../support/agent-process.js';
import { agentCall } from '../support/agent-api-server.js';
import { READY_DEADLINE_MS, retryUntil } from '../support/daemon.js';
import { apiCall, serverReady, startServerProcess } from '../support/server-process.js';
import { jobResultEntry } from '../support/server-store.js';
import { ControlPlaneClient, type ControlPlaneError } from '../../src/control-plane/client.js';
import { createMetrics } from '../../src/observability/metrics.js';

const API_KEY = 'write-limits-test-public-key';
const BUDGET = 65_536;
let server: AgentProcess;
let stateDir: string;
let url: string;
const keys: Record<string, string> = {};

beforeAll(async () => {
  const dir = tempDir('outpost-write-limits-');
  const checksFile = path.join(dir, 'checks.json');
  const url9 = 'http://127.0.0.1:9/';
  writeFileSync(
    checksFile,
    JSON.stringify({
      privateLocations: [
        { id: 'retries', name: 'Retries' },
        { id: 'flood', name: 'Flood' },
        { id: 'calm', name: 'Calm' },
        { id: 'burst', name: 'Burst' },
        { id: 'chunked', name: 'Chunked' },
        { id: 'large', name: 'Large batches' },
      ],
      checks: [
        // Every second, so that a job is queued at once; the test's agent is the only one.
        {
          id: 'three-retries',
          checkType: 'URL',
          frequency: 1,
          request: { url: url9 },
          retryStrategy: { type: 'FIXED', baseBackoffSeconds: 0, maxRetries: 3 },
          locations: ['retries'],
        },
        { id: 'no-retries', checkType: 'URL', frequency: 1, request: { url: url9 }, locations: ['retries'] },
      ],
    }),
  );
  stateDir = path.join(dir, 'state');
  server = startServerProcess({ checksFile, stateDir, apiKey: API_KEY, env: { LOCATION_WRITE_BYTES_PER_MINUTE: String(BUDGET) } });
  const port = await serverReady(server);
  url = `http://127.0.0.1:${port}`;
  for (const location of ['retries', 'flood', 'calm', 'burst', 'chunked', 'large']) {
    const key = await apiCall(port, API_KEY, 'POST', `/v1/private-locations/${location}/keys`);
    expect(key.status).toBe(201);
    keys[location] = (key.body as { rawKey: string }).rawKey;
  }
});

afterAll(async () => {
  server?.kill('SIGKILL');
  await server?.exit;
});

function result(job: Job, resultType: 'FINAL' | 'ATTEMPT', attempts: number): CheckResultEntry {
  return jobResultEntry(job, { resultType, hasFailures: resultType === 'ATTEMPT', attempts, responseTime: 3 });
}

const envelope = (job: Job, r: CheckResultEntry) => ({ jobId: job.id, resultId: r.id, result: r });

interface Outcome {
  accepted: string[];
  rejected: Array<{ resultId: string; statusCode: number; message: string }>;
}

async function sendResults(location: string, list: unknown[]): Promise<Outcome> {
  const answer = await agentCall(url, '/v1/agent/results', keys[location] as string, { results: list });
  expect(answer.status, JSON.stringify(answer.body)).toBe(200);
  return answer.body as Outcome;
}

/** Claims until a job of each check is held. */
async function jobsOf(location: string, checkIds: string[]): Promise<Record<string, Job>> {
  const held: Record<string, Job> = {};
  const all = await retryUntil(READY_DEADLINE_MS, async () => {
    const answer = await agentCall(url, '/v1/agent/claim', keys[location] as string, {
      max: 10,
      waitSeconds: 2,
      agent: { id: 'agent-1', version: '0.1.0', checkTypes: ['URL'], runtimes: [] },
    });
    expect(answer.status).toBe(200);
    for (const job of (answer.body as { jobs: Job[] }).jobs) {
      const checkId = (job.check as { id?: string }).id ?? '';
      held[checkId] ??= job;
    }
    return checkIds.every((id) => held[id] !== undefined);
  });
  expect(all, `jobs held: ${Object.keys(held).join(', ')}`).toBe(true);
  return held;
}

describe('ATTEMPT results per job', () => {
  it("takes an honest retry sequence whole and refuses ATTEMPTs past the check's maxRetries, naming why", async () => {
    const jobs = await jobsOf('retries', ['three-retries', 'no-retries']);
    const job = jobs['three-retries'] as Job;
    // What the agent sends for maxRetries 3 when every attempt fails: three ATTEMPTs, then the FINAL.
    const honest = [1, 2, 3].map((n) => result(job, 'ATTEMPT', n));
    expect(await sendResults('retries', honest.map((r) => envelope(job, r)))).toEqual({ accepted: honest.map((r) => r.id), rejected: [] });
    const extra = [result(job, 'ATTEMPT', 4), result(job, 'ATTEMPT', 5)];
    const refused = await sendResults('retries', extra.map((r) => envelope(job, r)));
    expect(refused.accepted).toEqual([]);
    expect(refused.rejected).toEqual(
      extra.map((r) => ({
        resultId: r.id,
        statusCode: 409,
        message: `job ${job.id} has 3 ATTEMPT results already, as many as its one run can send (its check's retryStrategy allows 3 retries a run): no more are kept`,
      })),
    );
    const final = result(job, 'FINAL', 4);
    expect(await sendResults('retries', [envelope(job, final)])).toEqual({ accepted: [final.id], rejected: [] });

    // A check without a retryStrategy is never retried: no ATTEMPT of it is kept; its FINAL is.
    const once = jobs['no-retries'] as Job;
    const attempt = result(once, 'ATTEMPT', 1);
    const none = await sendResults('retries', [envelope(once, attempt)]);
    expect(none.rejected).toEqual([{ resultId: attempt.id, statusCode: 409, message: expect.stringContaining("retryStrategy allows 0 retries a run") }]);
    expect((await sendResults('retries', [envelope(once, result(once, 'FINAL', 1))])).rejected).toEqual([]);
  });
});

describe('the write budget', () => {
  const event = (i: number) => ({ level: 'error', name: `FloodError${i}`, message: 'x'.repeat(300), agentVersion: '0.1.0' });
  const batch = (from: number) => ({ events: Array.from({ length: 100 }, (_, i) => event(from + i)) });

  function eventsStored(location: string): number {
    const db = new DatabaseSync(path.join(stateDir, 'outpost.db'), { readOnly: true });
    try {
      return Number((db.prepare('SELECT count(*) AS n FROM events WHERE location = ?').get(location) as { n: number }).n);
    } finally {
      db.close();
    }
  }

  it('answers a flood of events with 429 and Retry-After once the location has sent its budget; stores and logs no more of it; other locations carry on', async () => {
    let taken = 0;
    let refusal: Response | undefined;
    // About 40 KB a request: the 64 KiB budget lets two in.
    for (let i = 0; i < 10 && !refusal; i++) {
      const response = await fetch(`${url}/v1/agent/events`, {
        method: 'POST',
        headers: { authorization: `Bearer ${keys.flood}`, 'x-agent-id': 'flooder', 'content-type': 'application/json' },
        body: JSON.stringify(batch(i * 100)),
      });
      if (response.status === 202) taken++;
      else refusal = response;
    }
    expect(refusal?.status).toBe(429);
    // Let in while the bucket is not empty, each charged once: the budget's worth and the request that crosses it.
    expect(taken).toBeGreaterThanOrEqual(Math.ceil(BUDGET / JSON.stringify(batch(0)).length));
    const retryAfter = Number(refusal?.headers.get('retry-after'));
    expect(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 60, `Retry-After ${retryAfter}`).toBe(true);
    expect(await refusal?.json()).toEqual({
      statusCode: 429,
      error: 'Too Many Requests',
      message: `location flood has sent its write budget (${BUDGET} bytes of results and events a minute); retry after ${retryAfter} s`,
      attributes: { location: 'flood', bytesPerMinute: BUDGET },
    });

    // The flood goes on: refused, as are its results (one budget for both); another location's writes are taken.
    let refused = 0;
    const floodStarted = Date.now();
    for (let i = 0; i < 20; i++) {
      const answer = await agentCall(url, '/v1/agent/events', keys.flood as string, batch(10_000 + i * 100), { agentId: 'flooder' });
      if (answer.status === 429) refused++;
      else taken++;
    }
    // The debt is paid back at about 1 KB/s: only on a machine slow enough to take seconds over these does one more get in.
    const refilled = Math.ceil(((Date.now() - floodStarted) / 1000) * (BUDGET / 60));
    expect(20 - refused).toBeLessThanOrEqual(Math.ceil(refilled / JSON.stringify(batch(0)).length));
    expect((await agentCall(url, '/v1/agent/results', keys.flood as string, { results: [{}] }, { agentId: 'flooder' })).status).toBe(429);
    expect((await agentCall(url, '/v1/agent/events', keys.calm as string, { events: [event(0)] }, { agentId: 'calm-1' })).status).toBe(202);

    // Only what was taken is stored; the log has at most MAX_LOGGED_PER_MINUTE event lines, a line saying the rest
    // are not logged, and one line for the location over its budget however many requests were refused.
    expect(eventsStored('flood')).toBe(taken * 100);
    const lines = (msg: string, location: string) => server.logs.filter((l) => l.msg === msg && l.location === location);
    expect(await retryUntil(READY_DEADLINE_MS, async () => lines('agent event', 'calm').length === 1)).toBe(true);
    expect(lines('agent event', 'flood')).toHaveLength(MAX_LOGGED_PER_MINUTE);
    expect(server.logs.filter((l) => String(l.msg).startsWith('agent events over the most logged') && l.location === 'flood')).toHaveLength(1);
    expect(server.logs.filter((l) => String(l.msg).startsWith("a location's agents sent more results and events than"))).toMatchObject([
      { location: 'flood', bytesPerMinute: BUDGET },
    ]);
  });

  // A chunked body announces no length: it is charged the route's limit as it is let in, the rest paid back once read.
  for (const { location, chunked } of [
    { location: 'burst', chunked: false },
    { location: 'chunked', chunked: true },
  ]) {
    it(`lets in no more than the budget when the requests come all at once${chunked ? ', chunked without a Content-Length' : ''}`, async () => {
      const body = JSON.stringify(batch(0));
      const started = Date.now();
      const statuses = await Promise.all(
        Array.from({ length: 12 }, async () => {
          const response = await fetch(`${url}/v1/agent/events`, {
            method: 'POST',
            headers: { authorization: `Bearer ${keys[location]}`, 'x-agent-id': 'burster', 'content-type': 'application/json' },
            body: chunked ? new Blob([body]).stream() : body,
            ...(chunked ? { duplex: 'half' } : {}),
          } as RequestInit);
          await response.arrayBuffer();
          return response.status;
        }),
      );
      const seconds = (Date.now() - started) / 1000;
      const taken = statuses.filter((status) => status === 202).length;
      expect(statuses.filter((status) => status !== 202 && status !== 429)).toEqual([]);
      // Each request is charged as it is let in: the budget, one request's overshoot and what refilled meanwhile.
      expect(taken).toBeGreaterThanOrEqual(1);
      expect(taken * body.length).toBeLessThanOrEqual(BUDGET + body.length + Math.ceil((seconds * BUDGET) / 60));
      expect(eventsStored(location)).toBe(taken * 100);
    });
  }
  it("tells the real agent client of the budget (429 and Retry-After) when its refused batch is large, never a reset connection", async () => {
    const client = new ControlPlaneClient(
      { apiUrl: url, apiKey: keys.large as string, agentId: 'large-batches', version: '0.0.0-test', timeoutMs: 30_000, proxy: {} },
      createMetrics(),
    );
    try {
      // The first 8 MiB batch is let in and spends the budget (its results name no job: each is refused alone); the
      // next are refused before their body is read, which is then read and dropped.
      const lines = Array.from({ length: 8 }, (_, i) => JSON.stringify({ jobId: `j-${i}`, resultId: `r-${i}`, pad: 'x'.repeat(1024 * 1024 - 64) }));
      await client.sendResultLines(lines);
      // Ten tries: a connection closed with its body unread is reset often, not always.
      for (let i = 0; i < 10; i++) {
        const refused = await client.sendResultLines(lines).then(
          () => undefined,
          (error: unknown) => error as ControlPlaneError,
        );
        expect(refused?.message).toMatch(/^results: HTTP 429 /);
        expect(refused?.retryAfterMs).toBeGreaterThan(0);
      }
    } finally {
      await client.close();
    }
  });
});
