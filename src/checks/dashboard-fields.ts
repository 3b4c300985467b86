// A dashboard's and an incident's fields, as the checks file (`dashboards`,
// `incidents`) and PUT /v1/dashboards/{dashboardId} give them: the service's
// field set, bounds and defaults (docs/dashboards.md). Every problem is named
// by its JSON path. Shared by checks-file.ts and the server's dashboards route.

import {
  DASHBOARD_WIDTHS,
  type DashboardDefinition,
  type DashboardKeyInput,
  DEFAULT_CHECKS_PER_PAGE,
  INCIDENT_IMPACTS,
  INCIDENT_STATUSES,
  type IncidentDefinition,
  type IncidentUpdateDefinition,
  MAX_CHECKS_PER_PAGE,
  MIN_CHECKS_PER_PAGE,
  PAGINATION_RATES,
  REFRESH_RATES,
} from '../core/dashboard.js';
import type { EnvironmentVariable } from '../core/protocol.js';
import type { Fields } from './fields.js';
import { parseTags } from './maintenance-windows.js';
import { UnknownVariableError, Variables } from './variables.js';

export const DASHBOARD_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
/** A subdomain's shape: it names the page at /dashboards/{customUrl}. */
export const CUSTOM_URL = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;
const KEY_ID = /^[A-Za-z0-9._-]{1,64}$/;
/** Printable ASCII without spaces: a key travels in a cookie and a query string. */
const RAW_KEY = /^[\x21-\x7e]{16,256}$/;
export const MAX_DASHBOARDS = 1_000;
export const MAX_KEYS = 20;
export const MAX_CUSTOM_CSS = 64 * 1024;
const MAX_INCIDENTS = 1_000;
const MAX_UPDATES = 100;
/** An inline logo or favicon (a data: URL) is at most this long. */
const MAX_DATA_URL = 64 * 1024;
const DATA_IMAGE = /^data:image\/(?:png|gif|jpeg|webp);base64,[A-Za-z0-9+/]+={0,2}$/;

/**
 * Fields the server answers with and nothing reads back: known, so that a
 * GET answer can be PUT back (or pasted into a checks file) as it is. Any
 * other field nobody asks for is named as a checks file's are
 * (unread-fields.ts) and refused by the PUT route (src/server/http/record-body.ts).
 */
const ANSWERED_DASHBOARD_FIELDS = ['source', 'id', 'created_at', 'updated_at'];
const ANSWERED_KEY_FIELDS = ['maskedKey', 'created_at', 'updated_at'];

function describe(value: unknown): string {
  return value === undefined ? 'nothing' : (JSON.stringify(value)?.slice(0, 80) ?? String(value));
}

function nullableString(item: Fields, name: string, maxLength: number): string | null {
  const value = item.string(name, { maxLength });
  return value === undefined || value === '' ? null : value;
}

function httpUrl(text: string): boolean {
  try {
    const url = new URL(text);
    return url.protocol === 'http:' || url.protocol === 'https:';
  } catch {
    return false;
  }
}

/** An http(s) URL, or for an image (`image`: true) also an inline `data:image/…;base64,` URL. */
function urlField(item: Fields, name: string, image: boolean): string | null {
  const value = nullableString(item, name, image ? MAX_DATA_URL : 2048);
  if (value === null) return null;
  if (httpUrl(value) && value.length <= 2048) return value;
  if (image && DATA_IMAGE.test(value)) return value;
  item.fail(item.at(name), image ? 'must be an http or https URL, or a data:image/(png|gif|jpeg|webp);base64 URL of at most 64 KiB' : 'must be an http or https URL');
  return null;
}

function enumNumber<T extends number>(item: Fields, name: string, allowed: readonly T[], fallback: T): T {
  const value = item.raw(name);
  if (value === undefined || value === null) return fallback;
  if (typeof value !== 'number' || !(allowed as readonly number[]).includes(value)) {
    item.fail(item.at(name), `must be one of ${allowed.join(', ')} (got ${describe(value)})`);
    return fallback;
  }
  return value as T;
}

/** Any C0 control character other than tab, newline, form feed and carriage return, or DEL. */
function hasControlCharacter(text: string): boolean {
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if ((c < 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0c && c !== 0x0d) || c === 0x7f) return true;
  }
  return false;
}

