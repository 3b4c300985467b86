// The analytics routes and GET /v1/static-ipv6s.txt over real HTTP: the
// server's real router with its agent, read, analytics and address routes in
// front of a real store (SQLite; PostgreSQL in the `postgres` project). Sessions are queued through the store's own
// flow (as the scheduler does); two agents, one per location, claim their
// jobs and send results with chosen start times over protocol v1, spread over
// ten weeks. Every answer is compared with a brute-force computation
// (support/analytics-reference.ts) over the stored results as the results
// API lists them, for every metric and each quick range tested.

import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AGENT_ROUTE_LIMIT_PER_MINUTE, type Job, type ResultEnvelope } from '../../src/core/protocol.js';
import type { CheckResultEntry } from '../../src/core/result-entry.js';
import { AgentAddressBook, staticIpv6Routes } from '../../src/server/agent-addresses.js';
import { agentRoutes } from '../../src/server/agent-api.js';
import { analyticsRoutes } from '../../src/server/analytics-api.js';
import { METRICS, type Metric } from '../../src/server/analytics/metrics.js';
import { QUICK_RANGES, quickRangeWindow } from '../../src/server/analytics/query.js';
import { keyHash } from '../../src/server/http/credentials.js';
import { RateLimiter } from '../../src/server/http/rate-limit.js';
import { ApiError } from '../../src/server/http/api-error.js';
import { closeApiServer, type Route, type RouteContext, Router, startApiServer } from '../../src/server/http/router.js';
import { JobSignal } from '../../src/server/job-signal.js';
import { readRoutes } from '../../src/server/read-api.js';
import type { ServerStores } from '../../src/store/server-stores.js';
import type { Store } from '../../src/store/store.js';
import { closeTo, type ReferenceRow, referenceSeries } from '../support/analytics-reference.js';
import { openStateStores } from '../support/postgres.js';
import { mulberry32 } from '../support/random.js';
import { queueSessions, storedCheck } from '../support/server-store.js';

const logger = pino({ level: 'silent' });
const PUBLIC_KEY = 'analytics-test-public-key';
const LOCATIONS = ['dmz', 'lab'] as const;
const DAY = 86_400_000;
/** The server's clock for the analytics routes: quick ranges are computed from it. A Thursday. */
const NOW = Date.parse('2026-11-26T10:17:23.000Z');
const SESSIONS = 700;

const web = storedCheck({ id: 'web', locations: [...LOCATIONS], definition: { id: 'web', checkType: 'API', tags: ['prod', 'edge'] } });
const flow = storedCheck({ id: 'flow', locations: ['lab'], checkType: 'MULTI_STEP', definition: { id: 'flow', checkType: 'MULTI_STEP' } });
const beat = storedCheck({ id: 'beat', locations: [], checkType: 'HEARTBEAT', definition: { id: 'beat', checkType: 'HEARTBEAT' } });

let dir: string;
let stores: ServerStores;
let store: Store;
let server: Server;
let base: string;
const agentKeys = new Map<string, string>();
/** Brute force's input: the stored FINAL results of `web`, read back through the results API. */
let rows: ReferenceRow[] = [];

// biome-ignore lint/suspicious/noExplicitAny: answers are checked field by field
type Body = any;

async function call(method: string, route: string, options: { token?: string; agentId?: string; body?: unknown } = {}): Promise<{ status: number; headers: Headers; text: string; body: Body }> {
  const headers: Record<string, string> = { authorization: `Bearer ${options.token ?? PUBLIC_KEY}` };
  if (options.agentId) headers['x-agent-id'] = options.agentId;
  if (options.body !== undefined) headers['content-type'] = 'application/json';
  const response = await fetch(`${base}${route}`, { method, headers, ...(options.body === undefined ? {} : { body: JSON.stringify(options.body) }) });
  const text = await response.text();
  let body: Body;
  try {
    body = text ? JSON.parse(text) : undefined;
  } catch {
    body = undefined;
  }
  return { status: response.status, headers: response.headers, text, body };
}

