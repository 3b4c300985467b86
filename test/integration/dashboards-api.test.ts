// Dashboards and incidents over real HTTP: the real router and dashboard
// routes in front of a real store (SQLite; PostgreSQL in the `postgres`
// project), dashboards from a checks file
// (parseServerChecksFile, then the store's sync) and from PUT. Covers the
// PUT field set and its error bodies, keys answered once and masked after,
// the file winning over the API, GET /v1/incidents/{id}, private pages (login
// form, cookie, ?key=, wrong keys limited per address and no key compared
// while limited), repeated parameters refused, figures computed once per
// FIGURES_TTL_MS however many requests, the page's headers
// and the escaping of hostile names.

import { mkdtemp, rm } from 'node:fs/promises';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ChecksFileError, parseServerChecksFile } from '../../src/checks/checks-file.js';
import { definitionRegistry } from '../../src/checks/registry.js';
import { AGENT_ROUTE_LIMIT_PER_MINUTE } from '../../src/core/protocol.js';
import { dashboardRoutes, fileDashboards } from '../../src/server/dashboards-api.js';
import { FIGURES_TTL_MS } from '../../src/server/figures-cache.js';
import { RateLimiter } from '../../src/server/http/rate-limit.js';
import { closeApiServer, Router, startApiServer } from '../../src/server/http/router.js';
import type { DashboardStore } from '../../src/store/dashboards.js';
import type { ServerStores } from '../../src/store/server-stores.js';
import type { Store } from '../../src/store/store.js';
import { openStateStores } from '../support/postgres.js';
import { runSessions, storedCheck } from '../support/server-store.js';

const logger = pino({ level: 'silent' });
const API_KEY = 'dashboards-api-test-key';
const A = 'lab';
const FILE_KEY = 'file-dashboard-key-0123456789';
const HOSTILE = `<script>alert('x')</script> "quoted" & <img src=x onerror=alert(1)>`;

const checksFile = {
  environmentVariables: [{ key: 'WALL_KEY', value: FILE_KEY, secret: true }],
  privateLocations: [{ id: A, name: 'Lab' }],
  checks: [
    { id: 'web', name: 'Web', checkType: 'API', frequency: 1, tags: ['web'], request: { method: 'GET', url: 'http://127.0.0.1:9/' } },
    { id: 'secret-check', name: 'Secret payroll', checkType: 'API', frequency: 1, tags: ['internal'], request: { method: 'GET', url: 'http://127.0.0.1:9/' } },
  ],
  dashboards: [
    { dashboardId: 'filed', customUrl: 'shared', tags: ['web'], enableIncidents: true, header: 'From the file' },
    { dashboardId: 'inside', isPrivate: true, keys: [{ id: 'wall', rawKey: '{{WALL_KEY}}' }], tags: ['internal'], header: 'Internal header' },
  ],
  incidents: [
    {
      id: '0b7d3d8e-51c9-4c33-a8a8-6e0d6c2f1a10',
      name: 'Slow web',
      impact: 'MAJOR',
      dashboard: 'filed',
      incidentUpdates: [
        { status: 'INVESTIGATING', description: 'first', created_at: '2026-11-24T01:00:00Z' },
        { status: 'MONITORING', description: 'third', created_at: '2026-11-24T03:00:00Z' },
        { status: 'IDENTIFIED', description: 'second', created_at: '2026-11-24T02:00:00Z' },
      ],
    },
  ],
};

let dir: string;
let stores: ServerStores;
let store: Store;
let dashboards: DashboardStore;
let server: Server;
let base: string;

function router(keyAttempts = 100): Router {
  return routerOf(dashboardRoutes({ store, dashboards, windows: stores.windows, keyLimiter: new RateLimiter(keyAttempts, 60) }));
}

/** The routes behind the router every test uses: the test's key and generous limits. */
function routerOf(routes: ReturnType<typeof dashboardRoutes>): Router {
  return new Router([...routes], {
    publicKey: API_KEY,
    agentKey: async () => undefined,
    publicLimiter: new RateLimiter(600, 60),
    agentLimiter: new RateLimiter(AGENT_ROUTE_LIMIT_PER_MINUTE, 60),
    anonymousLimiter: new RateLimiter(600, 60),
    logger,
  });
}

