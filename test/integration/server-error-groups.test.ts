// Error groups and maintenance windows over real HTTP: the real router with
// the agent, read, error-group and maintenance routes in front of a real
// SQLite store. Failing results come in as an agent sends them (POST
// /v1/agent/results with its key), and are read back through the public API.

import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MaintenanceWindowDefinition } from '../../src/core/maintenance-window.js';
import { AGENT_ROUTE_LIMIT_PER_MINUTE } from '../../src/core/protocol.js';
import { agentRoutes } from '../../src/server/agent-api.js';
import { errorGroupRoutes } from '../../src/server/error-groups-api.js';
import { keyHash, newAgentKey } from '../../src/server/http/credentials.js';
import { RateLimiter } from '../../src/server/http/rate-limit.js';
import { closeApiServer, Router, startApiServer } from '../../src/server/http/router.js';
import { JobSignal } from '../../src/server/job-signal.js';
import { maintenanceRoutes } from '../../src/server/maintenance-api.js';
import { readRoutes } from '../../src/server/read-api.js';
import { SqliteMaintenanceWindowStore } from '../../src/store/sqlite/maintenance-windows-store.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { claimAll, envelopeFor, queueSessions, storedCheck } from '../support/server-store.js';

const PUBLIC_KEY = 'error-groups-test-key';
const LOCATION = 'lab';
const check = storedCheck({ id: 'flaky', locations: [LOCATION] });

let dir: string;
let store: SqliteStore;
let server: Server;
let base: string;
let agentKey: string;

interface Answer {
  status: number;
  // biome-ignore lint/suspicious/noExplicitAny: answers are checked field by field
  body: any;
}

async function call(method: string, route: string, options: { body?: unknown; token?: string; headers?: Record<string, string> } = {}): Promise<Answer> {
  const response = await fetch(`${base}${route}`, {
    method,
    headers: {
      authorization: `Bearer ${options.token ?? PUBLIC_KEY}`,
      ...(options.body !== undefined ? { 'content-type': 'application/json' } : {}),
      ...options.headers,
    },
    ...(options.body !== undefined ? { body: typeof options.body === 'string' ? options.body : JSON.stringify(options.body) } : {}),
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : undefined };
}

/** One run of the check whose FINAL (failing unless `requestError` is null) the agent posts over HTTP; returns the result id. */
async function agentReports(requestError: string | null): Promise<string> {
  await queueSessions(store, check, [LOCATION], 1);
  const [job] = await claimAll(store, LOCATION, ['API'], new Date(), 'agent-1');
  if (!job) throw new Error('no job');
  const envelope = envelopeFor(job, check, { hasFailures: requestError !== null });
  envelope.result.hasErrors = requestError !== null;
  envelope.result.apiCheckResult = { requestError, assertions: [] };
  const answer = await call('POST', '/v1/agent/results', { token: agentKey, headers: { 'x-agent-id': 'agent-1' }, body: { results: [envelope] } });
  expect(answer.status).toBe(200);
  expect(answer.body.accepted).toEqual([envelope.resultId]);
  return envelope.resultId;
}

async function resultOf(id: string) {
  const answer = await call('GET', `/v1/check-results/${check.id}/${id}`);
  expect(answer.status).toBe(200);
  return answer.body;
}

const WINDOWS: MaintenanceWindowDefinition[] = Array.from({ length: 25 }, (_, i) => ({
  id: i + 1,
  name: `window ${i + 1}`,
  tags: i % 2 === 0 ? ['prod'] : [],
  startsAt: '2026-01-01T22:00:00.000Z',
  endsAt: '2026-01-01T23:00:00.000Z',
  repeatUnit: i === 0 ? 'MONTH' : null,
  repeatInterval: i === 0 ? 1 : null,
  repeatEndsAt: null,
}));

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'outpost-error-groups-api-'));
  store = await SqliteStore.open(path.join(dir, 'outpost.db'));
  await store.syncLocations([{ id: LOCATION, name: 'Lab' }]);
  await store.syncChecks([check], new Date());
  const windows = new SqliteMaintenanceWindowStore(store.access);
  await windows.sync(WINDOWS, new Date('2026-01-01T00:00:00Z'));
  const { rawKey, maskedKey, hash } = newAgentKey();
  const at = new Date().toISOString();
  await store.createKey({ id: randomUUID(), locationId: LOCATION, maskedKey, hash, created_at: at, updated_at: at });
  agentKey = rawKey;
  const logger = pino({ level: 'silent' });
  const router = new Router(
    [
      ...agentRoutes({ store, jobSignal: new JobSignal(), artifactsDir: path.join(dir, 'artifacts'), logger }),
      ...readRoutes({ store }),
      ...errorGroupRoutes({ errorGroups: store.errorGroups }),
      ...maintenanceRoutes({ windows }),
    ],
    {
      publicKey: PUBLIC_KEY,
      agentKey: (token) => store.keyByHash(keyHash(token)),
      publicLimiter: new RateLimiter(600, 60),
      agentLimiter: new RateLimiter(AGENT_ROUTE_LIMIT_PER_MINUTE, 60),
      logger,
    },
  );
  server = await startApiServer(router, { host: '127.0.0.1', port: 0 });
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  if (server) await closeApiServer(server, 1_000);
  await store?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('error groups', () => {
  it('groups results sent by an agent: same failure with other addresses merges, another splits; GET shows the record', async () => {
    const first = await resultOf(await agentReports('connect ECONNREFUSED 10.1.2.3:8080'));
    const second = await resultOf(await agentReports('connect ECONNREFUSED 10.9.8.7:9443'));
    const other = await resultOf(await agentReports('certificate has expired'));
    const passed = await resultOf(await agentReports(null));
    expect(first.errorGroupIds).toHaveLength(1);
    expect(second.errorGroupIds).toEqual(first.errorGroupIds);
    expect(other.errorGroupIds).toHaveLength(1);
    expect(other.errorGroupIds).not.toEqual(first.errorGroupIds);
    expect(passed.errorGroupIds).toEqual([]);

    const group = await call('GET', `/v1/error-groups/${first.errorGroupIds[0]}`);
    expect(group.status).toBe(200);
    expect(group.body).toMatchObject({
      id: first.errorGroupIds[0],
      checkId: 'flaky',
      errorHash: expect.stringMatching(/^[0-9a-f]{64}$/),
      rawErrorMessage: 'connect ECONNREFUSED 10.9.8.7:9443',
      cleanedErrorMessage: 'connect ECONNREFUSED <ip>:<port>',
      archivedUntilNextEvent: false,
      archivedForEver: false,
    });
    expect(Date.parse(group.body.lastSeen)).toBeGreaterThanOrEqual(Date.parse(group.body.firstSeen));
  });

  it('PATCH archives until the next event (reopened by it) and for ever (stays archived)', async () => {
    const id = (await resultOf(await agentReports('read ETIMEDOUT after 5000 ms'))).errorGroupIds[0];
    const archived = await call('PATCH', `/v1/error-groups/${id}`, { body: { archivedUntilNextEvent: true } });
    expect(archived.status).toBe(200);
    expect(archived.body).toMatchObject({ id, archivedUntilNextEvent: true, archivedForEver: false });
    expect((await call('GET', `/v1/error-groups/${id}`)).body.archivedUntilNextEvent).toBe(true);

    await agentReports('read ETIMEDOUT after 6100 ms');
    expect((await call('GET', `/v1/error-groups/${id}`)).body).toMatchObject({ archivedUntilNextEvent: false, rawErrorMessage: 'read ETIMEDOUT after 6100 ms' });

    expect((await call('PATCH', `/v1/error-groups/${id}`, { body: { archiveForEver: true } })).body).toMatchObject({ archivedUntilNextEvent: true, archivedForEver: true });
    await agentReports('read ETIMEDOUT after 7000 ms');
    expect((await call('GET', `/v1/error-groups/${id}`)).body).toMatchObject({ archivedUntilNextEvent: true, archivedForEver: true });

    expect((await call('PATCH', `/v1/error-groups/${id}`, { body: { archiveForEver: false } })).body).toMatchObject({ archivedUntilNextEvent: false, archivedForEver: false });
  });

  it('answers 400 naming the field for a bad body, 404 for an unknown group, 401 without the key', async () => {
    const id = (await resultOf(await agentReports('socket hang up'))).errorGroupIds[0];
    const bad = async (body: unknown, field: string) => {
      const answer = await call('PATCH', `/v1/error-groups/${id}`, { body });
      expect(answer.status, JSON.stringify(body)).toBe(400);
      expect(answer.body).toMatchObject({ statusCode: 400, error: 'Bad Request', attributes: { field } });
    };
    await bad({ archiveForEver: 'yes' }, 'archiveForEver');
    await bad({ archivedUntilNextEvent: 1 }, 'archivedUntilNextEvent');
    await bad({ archived: true }, 'archived');
    await bad({}, '$');
    await bad([true], '$');
    await bad({ archiveForEver: true, archivedUntilNextEvent: false }, 'archivedUntilNextEvent');
    expect((await call('PATCH', `/v1/error-groups/${id}`, { body: 'not json' })).status).toBe(400);

    const missing = await call('GET', `/v1/error-groups/${randomUUID()}`);
    expect(missing.status).toBe(404);
    expect(missing.body.statusCode).toBe(404);
    expect((await call('PATCH', '/v1/error-groups/nope', { body: { archiveForEver: true } })).status).toBe(404);
    expect((await call('GET', `/v1/error-groups/${id}`, { token: 'wrong' })).status).toBe(401);
    expect((await call('GET', `/v1/error-groups/${id}?x=1`)).body.attributes).toEqual({ parameter: 'x' });
  });
});

