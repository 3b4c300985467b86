// The server's public read API over real HTTP: the real router and read
// routes in front of a real SQLite store, results seeded through the agent's
// own flows (createSession, claimJobs, acceptResults).

import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AGENT_ROUTE_LIMIT_PER_MINUTE } from '../../src/core/protocol.js';
import { keyHash } from '../../src/server/http/credentials.js';
import { RateLimiter } from '../../src/server/http/rate-limit.js';
import { closeApiServer, Router, startApiServer } from '../../src/server/http/router.js';
import { readRoutes } from '../../src/server/read-api.js';
import type { Store } from '../../src/store/store.js';
import { claimAll, envelopeFor, openTestStore, queueSessions, runSessions, storedCheck } from '../support/server-store.js';

const logger = pino({ level: 'silent' });
const PUBLIC_KEY = 'read-api-test-key';
const LOCATIONS = [
  { id: 'loc-a', name: 'Office A' },
  { id: 'loc-b', name: 'Office B' },
];
const A = 'loc-a';
const B = 'loc-b';

const paged = storedCheck({ id: 'paged', locations: [A, B] });
const filtered = storedCheck({ id: 'filtered', locations: [A, B] });
const sessions = storedCheck({ id: 'sessions', locations: [A, B], checkType: 'TCP', definition: { id: 'sessions', checkType: 'TCP' } });
const doomed = storedCheck({ id: 'doomed', locations: [A] });

let dir: string;
let store: Store;
let server: Server;
let base: string;
const deleted: string[] = [];

interface Answer {
  status: number;
  headers: Headers;
  text: string;
  // biome-ignore lint/suspicious/noExplicitAny: answers are checked field by field
  body: any;
}

/** `token` null: no Authorization header at all. */
async function call(baseUrl: string, method: string, route: string, token: string | null = PUBLIC_KEY): Promise<Answer> {
  const response = await fetch(`${baseUrl}${route}`, { method, headers: token === null ? {} : { authorization: `Bearer ${token}` } });
  const text = await response.text();
  return { status: response.status, headers: response.headers, text, body: text ? JSON.parse(text) : undefined };
}

const api = (method: string, route: string) => call(base, method, route);

async function listen(router: Router): Promise<{ server: Server; base: string }> {
  const started = await startApiServer(router, { host: '127.0.0.1', port: 0 });
  return { server: started, base: `http://127.0.0.1:${(started.address() as AddressInfo).port}` };
}

function router(now?: () => number): Router {
  return new Router(readRoutes({ store, onCheckDeleted: (id) => deleted.push(id) }), {
    publicKey: PUBLIC_KEY,
    agentKey: async (token) => store.keyByHash(keyHash(token)),
    publicLimiter: new RateLimiter(600, 60),
    agentLimiter: new RateLimiter(AGENT_ROUTE_LIMIT_PER_MINUTE, 60),
    logger,
    ...(now ? { now } : {}),
  });
}

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'outpost-read-api-'));
  store = await openTestStore(dir);
  await store.syncLocations(LOCATIONS);
  await store.syncChecks([paged, filtered, sessions, doomed], new Date());
  ({ server, base } = await listen(router()));
});