async function listen(r: Router): Promise<{ server: Server; base: string }> {
  const started = await startApiServer(r, { host: '127.0.0.1', port: 0 });
  return { server: started, base: `http://127.0.0.1:${(started.address() as AddressInfo).port}` };
}

async function api(method: string, route: string, body?: unknown, key = API_KEY) {
  const response = await fetch(`${base}${route}`, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await response.text();
  return { status: response.status, body: text === '' ? undefined : JSON.parse(text) };
}

async function page(route: string, headers: Record<string, string> = {}, at = base) {
  const response = await fetch(`${at}${route}`, { headers, redirect: 'manual' });
  return { status: response.status, headers: response.headers, html: await response.text() };
}

async function applyFile(file: unknown) {
  const parsed = parseServerChecksFile(JSON.stringify(file), 'checks.json', definitionRegistry());
  await dashboards.sync(fileDashboards(parsed.dashboards), parsed.incidents, new Date());
}

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'outpost-dashboards-api-'));
  stores = await openStateStores(dir);
  store = stores.store;
  dashboards = stores.dashboards;
  await store.syncLocations([{ id: A, name: 'Lab' }]);
  const web = { ...storedCheck({ id: 'web', name: 'Web', locations: [A] }), definition: { tags: ['web'] } };
  const secret = { ...storedCheck({ id: 'secret-check', name: 'Secret payroll', locations: [A] }), definition: { tags: ['internal'] } };
  const hostile = { ...storedCheck({ id: 'hostile', name: HOSTILE, locations: [A] }), definition: { tags: ['web', HOSTILE] } };
  await store.syncChecks([web, secret, hostile], new Date());
  for (const check of [web, secret, hostile]) await runSessions(store, check, [A], 3, () => [{ responseTime: 25 }]);
  await applyFile(checksFile);
  ({ server, base } = await listen(router()));
});