/** CSS at-rules a dashboard's customCSS may use; the others load things (@import, @font-face) or change scoping (@scope, @namespace). */
const CSS_AT_RULES = new Set(['media', 'supports', 'keyframes', '-webkit-keyframes', 'container', 'layer']);
/** Functions that fetch (url, image-set, image, src) or run script in old engines (expression). */
const CSS_FETCHING = /(?:url|image-set|-webkit-image-set|image|src|expression|element|cross-fade)\s*\(/i;

/**
 * Why customCSS cannot be confined to its dashboard, or undefined when it
 * can. The page puts it inside `@scope (.dash-scope) { … }` in its own
 * <style> element (src/server/dashboard-page.ts), so it must not be able to
 * close that block or that element: braces balance outside strings and
 * comments, and no `<` appears at all. Nothing in it may fetch (the page's
 * Content-Security-Policy would refuse it anyway) and no backslash escape
 * may spell a forbidden word another way.
 */
export function customCssProblem(css: string): string | undefined {
  if (css.length > MAX_CUSTOM_CSS) return `must be at most ${MAX_CUSTOM_CSS} characters (got ${css.length})`;
  if (css.includes('<')) return 'must not contain "<" (it could end the <style> element)';
  if (css.includes('\\')) return 'must not contain backslash escapes';
  if (hasControlCharacter(css)) return 'must not contain control characters';
  if (CSS_FETCHING.test(css)) return 'must not load anything: url(), image-set(), image() and expression() are refused';
  let depth = 0;
  for (let i = 0; i < css.length; i++) {
    const c = css[i];
    if (c === '/' && css[i + 1] === '*') {
      const end = css.indexOf('*/', i + 2);
      if (end < 0) return 'has an unterminated comment';
      i = end + 1;
    } else if (c === '"' || c === "'") {
      const end = css.indexOf(c, i + 1);
      const newline = css.slice(i + 1, end < 0 ? undefined : end).search(/[\r\n\f]/);
      if (end < 0 || newline >= 0) return 'has an unterminated string';
      i = end;
    } else if (c === '{') {
      depth++;
    } else if (c === '}') {
      depth--;
      if (depth < 0) return 'has a "}" without its "{"';
    } else if (c === '@') {
      const name = /^@([-A-Za-z0-9_]+)/.exec(css.slice(i, i + 64))?.[1]?.toLowerCase();
      if (name === undefined || !CSS_AT_RULES.has(name)) return `must use only the at-rules ${[...CSS_AT_RULES].map((r) => `@${r}`).join(', ')} (got @${name ?? ''})`;
    }
  }
  if (depth !== 0) return 'has a "{" without its "}"';
  return undefined;
}

/** `variables`: the checks file's, whose `{{NAME}}` a file key's rawKey may use (undefined: a PUT body, taken as written). */
function parseKeys(item: Fields, requireRaw: boolean, variables?: Variables): DashboardKeyInput[] {
  const value = item.raw('keys');
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value) || value.length > MAX_KEYS) {
    item.fail(item.at('keys'), `must be an array of at most ${MAX_KEYS} key records`);
    return [];
  }
  const keys: DashboardKeyInput[] = [];
  item.list('keys').forEach((key, index) => {
    key.ignore(...ANSWERED_KEY_FIELDS);
    const id = key.string('id', { maxLength: 64 });
    const written = key.string('rawKey', { maxLength: 1_000 });
    let rawKey = written;
    if (written !== undefined && variables !== undefined) {
      try {
        rawKey = variables.interpolate(written, key.at('rawKey'));
      } catch (error) {
        if (!(error instanceof UnknownVariableError)) throw error;
        key.fail(key.at('rawKey'), `uses the unknown variable {{${error.variable}}}: define it in $.environmentVariables`);
        rawKey = undefined;
      }
    }
    if (id !== undefined && !KEY_ID.test(id)) key.fail(key.at('id'), 'must be 1 to 64 letters, digits or ._-');
    if (rawKey !== undefined && !RAW_KEY.test(rawKey)) {
      key.fail(key.at('rawKey'), `must be 16 to 256 printable ASCII characters without spaces${written !== rawKey ? ' once its variables are filled in' : ''}`);
    }
    if (written === undefined && (requireRaw || id === undefined)) key.fail(key.at('rawKey'), requireRaw ? 'is required' : 'is required, or the id of a key this dashboard has');
    const keyId = id ?? `key-${index + 1}`;
    if (keys.some((k) => k.id === keyId)) key.fail(key.at('id'), `${keyId} is already used by another key of this dashboard`);
    keys.push(rawKey === undefined ? { id: keyId } : { id: keyId, rawKey });
  });
  return keys;
}

export interface ParsedDashboard {
  definition: DashboardDefinition;
  keys: DashboardKeyInput[];
}

