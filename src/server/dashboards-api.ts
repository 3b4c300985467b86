// Dashboards and incidents over HTTP (docs/dashboards.md): PUT, GET and
// DELETE /v1/dashboards/{dashboardId} and GET /v1/incidents/{id} with the
// API key; the pages themselves at /dashboards/{customUrl, dashboardId or id},
// without credentials (rate limited per client address), a private one
// behind one of its keys: a login form that sets a cookie for that
// dashboard, or `?key=`. Keys are compared as SHA-256 digests in constant
// time, and wrong keys are limited per client address.

import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { parseDashboard } from '../checks/dashboard-fields.js';
import type { DashboardDefinition } from '../core/dashboard.js';
import type { CheckResultEntry } from '../core/result-entry.js';
import type { MaintenanceWindowStore } from '../store/maintenance-windows.js';
import { resultLocations } from '../store/heartbeats.js';
import { finalOutcome } from '../store/session-status.js';
import type { DashboardKeyChange, DashboardRecord, DashboardStore, FileDashboard, IncidentRecord, ResultSample, StoredDashboardKey } from '../store/dashboards.js';
import type { Store, StoredCheck } from '../store/store.js';
import { CHART_RANGES, type ChartRange, type CheckFigures, checkFigures, UPTIME_WINDOWS } from './dashboard-stats.js';
import { type CheckStatus, type PageCheck, type PageGroup, pageHeaders, renderDashboardPage, renderLoginPage, THEMES, type Theme } from './dashboard-page.js';
import { ApiError, badRequest, notFound } from './http/api-error.js';
import { FiguresCache } from './figures-cache.js';
import { keyHash } from './http/credentials.js';
import { latestFinals } from './latest-finals.js';
import { RateLimiter } from './http/rate-limit.js';
import { readRecordBody } from './http/record-body.js';
import type { Route } from './http/router.js';
import { activeWindows, tagsOf, windowInEffect } from './maintenance.js';

/** A check's figures (uptime, chart, P95/P99), as computed for a page and cached; its status is read fresh for each page. */
export type CheckComputed = CheckFigures;

export interface DashboardsApiDeps {
  store: Store;
  dashboards: DashboardStore;
  windows: MaintenanceWindowStore;
  /** Wrong keys (form or `?key=`) per client address; 10 a minute unless a test gives its own. */
  keyLimiter?: RateLimiter;
  now?: () => Date;
  /** Per-check figures shared by every page for FIGURES_TTL_MS; a test may give its own. */
  figuresCache?: FiguresCache<CheckComputed>;
}

/** Wrong access keys a client address may try per minute. */
export const KEY_ATTEMPTS_PER_MINUTE = 10;
/** How long the login cookie lasts. */
export const KEY_COOKIE_MAX_AGE_SECONDS = 30 * 86_400;

/** A key's masked form: eight stars and its last four characters. */
export function maskDashboardKey(rawKey: string): string {
  return `${'*'.repeat(8)}${rawKey.slice(-4)}`;
}

/** The checks file's dashboards with their keys' digests (the file holds the raw keys). */
export function fileDashboards(parsed: ReadonlyArray<{ definition: DashboardDefinition; keys: ReadonlyArray<{ id: string; rawKey?: string }> }>): FileDashboard[] {
  return parsed.map(({ definition, keys }) => ({
    definition,
    keys: keys.flatMap((k) => (k.rawKey === undefined ? [] : [{ id: k.id, hash: keyHash(k.rawKey), maskedKey: maskDashboardKey(k.rawKey) }])),
  }));
}

/** Whether `given` is one of the keys, in a time that depends neither on which one nor on where they differ. */
export function keyOpens(keys: readonly StoredDashboardKey[], given: string | undefined): boolean {
  if (given === undefined || given.length === 0 || given.length > 256) return false;
  const digest = createHash('sha256').update(given, 'utf8').digest();
  let opens = false;
  for (const key of keys) {
    const stored = Buffer.from(key.hash, 'hex');
    // Every key is compared; no early exit.
    if (stored.length === digest.length && timingSafeEqual(stored, digest)) opens = true;
  }
  return opens;
}

/** The service's record, plus `source`; `rawKeys`: the raw values given or made in this request (answered once). */
export function dashboardAnswer(record: DashboardRecord, rawKeys: ReadonlyMap<string, string> = new Map()): Record<string, unknown> {
  return {
    id: record.id,
    ...record.definition,
    keys: record.keys.map((k) => ({
      id: k.id,
      ...(rawKeys.has(k.id) ? { rawKey: rawKeys.get(k.id) } : {}),
      maskedKey: k.maskedKey,
      created_at: k.created_at,
      updated_at: k.updated_at,
    })),
    source: record.source,
    created_at: record.created_at,
    updated_at: record.updated_at,
  };
}

