// Alerts on the server's real pieces (docs/server.md, "Alerts"): the SQLite
// store, results accepted through the store's own flows (as the agent API
// does), the evaluator and the deliverer, the routes over real HTTP, and a
// local webhook receiver. A target that fails, recovers and degrades yields
// exactly the notifications each channel asks for, signed; a receiver that
// answers 500 three times gets the notification once more and then keeps it;
// a certificate near expiry is told once a day; payloads are scrubbed.

import { createHmac } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Scrubber } from '../../src/secrets/scrubber.js';
import { AlertDeliverer } from '../../src/server/alert-delivery.js';
import { AlertEvaluator, EVALUATOR_CURSOR } from '../../src/server/alert-evaluator.js';
import { alertsRoutes } from '../../src/server/alerts-api.js';
import { RateLimiter } from '../../src/server/http/rate-limit.js';
import { closeApiServer, Router, startApiServer } from '../../src/server/http/router.js';
import { readRoutes } from '../../src/server/read-api.js';
import { SqliteAlertStore } from '../../src/store/sqlite/alerts-store.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import type { StoredCheck } from '../../src/store/store.js';
import { tempDir } from '../support/agent-process.js';
import { retryUntil } from '../support/daemon.js';
import { claimAll, envelopeFor, queueSessions, storedCheck } from '../support/server-store.js';

const API_KEY = 'alerts-test-public-key-0123456789';
const HOOK_SECRET = 'hook-secret-0123456789';
const CHECK_SECRET = 'topsecret-variable-value';

interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
}

let store: SqliteStore;
let alerts: SqliteAlertStore;
let evaluator: AlertEvaluator;
let deliverer: AlertDeliverer;
let receiver: Server;
let receiverUrl: string;
let api: Server;
let apiUrl: string;
const received: Received[] = [];
/** Statuses a receiver path answers first, one per request, before it answers 200. */
const plan = new Map<string, number[]>();
/** Answers /hang and /trickle keep open until the test ends them (and answers at once after that). */
const held: ServerResponse[] = [];
let holding = true;

const checks: Record<string, StoredCheck> = {
  shop: storedCheck({ id: 'shop', locations: ['lab'] }),
  flaky: storedCheck({
    id: 'flaky',
    locations: ['lab'],
    definition: { id: 'flaky', name: 'check flaky', checkType: 'API', alertAfter: 2, request: { method: 'GET', url: 'http://127.0.0.1:9/' } },
  }),
  retry: storedCheck({ id: 'retry', locations: ['lab'] }),
  tls: storedCheck({ id: 'tls', locations: ['lab'] }),
  order: storedCheck({ id: 'order', locations: ['lab'] }),
  paged: storedCheck({ id: 'paged', locations: ['lab'] }),
  side: storedCheck({ id: 'side', locations: ['lab'] }),
};

type Outcome = 'PASS' | 'FAIL' | 'DEGRADED';

/** One FINAL result of a check in lab, through queue, claim and acceptResults. */
async function report(check: StoredCheck, outcome: Outcome, extra: Record<string, unknown> = {}): Promise<string> {
  await queueSessions(store, check, ['lab'], 1);
  const jobs = await claimAll(store, 'lab', [check.checkType]);
  expect(jobs).toHaveLength(1);
  const envelope = envelopeFor(jobs[0] as never, check, { hasFailures: outcome === 'FAIL' });
  envelope.result.isDegraded = outcome === 'DEGRADED';
  envelope.result.apiCheckResult = { ...envelope.result.apiCheckResult, ...extra };
  const accepted = await store.acceptResults('agent-lab', 'lab', [envelope], new Date());
  expect(accepted.rejected).toEqual([]);
  return envelope.resultId;
}