/**
 * One dashboard's fields at `item`, defaults applied. `dashboardId`: the
 * route's (PUT); from the checks file it is the item's required
 * `dashboardId`. `fromFile`: a file's keys must carry their raw value.
 */
export function parseDashboard(item: Fields, options: { dashboardId?: string; fromFile: boolean; variables?: Variables }): ParsedDashboard {
  item.ignore(...ANSWERED_DASHBOARD_FIELDS);
  const given = options.fromFile ? item.string('dashboardId', { required: true, maxLength: 64 }) : item.string('dashboardId', { maxLength: 64 });
  const dashboardId = options.dashboardId ?? given ?? '';
  if (options.dashboardId !== undefined && given !== undefined && given !== options.dashboardId) {
    item.fail(item.at('dashboardId'), `must be the path's dashboardId ${options.dashboardId} when given`);
  }
  if (!DASHBOARD_ID.test(dashboardId) && (options.dashboardId !== undefined || given !== undefined)) {
    item.fail(options.dashboardId !== undefined ? 'dashboardId' : item.at('dashboardId'), 'must be 1 to 64 letters, digits or ._-, starting with a letter or digit');
  }
  const customUrl = nullableString(item, 'customUrl', 63);
  if (customUrl !== null && !CUSTOM_URL.test(customUrl)) item.fail(item.at('customUrl'), 'must be a subdomain: 1 to 63 lowercase letters, digits and dashes, not starting or ending with a dash');
  const customDomain = nullableString(item, 'customDomain', 253);
  if (customDomain !== null && !/^(?=.{1,253}$)(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,63}$/.test(customDomain)) {
    item.fail(item.at('customDomain'), 'must be a domain name such as status.example.com');
  }
  const checksPerPageRaw = item.raw('checksPerPage');
  const checksPerPage =
    checksPerPageRaw === null ? DEFAULT_CHECKS_PER_PAGE : item.integer('checksPerPage', { min: MIN_CHECKS_PER_PAGE, max: MAX_CHECKS_PER_PAGE, default: DEFAULT_CHECKS_PER_PAGE });
  const customCSS = item.string('customCSS', { default: '' }) ?? '';
  const cssProblem = customCssProblem(customCSS);
  if (cssProblem) item.fail(item.at('customCSS'), cssProblem);
  const definition: DashboardDefinition = {
    dashboardId,
    customUrl,
    customDomain,
    logo: urlField(item, 'logo', true),
    favicon: urlField(item, 'favicon', true),
    link: urlField(item, 'link', false),
    description: nullableString(item, 'description', 5_000),
    header: nullableString(item, 'header', 500),
    width: item.oneOf('width', DASHBOARD_WIDTHS, { default: 'FULL' }),
    refreshRate: enumNumber(item, 'refreshRate', REFRESH_RATES, 60),
    paginate: item.boolean('paginate', true),
    paginationRate: enumNumber(item, 'paginationRate', PAGINATION_RATES, 60),
    checksPerPage,
    useTagsAndOperator: item.boolean('useTagsAndOperator', false),
    hideTags: item.boolean('hideTags', false),
    enableIncidents: item.boolean('enableIncidents', false),
    expandChecks: item.boolean('expandChecks', false),
    tags: parseTags(item),
    showHeader: item.boolean('showHeader', true),
    showCheckRunLinks: item.boolean('showCheckRunLinks', false),
    showGroupNames: item.boolean('showGroupNames', true),
    customCSS,
    isPrivate: item.boolean('isPrivate', false),
    showP95: item.boolean('showP95', true),
    showP99: item.boolean('showP99', true),
  };
  const keys = parseKeys(item, options.fromFile, options.variables);
  if (options.fromFile && definition.isPrivate && keys.length === 0) item.fail(item.at('keys'), 'is required for a private dashboard: at least one {"id", "rawKey"}');
  return { definition, keys };
}

/** `$.dashboards`: dashboardIds and customUrls unique within the file; keys may use the file's variables (`globals`). */
export function parseDashboards(root: Fields, globals: readonly EnvironmentVariable[] = []): ParsedDashboard[] {
  const variables = new Variables([...globals]);
  const declared = root.raw('dashboards');
  if (Array.isArray(declared) && declared.length > MAX_DASHBOARDS) {
    root.fail(root.at('dashboards'), `must have at most ${MAX_DASHBOARDS} dashboards (got ${declared.length})`);
    return [];
  }
  const parsed: ParsedDashboard[] = [];
  root.list('dashboards').forEach((item) => {
    const dashboard = parseDashboard(item, { fromFile: true, variables });
    const { dashboardId, customUrl } = dashboard.definition;
    const sameId = parsed.findIndex((p) => p.definition.dashboardId === dashboardId);
    if (dashboardId !== '' && sameId >= 0) item.fail(item.at('dashboardId'), `${dashboardId} is already used by $.dashboards[${sameId}]`);
    const sameUrl = parsed.findIndex((p) => customUrl !== null && p.definition.customUrl === customUrl);
    if (sameUrl >= 0) item.fail(item.at('customUrl'), `${customUrl} is already used by $.dashboards[${sameUrl}]`);
    parsed.push(dashboard);
  });
  return parsed;
}