/** The incident record; only the newest update unless `all`. */
export function incidentAnswer(incident: IncidentRecord, all: boolean): Record<string, unknown> {
  return { ...incident, incidentUpdates: all ? incident.incidentUpdates : incident.incidentUpdates.slice(0, 1) };
}

function onlyParameters(query: URLSearchParams, known: readonly string[]): void {
  const seen = new Set<string>();
  for (const name of query.keys()) {
    if (!known.includes(name)) throw badRequest(`unknown query parameter ${name}`, { parameter: name });
    if (seen.has(name)) throw badRequest(`query parameter ${name} is given more than once`, { parameter: name });
    seen.add(name);
  }
}

/** The cookie that carries a dashboard's key: one per dashboard (by its numeric id). */
export function keyCookieName(dashboard: number): string {
  return `outpost_dashboard_${dashboard}`;
}

function cookie(req: IncomingMessage, name: string): string | undefined {
  const header = req.headers.cookie;
  if (!header) return undefined;
  for (const part of header.split(';')) {
    const at = part.indexOf('=');
    if (at < 0 || part.slice(0, at).trim() !== name) continue;
    try {
      return decodeURIComponent(part.slice(at + 1).trim());
    } catch {
      return undefined;
    }
  }
  return undefined;
}

const FORM_LIMIT = 4096;
const FORM_DEADLINE_MS = 10_000;

/** The `key` of an urlencoded login form, at most 4 KiB, within 10 s. */
async function formKey(req: IncomingMessage): Promise<string | undefined> {
  const type = req.headers['content-type'] ?? '';
  if (!type.startsWith('application/x-www-form-urlencoded')) throw new ApiError(415, 'the login form is application/x-www-form-urlencoded');
  const chunks: Buffer[] = [];
  let size = 0;
  let late = false;
  const timer = setTimeout(() => {
    late = true;
    // Ends the iteration below: a client this slow gets its socket back, not an answer.
    req.destroy();
  }, FORM_DEADLINE_MS);
  try {
    for await (const chunk of req as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size > FORM_LIMIT) throw new ApiError(413, `the form is larger than ${FORM_LIMIT} bytes`);
      chunks.push(chunk);
    }
  } catch (error) {
    if (!late) throw error;
  } finally {
    clearTimeout(timer);
  }
  if (late) throw new ApiError(408, `the form did not arrive within ${FORM_DEADLINE_MS / 1000} s`);
  return new URLSearchParams(Buffer.concat(chunks).toString('utf8')).get('key') ?? undefined;
}

/** A check's status from the latest FINAL of each location, worst first (as its badge says it). */
function worst(statuses: readonly CheckStatus[]): CheckStatus {
  if (statuses.length === 0) return 'no data';
  if (statuses.includes('failing')) return 'failing';
  if (statuses.includes('degraded')) return 'degraded';
  if (statuses.every((s) => s === 'no data')) return 'no data';
  return 'passing';
}

/** One location's status from its newest FINAL, as the badge reads it. */
function locationStatus(entry: CheckResultEntry): CheckStatus {
  const outcome = finalOutcome(entry);
  return outcome === 'passed' ? 'passing' : outcome === 'degraded' ? 'degraded' : 'failing';
}

/** Which checks a dashboard shows: any of its tags (all of them with useTagsAndOperator); every check when it has none. */
export function dashboardChecks(definition: DashboardDefinition, checks: readonly StoredCheck[]): StoredCheck[] {
  const { tags } = definition;
  return checks
    .filter((check) => {
      if (tags.length === 0) return true;
      const own = tagsOf(check.definition);
      return definition.useTagsAndOperator ? tags.every((t) => own.includes(t)) : tags.some((t) => own.includes(t));
    })
    .sort((a, b) => a.name.localeCompare(b.name) || a.id.localeCompare(b.id));
}

/** Groups in page order: by the first of the dashboard's tags a check has (or its own first tag when the dashboard has none); untagged last. */
export function groupOf(definition: DashboardDefinition, check: StoredCheck): string | null {
  const own = tagsOf(check.definition);
  const tag = definition.tags.length > 0 ? definition.tags.find((t) => own.includes(t)) : own[0];
  return tag ?? null;
}