async function call(method: string, path: string, body?: unknown): Promise<{ status: number; body: unknown }> {
  const response = await fetch(`${apiUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${API_KEY}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : undefined };
}

async function createChannel(record: Record<string, unknown>): Promise<number> {
  const answer = await call('POST', '/v1/alert-channels', record);
  expect(answer.status, JSON.stringify(answer.body)).toBe(201);
  return (answer.body as { id: number }).id;
}

function at(path: string): Received[] {
  return received.filter((r) => r.path === path);
}

/** Waits until every result is evaluated and nothing is pending, then a little longer for anything extra to show. */
async function settle(): Promise<void> {
  const done = await retryUntil(60_000, async () => {
    const cursor = await alerts.cursor(EVALUATOR_CURSOR);
    const newest = await alerts.resultsAfter(cursor, 1);
    return newest.length === 0 && (await alerts.nextDue()) === undefined;
  }, 50);
  expect(done, 'the evaluator and the deliverer caught up').toBe(true);
  await new Promise((resolve) => setTimeout(resolve, 300));
}

const events = (path: string) => at(path).map((r) => (JSON.parse(r.body) as { event: string }).event);

beforeAll(async () => {
  receiver = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const path = req.url ?? '/';
      received.push({ path, headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      if (path === '/hang' && holding) {
        held.push(res);
        return;
      }
      if (path === '/trickle' && holding) {
        // 200 and a first byte, then nothing: the body never ends.
        res.writeHead(200, { 'content-type': 'text/plain' }).write('o');
        held.push(res);
        return;
      }
      const status = plan.get(path)?.shift() ?? 200;
      res.writeHead(status, { 'content-type': 'text/plain' }).end(status === 200 ? 'ok' : 'receiver failing');
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;

  store = await SqliteStore.open(`${tempDir('outpost-alerts-')}/outpost.db`);
  await store.syncLocations([{ id: 'lab', name: 'Lab' }]);
  await store.syncChecks(Object.values(checks), new Date());
  alerts = new SqliteAlertStore(store.access);
  // The cursor starts at the newest result: made before any result, it starts at 0.
  expect(await alerts.cursor(EVALUATOR_CURSOR)).toBe(0);

  const logger = pino({ level: 'silent' });
  const router = new Router([...readRoutes({ store }), ...alertsRoutes({ store, alerts })], {
    publicKey: API_KEY,
    agentKey: async () => undefined,
    publicLimiter: new RateLimiter(10_000, 60),
    agentLimiter: new RateLimiter(10_000, 60),
    logger,
  });
  api = await startApiServer(router, { host: '127.0.0.1', port: 0 });
  apiUrl = `http://127.0.0.1:${(api.address() as AddressInfo).port}`;
  // A long request timeout: a held answer must stay open while the test looks at the other channels.
  deliverer = new AlertDeliverer({ alerts, logger, baseMs: 100, capMs: 500, pollMs: 100, timeoutMs: 60_000 });
  evaluator = new AlertEvaluator({
    store,
    alerts,
    logger,
    origin: apiUrl,
    scrubber: Scrubber.of([CHECK_SECRET]),
    pollMs: 50,
    onQueued: () => deliverer.wake(),
  });
  deliverer.start();
  evaluator.start();
});

afterAll(async () => {
  for (const res of held) res.end();
  await evaluator?.stop();
  await deliverer?.stop();
  if (api) await closeApiServer(api, 1_000);
  await store?.close();
  await new Promise<void>((resolve) => (receiver ? receiver.close(() => resolve()) : resolve()));
});