async function claimAllOver(location: string, ipv6Addresses?: string[]): Promise<Job[]> {
  const jobs: Job[] = [];
  for (let round = 0; round < 100; round++) {
    const agent = { id: `agent-${location}`, version: 'test', checkTypes: ['API'], runtimes: [], ...(ipv6Addresses ? { ipv6Addresses } : {}) };
    const answer = await call('POST', '/v1/agent/claim', { token: agentKeys.get(location) as string, agentId: `agent-${location}`, body: { max: 100, waitSeconds: 0, agent } });
    expect(answer.status).toBe(200);
    jobs.push(...answer.body.jobs);
    if (answer.body.jobs.length < 100) return jobs;
  }
  throw new Error('claims did not run dry');
}

function entry(job: Job, spec: { resultType: 'FINAL' | 'ATTEMPT'; startedAt: number; responseTime: number; failed: boolean; attempts: number }): ResultEnvelope {
  const id = randomUUID();
  const result: CheckResultEntry = {
    resultType: spec.resultType,
    id,
    name: 'web',
    checkId: 'web',
    checkType: 'API',
    hasFailures: spec.failed,
    hasErrors: false,
    isDegraded: false,
    overMaxResponseTime: false,
    runLocation: job.runLocation ?? null,
    startedAt: new Date(spec.startedAt).toISOString(),
    stoppedAt: new Date(spec.startedAt + spec.responseTime).toISOString(),
    created_at: new Date(spec.startedAt + spec.responseTime).toISOString(),
    responseTime: spec.responseTime,
    checkRunId: job.checkRunId ?? null,
    attempts: spec.attempts,
    sequenceId: job.sequenceId ?? null,
    apiCheckResult: { response: { status: spec.failed ? 500 : 200 } },
  };
  return { jobId: job.id, resultId: id, result };
}

async function sendResults(location: string, envelopes: ResultEnvelope[]): Promise<void> {
  for (let i = 0; i < envelopes.length; i += 500) {
    const answer = await call('POST', '/v1/agent/results', { token: agentKeys.get(location) as string, agentId: `agent-${location}`, body: { results: envelopes.slice(i, i + 500) } });
    expect(answer.status).toBe(200);
    expect(answer.body.rejected).toEqual([]);
  }
}