export function dashboardRoutes(deps: DashboardsApiDeps): Route[] {
  const { dashboards, store, windows } = deps;
  const now = deps.now ?? (() => new Date());
  const keyLimiter = deps.keyLimiter ?? new RateLimiter(KEY_ATTEMPTS_PER_MINUTE, 60);

  const keyAddress = (req: IncomingMessage) => `address:${req.socket.remoteAddress ?? 'unknown'}`;
  const tooMany = (retryAfterSeconds: number) => new ApiError(429, 'Too Many Requests', {}, { 'retry-after': String(retryAfterSeconds) });
  const wrongKey = (req: IncomingMessage) => {
    const decision = keyLimiter.take(keyAddress(req), now().getTime());
    if (!decision.allowed) throw tooMany(decision.retryAfterSeconds);
  };
  /**
   * Called before any key (form, `?key=` or cookie) is compared: while an
   * address is limited none is, so that a right key answers the same 429 as
   * a wrong one and the limit is no oracle. A cookie is a key the client
   * sends like any other, so it waits too (docs/dashboards.md, Private dashboards).
   */
  const keysAllowed = (req: IncomingMessage) => {
    const decision = keyLimiter.peek(keyAddress(req), now().getTime());
    if (!decision.allowed) throw tooMany(decision.retryAfterSeconds);
  };

  const figuresCache = deps.figuresCache ?? new FiguresCache<CheckComputed>();

  /** What a page shows of one check that costs reads of many results: cached for FIGURES_TTL_MS (figures-cache.ts). */
  async function computeFigures(checkId: string, range: ChartRange, at: Date): Promise<CheckComputed> {
    // The store's reads are synchronous: between checks, agents' requests get their turn.
    await nextTurn();
    const samples: ResultSample[] = await dashboards.samples(checkId, new Date(at.getTime() - CHART_RANGES[range].ms), at);
    const availability = await dashboards.availability(checkId, at, UPTIME_WINDOWS.map(([, ms]) => ms));
    return checkFigures(samples, at.getTime(), range, availability);
  }

  /** Each location's status from its newest FINAL: one index lookup each (latest-finals.ts), so read fresh for every page. */
  async function locationStatuses(checkId: string, locationIds: readonly string[]): Promise<Array<{ id: string; status: CheckStatus; responseTime: number | null }>> {
    const newest = await latestFinals(store, checkId, locationIds);
    return locationIds.map((id) => {
      const entry = newest.get(id);
      return { id, status: entry ? locationStatus(entry) : ('no data' as const), responseTime: entry?.responseTime ?? null };
    });
  }

  async function renderPage(record: DashboardRecord, query: URLSearchParams, theme: Theme, nonce: string, keyInQuery: string | undefined): Promise<string> {
    const definition = record.definition;
    const at = now();
    const t = at.getTime();
    const rangeParam = query.get('range') ?? '24h';
    if (!Object.hasOwn(CHART_RANGES, rangeParam)) throw badRequest(`range must be one of ${Object.keys(CHART_RANGES).join(', ')}, not ${JSON.stringify(rangeParam)}`, { parameter: 'range' });
    const range = rangeParam as ChartRange;
    const pageParam = query.get('page') ?? '1';
    if (!/^\d{1,6}$/.test(pageParam) || Number(pageParam) < 1) throw badRequest(`page must be a whole number from 1, not ${JSON.stringify(pageParam)}`, { parameter: 'page' });
    const selected = dashboardChecks(definition, await store.activeChecks());
    // Groups in order, each check in its group, then pages of checksPerPage (or one page when paginate is off).
    const groupNames: Array<string | null> = [];
    for (const check of selected) {
      const name = groupOf(definition, check);
      if (!groupNames.includes(name)) groupNames.push(name);
    }
    // The dashboard's tags in its order (or the tags' names when it has none), untagged last.
    const rank = (name: string | null) => (name === null ? Number.POSITIVE_INFINITY : definition.tags.length > 0 ? definition.tags.indexOf(name) : 0);
    groupNames.sort((a, b) => rank(a) - rank(b) || (a ?? '').localeCompare(b ?? ''));
    const ordered = groupNames.flatMap((name) => selected.filter((c) => groupOf(definition, c) === name));
    const perPage = definition.paginate ? definition.checksPerPage : Math.max(1, ordered.length);
    const pages = Math.max(1, Math.ceil(ordered.length / perPage));
    const page = Math.min(Number(pageParam), pages);
    const shown = ordered.slice((page - 1) * perPage, page * perPage);
    const locationNames = new Map((await store.locations()).map((l) => [l.id, l.name]));
    const allWindows = (await windows.all()).filter((w) => windowInEffect(w, at));
    const checks: PageCheck[] = [];
    for (const check of shown) {
      const ids = resultLocations(check);
      const figures = await figuresCache.get(`${check.id}\n${range}`, t, () => computeFigures(check.id, range, at));
      const locations = (await locationStatuses(check.id, ids)).map((l) => ({ ...l, name: locationNames.get(l.id) ?? l.id }));
      const tags = tagsOf(check.definition);
      checks.push({
        id: check.id,
        name: check.name,
        checkType: check.checkType,
        tags,
        status: worst(locations.map((l) => l.status)),
        locations,
        figures,
        inMaintenance: activeWindows(allWindows, { id: check.id, name: check.name, tags }, at).length > 0,
      });
    }
    const groups: PageGroup[] = [];
    for (const check of checks) {
      const stored = shown.find((c) => c.id === check.id) as StoredCheck;
      const name = groupOf(definition, stored);
      const last = groups.at(-1);
      if (last && last.name === name) last.checks.push(check);
      else groups.push({ name, checks: [check] });
    }
    const keep = new URLSearchParams();
    if (theme !== 'auto') keep.set('theme', theme);
    if (range !== '24h') keep.set('range', range);
    if (keyInQuery !== undefined) keep.set('key', keyInQuery);
    // Windows in effect that hold back a check of this dashboard.
    const maintenance = allWindows.filter((w) => selected.some((c) => activeWindows([w], { id: c.id, name: c.name, tags: tagsOf(c.definition) }, at).length > 0));
    return renderDashboardPage({
      dashboard: definition,
      groups,
      page,
      pages,
      totalChecks: ordered.length,
      range,
      theme,
      now: t,
      nonce,
      keep,
      incidents: definition.enableIncidents ? await dashboards.incidentsOf(record.id) : [],
      maintenance,
    });
  }

  async function dashboardPage(ref: string, query: URLSearchParams, req: IncomingMessage, res: ServerResponse, failed = false): Promise<'streamed'> {
    const record = await dashboards.dashboardByRef(ref);
    if (!record) throw notFound('dashboard', ref);
    onlyParameters(query, ['page', 'theme', 'range', 'key']);
    const themeParam = query.get('theme') ?? 'auto';
    if (!(THEMES as readonly string[]).includes(themeParam)) throw badRequest(`theme must be one of ${THEMES.join(', ')}, not ${JSON.stringify(themeParam)}`, { parameter: 'theme' });
    const theme = themeParam as Theme;
    const nonce = randomBytes(18).toString('base64');
    let keyInQuery: string | undefined;
    if (record.definition.isPrivate) {
      const fromQuery = query.get('key') ?? undefined;
      const fromCookie = cookie(req, keyCookieName(record.id));
      if (fromQuery !== undefined || fromCookie !== undefined) keysAllowed(req);
      const opened = (fromQuery !== undefined && keyOpens(record.keys, fromQuery)) || (fromQuery === undefined && keyOpens(record.keys, fromCookie));
      if (!opened) {
        if (fromQuery !== undefined || fromCookie !== undefined) wrongKey(req);
        const html = renderLoginPage({ action: `/dashboards/${encodeURIComponent(ref)}/login`, nonce, theme, failed: failed || fromQuery !== undefined });
        res.writeHead(401, pageHeaders(nonce, html, true));
        res.end(html);
        return 'streamed';
      }
      keyInQuery = fromQuery;
    }
    const html = await renderPage(record, query, theme, nonce, keyInQuery);
    res.writeHead(200, pageHeaders(nonce, html, record.definition.isPrivate));
    res.end(html);
    return 'streamed';
  }

  return [
    {
      method: 'PUT',
      path: '/v1/dashboards/:dashboardId',
      auth: 'public',
      bodyLimit: 256 * 1024,
      async handle({ params, body, query }) {
        onlyParameters(query, []);
        const dashboardId = params.dashboardId as string;
        const parsed = readRecordBody(body, (fields) => parseDashboard(fields, { dashboardId, fromFile: false }));
        const existing = await dashboards.dashboard(dashboardId);
        const stored = new Set(existing?.keys.map((k) => k.id) ?? []);
        const rawKeys = new Map<string, string>();
        const changes: DashboardKeyChange[] = [];
        for (const key of parsed.keys) {
          if (key.rawKey !== undefined) {
            rawKeys.set(key.id, key.rawKey);
            changes.push({ id: key.id, hash: keyHash(key.rawKey), maskedKey: maskDashboardKey(key.rawKey) });
          } else if (stored.has(key.id)) {
            changes.push({ id: key.id, keep: true });
          } else {
            throw badRequest(`$.keys: ${key.id} is not a key of dashboard ${dashboardId}: give its rawKey`, { problems: [`$.keys: ${key.id} has no rawKey`] });
          }
        }
        // A private dashboard with no key given and none kept: one is made, and answered once.
        if (parsed.definition.isPrivate && changes.length === 0) {
          const rawKey = `dk_${randomBytes(24).toString('base64url')}`;
          rawKeys.set('key-1', rawKey);
          changes.push({ id: 'key-1', hash: keyHash(rawKey), maskedKey: maskDashboardKey(rawKey) });
        }
        const outcome = await dashboards.put(parsed.definition, changes, now());
        if (outcome.kind === 'conflict') throw new ApiError(409, outcome.message, { dashboardId });
        return { status: outcome.kind === 'created' ? 201 : 200, body: dashboardAnswer(outcome.record, rawKeys) };
      },
    },
    {
      method: 'GET',
      path: '/v1/dashboards/:dashboardId',
      auth: 'public',
      bodyLimit: 0,
      async handle({ params, query }) {
        onlyParameters(query, []);
        const record = await dashboards.dashboard(params.dashboardId as string);
        if (!record) throw notFound('dashboard', params.dashboardId as string);
        return { status: 200, body: dashboardAnswer(record) };
      },
    },
    {
      method: 'DELETE',
      path: '/v1/dashboards/:dashboardId',
      auth: 'public',
      bodyLimit: 0,
      async handle({ params, query }) {
        onlyParameters(query, []);
        const id = params.dashboardId as string;
        const deleted = await dashboards.deleteDashboard(id);
        if (deleted === 'file') throw new ApiError(409, `dashboard ${id} is defined in the checks file: remove it there`, { dashboardId: id });
        if (!deleted) throw notFound('dashboard', id);
        return { status: 204 };
      },
    },
    {
      method: 'GET',
      path: '/v1/incidents/:id',
      auth: 'public',
      bodyLimit: 0,
      async handle({ params, query }) {
        onlyParameters(query, ['includeAllIncidentUpdates']);
        const all = query.get('includeAllIncidentUpdates') ?? 'false';
        if (all !== 'true' && all !== 'false') throw badRequest(`includeAllIncidentUpdates must be true or false, not ${JSON.stringify(all)}`, { parameter: 'includeAllIncidentUpdates' });
        const incident = await dashboards.incident(params.id as string);
        if (!incident) throw notFound('incident', params.id as string);
        return { status: 200, body: incidentAnswer(incident, all === 'true') };
      },
    },
    {
      method: 'GET',
      path: '/dashboards/:ref',
      auth: 'none',
      bodyLimit: 0,
      handle: ({ params, query, req, res }) => dashboardPage(params.ref as string, query, req, res),
    },
    {
      method: 'POST',
      path: '/dashboards/:ref/login',
      auth: 'none',
      bodyLimit: 0,
      async handle({ params, req, res }) {
        const ref = params.ref as string;
        const record = await dashboards.dashboardByRef(ref);
        if (!record) throw notFound('dashboard', ref);
        const given = await formKey(req);
        if (!record.definition.isPrivate) return dashboardPage(ref, new URLSearchParams(), req, res, true);
        keysAllowed(req);
        if (!keyOpens(record.keys, given)) {
          wrongKey(req);
          // The form again, without looking at a cookie: one request, one key compared.
          const nonce = randomBytes(18).toString('base64');
          const html = renderLoginPage({ action: `/dashboards/${encodeURIComponent(ref)}/login`, nonce, theme: 'auto', failed: true });
          res.writeHead(401, pageHeaders(nonce, html, true));
          res.end(html);
          return 'streamed';
        }
        // One cookie per dashboard; Strict: a link from another site does not carry it.
        res.writeHead(303, {
          location: `/dashboards/${encodeURIComponent(ref)}`,
          'set-cookie': `${keyCookieName(record.id)}=${encodeURIComponent(given as string)}; Path=/dashboards/; Max-Age=${KEY_COOKIE_MAX_AGE_SECONDS}; HttpOnly; SameSite=Strict`,
          'cache-control': 'no-store',
          'content-length': '0',
        });
        res.end();
        return 'streamed';
      },
    },
  ];
}