describe('GET /v1/maintenance-windows', () => {
  it('pages the windows by id (limit default 10), as the service records them', async () => {
    const first = await call('GET', '/v1/maintenance-windows');
    expect(first.status).toBe(200);
    expect(first.body.map((w: { id: number }) => w.id)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    expect(first.body[0]).toEqual({
      id: 1,
      name: 'window 1',
      tags: ['prod'],
      startsAt: '2026-01-01T22:00:00.000Z',
      endsAt: '2026-01-01T23:00:00.000Z',
      repeatUnit: 'MONTH',
      repeatInterval: 1,
      repeatEndsAt: null,
      created_at: '2026-01-01T00:00:00.000Z',
      updated_at: null,
    });
    expect((await call('GET', '/v1/maintenance-windows?limit=10&page=3')).body.map((w: { id: number }) => w.id)).toEqual([21, 22, 23, 24, 25]);
    expect((await call('GET', '/v1/maintenance-windows?limit=100')).body).toHaveLength(25);
    expect((await call('GET', '/v1/maintenance-windows?page=4')).body).toEqual([]);
  });

  it('answers 400 naming a bad parameter', async () => {
    for (const [query, parameter] of [
      ['limit=0', 'limit'],
      ['limit=101', 'limit'],
      ['limit=ten', 'limit'],
      ['page=0', 'page'],
      ['page=-1', 'page'],
      ['page=1.5', 'page'],
      ['sort=name', 'sort'],
      ['limit=5&limit=6', 'limit'],
    ] as const) {
      const answer = await call('GET', `/v1/maintenance-windows?${query}`);
      expect(answer.status, query).toBe(400);
      expect(answer.body.attributes, query).toEqual({ parameter });
    }
  });
});