const ISO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:\d{2})$/;

function isoTime(item: Fields, name: string, required: boolean): string | null {
  const value = item.raw(name);
  if (value === undefined || value === null) {
    if (required) item.fail(item.at(name), 'is required: an ISO 8601 date-time with its offset, such as "2026-11-24T03:00:00Z"');
    return null;
  }
  if (typeof value !== 'string' || !ISO_TIME.test(value) || !Number.isFinite(Date.parse(value))) {
    item.fail(item.at(name), `must be an ISO 8601 date-time with its offset, such as "2026-11-24T03:00:00Z" (got ${describe(value)})`);
    return null;
  }
  return new Date(Date.parse(value)).toISOString();
}

/** `$.incidents`, each shown on the dashboard its `dashboard` names (one of `dashboardIds`, the file's). */
export function parseIncidents(root: Fields, dashboardIds: ReadonlySet<string>): IncidentDefinition[] {
  const declared = root.raw('incidents');
  if (Array.isArray(declared) && declared.length > MAX_INCIDENTS) {
    root.fail(root.at('incidents'), `must have at most ${MAX_INCIDENTS} incidents (got ${declared.length})`);
    return [];
  }
  const incidents: IncidentDefinition[] = [];
  root.list('incidents').forEach((item) => {
    const id = item.string('id', { required: true, maxLength: 64 }) ?? '';
    if (id !== '' && !KEY_ID.test(id)) item.fail(item.at('id'), 'must be 1 to 64 letters, digits or ._- (a UUID fits)');
    if (id !== '' && incidents.some((i) => i.id === id)) item.fail(item.at('id'), `${id} is already used by another incident`);
    const name = item.string('name', { required: true, minLength: 1, maxLength: 200 }) ?? '';
    const impact = item.oneOf('impact', INCIDENT_IMPACTS, { default: 'MINOR' });
    const dashboard = item.string('dashboard', { required: true, maxLength: 64 }) ?? '';
    if (dashboard !== '' && !dashboardIds.has(dashboard)) {
      item.fail(item.at('dashboard'), `must be the dashboardId of a dashboard in $.dashboards (${[...dashboardIds].slice(0, 10).join(', ') || 'none'})`);
    }
    const startedAt = isoTime(item, 'startedAt', false);
    const stoppedAt = isoTime(item, 'stoppedAt', false);
    if (startedAt !== null && stoppedAt !== null && Date.parse(stoppedAt) <= Date.parse(startedAt)) item.fail(item.at('stoppedAt'), `must be after startedAt (${startedAt})`);
    const rawUpdates = item.raw('incidentUpdates');
    if (!Array.isArray(rawUpdates) || rawUpdates.length === 0 || rawUpdates.length > MAX_UPDATES) {
      item.fail(item.at('incidentUpdates'), `is required: 1 to ${MAX_UPDATES} updates ({"status", "description", "created_at"})`);
    }
    const updates: IncidentUpdateDefinition[] = [];
    if (Array.isArray(rawUpdates) && rawUpdates.length <= MAX_UPDATES) {
      item.list('incidentUpdates').forEach((update, at) => {
        const updateId = update.string('id', { maxLength: 64 }) ?? `${id}-${at + 1}`;
        if (!KEY_ID.test(updateId)) update.fail(update.at('id'), 'must be 1 to 64 letters, digits or ._-');
        if (updates.some((u) => u.id === updateId)) update.fail(update.at('id'), `${updateId} is already used by another update of this incident`);
        updates.push({
          id: updateId,
          status: update.oneOf('status', INCIDENT_STATUSES, { required: true }),
          description: update.string('description', { required: true, maxLength: 5_000 }) ?? '',
          created_at: isoTime(update, 'created_at', true) ?? '',
        });
      });
    }
    incidents.push({ id, name, impact, dashboard, startedAt, stoppedAt, incidentUpdates: updates });
  });
  return incidents;
}