/** Every stored FINAL result of a check, through GET /v2/check-results (newest first, 100 a page). */
async function storedRows(checkId: string): Promise<ReferenceRow[]> {
  const found: ReferenceRow[] = [];
  let nextId: string | null = null;
  for (let page = 0; page < 100; page++) {
    const answer = await call('GET', `/v2/check-results/${checkId}?limit=100${nextId ? `&nextId=${nextId}` : ''}`);
    expect(answer.status).toBe(200);
    for (const e of answer.body.entries as CheckResultEntry[]) {
      found.push({ location: e.runLocation ?? '', startedAtMs: Date.parse(e.startedAt), responseTime: e.responseTime, failed: e.hasFailures, attempts: e.attempts ?? 1 });
    }
    nextId = answer.body.nextId;
    if (nextId === null) return found;
  }
  throw new Error('the results list did not end');
}

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'outpost-analytics-'));
  stores = await openStateStores(dir);
  store = stores.store;
  const analytics = stores.analytics;
  const book = new AgentAddressBook(analytics, () => new Date());
  await store.syncLocations(LOCATIONS.map((id) => ({ id, name: id })));
  await store.syncChecks([web, flow, beat], new Date(NOW - 80 * DAY));
  const router = new Router(
    [
      ...agentRoutes({ store, jobSignal: new JobSignal(), artifactsDir: path.join(dir, 'artifacts'), logger, addresses: book }),
      ...readRoutes({ store }),
      ...analyticsRoutes({ store, analytics, now: () => new Date(NOW) }),
      ...staticIpv6Routes({ book }),
    ],
    {
      publicKey: PUBLIC_KEY,
      agentKey: async (token) => store.keyByHash(keyHash(token)),
      publicLimiter: new RateLimiter(600, 60),
      agentLimiter: new RateLimiter(AGENT_ROUTE_LIMIT_PER_MINUTE, 60),
      logger,
    },
  );
  server = await startApiServer(router, { host: '127.0.0.1', port: 0 });
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  for (const location of LOCATIONS) {
    const key = await call('POST', `/v1/private-locations/${location}/keys`);
    expect(key.status).toBe(201);
    agentKeys.set(location, key.body.rawKey);
  }

  await queueSessions(store, web, LOCATIONS, SESSIONS, new Date(NOW - 80 * DAY));
  await queueSessions(store, flow, ['lab'], 20, new Date(NOW - 80 * DAY));
  const random = mulberry32(2026_11_26);
  for (const location of LOCATIONS) {
    const jobs = await claimAllOver(location);
    const envelopes: ResultEnvelope[] = [];
    for (const job of jobs) {
      // Ten weeks back from NOW, a few results just before and after it; response times with many ties.
      const startedAt = NOW - Math.floor(random() * 70 * DAY) + (random() < 0.02 ? 3_600_000 : 0);
      const responseTime = (location === 'lab' ? 40 : 0) + Math.floor(random() * 60) * 5;
      const failed = random() < 0.15;
      const attempts = failed ? 1 + Math.floor(random() * 3) : 1;
      for (let a = 1; a < attempts; a++) {
        envelopes.push(entry(job, { resultType: 'ATTEMPT', startedAt: startedAt - a * 1000, responseTime: 99_999, failed: true, attempts: a }));
      }
      envelopes.push(entry(job, { resultType: 'FINAL', startedAt, responseTime, failed, attempts }));
    }
    await sendResults(location, envelopes);
  }
  rows = await storedRows('web');
  expect(rows).toHaveLength(SESSIONS * LOCATIONS.length);
});

afterAll(async () => {
  if (server) await closeApiServer(server, 1000);
  await stores?.close();
  await rm(dir, { recursive: true, force: true });
});

/** The answer's series against brute force over `rows`, metric by metric, bucket by bucket. */
function expectReport(body: Body, options: { fromMs: number; toMs: number; intervalMs?: number; metrics: readonly Metric[]; statuses?: Array<'success' | 'failure'>; groupByLocation: boolean }): void {
  expect(body.from).toBe(new Date(options.fromMs).toISOString());
  expect(body.to).toBe(new Date(options.toMs).toISOString());
  const expected = referenceSeries(rows, options);
  expect(body.series.map((s: Body) => s.runLocation)).toEqual(expected.map((s) => s.location));
  let counted = 0;
  for (const [i, series] of expected.entries()) {
    const data = body.series[i].data;
    expect(data.map((p: Body) => [p.timestamp, p.results])).toEqual(series.points.map((p) => [new Date(p.startMs).toISOString(), p.results]));
    for (const [j, point] of series.points.entries()) {
      counted += point.results;
      for (const metric of options.metrics) {
        const want = point.values[metric] ?? null;
        if (!closeTo(data[j][metric], want, metric)) throw new Error(`${series.location ?? 'all'} bucket ${j} ${metric}: answered ${data[j][metric]}, brute force ${want}`);
      }
    }
  }
  // The comparison compared something.
  if (options.statuses === undefined) expect(counted).toBeGreaterThan(0);
}