afterAll(async () => {
  if (server) await closeApiServer(server, 1_000);
  await store?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('GET /v2/check-results/:checkId', () => {
  it('pages through 250 results newest first, each exactly once, while new results arrive', async () => {
    const original = await runSessions(store, paged, [A, B], 125);
    expect(original).toHaveLength(250);
    const seen: string[] = [];
    const lengths: number[] = [];
    let nextId: string | null = null;
    do {
      const answer: Answer = await api('GET', `/v2/check-results/paged?limit=100${nextId ? `&nextId=${nextId}` : ''}`);
      expect(answer.status).toBe(200);
      expect(answer.body.length).toBe(answer.body.entries.length);
      lengths.push(answer.body.length);
      seen.push(...answer.body.entries.map((entry: { id: string }) => entry.id));
      nextId = answer.body.nextId;
      // Newer results between pages must neither show up in later pages nor shift them.
      await runSessions(store, paged, [A, B], 2);
    } while (nextId !== null && lengths.length < 10);
    expect(lengths).toEqual([100, 100, 50]);
    expect(new Set(seen).size).toBe(seen.length);
    expect([...seen].sort()).toEqual([...original].sort());
    expect(seen[0]).toBe(original.at(-1));
    expect(seen.at(-1)).toBe(original[0]);
  });

  it('answers 10 entries by default, with a cursor to the rest', async () => {
    const answer = await api('GET', '/v2/check-results/paged');
    expect(answer.status).toBe(200);
    expect(answer.body.length).toBe(10);
    expect(answer.body.entries).toHaveLength(10);
    expect(typeof answer.body.nextId).toBe('string');
  });

  describe('filters', () => {
    const T0 = Date.UTC(2026, 0, 1);
    const seconds = (index: number) => T0 / 1000 + index * 60;
    beforeAll(async () => {
      // Eight jobs (four sessions, two locations), started a minute apart: even ones fail an attempt and then
      // pass, odd ones fail their only run.
      await runSessions(store, filtered, [A, B], 4, (_job, index) => {
        const startedAt = new Date(seconds(index) * 1000);
        return index % 2 === 0
          ? [
              { resultType: 'ATTEMPT', hasFailures: true, startedAt },
              { resultType: 'FINAL', hasFailures: false, startedAt },
            ]
          : [{ resultType: 'FINAL', hasFailures: true, startedAt }];
      });
    });

    type Entry = { resultType: string; runLocation: string; hasFailures: boolean; checkType: string; startedAt: string };
    async function entries(query: string): Promise<Entry[]> {
      const answer = await api('GET', `/v2/check-results/filtered?limit=100${query}`);
      expect(answer.status, answer.text).toBe(200);
      expect(answer.body.nextId).toBeNull();
      return answer.body.entries;
    }

    it('by resultType: FINAL by default, ATTEMPT, ALL', async () => {
      const finals = await entries('');
      expect(finals).toHaveLength(8);
      expect(finals.every((e) => e.resultType === 'FINAL')).toBe(true);
      expect(await entries('&resultType=FINAL')).toHaveLength(8);
      const attempts = await entries('&resultType=ATTEMPT');
      expect(attempts).toHaveLength(4);
      expect(attempts.every((e) => e.resultType === 'ATTEMPT')).toBe(true);
      expect(await entries('&resultType=ALL')).toHaveLength(12);
    });

    it('by location', async () => {
      const inA = await entries(`&location=${A}`);
      expect(inA).toHaveLength(4);
      expect(inA.every((e) => e.runLocation === A)).toBe(true);
      expect(await entries(`&location=${B}&resultType=ALL`)).toHaveLength(6);
    });

    it('by hasFailures: true keeps the failed ones, false filters nothing (as the service has it)', async () => {
      const failed = await entries('&hasFailures=true');
      expect(failed).toHaveLength(4);
      expect(failed.every((e) => e.hasFailures)).toBe(true);
      expect(await entries('&hasFailures=false')).toHaveLength(8);
      expect(await entries('&hasFailures=true&resultType=ALL')).toHaveLength(8);
    });

    it('by checkType', async () => {
      expect(await entries('&checkType=API')).toHaveLength(8);
      expect(await entries('&checkType=TCP')).toHaveLength(0);
    });

    it('by from (inclusive) and to (exclusive), on startedAt', async () => {
      const window = await entries(`&from=${seconds(2)}&to=${seconds(5)}`);
      expect(window.map((e) => Date.parse(e.startedAt)).sort()).toEqual([2, 3, 4].map((i) => seconds(i) * 1000));
      expect(await entries(`&from=${seconds(7)}`)).toHaveLength(1);
      expect(await entries(`&to=${seconds(1)}`)).toHaveLength(1);
      expect(await entries(`&from=${seconds(3)}&to=${seconds(3)}`)).toHaveLength(0);
      expect(await entries(`&from=${seconds(0)}&to=${seconds(8)}&location=${A}&hasFailures=true`)).toHaveLength(2);
    });
  });

  it.each([
    ['limit=0', 'limit'],
    ['limit=101', 'limit'],
    ['limit=abc', 'limit'],
    ['limit=1.5', 'limit'],
    ['limit=', 'limit'],
    ['limit=1&limit=2', 'limit'],
    ['from=-1', 'from'],
    ['from=1.5', 'from'],
    ['from=yesterday', 'from'],
    ['to=2026-01-01', 'to'],
    ['to=99999999999999999', 'to'],
    ['from=200&to=100', 'from'],
    ['location=nowhere', 'location'],
    ['location=', 'location'],
    ['checkType=api', 'checkType'],
    ['checkType=GRPC', 'checkType'],
    ['hasFailures=yes', 'hasFailures'],
    ['hasFailures=1', 'hasFailures'],
    ['resultType=final', 'resultType'],
    ['resultType=BOTH', 'resultType'],
    ['nextId=not%20a%20cursor', 'nextId'],
    ['nextId=', 'nextId'],
    // Well-formed base64url ("123a"), but no cursor the store made.
    ['nextId=MTIzYQ', 'nextId'],
    ['page=2', 'page'],
  ])('?%s → 400 naming %s', async (query, parameter) => {
    const answer = await api('GET', `/v2/check-results/paged?${query}`);
    expect(answer.status).toBe(400);
    expect(answer.body).toMatchObject({ statusCode: 400, error: 'Bad Request', attributes: { parameter } });
    expect(answer.body.message).toContain(parameter);
  });

  it('an unknown check → 404 with the error body', async () => {
    const answer = await api('GET', '/v2/check-results/no-such-check');
    expect(answer.status).toBe(404);
    expect(answer.body).toEqual({ statusCode: 404, error: 'Not Found', message: 'check no-such-check does not exist', attributes: { id: 'no-such-check' } });
  });
});

describe('GET /v1/check-results/:checkId/:checkResultId', () => {
  it('answers the stored result, and 404 for another check or an unknown id', async () => {
    const [id] = await runSessions(store, doomed, [A], 1);
    const answer = await api('GET', `/v1/check-results/doomed/${id}`);
    expect(answer.status).toBe(200);
    expect(answer.body).toMatchObject({ id, checkId: 'doomed', resultType: 'FINAL', runLocation: A });
    for (const route of [`/v1/check-results/paged/${id}`, '/v1/check-results/doomed/no-such-result']) {
      const missing = await api('GET', route);
      expect(missing.status).toBe(404);
      expect(missing.body).toMatchObject({ statusCode: 404, error: 'Not Found' });
    }
  });
});

describe('GET /v1/check-sessions/:id', () => {
  it('follows a session from STARTED to FAILED with its results', async () => {
    const [id] = await queueSessions(store, sessions, [A, B], 1);
    const started = await api('GET', `/v1/check-sessions/${id}`);
    expect(started.status).toBe(200);
    expect(started.body).toMatchObject({
      id,
      checkId: 'sessions',
      checkType: 'TCP',
      name: sessions.name,
      status: 'STARTED',
      stoppedAt: null,
      duration: null,
      runLocations: [A, B],
      triggerSource: 'SCHEDULER',
      results: [],
    });
    expect(Number.isNaN(Date.parse(started.body.startedAt))).toBe(false);

    const [jobA] = await claimAll(store, A, ['TCP']);
    const [jobB] = await claimAll(store, B, ['TCP']);
    if (!jobA || !jobB) throw new Error('no job to claim');
    expect(jobA.sequenceId).toBe(id);
    await store.acceptResults(`agent-${A}`, A, [envelopeFor(jobA, sessions)], new Date());
    const progress = await api('GET', `/v1/check-sessions/${id}`);
    expect(progress.body).toMatchObject({ status: 'PROGRESS', duration: null, stoppedAt: null });
    expect(progress.body.results).toHaveLength(1);

    await store.acceptResults(`agent-${B}`, B, [envelopeFor(jobB, sessions, { hasFailures: true })], new Date());
    const done = await api('GET', `/v1/check-sessions/${id}`);
    expect(done.body.status).toBe('FAILED');
    expect(typeof done.body.duration).toBe('number');
    expect(done.body.duration).toBeGreaterThanOrEqual(0);
    expect(typeof done.body.stoppedAt).toBe('string');
    expect(done.body.results.map((r: { runLocation: string }) => r.runLocation).sort()).toEqual([A, B]);
    expect(Object.keys(done.body).sort()).toEqual(
      ['id', 'checkId', 'checkType', 'name', 'status', 'startedAt', 'stoppedAt', 'duration', 'runLocations', 'triggerSource', 'results'].sort(),
    );
  });

  it('an unknown session → 404', async () => {
    const answer = await api('GET', '/v1/check-sessions/00000000-0000-4000-8000-000000000000');
    expect(answer.status).toBe(404);
    expect(answer.body).toMatchObject({ statusCode: 404, error: 'Not Found', attributes: { id: '00000000-0000-4000-8000-000000000000' } });
  });
});

describe('U+0000 in a path id or a query parameter', () => {
  it('is 404 in an id and 400 naming the parameter in a query, on either store, with no 500', async () => {
    for (const route of ['/v2/check-results/%00', '/v1/check-results/paged/%00', '/v1/check-sessions/%00', '/v1/check-sessions/a%00b']) {
      const answer = await api('GET', route);
      expect(answer.status, route).toBe(404);
      expect(answer.body).toMatchObject({ statusCode: 404, error: 'Not Found', attributes: { parameter: expect.any(String) } });
    }
    expect((await api('DELETE', '/v1/checks/%00')).status).toBe(404);
    expect((await api('POST', '/v1/private-locations/%00/keys')).status).toBe(404);
    const query = await api('GET', '/v2/check-results/paged?location=%00');
    expect(query.status).toBe(400);
    expect(query.body).toMatchObject({ statusCode: 400, attributes: { parameter: 'location' } });
    expect(deleted).not.toContain('\u0000');
  });
});

describe('GET /v1/runtimes/:id', () => {
  it('answers the runtime record the project ships for 2026-04', async () => {
    const answer = await api('GET', '/v1/runtimes/2026-04');
    expect(answer.status).toBe(200);
    const shipped = JSON.parse(readFileSync(new URL('../../runtimes/2026-04/runtime.json', import.meta.url), 'utf8'));
    expect(answer.body).toEqual({
      name: '2026-04',
      multiStepSupport: shipped.multiStepSupport,
      nodeJsVersion: shipped.nodeJsVersion,
      dependencies: shipped.dependencies,
      stage: shipped.stage,
      runtimeEndOfLife: shipped.runtimeEndOfLife,
      description: shipped.description,
    });
    expect(answer.body.stage).toBe('CURRENT');
  });

  it('an unknown runtime → 404', async () => {
    const answer = await api('GET', '/v1/runtimes/1999-01');
    expect(answer.status).toBe(404);
    expect(answer.body).toMatchObject({ statusCode: 404, error: 'Not Found', message: 'runtime 1999-01 does not exist' });
  });
});

describe('DELETE /v1/checks/:id', () => {
  it('answers 204 and tells the scheduler, then 404; its results stay readable', async () => {
    const first = await api('DELETE', '/v1/checks/doomed');
    expect(first.status).toBe(204);
    expect(first.text).toBe('');
    expect(deleted).toEqual(['doomed']);
    const again = await api('DELETE', '/v1/checks/doomed');
    expect(again.status).toBe(404);
    expect(again.body).toEqual({ statusCode: 404, error: 'Not Found', message: 'check doomed does not exist', attributes: { id: 'doomed' } });
    expect(deleted).toEqual(['doomed']);
    expect((await store.activeChecks()).map((c) => c.id)).not.toContain('doomed');
    const results = await api('GET', '/v2/check-results/doomed');
    expect(results.status).toBe(200);
    expect(results.body.length).toBe(1);
    const unknown = await api('DELETE', '/v1/checks/never-was');
    expect(unknown.status).toBe(404);
  });
});

describe('POST /v1/private-locations/:id/keys', () => {
  it('answers 201 with the key record; the raw key is admitted by its hash', async () => {
    const answer = await api('POST', `/v1/private-locations/${B}/keys`);
    expect(answer.status).toBe(201);
    expect(Object.keys(answer.body).sort()).toEqual(['created_at', 'id', 'maskedKey', 'rawKey', 'updated_at']);
    const { id, rawKey, maskedKey } = answer.body;
    expect(rawKey).toMatch(/^pl_[A-Za-z0-9_-]{43}$/);
    expect(maskedKey.endsWith(rawKey.slice(-4))).toBe(true);
    expect(maskedKey).not.toContain(rawKey.slice(3, -4));
    const record = await store.keyByHash(keyHash(rawKey));
    expect(record).toMatchObject({ id, locationId: B, maskedKey });
    expect(await store.keyByHash(keyHash(`${rawKey}x`))).toBeUndefined();
    const second = await api('POST', `/v1/private-locations/${B}/keys`);
    expect(second.body.rawKey).not.toBe(rawKey);
  });

  it('an unknown location → 404 with the error body', async () => {
    const answer = await api('POST', '/v1/private-locations/nowhere/keys');
    expect(answer.status).toBe(404);
    expect(answer.body).toEqual({ statusCode: 404, error: 'Not Found', message: 'private location nowhere does not exist', attributes: { id: 'nowhere' } });
  });
});

describe('authentication and limits', () => {
  it.each([
    ['no token', null],
    ['a wrong token', 'not-the-key'],
  ])('%s → 401 with exactly the service body', async (_what, token) => {
    for (const [method, route] of [
      ['GET', '/v2/check-results/paged'],
      ['GET', '/v1/runtimes/2026-04'],
      ['DELETE', '/v1/checks/paged'],
      ['POST', `/v1/private-locations/${A}/keys`],
    ] as const) {
      const answer = await call(base, method, route, token);
      expect(answer.status).toBe(401);
      expect(answer.body).toEqual({ statusCode: 401, error: 'Unauthorized', message: 'bad token', attributes: {} });
    }
    expect((await store.activeChecks()).map((c) => c.id)).toContain('paged');
  });

  it('the 601st request in 60 s → 429 with Retry-After', async () => {
    // Its own server and limiter, on a clock that stands still: the window is exactly one minute.
    const own = await listen(router(() => Date.UTC(2026, 10, 24, 12)));
    try {
      for (let sent = 0; sent < 600; sent += 20) {
        const answers = await Promise.all(Array.from({ length: 20 }, () => call(own.base, 'GET', '/v1/runtimes/2026-04')));
        expect(answers.map((a) => a.status)).toEqual(Array(20).fill(200));
      }
      const refused = await call(own.base, 'GET', '/v1/runtimes/2026-04');
      expect(refused.status).toBe(429);
      expect(refused.body).toEqual({ statusCode: 429, error: 'Too Many Requests', message: 'Too Many Requests', attributes: {} });
      const retryAfter = Number(refused.headers.get('retry-after'));
      expect(Number.isInteger(retryAfter)).toBe(true);
      expect(retryAfter).toBeGreaterThanOrEqual(1);
      expect(retryAfter).toBeLessThanOrEqual(60);
    } finally {
      await closeApiServer(own.server, 1_000);
    }
  });
});