describe('alerts', () => {
  it('validates the channel routes', async () => {
    expect((await call('POST', '/v1/alert-channels', {})).status).toBe(400);
    expect((await call('POST', '/v1/alert-channels', { type: 'WEBHOOK' })).status).toBe(400);
    expect((await call('POST', '/v1/alert-channels', { type: 'NOPE', config: {} })).status).toBe(400);
    // Written out by hand: JSON.stringify itself cannot go 20,000 levels deep.
    const nested = (depth: number) =>
      fetch(`${apiUrl}/v1/alert-channels`, {
        method: 'POST',
        headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json' },
        body: `{"type":"WEBHOOK","config":{"url":"http://h/","extra":${'['.repeat(depth)}${']'.repeat(depth)}}}`,
      });
    // Within the body's limit (src/server/http/router.ts MAX_BODY_DEPTH) the field is named; past it, the body is refused unparsed.
    const deep = await nested(200);
    expect(deep.status).toBe(400);
    expect(await deep.text()).toContain('config.extra[0][0][0]…: is nested deeper than 64 levels');
    const deeper = await nested(20_000);
    expect(deeper.status).toBe(400);
    expect(await deeper.text()).toContain('the body is nested deeper than 512 levels');
    // Every field the channel does not have is refused, a misspelling naming the field meant (a checks file warns of the others).
    const unknown = await call('POST', '/v1/alert-channels', { type: 'WEBHOOK', config: { url: 'http://h/', heders: {} }, sendFailrue: false, muted: true, id: 7 });
    expect(unknown.status).toBe(400);
    expect((unknown.body as { attributes: unknown }).attributes).toEqual({
      problems: [
        '$.id: is chosen by the server: leave it out',
        '$.sendFailrue: is not a field Outpost reads; did you mean "sendFailure"?',
        '$.muted: is not a field of this record',
        '$.config.heders: is not a field Outpost reads; did you mean "headers"?',
      ],
    });
    const many = await call('POST', '/v1/alert-channels', { type: 'SLACK', config: { url: 'http://h/' }, ...Object.fromEntries(Array.from({ length: 30 }, (_, i) => [`extra${i}`, i])) });
    expect((many.body as { attributes: { problems: string[] } }).attributes.problems).toEqual([
      ...Array.from({ length: 20 }, (_, i) => `$.extra${i}: is not a field of this record`),
      'and 10 more problems',
    ]);
    const over = await call('POST', '/v1/alert-channels', { type: 'SLACK', config: { url: 'http://h/' }, sslExpiryThreshold: 31 });
    expect(over.status).toBe(400);
    expect(JSON.stringify(over.body)).toContain('sslExpiryThreshold');
    const email = await call('POST', '/v1/alert-channels', { type: 'EMAIL', config: { address: 'ops@example.com' }, autoSubscribe: true });
    expect(email.status).toBe(201);
    expect(email.body).toMatchObject({ type: 'EMAIL', sslExpiryThreshold: 30, autoSubscribe: true, deliveryStatus: 'NOT_DELIVERED', source: 'api' });
    expect((email.body as { deliveryStatusReason: string }).deliveryStatusReason).toContain('not delivered');
    const id = (email.body as { id: number }).id;
    expect((await call('GET', `/v1/alert-channels/${id}`)).status).toBe(200);
    expect((await call('DELETE', `/v1/alert-channels/${id}`)).status).toBe(204);
    expect((await call('DELETE', `/v1/alert-channels/${id}`)).status).toBe(404);
    expect((await call('GET', `/v1/alert-channels/${id}`)).status).toBe(404);
    expect((await call('DELETE', '/v1/alert-channels/999999')).status).toBe(404);
    expect((await call('DELETE', '/v1/alert-channels/abc')).status).toBe(404);
    const secretAnswer = await call('POST', '/v1/alert-channels', { type: 'WEBHOOK', config: { url: 'http://h/', secret: 'abcdefgh', headers: { authorization: 'Bearer x' } } });
    expect((secretAnswer.body as { config: unknown }).config).toEqual({ url: 'http://h/', secret: '*****', headers: { authorization: '*****' } });
    expect((await call('DELETE', `/v1/alert-channels/${(secretAnswer.body as { id: number }).id}`)).status).toBe(204);
  });

  it('notifies exactly the transitions each channel asks for, signed, scrubbed, with a working result link', { timeout: 120_000 }, async () => {
    await createChannel({
      type: 'WEBHOOK',
      config: { url: `${receiverUrl}/all`, secret: HOOK_SECRET, headers: { 'x-team': 'ops' } },
      sendFailure: true,
      sendRecovery: true,
      sendDegraded: true,
      subscriptions: ['shop'],
    });
    await createChannel({ type: 'WEBHOOK', config: { url: `${receiverUrl}/no-degraded` }, subscriptions: [{ checkId: 'shop' }] });
    await createChannel({ type: 'WEBHOOK', config: { url: `${receiverUrl}/flaky` }, subscriptions: ['flaky'] });
    const shop = checks.shop as StoredCheck;
    await report(shop, 'PASS');
    const failed = await report(shop, 'FAIL', { requestError: `connect ECONNREFUSED with ${CHECK_SECRET}` });
    await report(shop, 'FAIL');
    await report(shop, 'PASS');
    await report(shop, 'DEGRADED');
    await report(shop, 'DEGRADED');
    await report(shop, 'PASS');
    // alertAfter 2: the single failures in between are damped.
    for (const outcome of ['FAIL', 'PASS', 'FAIL', 'FAIL', 'PASS', 'FAIL', 'PASS', 'PASS'] as const) await report(checks.flaky as StoredCheck, outcome);
    await settle();

    expect(events('/all')).toEqual(['FAILURE', 'RECOVERY', 'DEGRADED', 'RECOVERY']);
    expect(events('/no-degraded')).toEqual(['FAILURE', 'RECOVERY']);
    expect(events('/flaky')).toEqual(['FAILURE', 'RECOVERY']);
    for (const r of at('/all')) {
      expect(r.headers['x-outpost-signature']).toBe(`sha256=${createHmac('sha256', HOOK_SECRET).update(r.body).digest('hex')}`);
      expect(r.headers['x-team']).toBe('ops');
    }
    for (const r of at('/no-degraded')) expect(r.headers['x-outpost-signature']).toBeUndefined();
    const failure = JSON.parse((at('/all')[0] as Received).body) as Record<string, unknown> & { result: { url: string; errorMessage: string } };
    expect(failure).toMatchObject({
      event: 'FAILURE',
      check: { id: 'shop', name: 'check shop', checkType: 'API' },
      location: 'lab',
      status: { previous: 'PASSING', current: 'FAILING' },
      overallStatus: 'FAILING',
      result: { id: failed },
    });
    expect(failure.result.errorMessage).toBe('connect ECONNREFUSED with *****');
    expect(JSON.stringify(received)).not.toContain(CHECK_SECRET);
    const link = await fetch(failure.result.url, { headers: { authorization: `Bearer ${API_KEY}` } });
    expect(link.status).toBe(200);
    expect(((await link.json()) as { id: string }).id).toBe(failed);

    const status = await call('GET', '/v1/checks/shop/status');
    expect(status).toEqual({ status: 200, body: { checkId: 'shop', status: 'PASSING', locations: [expect.objectContaining({ location: 'lab', status: 'PASSING', pending: null })] } });
  });

  it('retries a receiver that answers 500 three times and delivers the notification once', { timeout: 120_000 }, async () => {
    plan.set('/retry', [500, 500, 500]);
    const id = await createChannel({ type: 'WEBHOOK', config: { url: `${receiverUrl}/retry` }, subscriptions: ['retry'] });
    await report(checks.retry as StoredCheck, 'FAIL');
    await settle();
    const requests = at('/retry');
    expect(requests).toHaveLength(4);
    expect(new Set(requests.map((r) => (JSON.parse(r.body) as { notificationId: number }).notificationId)).size).toBe(1);
    const list = await call('GET', `/v1/alert-channels/${id}/notifications`);
    expect(list.status).toBe(200);
    const [notification] = list.body as { state: string; attempts: number; attemptLog: { status: number }[] }[];
    expect(notification).toMatchObject({ state: 'DELIVERED', attempts: 4, kind: 'FAILURE', checkId: 'retry' });
    expect(notification?.attemptLog.map((a) => a.status)).toEqual([500, 500, 500, 200]);
    expect((await call('GET', `/v1/alert-channels/${id}/notifications?limit=0`)).status).toBe(400);
  });

  it('keeps a channel\'s order: a recovery waits for the failure being retried', { timeout: 120_000 }, async () => {
    plan.set('/order', [500, 500]);
    await createChannel({ type: 'WEBHOOK', config: { url: `${receiverUrl}/order` }, subscriptions: ['order'] });
    await report(checks.order as StoredCheck, 'FAIL');
    await report(checks.order as StoredCheck, 'PASS');
    await settle();
    expect(events('/order')).toEqual(['FAILURE', 'FAILURE', 'FAILURE', 'RECOVERY']);
  });

  it('serves channels side by side: a receiver that never answers, or trickles its 2xx body, holds up no channel', { timeout: 120_000 }, async () => {
    await createChannel({ type: 'WEBHOOK', config: { url: `${receiverUrl}/hang` }, subscriptions: ['side'] });
    const trickle = await createChannel({ type: 'WEBHOOK', config: { url: `${receiverUrl}/trickle` }, subscriptions: ['side'] });
    await createChannel({ type: 'WEBHOOK', config: { url: `${receiverUrl}/quick` }, subscriptions: ['side'] });
    const side = checks.side as StoredCheck;
    for (const outcome of ['FAIL', 'PASS', 'FAIL', 'PASS'] as const) await report(side, outcome);
    const quick = await retryUntil(60_000, async () => events('/quick').length === 4, 50);
    expect(quick, 'the quick channel got its four notifications').toBe(true);
    expect(events('/quick')).toEqual(['FAILURE', 'RECOVERY', 'FAILURE', 'RECOVERY']);
    // Meanwhile the hanging receiver still holds its first request open, and has had no other.
    expect(at('/hang')).toHaveLength(1);
    expect(held.some((res) => !res.writableEnded)).toBe(true);
    // A 2xx counts when its status arrives: the trickling receiver had all four, in order, its bodies never ended.
    const trickled = await retryUntil(60_000, async () => events('/trickle').length === 4, 50);
    expect(trickled, 'the trickling channel got its four notifications').toBe(true);
    const listed = await call('GET', `/v1/alert-channels/${trickle}/notifications`);
    expect((listed.body as { state: string }[]).map((n) => n.state)).toEqual(['DELIVERED', 'DELIVERED', 'DELIVERED', 'DELIVERED']);
    holding = false;
    for (const res of held.splice(0)) res.end();
    await settle();
    expect(events('/hang')).toEqual(['FAILURE', 'RECOVERY', 'FAILURE', 'RECOVERY']);
  });

  it('sends PagerDuty events (trigger, then resolve with the same dedup key) and Slack messages', { timeout: 120_000 }, async () => {
    const pd = await createChannel({ type: 'PAGERDUTY', config: { routingKey: 'routing-key-0123', url: `${receiverUrl}/pd` }, subscriptions: ['paged'] });
    await createChannel({ type: 'SLACK', config: { url: `${receiverUrl}/slack` }, subscriptions: ['paged'] });
    expect(JSON.stringify((await call('GET', `/v1/alert-channels/${pd}`)).body)).not.toContain('routing-key-0123');
    await report(checks.paged as StoredCheck, 'FAIL');
    await report(checks.paged as StoredCheck, 'PASS');
    await settle();
    const paged = at('/pd').map((r) => JSON.parse(r.body) as { routing_key: string; event_action: string; dedup_key: string; payload?: { severity: string } });
    expect(paged.map((e) => [e.routing_key, e.event_action, e.dedup_key])).toEqual([
      ['routing-key-0123', 'trigger', 'outpost:paged:lab'],
      ['routing-key-0123', 'resolve', 'outpost:paged:lab'],
    ]);
    expect(paged[0]?.payload?.severity).toBe('critical');
    const slack = at('/slack').map((r) => JSON.parse(r.body) as { text: string; blocks: unknown[] });
    expect(slack.map((m) => m.text)).toEqual(['check paged is FAILING in lab', 'check paged recovered in lab (PASSING)']);
    expect(slack.every((m) => m.blocks.length === 2)).toBe(true);
    // The outbox keeps the event, not the routing key.
    const listed = await call('GET', `/v1/alert-channels/${pd}/notifications`);
    expect(JSON.stringify(listed.body)).not.toContain('routing-key-0123');
    expect((listed.body as { state: string }[]).map((n) => n.state)).toEqual(['DELIVERED', 'DELIVERED']);
  });

  it('tells of a certificate at the threshold once per certificate per day', { timeout: 120_000 }, async () => {
    await createChannel({ type: 'WEBHOOK', config: { url: `${receiverUrl}/ssl` }, subscriptions: ['tls'], sslExpiry: true, sslExpiryThreshold: 14 });
    const tls = (days: number, validTo = '2026-12-01T00:00:00.000Z') => ({ response: { status: 200, tls: { subject: 'CN=shop', issuer: 'CN=ca', validTo, daysToExpiry: days } } });
    const check = checks.tls as StoredCheck;
    await report(check, 'PASS', tls(20));
    await report(check, 'PASS', tls(14));
    await report(check, 'PASS', tls(13));
    await report(check, 'PASS', tls(5, '2026-12-02T00:00:00.000Z'));
    await settle();
    const got = at('/ssl').map((r) => JSON.parse(r.body) as { event: string; certificate: { daysToExpiry: number } });
    expect(got.map((e) => [e.event, e.certificate.daysToExpiry])).toEqual([
      ['SSL_EXPIRY', 14],
      ['SSL_EXPIRY', 5],
    ]);
  });
});