describe('GET /v1/analytics/checks/{id}', () => {
  for (const range of QUICK_RANGES) {
    it(`${range}: every metric, one bucket and hourly/daily buckets, all locations and by location`, async () => {
      const window = quickRangeWindow(range, new Date(NOW));
      const all = await call('GET', `/v1/analytics/checks/web?metrics=${METRICS.join(',')}&quickRange=${range}`);
      expect(all.status).toBe(200);
      expectReport(all.body, { ...window, metrics: METRICS, groupByLocation: false });
      const interval = range === 'last24Hours' ? 60 : 1440;
      const grouped = await call('GET', `/v1/analytics/checks/web?metrics=${METRICS.join(',')}&quickRange=${range}&aggregationInterval=${interval}&groupBy=runLocation`);
      expect(grouped.status).toBe(200);
      expectReport(grouped.body, { ...window, intervalMs: interval * 60_000, metrics: METRICS, groupByLocation: true });
    });
  }

  it('the report carries the check and the metadata of each metric', async () => {
    const answer = await call('GET', '/v1/analytics/checks/web?metrics=responseTime_p95,availability,retries');
    expect(answer.status).toBe(200);
    expect(answer.body).toMatchObject({
      checkId: 'web',
      name: 'check web',
      checkType: 'API',
      activated: true,
      muted: false,
      frequency: 60,
      tags: ['prod', 'edge'],
      pagination: { page: 1, limit: 10 },
      metadata: {
        responseTime_p95: { unit: 'milliseconds', label: 'Response time (95th percentile)', aggregation: 'p95' },
        availability: { unit: 'percent', label: 'Availability', aggregation: 'ratio' },
        retries: { unit: 'count', label: 'Retries', aggregation: 'sum' },
      },
    });
    expect(Object.keys(answer.body.series[0].data[0]).sort()).toEqual(['availability', 'responseTime_p95', 'results', 'retries', 'timestamp']);
  });

  it('a custom window, filtered by status, in 7-hour buckets', async () => {
    const fromMs = NOW - 20 * DAY - 1234_000;
    const toMs = NOW - 3 * DAY;
    for (const statuses of [['failure'], ['success'], ['success', 'failure']] as Array<Array<'success' | 'failure'>>) {
      const answer = await call(
        'GET',
        `/v1/analytics/checks/web?metrics=${METRICS.join(',')}&from=${fromMs / 1000}&to=${toMs / 1000}&aggregationInterval=420&filterByStatus=${statuses.join(',')}&groupBy=runLocation`,
      );
      expect(answer.status).toBe(200);
      expectReport(answer.body, { fromMs, toMs, intervalMs: 420 * 60_000, metrics: METRICS, statuses, groupByLocation: true });
    }
  });

  it('pages through the locations when grouped', async () => {
    const first = await call('GET', '/v1/analytics/checks/web?metrics=availability&quickRange=last30Days&groupBy=runLocation&limit=1');
    const second = await call('GET', '/v1/analytics/checks/web?metrics=availability&quickRange=last30Days&groupBy=runLocation&limit=1&page=2');
    const third = await call('GET', '/v1/analytics/checks/web?metrics=availability&quickRange=last30Days&groupBy=runLocation&limit=1&page=3');
    expect([first.body.series, second.body.series, third.body.series].map((s: Body[]) => s.map((x) => x.runLocation))).toEqual([['dmz'], ['lab'], []]);
    expect(second.body.pagination).toEqual({ page: 2, limit: 1 });
  });

  it('answers 400 naming the parameter or metric, 404 for an unknown check', async () => {
    const bad = await call('GET', '/v1/analytics/checks/web?metrics=responseTime_p42');
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({ statusCode: 400, error: 'Bad Request', attributes: { parameter: 'metrics', metric: 'responseTime_p42' } });
    const heartbeat = await call('GET', '/v1/analytics/checks/beat?metrics=responseTime_avg');
    expect(heartbeat.status).toBe(400);
    expect(heartbeat.body.attributes).toMatchObject({ parameter: 'metrics', metric: 'responseTime_avg' });
    expect((await call('GET', '/v1/analytics/checks/beat?metrics=availability')).status).toBe(200);
    expect((await call('GET', '/v1/analytics/checks/web?metrics=availability&quickRange=tomorrow')).body.attributes.parameter).toBe('quickRange');
    expect((await call('GET', '/v1/analytics/checks/nope?metrics=availability')).status).toBe(404);
    expect((await call('GET', '/v1/analytics/checks/web?metrics=availability', { token: 'wrong-key-wrong-key' })).status).toBe(401);
  });
});

