// Dashboards in headless Chromium (/usr/bin/chromium through the runtime's
// playwright-core), against the real router, agent routes, dashboard routes
// and SQLite store: a week of results is posted through the agent protocol
// (POST /v1/agent/claim, POST /v1/agent/results) with chosen start times,
// then each dashboard is opened light, dark and on a phone-sized viewport
// (screenshots kept in os.tmpdir()/outpost-dashboard-screenshots, replaced
// by the next run; each path is printed). The
// page must show each check's status, uptime figures equal to the ones
// computed here from the rows posted, one SVG point per non-empty bucket,
// P95/P99 equal to a brute-force computation, the active incident and the
// maintenance window; a private dashboard without its key shows the login
// form and none of its checks. Every request the page makes goes to the
// server's origin and the page reports no Content-Security-Policy violation.

import { randomUUID } from 'node:crypto';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseDashboards, parseIncidents } from '../../src/checks/dashboard-fields.js';
import { Fields } from '../../src/checks/fields.js';
import { AGENT_ROUTE_LIMIT_PER_MINUTE, type Job, type ResultEnvelope } from '../../src/core/protocol.js';
import { agentRoutes } from '../../src/server/agent-api.js';
import { analyticsRoutes } from '../../src/server/analytics-api.js';
import { dashboardRoutes, fileDashboards } from '../../src/server/dashboards-api.js';
import { keyHash, maskKey, newAgentKey } from '../../src/server/http/credentials.js';
import { RateLimiter } from '../../src/server/http/rate-limit.js';
import { closeApiServer, Router, startApiServer } from '../../src/server/http/router.js';
import { JobSignal } from '../../src/server/job-signal.js';
import { SqliteAnalyticsStore } from '../../src/store/sqlite/analytics-store.js';
import { SqliteDashboardStore } from '../../src/store/sqlite/dashboards-store.js';
import { SqliteMaintenanceWindowStore } from '../../src/store/sqlite/maintenance-windows-store.js';
import type { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import type { StoredCheck } from '../../src/store/store.js';
import { CHROMIUM_FLAGS, chromium } from '../support/badge-font-widths.js';
import { envelopeFor, openTestStore, queueSessions, storedCheck } from '../support/server-store.js';

const logger = pino({ level: 'silent' });
const A = 'loc-a';
const B = 'loc-b';
const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const STEP = 30 * 60_000;
const PRIVATE_KEY = 'wall-screen-key-0123456789';
const HOSTILE = `<script>alert("x")</script> 'Tom' & "Jerry"`;

const tagged = (check: StoredCheck, tags: string[]) => ({ ...check, definition: { ...(check.definition as object), tags } });
const home = tagged(storedCheck({ id: 'home', name: 'Home page', locations: [A, B] }), ['web', 'prod']);
const login = tagged(storedCheck({ id: 'login', name: 'Login API', locations: [A, B] }), ['web']);
const db = tagged(storedCheck({ id: 'db', name: 'Database port', checkType: 'TCP', locations: [A] }), ['db']);
const hostile = tagged(storedCheck({ id: 'hostile', name: HOSTILE, locations: [A] }), ['web', `<b>"tag"</b>`]);
const secretCheck = tagged(storedCheck({ id: 'payroll', name: 'Payroll export', locations: [A] }), ['internal']);
const CHECKS = [home, login, db, hostile, secretCheck];

interface Row {
  checkId: string;
  at: number;
  responseTime: number;
  up: boolean;
}

/** A deterministic spread of response times (a little LCG), with failures and degraded runs in chosen places. */
function lcg(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

let dir: string;
let shots: string;
let store: SqliteStore;
let server: Server;
let base: string;
const agentKeys = new Map<string, string>();
const rows: Row[] = [];
let t0: number;

async function post<T>(route: string, body: unknown, location: string): Promise<T> {
  const response = await fetch(`${base}${route}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${agentKeys.get(location)}`, 'x-agent-id': `agent-${location}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await response.text();
  if (response.status !== 200) throw new Error(`${route}: ${response.status} ${text}`);
  return JSON.parse(text) as T;
}

/**
 * Sessions of `check` started at `times`, every location's job claimed and its
 * FINAL posted through the agent protocol, with the result's startedAt, response
 * time and verdict `spec` chooses.
 */
async function postWeek(check: StoredCheck, times: readonly number[], spec: (at: number, location: string, i: number) => { responseTime: number; hasFailures?: boolean; isDegraded?: boolean }) {
  const sessionTime = new Map<string, number>();
  for (const at of times) {
    const [id] = await queueSessions(store, check, check.locations, 1, new Date(at));
    sessionTime.set(id as string, at);
  }
  let i = 0;
  for (const location of check.locations) {
    for (;;) {
      const { jobs } = await post<{ jobs: Job[] }>('/v1/agent/claim', { max: 100, waitSeconds: 0, agent: { id: `agent-${location}`, version: '1.0.0', checkTypes: [check.checkType], runtimes: [] } }, location);
      if (jobs.length === 0) break;
      const envelopes: ResultEnvelope[] = jobs.map((job) => {
        const at = sessionTime.get(job.sequenceId ?? '') as number;
        const chosen = spec(at, location, i++);
        rows.push({ checkId: check.id, at, responseTime: chosen.responseTime, up: !chosen.hasFailures });
        return envelopeFor(job, check, { startedAt: new Date(at), ...chosen });
      });
      const answer = await post<{ accepted: string[]; rejected: unknown[] }>('/v1/agent/results', { results: envelopes }, location);
      expect(answer.rejected).toEqual([]);
    }
  }
}

const definitions = {
  dashboards: [
    {
      dashboardId: 'wall',
      customUrl: 'status',
      header: 'Lab status',
      description: 'What the lab network sees, every minute.',
      tags: ['web', 'db'],
      enableIncidents: true,
      checksPerPage: 20,
      customCSS: 'h3 { letter-spacing: 0.5px; } .check { border-radius: 10px; } body { background-color: rgb(255, 0, 0); } .dash-frame { display: none; }',
    },
    { dashboardId: 'paged', tags: ['web', 'db'], checksPerPage: 2, paginationRate: 30, showP99: false },
    { dashboardId: 'private', isPrivate: true, keys: [{ id: 'wall', rawKey: PRIVATE_KEY }], tags: ['internal'], header: 'Internal' },
  ],
  incidents: [
    {
      id: '4f6c2a1e-1c1b-4c43-9d7e-3b9a0c1d2e3f',
      name: 'Login slower than usual',
      impact: 'MINOR',
      dashboard: 'wall',
      incidentUpdates: [
        { status: 'INVESTIGATING', description: 'Logins take seconds.', created_at: 'START1' },
        { status: 'IDENTIFIED', description: 'A slow database replica.', created_at: 'START2' },
      ],
    },
    {
      id: 'upgrade',
      name: 'Planned upgrade',
      impact: 'MAINTENANCE',
      dashboard: 'wall',
      startedAt: 'TOMORROW',
      incidentUpdates: [{ status: 'INVESTIGATING', description: 'Announced ahead.', created_at: 'START1' }],
    },
    {
      id: 'old-outage',
      name: 'Last week outage',
      impact: 'MAJOR',
      dashboard: 'wall',
      incidentUpdates: [
        { status: 'INVESTIGATING', description: 'Down.', created_at: '2026-01-01T10:00:00Z' },
        { status: 'RESOLVED', description: 'Back.', created_at: '2026-01-01T11:00:00Z' },
      ],
    },
  ],
};

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'outpost-dashboards-browser-'));
  // Kept after the run (one fixed directory, overwritten by the next run): the test's artifacts.
  shots = path.join(tmpdir(), 'outpost-dashboard-screenshots');
  await rm(shots, { recursive: true, force: true });
  await mkdir(shots, { recursive: true });
  store = (await openTestStore(dir)) as SqliteStore;
  await store.syncLocations([
    { id: A, name: 'Office A' },
    { id: B, name: 'Office B' },
  ]);
  await store.syncChecks(CHECKS, new Date());
  for (const location of [A, B]) {
    const raw = newAgentKey().rawKey;
    agentKeys.set(location, raw);
    await store.createKey({ id: randomUUID(), locationId: location, maskedKey: maskKey(raw), created_at: new Date().toISOString(), updated_at: new Date().toISOString(), hash: keyHash(raw) });
  }
  const dashboards = new SqliteDashboardStore(store.access);
  const windows = new SqliteMaintenanceWindowStore(store.access);
  t0 = Date.now();
  const text = JSON.stringify(definitions)
    .replaceAll('START1', new Date(t0 - 2 * HOUR).toISOString())
    .replace('START2', new Date(t0 - HOUR).toISOString())
    .replace('TOMORROW', new Date(t0 + DAY).toISOString());
  const root = Fields.root(JSON.parse(text), '$');
  const parsed = parseDashboards(root);
  const incidents = parseIncidents(root, new Set(parsed.map((d) => d.definition.dashboardId)));
  expect(root.issues).toEqual([]);
  await dashboards.sync(fileDashboards(parsed), incidents, new Date());
  // The database check is in a maintenance window now.
  await windows.sync(
    [{ id: 7, name: 'Database upgrade', tags: ['db'], startsAt: new Date(t0 - HOUR).toISOString(), endsAt: new Date(t0 + 2 * HOUR).toISOString(), repeatUnit: null, repeatInterval: null, repeatEndsAt: null }],
    new Date(),
  );
  const router = new Router(
    [...agentRoutes({ store, jobSignal: new JobSignal(), artifactsDir: path.join(dir, 'artifacts'), logger }), ...dashboardRoutes({ store, dashboards, windows }), ...analyticsRoutes({ store, analytics: new SqliteAnalyticsStore(store.access) })],
    {
      publicKey: 'dashboards-browser-key',
      agentKey: (token) => store.keyByHash(keyHash(token)),
      publicLimiter: new RateLimiter(600, 60),
      agentLimiter: new RateLimiter(AGENT_ROUTE_LIMIT_PER_MINUTE, 60),
      anonymousLimiter: new RateLimiter(600, 60),
      logger,
    },
  );
  server = await startApiServer(router, { host: '127.0.0.1', port: 0 });
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  // A week, every half hour, 7 minutes off the half hours so no result sits on a window's edge.
  const week = Array.from({ length: (7 * DAY) / STEP }, (_, k) => t0 - 7 * 60_000 - k * STEP).reverse();
  const random = lcg(42);
  // Home failing now and then, never in its latest run (which one in 37 runs of this test would otherwise be).
  await postWeek(home, week, (at) => ({ responseTime: Math.round(80 + random() * 400), hasFailures: at !== week.at(-1) && Math.floor(at / STEP) % 37 === 0 }));
  // Login degraded in its latest runs.
  await postWeek(login, week, (at) => ({ responseTime: Math.round(200 + random() * 1800), isDegraded: at > t0 - 3 * HOUR }));
  // The database port failing in its latest run, and for six hours three days ago.
  await postWeek(db, week, (at) => ({ responseTime: Math.round(2 + random() * 10), hasFailures: at === week.at(-1) || (at > t0 - 3 * DAY && at < t0 - 3 * DAY + 6 * HOUR) }));
  await postWeek(hostile, week.slice(-10), () => ({ responseTime: 42 }));
  await postWeek(secretCheck, week.slice(-10), () => ({ responseTime: 5 }));
}, 180_000);

afterAll(async () => {
  if (server) await closeApiServer(server, 1_000);
  await store?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

// ---- the brute-force figures, from the rows posted ----

function expectedUptime(checkId: string, now: number, ms: number): number | null {
  const inWindow = rows.filter((r) => r.checkId === checkId && r.at >= now - ms && r.at < now);
  return inWindow.length === 0 ? null : inWindow.filter((r) => r.up).length / inWindow.length;
}

/** Linear interpolation between closest ranks, written out from its definition (numpy's default). */
function bruteQuantile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  const rank = p * (sorted.length - 1);
  const below = sorted[Math.floor(rank)] as number;
  const above = sorted[Math.ceil(rank)] as number;
  return below + (above - below) * (rank - Math.floor(rank));
}

function window24h(checkId: string, now: number): Row[] {
  return rows.filter((r) => r.checkId === checkId && r.at >= now - DAY && r.at < now);
}

// ---- the browser ----

interface Request {
  url(): string;
}
interface ConsoleMessage {
  type(): string;
  text(): string;
}
interface Response {
  status(): number;
}
interface BrowserPage {
  on(event: 'request', listener: (request: Request) => void): void;
  on(event: 'console', listener: (message: ConsoleMessage) => void): void;
  addInitScript(script: string): Promise<void>;
  goto(url: string): Promise<Response | null>;
  content(): Promise<string>;
  evaluate<R>(fn: string): Promise<R>;
  screenshot(options: { path: string; fullPage: boolean }): Promise<Buffer>;
  fill(selector: string, value: string): Promise<void>;
  click(selector: string): Promise<void>;
  waitForURL(url: string): Promise<void>;
  close(): Promise<void>;
}
interface BrowserContext {
  newPage(): Promise<BrowserPage>;
  close(): Promise<void>;
}
interface Browser {
  newContext(options?: { viewport?: { width: number; height: number }; colorScheme?: 'light' | 'dark'; isMobile?: boolean; deviceScaleFactor?: number }): Promise<BrowserContext>;
  close(): Promise<void>;
}

interface Shown {
  now: number;
  checks: Array<{
    id: string;
    name: string;
    status: string;
    figures: Record<string, string>;
    shownFigures: Record<string, string>;
    buckets: number;
    points: Array<{ count: number; mean: number }>;
    lines: number;
  }>;
  incidents: Array<{ id: string; active: string; state: string; text: string }>;
  maintenance: string[];
  loginForm: boolean;
  refresh: string | null;
  width: number;
  scrollWidth: number;
  background: string;
  frameDisplay: string;
  h3Spacing: string | null;
}

/** Runs in the page (as a string: the test's tsconfig has no DOM types). */
const READ_PAGE = `(() => {
  const main = document.querySelector('main');
  const checks = [...document.querySelectorAll('article.check')].map((a) => ({
    id: a.dataset.check,
    name: a.querySelector('h3').textContent,
    status: a.querySelector('.row .status').dataset.status,
    figures: Object.fromEntries([...a.querySelectorAll('dd[data-figure]')].map((d) => [d.dataset.figure, d.dataset.value])),
    shownFigures: Object.fromEntries([...a.querySelectorAll('dd[data-figure]')].map((d) => [d.dataset.figure, d.textContent])),
    buckets: Number(a.querySelector('svg.chart').dataset.buckets),
    points: [...a.querySelectorAll('svg.chart circle.pt')].map((c) => ({ count: Number(c.dataset.count), mean: Number(c.dataset.mean), title: c.querySelector('title')?.textContent })),
    lines: a.querySelectorAll('svg.chart polyline').length,
  }));
  return {
    now: main ? Number(main.dataset.now) : 0,
    checks,
    incidents: [...document.querySelectorAll('[data-incident]')].map((s) => ({ id: s.dataset.incident, active: s.dataset.active, state: s.dataset.state, text: s.textContent })),
    maintenance: [...document.querySelectorAll('[data-maintenance]')].map((s) => s.textContent),
    loginForm: document.querySelector('form.login input[name=key]') !== null,
    refresh: document.querySelector('meta[http-equiv=refresh]')?.getAttribute('content') ?? null,
    width: window.innerWidth,
    scrollWidth: document.documentElement.scrollWidth,
    background: getComputedStyle(document.body).backgroundColor,
    frameDisplay: getComputedStyle(document.querySelector('.dash-frame')).display,
    h3Spacing: document.querySelector('article.check h3') ? getComputedStyle(document.querySelector('article.check h3')).letterSpacing : null,
  };
})()`;

const WATCH_CSP = `window.__violations = []; document.addEventListener('securitypolicyviolation', (e) => window.__violations.push(e.violatedDirective + ' ' + e.blockedURI));`;

let browser: Browser | undefined;

async function open(url: string, options: Parameters<Browser['newContext']>[0], shot: string) {
  browser ??= (await (await chromium()).launch({ executablePath: '/usr/bin/chromium', args: CHROMIUM_FLAGS, headless: true })) as unknown as Browser;
  const context = await browser.newContext(options);
  const page = await context.newPage();
  const requests: string[] = [];
  const problems: string[] = [];
  page.on('request', (r) => requests.push(r.url()));
  page.on('console', (m) => {
    if (m.type() === 'error' || /Content.Security.Policy/i.test(m.text())) problems.push(m.text());
  });
  await page.addInitScript(WATCH_CSP);
  const response = await page.goto(url);
  const shown = await page.evaluate<Shown>(READ_PAGE);
  const violations = await page.evaluate<string[]>('window.__violations');
  const file = path.join(shots, `${shot}.png`);
  await page.screenshot({ path: file, fullPage: true });
  process.stdout.write(`dashboard screenshot: ${file}\n`);
  return { page, context, shown, requests, problems, violations, status: response?.status() ?? 0, file };
}

async function analyticsP9x(checkId: string, now: number): Promise<{ results: number; responseTime_p95: number; responseTime_p99: number }> {
  const query = `metrics=responseTime_p95,responseTime_p99&from=${Math.ceil((now - DAY) / 1000)}&to=${Math.ceil(now / 1000)}`;
  const response = await fetch(`${base}/v1/analytics/checks/${checkId}?${query}`, { headers: { authorization: 'Bearer dashboards-browser-key' } });
  expect(response.status).toBe(200);
  const report = (await response.json()) as { series: { data: { results: number; responseTime_p95: number; responseTime_p99: number }[] }[] };
  expect(report.series).toHaveLength(1);
  expect(report.series[0]?.data).toHaveLength(1);
  return report.series[0]?.data[0] as { results: number; responseTime_p95: number; responseTime_p99: number };
}

function expectOnlyOwnOrigin(requests: readonly string[]) {
  expect(requests.length).toBeGreaterThan(0);
  for (const url of requests) if (!url.startsWith('data:')) expect(new URL(url).origin, url).toBe(base);
}

afterAll(async () => {
  await browser?.close();
});

describe('dashboards in headless Chromium', () => {
  it('the wall dashboard, light, dark and phone-sized: statuses, uptime, charts, P95/P99, incident and maintenance as stored', { timeout: 180_000 }, async () => {
    const views = [
      { shot: 'wall-light', query: '?theme=light', options: { viewport: { width: 1280, height: 900 }, colorScheme: 'light' as const } },
      { shot: 'wall-dark', query: '?theme=dark', options: { viewport: { width: 1280, height: 900 }, colorScheme: 'light' as const } },
      { shot: 'wall-auto-dark', query: '', options: { viewport: { width: 1280, height: 900 }, colorScheme: 'dark' as const } },
      { shot: 'wall-phone', query: '', options: { viewport: { width: 390, height: 844 }, isMobile: true, deviceScaleFactor: 2, colorScheme: 'light' as const } },
    ];
    const backgrounds = new Map<string, string>();
    for (const view of views) {
      const { shown, requests, problems, violations, status, context } = await open(`${base}/dashboards/status${view.query}`, view.options, view.shot);
      expect(status).toBe(200);
      expectOnlyOwnOrigin(requests);
      expect(violations).toEqual([]);
      expect(problems).toEqual([]);
      backgrounds.set(view.shot, shown.background);
      // customCSS applies inside the dashboard only: its h3 rule does, its body and frame rules reach nothing.
      expect(shown.h3Spacing).toBe('0.5px');
      expect(shown.background).not.toBe('rgb(255, 0, 0)');
      expect(shown.frameDisplay).toBe('block');
      // Nothing wider than the viewport, the phone's included.
      expect(shown.scrollWidth).toBeLessThanOrEqual(shown.width);
      expect(shown.refresh).toBe(`60;url=${view.query === '' ? '?' : view.query}`);
      const now = shown.now;
      expect(Math.abs(now - Date.now())).toBeLessThan(10 * 60_000);
      // The dashboard's tags: web or db; not the internal check; sorted by name within groups (web first, then db).
      expect(shown.checks.map((c) => c.id)).toEqual(['hostile', 'home', 'login', 'db']);
      const byId = new Map(shown.checks.map((c) => [c.id, c]));
      expect(byId.get('home')?.status).toBe('passing');
      expect(byId.get('login')?.status).toBe('degraded');
      expect(byId.get('db')?.status).toBe('failing');
      expect(byId.get('hostile')?.name).toBe(HOSTILE);
      for (const check of shown.checks) {
        for (const [name, ms] of [
          ['uptime-24h', DAY],
          ['uptime-7d', 7 * DAY],
          ['uptime-30d', 30 * DAY],
        ] as const) {
          const expected = expectedUptime(check.id, now, ms);
          expect(check.figures[name], `${check.id} ${name}`).toBe(expected === null ? '' : String(expected));
          expect(check.shownFigures[name]).toBe(expected === null ? '—' : `${(expected * 100).toFixed(2)}%`);
        }
        const day = window24h(check.id, now);
        // One point per one-hour bucket that has results; every result of the last 24 h in exactly one of them.
        expect(check.buckets).toBe(24);
        const filled = new Set(day.map((r) => Math.floor((r.at - (now - DAY)) / HOUR)));
        expect(check.points.length).toBe(filled.size);
        expect(check.points.reduce((n, p) => n + p.count, 0)).toBe(day.length);
        expect(check.figures.p95).toBe(String(bruteQuantile(day.map((r) => r.responseTime), 0.95)));
        expect(check.figures.p99).toBe(String(bruteQuantile(day.map((r) => r.responseTime), 0.99)));
        // The analytics route answers the same P95/P99 for the same window (results sit 7 minutes off the half
        // hours, so whole seconds bound the same rows as the page's milliseconds).
        const report = await analyticsP9x(check.id, now);
        expect(report.results).toBe(day.length);
        expect(check.figures.p95).toBe(String(report.responseTime_p95));
        expect(check.figures.p99).toBe(String(report.responseTime_p99));
      }
      // db failed for six hours three days ago: its 7-day uptime is below 100 %, its 24-hour one too (the latest run failed).
      expect(Number(byId.get('db')?.figures['uptime-7d'])).toBeLessThan(1);
      // The active incident first, then the scheduled one, then the resolved one under "Past incidents".
      expect(shown.incidents.map((i) => [i.id, i.active, i.state])).toEqual([
        ['4f6c2a1e-1c1b-4c43-9d7e-3b9a0c1d2e3f', 'true', 'active'],
        ['upgrade', 'false', 'scheduled'],
        ['old-outage', 'false', 'past'],
      ]);
      expect(shown.incidents[0]?.text).toContain('Login slower than usual');
      // Updates newest first.
      expect(shown.incidents[0]?.text.indexOf('IDENTIFIED')).toBeLessThan(shown.incidents[0]?.text.indexOf('INVESTIGATING') ?? -1);
      expect(shown.maintenance.join(' ')).toContain('Database upgrade');
      await context.close();
    }
    // The themes differ: light, dark by ?theme=dark, and dark by the system's preference.
    expect(backgrounds.get('wall-light')).not.toBe(backgrounds.get('wall-dark'));
    expect(backgrounds.get('wall-auto-dark')).toBe(backgrounds.get('wall-dark'));
    expect(backgrounds.get('wall-phone')).toBe(backgrounds.get('wall-light'));
  });

  it('paginates and rotates: checksPerPage per page, the meta refresh goes to the next page after paginationRate', { timeout: 120_000 }, async () => {
    const first = await open(`${base}/dashboards/paged`, { viewport: { width: 1024, height: 800 } }, 'paged-1');
    expect(first.shown.checks.map((c) => c.id)).toEqual(['hostile', 'home']);
    expect(first.shown.refresh).toBe('30;url=?page=2');
    expect(first.shown.checks[0]?.figures.p99).toBeUndefined();
    expectOnlyOwnOrigin(first.requests);
    await first.context.close();
    const second = await open(`${base}/dashboards/paged?page=2`, { viewport: { width: 1024, height: 800 } }, 'paged-2');
    expect(second.shown.checks.map((c) => c.id)).toEqual(['login', 'db']);
    expect(second.shown.refresh).toBe('30;url=?');
    await second.context.close();
  });

  it('a private dashboard without its key shows the login form only; the form’s key opens it', { timeout: 120_000 }, async () => {
    const closed = await open(`${base}/dashboards/private`, { viewport: { width: 1024, height: 800 } }, 'private-login');
    expect(closed.status).toBe(401);
    expect(closed.shown.loginForm).toBe(true);
    expect(closed.shown.checks).toEqual([]);
    const html = await closed.page.content();
    expect(html).not.toContain('Payroll');
    expect(html).not.toContain('Internal');
    expectOnlyOwnOrigin(closed.requests);
    expect(closed.violations).toEqual([]);
    await closed.page.fill('input[name=key]', PRIVATE_KEY);
    await closed.page.click('button[type=submit]');
    await closed.page.waitForURL(`${base}/dashboards/private`);
    const opened = await closed.page.evaluate<Shown>(READ_PAGE);
    expect(opened.loginForm).toBe(false);
    expect(opened.checks.map((c) => c.name)).toEqual(['Payroll export']);
    await closed.page.screenshot({ path: path.join(shots, 'private-open.png'), fullPage: true });
    process.stdout.write(`dashboard screenshot: ${path.join(shots, 'private-open.png')}\n`);
    expectOnlyOwnOrigin(closed.requests);
    await closed.context.close();
  });
});