describe('the deliverer while the database cannot write', () => {
  it('sends a notification once, and records the attempt when the database writes again', { timeout: 60_000 }, async () => {
    const own = await SqliteStore.open(`${tempDir('outpost-alerts-full-')}/outpost.db`);
    const ownAlerts = new SqliteAlertStore(own.access);
    let full = true;
    let refusedRecords = 0;
    // A thin fault: recordAttempt fails as SQLite does on a full disk, while reads (dueNotifications) keep working, as they do then.
    const failing = new Proxy(ownAlerts, {
      get(target, name, receiver) {
        if (name === 'recordAttempt') {
          return async (...args: Parameters<SqliteAlertStore['recordAttempt']>) => {
            if (full) {
              refusedRecords++;
              throw Object.assign(new Error('database or disk is full'), { code: 'ERR_SQLITE_ERROR', errcode: 13 });
            }
            return target.recordAttempt(...args);
          };
        }
        const value = Reflect.get(target, name, receiver);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    const requests: string[] = [];
    const hook = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        requests.push(req.url ?? '/');
        res.end('ok');
      });
    });
    await new Promise<void>((resolve) => hook.listen(0, '127.0.0.1', resolve));
    const ownDeliverer = new AlertDeliverer({ alerts: failing, logger: pino({ level: 'silent' }), baseMs: 50, capMs: 100, pollMs: 100, timeoutMs: 5_000 });
    try {
      const channel = await ownAlerts.createChannel(
        { type: 'WEBHOOK', config: { url: `http://127.0.0.1:${(hook.address() as AddressInfo).port}/full` }, subscriptions: [], autoSubscribe: true, sendFailure: true, sendRecovery: true, sendDegraded: false, sslExpiry: false, sslExpiryThreshold: 30 },
        new Date(),
      );
      await ownAlerts.commitEvaluation('alerts', 1, [], [{ channelId: channel.id, kind: 'FAILURE', checkId: 'c', location: 'lab', resultId: null, body: { event: 'FAILURE' } }], new Date());
      ownDeliverer.start();
      expect(await retryUntil(30_000, async () => refusedRecords >= 3, 20), 'the deliverer kept trying to record').toBe(true);
      expect(requests).toEqual(['/full']);
      full = false;
      expect(await retryUntil(30_000, async () => (await ownAlerts.notifications(channel.id, 1))[0]?.state === 'DELIVERED', 20)).toBe(true);
      expect((await ownAlerts.notifications(channel.id, 1))[0]).toMatchObject({ attempts: 1, attemptLog: [{ status: 200 }] });
      expect(requests).toEqual(['/full']);
    } finally {
      await ownDeliverer.stop();
      await new Promise((resolve) => hook.close(resolve));
      await own.close();
    }
  });
});