describe('the reports\' own rate limit', () => {
  it('past it, a report is a 429 with Retry-After; listing metrics is not limited by it', async () => {
    const routes = analyticsRoutes({ store, analytics: stores.analytics, reportsPerMinute: 2 });
    const route = (path: string) => routes.find((r) => r.path === path) as Route;
    const ask = (path: string, params: Record<string, string>, query: string) =>
      route(path).handle({ params, query: new URLSearchParams(query) } as unknown as RouteContext);
    await ask('/v1/analytics/checks/:id', { id: 'web' }, 'metrics=availability');
    await ask('/v1/analytics/multistep-checks/:id', { id: 'flow' }, 'metrics=availability');
    const refused = await ask('/v1/analytics/checks/:id', { id: 'web' }, 'metrics=availability').catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(ApiError);
    expect(refused).toMatchObject({ statusCode: 429, message: 'Too Many Requests' });
    expect(Number((refused as ApiError).headers['retry-after'])).toBeGreaterThan(0);
    expect(await ask('/v1/analytics/metrics', {}, 'checkType=URL')).toMatchObject({ status: 200 });
  });
});

describe('GET /v1/analytics/multistep-checks/{id}', () => {
  it('reports a multi-step check, and only those', async () => {
    const answer = await call('GET', '/v1/analytics/multistep-checks/flow?metrics=availability,responseTime_p99');
    expect(answer.status).toBe(200);
    expect(answer.body).toMatchObject({ checkId: 'flow', checkType: 'MULTI_STEP', series: [{ data: [{ results: 0, availability: null, responseTime_p99: null }] }] });
    const other = await call('GET', '/v1/analytics/multistep-checks/web?metrics=availability');
    expect(other.status).toBe(404);
    expect(other.body.message).toBe('check web is of type API, not MULTI_STEP: GET /v1/analytics/checks/web reports every type');
  });
});

describe('GET /v1/analytics/metrics', () => {
  it('lists the metric names of a check type', async () => {
    expect((await call('GET', '/v1/analytics/metrics?checkType=MULTI_STEP')).body).toEqual([...METRICS]);
    expect((await call('GET', '/v1/analytics/metrics?checkType=HEARTBEAT')).body).toEqual(['availability']);
    const bad = await call('GET', '/v1/analytics/metrics?checkType=FTP');
    expect(bad.status).toBe(400);
    expect(bad.body.attributes.parameter).toBe('checkType');
    expect((await call('GET', '/v1/analytics/metrics')).status).toBe(400);
  });
});

describe('GET /v1/static-ipv6s.txt', () => {
  it('lists the IPv6 addresses agents report with their claims, one per line, canonical and sorted', async () => {
    await claimAllOver('lab', ['2001:DB8:0:0::10', 'fd12:3456:789a::1']);
    await claimAllOver('dmz', ['2001:db8::20', '2001:db8::10']);
    const answer = await call('GET', '/v1/static-ipv6s.txt');
    expect(answer.status).toBe(200);
    expect(answer.headers.get('content-type')).toBe('text/plain; charset=utf-8');
    expect(answer.text).toBe('2001:db8::10\n2001:db8::20\nfd12:3456:789a::1\n');
    expect((await call('GET', '/v1/static-ipv6s.txt', { token: 'wrong-key-wrong-key' })).status).toBe(401);
  });

  it('a claim with something else than an IPv6 address is refused, naming the field', async () => {
    const answer = await call('POST', '/v1/agent/claim', {
      token: agentKeys.get('lab') as string,
      agentId: 'agent-lab',
      body: { max: 1, waitSeconds: 0, agent: { id: 'a', version: 't', checkTypes: ['API'], runtimes: [], ipv6Addresses: ['10.0.0.1'] } },
    });
    expect(answer.status).toBe(400);
    expect(answer.body.attributes.field).toBe('agent.ipv6Addresses[0]');
  });
});