afterAll(async () => {
  if (server) await closeApiServer(server, 1_000);
  await stores?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('PUT, GET and DELETE /v1/dashboards/{dashboardId}', () => {
  it('creates with the reference defaults (201), replaces (200) keeping the numeric id, answers the record on GET', async () => {
    const created = await api('PUT', '/v1/dashboards/team', { header: 'Team', tags: ['web'] });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({
      dashboardId: 'team',
      header: 'Team',
      refreshRate: 60,
      paginationRate: 60,
      checksPerPage: 15,
      width: 'FULL',
      paginate: true,
      showP95: true,
      showP99: true,
      showHeader: true,
      isPrivate: false,
      customCSS: '',
      keys: [],
      source: 'api',
      updated_at: null,
    });
    expect(typeof created.body.id).toBe('number');
    expect(Number.isFinite(Date.parse(created.body.created_at))).toBe(true);
    const replaced = await api('PUT', '/v1/dashboards/team', { header: 'Team 2', refreshRate: 300, checksPerPage: 20 });
    expect(replaced.status).toBe(200);
    expect(replaced.body).toMatchObject({ id: created.body.id, header: 'Team 2', refreshRate: 300, checksPerPage: 20, tags: [], created_at: created.body.created_at });
    expect(replaced.body.updated_at).not.toBeNull();
    // A record read back is a valid body: PUT it again as it is.
    const read = await api('GET', '/v1/dashboards/team');
    expect(read.body).toEqual(replaced.body);
    expect((await api('PUT', '/v1/dashboards/team', read.body)).status).toBe(200);
  });

  it('refuses bad fields with 400 and the error body naming each path', async () => {
    const answer = await api('PUT', '/v1/dashboards/team', { refreshRate: 30, paginationRate: 600, checksPerPage: 25, width: 'HALF', customCSS: '</style><script>', nonsense: 1 });
    expect(answer.status).toBe(400);
    expect(answer.body).toMatchObject({ statusCode: 400, error: 'Bad Request' });
    expect(answer.body.attributes.problems).toEqual([
      '$.checksPerPage: must be between 1 and 20 (got 25)',
      '$.customCSS: must not contain "<" (it could end the <style> element)',
      '$.width: must be one of FULL, 960PX (got "HALF")',
      '$.refreshRate: must be one of 60, 300, 600 (got 30)',
      '$.paginationRate: must be one of 30, 60, 300 (got 600)',
      '$.nonsense: is not a field of this record',
    ]);
    // A misspelling names the field meant, at any level of the body.
    const typos = await api('PUT', '/v1/dashboards/team', { isPrivat: true, keys: [{ rawKey: 'a-key-of-sixteen-chars', maskedkey: 'x' }] });
    expect(typos.status).toBe(400);
    expect(typos.body.attributes.problems).toEqual([
      '$.isPrivat: is not a field Outpost reads; did you mean "isPrivate"?',
      '$.keys[0].maskedkey: is not a field Outpost reads; did you mean "maskedKey"?',
    ]);
    expect((await api('PUT', '/v1/dashboards/bad%20id', {})).status).toBe(400);
    expect((await api('PUT', '/v1/dashboards/team?x=1', {})).body.attributes).toEqual({ parameter: 'x' });
    expect((await api('PUT', '/v1/dashboards/team', [])).status).toBe(400);
  });

  it('needs the API key', async () => {
    expect(await api('PUT', '/v1/dashboards/team', {}, 'wrong')).toEqual({ status: 401, body: { statusCode: 401, error: 'Unauthorized', message: 'bad token', attributes: {} } });
    expect((await api('GET', '/v1/dashboards/team', undefined, 'wrong')).status).toBe(401);
  });

  it('private: a key is made when none is given and answered once; later answers mask it; an id keeps a stored key', async () => {
    const made = await api('PUT', '/v1/dashboards/vault', { isPrivate: true });
    expect(made.status).toBe(201);
    const [key] = made.body.keys;
    expect(key).toMatchObject({ id: 'key-1', maskedKey: `********${key.rawKey.slice(-4)}`, updated_at: null });
    expect(key.rawKey).toMatch(/^dk_[A-Za-z0-9_-]{32}$/);
    const read = await api('GET', '/v1/dashboards/vault');
    expect(read.body.keys).toEqual([{ id: 'key-1', maskedKey: key.maskedKey, created_at: key.created_at, updated_at: null }]);
    expect(JSON.stringify(read.body)).not.toContain(key.rawKey);
    const kept = await api('PUT', '/v1/dashboards/vault', { isPrivate: true, header: 'Vault', keys: [{ id: 'key-1' }, { id: 'tv', rawKey: 'the-tv-in-the-hall-0001' }] });
    expect(kept.status).toBe(200);
    expect(kept.body.keys.map((k: { id: string; rawKey?: string }) => [k.id, k.rawKey])).toEqual([
      ['key-1', undefined],
      ['tv', 'the-tv-in-the-hall-0001'],
    ]);
    expect((await page(`/dashboards/vault?key=${encodeURIComponent(key.rawKey)}`)).status).toBe(200);
    const unknown = await api('PUT', '/v1/dashboards/vault', { isPrivate: true, keys: [{ id: 'nope' }] });
    expect(unknown.status).toBe(400);
    expect(unknown.body.message).toContain('nope');
  });

  it('the checks file wins: its dashboards cannot be changed or deleted through the API, and it takes ids and customUrls', async () => {
    expect((await api('PUT', '/v1/dashboards/filed', {})).status).toBe(409);
    expect((await api('DELETE', '/v1/dashboards/filed')).status).toBe(409);
    expect((await api('GET', '/v1/dashboards/filed')).body).toMatchObject({ source: 'file', header: 'From the file', customUrl: 'shared' });
    // customUrl taken by the file: refused for an API dashboard.
    const clash = await api('PUT', '/v1/dashboards/other', { customUrl: 'shared' });
    expect(clash.status).toBe(409);
    expect(clash.body.message).toContain('shared');
    // An API dashboard whose id and customUrl a reloaded file then uses: the file's replaces it (numeric id kept); another loses the customUrl.
    const api1 = (await api('PUT', '/v1/dashboards/later', { customUrl: 'later-url', header: 'API version' })).body;
    const api2 = (await api('PUT', '/v1/dashboards/bystander', { customUrl: 'taken-url' })).body;
    await applyFile({ ...checksFile, dashboards: [...checksFile.dashboards, { dashboardId: 'later', header: 'File version', customUrl: 'taken-url' }] });
    expect((await api('GET', '/v1/dashboards/later')).body).toMatchObject({ id: api1.id, source: 'file', header: 'File version', customUrl: 'taken-url' });
    expect((await api('GET', '/v1/dashboards/bystander')).body).toMatchObject({ id: api2.id, source: 'api', customUrl: null });
    expect((await page('/dashboards/taken-url')).html).toContain('File version');
    // Gone from the file: gone from the store; API dashboards stay.
    await applyFile(checksFile);
    expect((await api('GET', '/v1/dashboards/later')).status).toBe(404);
    expect((await api('GET', '/v1/dashboards/bystander')).status).toBe(200);
  });

  it('DELETE removes an API dashboard (204), then 404', async () => {
    await api('PUT', '/v1/dashboards/temporary', {});
    expect((await api('DELETE', '/v1/dashboards/temporary')).status).toBe(204);
    expect((await api('GET', '/v1/dashboards/temporary')).body).toMatchObject({ statusCode: 404, error: 'Not Found' });
    expect((await api('DELETE', '/v1/dashboards/temporary')).status).toBe(404);
  });

  it('a checks file with bad dashboards or incidents is refused with every problem named', () => {
    const bad = {
      ...checksFile,
      dashboards: [{ dashboardId: 'x', refreshRate: 1 }],
      incidents: [{ id: 'i', name: 'n', dashboard: 'missing', incidentUpdates: [{ status: 'INVESTIGATING', description: 'd', created_at: 'now' }] }],
    };
    let error: unknown;
    try {
      parseServerChecksFile(JSON.stringify(bad), 'checks.json', definitionRegistry());
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(ChecksFileError);
    expect((error as ChecksFileError).problems).toEqual([
      '$.dashboards[0].refreshRate: must be one of 60, 300, 600 (got 1)',
      '$.incidents[0].dashboard: must be the dashboardId of a dashboard in $.dashboards (x)',
      '$.incidents[0].incidentUpdates[0].created_at: must be an ISO 8601 date-time with its offset, such as "2026-11-24T03:00:00Z" (got "now")',
    ]);
  });
});

describe('GET /v1/incidents/{id}', () => {
  const id = '0b7d3d8e-51c9-4c33-a8a8-6e0d6c2f1a10';
  it('answers the record with its newest update, or all of them newest first', async () => {
    const filed = (await api('GET', '/v1/dashboards/filed')).body;
    const one = await api('GET', `/v1/incidents/${id}`);
    expect(one.status).toBe(200);
    expect(one.body).toMatchObject({ id, name: 'Slow web', impact: 'MAJOR', dashboardId: filed.id, startedAt: null, stoppedAt: null, updated_at: null });
    expect(one.body.incidentUpdates.map((u: { description: string }) => u.description)).toEqual(['third']);
    const all = await api('GET', `/v1/incidents/${id}?includeAllIncidentUpdates=true`);
    expect(all.body.incidentUpdates.map((u: { description: string; incidentId: string }) => [u.description, u.incidentId])).toEqual([
      ['third', id],
      ['second', id],
      ['first', id],
    ]);
    expect((await api('GET', `/v1/incidents/${id}?includeAllIncidentUpdates=false`)).body.incidentUpdates).toHaveLength(1);
    expect((await api('GET', `/v1/incidents/${id}?includeAllIncidentUpdates=yes`)).body.attributes).toEqual({ parameter: 'includeAllIncidentUpdates' });
    expect((await api('GET', '/v1/incidents/nope')).status).toBe(404);
  });
});

describe('the pages', () => {
  it('a public page: HTML with a strict CSP, the checks of its tags, hostile names escaped', async () => {
    const answer = await page('/dashboards/shared');
    expect(answer.status).toBe(200);
    expect(answer.headers.get('content-type')).toBe('text/html; charset=utf-8');
    const csp = answer.headers.get('content-security-policy') ?? '';
    const nonce = /'nonce-([^']+)'/.exec(csp)?.[1] as string;
    expect(csp).toBe(`default-src 'none'; style-src 'nonce-${nonce}'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'`);
    // A fresh nonce each time.
    expect((await page('/dashboards/shared')).headers.get('content-security-policy')).not.toContain(nonce);
    expect(answer.html).toContain('From the file');
    expect(answer.html).toContain('>Web<');
    expect(answer.html).not.toContain('Secret payroll');
    expect(answer.html).not.toContain(HOSTILE);
    expect(answer.html).not.toMatch(/<script|<img/i);
    // No event handler attribute: outside quoted (escaped) attribute values, no on…= appears inside a tag.
    for (const tag of answer.html.match(/<[a-z][^>]*>/gi) ?? []) expect(tag.replace(/"[^"]*"/g, '""'), tag).not.toMatch(/\son[a-z]+=/i);
    expect(answer.html).toContain('&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &quot;quoted&quot; &amp; &lt;img src=x onerror=alert(1)&gt;');
    // The dashboardId and the numeric id work as well as the customUrl.
    expect((await page('/dashboards/filed')).html).toContain('From the file');
    const { id } = (await api('GET', '/v1/dashboards/filed')).body;
    expect((await page(`/dashboards/${id}`)).html).toContain('From the file');
  });

  it('each display field changes the page as documented', async () => {
    const draw = async (fields: Record<string, unknown>) => {
      expect((await api('PUT', '/v1/dashboards/looks', { tags: ['web'], ...fields })).status).toBeLessThan(300);
      return (await page('/dashboards/looks')).html;
    };
    const plain = await draw({ header: 'Looks', description: 'Below the header' });
    expect(plain).toContain('<meta http-equiv="refresh" content="60;url=?">');
    expect(plain).toContain('<h1>Looks</h1>');
    expect(plain).toContain('Below the header');
    expect(plain).toContain('<ul class="tags">');
    expect(plain).toContain('<h2>web</h2>');
    expect(plain).toContain('data-figure="p95"');
    expect(plain).toContain('data-figure="p99"');
    expect(plain).toContain('class="dash-frame width-full"');
    expect(plain).toMatch(/<details>/);
    expect(plain).not.toContain('@scope');
    const changed = await draw({
      header: 'Looks',
      description: 'Below the header',
      refreshRate: 600,
      showHeader: false,
      hideTags: true,
      showGroupNames: false,
      showP95: false,
      showP99: false,
      width: '960PX',
      expandChecks: true,
      customCSS: '.check { padding: 3px }',
      logo: 'data:image/png;base64,iVBORw0KGgo=',
      link: 'https://example.com/',
    });
    expect(changed).toContain('<meta http-equiv="refresh" content="600;url=?">');
    expect(changed).not.toContain('<h1>');
    expect(changed).not.toContain('Below the header');
    expect(changed).not.toContain('<ul class="tags">');
    expect(changed).not.toContain('<h2>web</h2>');
    expect(changed).not.toContain('data-figure="p95"');
    expect(changed).not.toContain('data-figure="p99"');
    expect(changed).toContain('class="dash-frame width-960px"');
    expect(changed).toMatch(/<details open>/);
    expect(changed).toMatch(/<style nonce="[^"]+">@scope \(\.dash-scope\) \{\n\.check \{ padding: 3px \}\n\}<\/style>/);
    // A data: logo is drawn, inside its link; an http(s) logo or favicon is not (nothing is loaded from elsewhere).
    const logo = await draw({ logo: 'data:image/png;base64,iVBORw0KGgo=', link: 'https://example.com/', favicon: 'https://example.com/favicon.ico' });
    expect(logo).toContain('<a href="https://example.com/" rel="noopener noreferrer"><img class="logo" src="data:image/png;base64,iVBORw0KGgo=" alt=""></a>');
    expect(logo).toContain('<link rel="icon" href="data:,">');
    expect(logo).not.toContain('favicon.ico');
    const remote = await draw({ logo: 'https://example.com/logo.png' });
    expect(remote).not.toContain('logo.png');
    // No tags: every check; useTagsAndOperator: only checks with every tag.
    expect(await draw({ tags: [] })).toContain('Secret payroll');
    const both = await draw({ tags: ['web', 'internal'], useTagsAndOperator: true });
    expect(both).toContain('No checks match this dashboard.');
    expect(await draw({ tags: ['web', 'internal'], useTagsAndOperator: false })).toContain('Secret payroll');
  });

  it('bad parameters and unknown dashboards', async () => {
    expect((await page('/dashboards/nowhere')).status).toBe(404);
    expect((await page('/dashboards/shared?theme=pink')).status).toBe(400);
    expect((await page('/dashboards/shared?range=1y')).status).toBe(400);
    // Names every object has are no ranges either (they were a 500).
    for (const name of ['toString', 'constructor', '__proto__', 'hasOwnProperty']) expect((await page(`/dashboards/shared?range=${name}`)).status, name).toBe(400);
    expect((await page('/dashboards/shared?page=0')).status).toBe(400);
    expect((await page('/dashboards/shared?script=1')).status).toBe(400);
    // A parameter given twice is refused as on every other route, not read as its first value.
    for (const query of ['page=1&page=2', 'theme=dark&theme=zzz', 'range=24h&range=7d', `key=${FILE_KEY}&key=x`]) {
      const twice = await fetch(`${base}/dashboards/shared?${query}`);
      const name = query.split('=')[0] as string;
      expect(twice.status, query).toBe(400);
      expect(await twice.json(), query).toMatchObject({ message: `query parameter ${name} is given more than once`, attributes: { parameter: name } });
    }
    // A page past the last shows the last.
    expect((await page('/dashboards/shared?page=99')).html).toContain('data-page="1"');
  });

  it("computes a check's figures once per FIGURES_TTL_MS, shared by concurrent and later requests of any theme, page or dashboard", async () => {
    let sampleReads = 0;
    const counting = new Proxy(dashboards, {
      get(target, name) {
        const value: unknown = Reflect.get(target, name, target);
        if (typeof value !== 'function') return value;
        return (...args: unknown[]) => {
          if (name === 'samples') sampleReads++;
          return (value as (...a: unknown[]) => unknown).apply(target, args);
        };
      },
    });
    let clock = Date.now();
    const cached = routerOf(dashboardRoutes({ store, dashboards: counting, windows: stores.windows, now: () => new Date(clock) }));
    const started = await listen(cached);
    try {
      // 'shared' shows the checks tagged web: Web and the hostile one.
      const answers = await Promise.all(Array.from({ length: 8 }, () => page('/dashboards/shared?range=30d', {}, started.base)));
      expect(answers.map((a) => a.status)).toEqual(Array(8).fill(200));
      expect(sampleReads).toBe(2);
      expect((await page('/dashboards/shared?range=30d&theme=dark', {}, started.base)).status).toBe(200);
      expect((await page('/dashboards/filed?range=30d', {}, started.base)).status).toBe(200);
      clock += FIGURES_TTL_MS - 1;
      expect((await page('/dashboards/shared?range=30d', {}, started.base)).status).toBe(200);
      expect(sampleReads).toBe(2);
      // Another range is other figures.
      expect((await page('/dashboards/shared?range=7d', {}, started.base)).status).toBe(200);
      expect(sampleReads).toBe(4);
      // Once the TTL has passed since they were computed, they are computed again.
      clock += 1;
      const fresh = await page('/dashboards/shared?range=30d', {}, started.base);
      expect(fresh.status).toBe(200);
      expect(fresh.html).toContain('Web');
      expect(sampleReads).toBe(6);
    } finally {
      await closeApiServer(started.server, 1_000);
    }
  });

  it('a private page: the login form without a key, never the checks, header or CSS', async () => {
    for (const headers of [{}, { cookie: 'outpost_dashboard_999=x' }] as Array<Record<string, string>>) {
      const closed = await page('/dashboards/inside', headers);
      expect(closed.status).toBe(401);
      expect(closed.html).toContain('<form class="login" method="post" action="/dashboards/inside/login">');
      expect(closed.html).not.toContain('Secret payroll');
      expect(closed.html).not.toContain('Internal header');
      expect(closed.headers.get('cache-control')).toBe('private, no-store');
    }
    const wrong = await page('/dashboards/inside?key=not-the-key-000000');
    expect(wrong.status).toBe(401);
    expect(wrong.html).toContain('That key does not open this dashboard');
    expect(wrong.html).not.toContain('Secret payroll');
    const right = await page(`/dashboards/inside?key=${FILE_KEY}`);
    expect(right.status).toBe(200);
    expect(right.html).toContain('Secret payroll');
    // The key stays in the page's own links (and leaves no referrer).
    expect(right.html).toContain(`url=?key=${FILE_KEY}`);
    expect(right.headers.get('referrer-policy')).toBe('no-referrer');
  });

  it('the login form sets an HttpOnly, SameSite=Strict cookie for that dashboard; a wrong key shows the form again', async () => {
    const form = (key: string) =>
      fetch(`${base}/dashboards/inside/login`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams({ key }).toString(), redirect: 'manual' });
    const ok = await form(FILE_KEY);
    expect(ok.status).toBe(303);
    expect(ok.headers.get('location')).toBe('/dashboards/inside');
    const cookie = ok.headers.get('set-cookie') as string;
    const inside = (await api('GET', '/v1/dashboards/inside')).body;
    expect(cookie).toBe(`outpost_dashboard_${inside.id}=${FILE_KEY}; Path=/dashboards/; Max-Age=2592000; HttpOnly; SameSite=Strict`);
    const opened = await page('/dashboards/inside', { cookie: cookie.split(';')[0] as string });
    expect(opened.status).toBe(200);
    expect(opened.html).toContain('Secret payroll');
    // The cookie of one dashboard does not open another.
    expect((await page('/dashboards/vault', { cookie: `outpost_dashboard_${inside.id}=${FILE_KEY}` })).status).toBe(401);
    const bad = await form('wrong-key-0000000000');
    expect(bad.status).toBe(401);
    expect(bad.headers.get('set-cookie')).toBeNull();
    expect(await bad.text()).not.toContain('Secret payroll');
    const json = await fetch(`${base}/dashboards/inside/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    expect(json.status).toBe(415);
    const huge = await fetch(`${base}/dashboards/inside/login`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: `key=${'k'.repeat(5000)}` });
    expect(huge.status).toBe(413);
  });

  it('wrong keys are limited per client address (429 with Retry-After); the right key still counts nothing', async () => {
    const limited = await listen(router(3));
    try {
      expect((await page(`/dashboards/inside?key=${FILE_KEY}`, {}, limited.base)).status).toBe(200);
      for (let i = 0; i < 3; i++) expect((await page(`/dashboards/inside?key=wrong-${i}-0000000000`, {}, limited.base)).status).toBe(401);
      const refused = await page('/dashboards/inside?key=wrong-again-0000000', {}, limited.base);
      expect(refused.status).toBe(429);
      expect(refused.headers.get('retry-after')).toMatch(/^\d+$/);
      // Without any key: the form, which is not an attempt.
      expect((await page('/dashboards/inside', {}, limited.base)).status).toBe(401);
    } finally {
      await closeApiServer(limited.server, 1_000);
    }
  });

  it('while an address is limited no key is compared: the right key, by ?key=, form or cookie, gets the same 429 as a wrong one', async () => {
    const limited = await listen(router(2));
    const inside = (await api('GET', '/v1/dashboards/inside')).body;
    const form = (key: string) =>
      fetch(`${limited.base}/dashboards/inside/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ key }).toString(),
        redirect: 'manual',
      });
    try {
      expect((await form('wrong-form-0000000000')).status).toBe(401);
      expect((await page('/dashboards/inside?key=wrong-query-000000', {}, limited.base)).status).toBe(401);
      expect((await page('/dashboards/inside?key=wrong-query-111111', {}, limited.base)).status).toBe(429);
      // Were the right key let through here, 200 against 429 would tell a guesser which of its guesses was right.
      const right = await page(`/dashboards/inside?key=${FILE_KEY}`, {}, limited.base);
      expect(right.status).toBe(429);
      expect(right.headers.get('retry-after')).toMatch(/^\d+$/);
      expect(right.html).not.toContain('Secret payroll');
      const login = await form(FILE_KEY);
      expect(login.status).toBe(429);
      expect(login.headers.get('set-cookie')).toBeNull();
      expect((await page('/dashboards/inside', { cookie: `outpost_dashboard_${inside.id}=${FILE_KEY}` }, limited.base)).status).toBe(429);
      // Without a key there is nothing to compare: the form.
      expect((await page('/dashboards/inside', {}, limited.base)).status).toBe(401);
    } finally {
      await closeApiServer(limited.server, 1_000);
    }
  });
});