describe('the evaluator', () => {
  it('queues nothing while suppressed(), keeps the results and the status, and tells the difference after the window', { timeout: 60_000 }, async () => {
    const own = await SqliteStore.open(`${tempDir('outpost-alerts-suppressed-')}/outpost.db`);
    try {
      const check = storedCheck({ id: 'window', locations: ['lab'] });
      await own.syncLocations([{ id: 'lab', name: 'Lab' }]);
      await own.syncChecks([check], new Date());
      const ownAlerts = new SqliteAlertStore(own.access);
      await ownAlerts.createChannel(
        { type: 'WEBHOOK', config: { url: 'http://127.0.0.1:9/' }, subscriptions: [], autoSubscribe: true, sendFailure: true, sendRecovery: true, sendDegraded: false, sslExpiry: false, sslExpiryThreshold: 30 },
        new Date(),
      );
      let inWindow = true;
      const asked: string[] = [];
      const ownEvaluator = new AlertEvaluator({
        store: own,
        alerts: ownAlerts,
        logger: pino({ level: 'silent' }),
        origin: 'http://127.0.0.1:1',
        suppressed: async (checkId) => {
          asked.push(checkId);
          return inWindow;
        },
      });
      expect(await ownAlerts.cursor(EVALUATOR_CURSOR)).toBe(0);
      const reportOwn = async (hasFailures: boolean) => {
        await queueSessions(own, check, ['lab'], 1);
        const [job] = await claimAll(own, 'lab', ['API']);
        await own.acceptResults('agent-lab', 'lab', [envelopeFor(job as never, check, { hasFailures })], new Date());
      };
      const fail = () => reportOwn(true);
      const pass = () => reportOwn(false);
      await fail();
      await ownEvaluator.tick();
      expect(asked).toEqual(['window']);
      expect(await ownAlerts.nextDue()).toBeUndefined();
      expect((await ownAlerts.statuses('window')).map((s) => s.status)).toEqual(['FAILING']);
      expect((await own.listResults({ checkId: 'window', limit: 10, resultType: 'FINAL' })).entries).toHaveLength(1);
      // Still failing in the window: nothing, and the log says so once per change, not per result.
      await fail();
      await ownEvaluator.tick();
      expect(await ownAlerts.nextDue()).toBeUndefined();
      // The first result after the window tells what the window held back: the channel never heard of this failure.
      inWindow = false;
      await fail();
      await ownEvaluator.tick();
      const [told] = await ownAlerts.notifications(1, 10);
      expect(told).toMatchObject({ kind: 'FAILURE', state: 'PENDING', body: { event: 'FAILURE', status: { previous: 'PASSING', current: 'FAILING' } } });
      expect((await ownAlerts.statuses('window'))[0]).toMatchObject({ status: 'FAILING', announced: 'FAILING' });
      // A recovery in a later window is held back too, and told after it; a failure that came and went inside a window is not told at all.
      await ownAlerts.recordAttempt(told?.id as number, null, { kind: 'cancelled', reason: 'the test read it' });
      inWindow = true;
      await pass();
      await ownEvaluator.tick();
      await fail();
      await ownEvaluator.tick();
      await pass();
      await ownEvaluator.tick();
      expect(await ownAlerts.nextDue()).toBeUndefined();
      expect((await ownAlerts.statuses('window'))[0]).toMatchObject({ status: 'PASSING', announced: 'FAILING' });
      inWindow = false;
      await pass();
      await ownEvaluator.tick();
      expect((await ownAlerts.notifications(1, 10)).map((n) => [n.kind, n.state])).toEqual([
        ['RECOVERY', 'PENDING'],
        ['FAILURE', 'CANCELLED'],
      ]);
      await pass();
      await ownEvaluator.tick();
      expect(await ownAlerts.notifications(1, 10)).toHaveLength(2);
    } finally {
      await own.close();
    }
  });
});
