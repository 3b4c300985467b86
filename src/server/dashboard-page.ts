// A dashboard as a server-drawn HTML page (docs/dashboards.md): no script at
// all, inline SVG charts, every text escaped, the dashboard's customCSS
// inside `@scope (.dash-scope)` in a <style> with the response's nonce, and
// an outer frame with `contain: paint` so that nothing custom is drawn
// outside it. The Content-Security-Policy that goes with it is pageHeaders().

import type { DashboardDefinition } from '../core/dashboard.js';
import type { MaintenanceWindowDefinition } from '../core/maintenance-window.js';
import type { IncidentRecord } from '../store/dashboards.js';
import { CHART_RANGES, type ChartRange, type CheckFigures } from './dashboard-stats.js';

export const THEMES = ['auto', 'light', 'dark'] as const;
export type Theme = (typeof THEMES)[number];

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Text and attribute values: the five characters that can end either. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ESCAPES[c] as string);
}

/** The headers of every dashboard page; `nonce` is the one its <style> elements carry. */
export function pageHeaders(nonce: string, html: string, isPrivate: boolean): Record<string, string> {
  return {
    'content-type': 'text/html; charset=utf-8',
    'content-length': String(Buffer.byteLength(html)),
    // No script-src: nothing runs. Styles only with the nonce, images only from the server or inline.
    'content-security-policy': `default-src 'none'; style-src 'nonce-${nonce}'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'`,
    'x-content-type-options': 'nosniff',
    'referrer-policy': 'no-referrer',
    'x-frame-options': 'DENY',
    'cache-control': isPrivate ? 'private, no-store' : 'no-cache',
  };
}

export type CheckStatus = 'passing' | 'degraded' | 'failing' | 'no data';

export interface PageCheck {
  id: string;
  name: string;
  checkType: string;
  tags: string[];
  status: CheckStatus;
  /** Latest FINAL of each location: its status and response time. */
  locations: Array<{ id: string; name: string; status: CheckStatus; responseTime: number | null }>;
  figures: CheckFigures;
  inMaintenance: boolean;
}

export interface PageGroup {
  name: string | null;
  checks: PageCheck[];
}

export interface DashboardPage {
  dashboard: DashboardDefinition;
  groups: PageGroup[];
  page: number;
  pages: number;
  totalChecks: number;
  range: ChartRange;
  theme: Theme;
  now: number;
  nonce: string;
  /** The query the page's own links keep (theme, range, key when it came in the query). */
  keep: URLSearchParams;
  /** Incidents of the dashboard when it enables them; the active ones are shown first. */
  incidents: IncidentRecord[];
  maintenance: MaintenanceWindowDefinition[];
}

const BASE_CSS = `
:root{color-scheme:light dark;--bg:#f6f7f9;--fg:#1b1f24;--muted:#57606a;--card:#fff;--line:#d0d7de;--ok:#1a7f37;--warn:#9a6700;--bad:#cf222e;--none:#6e7781;--chart:#0969da}
@media (prefers-color-scheme:dark){:root:not(.theme-light){--bg:#0d1117;--fg:#e6edf3;--muted:#9198a1;--card:#161b22;--line:#30363d;--ok:#3fb950;--warn:#d29922;--bad:#f85149;--none:#8b949e;--chart:#58a6ff}}
:root.theme-dark{color-scheme:dark;--bg:#0d1117;--fg:#e6edf3;--muted:#9198a1;--card:#161b22;--line:#30363d;--ok:#3fb950;--warn:#d29922;--bad:#f85149;--none:#8b949e;--chart:#58a6ff}
:root.theme-light{color-scheme:light}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--fg);font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif}
.dash-frame{contain:paint;min-height:100vh;padding:16px}
.dash-scope{margin:0 auto}
.width-960px .dash-scope{max-width:960px}
header.dash-header{display:flex;gap:12px;align-items:center;flex-wrap:wrap;margin-bottom:12px}
header.dash-header h1{font-size:1.5rem;margin:0}
.logo{height:40px;width:auto}
.description{color:var(--muted);margin:4px 0 12px}
.banner{border:1px solid var(--line);border-left-width:6px;border-radius:6px;padding:10px 12px;margin:0 0 12px;background:var(--card)}
.banner.impact-MAJOR{border-left-color:var(--bad)}.banner.impact-MINOR{border-left-color:var(--warn)}.banner.impact-MAINTENANCE,.banner.maintenance{border-left-color:var(--chart)}
.banner h2{font-size:1.05rem;margin:0 0 4px}
.updates{list-style:none;margin:6px 0 0;padding:0}.updates li{margin:4px 0}.updates time{color:var(--muted);font-size:.85em}
.group h2{font-size:1.1rem;margin:18px 0 8px;color:var(--muted)}
.checks{display:grid;grid-template-columns:repeat(auto-fill,minmax(320px,1fr));gap:12px}
.check{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:12px;min-width:0}
.check h3{font-size:1rem;margin:0;overflow-wrap:anywhere}
.row{display:flex;justify-content:space-between;gap:8px;align-items:baseline;flex-wrap:wrap}
.status{font-weight:600;text-transform:uppercase;font-size:.8rem;padding:2px 8px;border-radius:10px;border:1px solid currentColor;white-space:nowrap}
.status-passing{color:var(--ok)}.status-degraded{color:var(--warn)}.status-failing{color:var(--bad)}.status-no-data{color:var(--none)}
.tags{margin:6px 0 0;padding:0;list-style:none;display:flex;gap:4px;flex-wrap:wrap}.tags li{font-size:.75rem;border:1px solid var(--line);border-radius:4px;padding:0 6px;color:var(--muted)}
dl.figures{display:grid;grid-template-columns:repeat(auto-fit,minmax(54px,1fr));gap:4px;margin:8px 0}
dl.figures div{text-align:center}dl.figures dt{font-size:.7rem;color:var(--muted);text-transform:uppercase}dl.figures dd{margin:0;font-weight:600;font-variant-numeric:tabular-nums;white-space:nowrap}
svg.chart{width:100%;height:auto;display:block}
svg.chart .line{fill:none;stroke:var(--chart);stroke-width:2}
svg.chart .pt{fill:var(--chart)}
svg.chart .axis{stroke:var(--line);stroke-width:1}
svg.chart text{fill:var(--muted);font-size:11px}
details{margin-top:6px}summary{cursor:pointer;color:var(--muted);font-size:.85rem}
.locations{margin:4px 0 0;padding:0;list-style:none;font-size:.85rem}
.maint{font-size:.75rem;color:var(--chart)}
nav.pages{display:flex;gap:8px;justify-content:center;margin:16px 0;flex-wrap:wrap}
nav.pages a,nav.pages span{padding:2px 8px;border:1px solid var(--line);border-radius:4px;color:var(--fg);text-decoration:none}
nav.pages .current{font-weight:700;border-color:var(--fg)}
footer{color:var(--muted);font-size:.8rem;text-align:center;margin-top:16px}
a{color:var(--chart)}
form.login{max-width:360px;margin:15vh auto;background:var(--card);border:1px solid var(--line);border-radius:8px;padding:20px}
form.login input{width:100%;padding:8px;margin:8px 0;font:inherit;background:var(--bg);color:var(--fg);border:1px solid var(--line);border-radius:4px}
form.login button{padding:8px 16px;font:inherit}
.error{color:var(--bad)}
@media (max-width:480px){.dash-frame{padding:8px}dl.figures{gap:6px}dl.figures dd{font-size:.8rem}.checks{grid-template-columns:1fr}header.dash-header h1{font-size:1.2rem}}
`;

function themeClass(theme: Theme): string {
  return theme === 'auto' ? '' : ` class="theme-${theme}"`;
}

function head(title: string, nonce: string, favicon: string | null, refresh: string | null): string {
  // A favicon that is not inline would be a request to another origin: only a data: URL is used, else none (not even /favicon.ico).
  const icon = favicon?.startsWith('data:') ? favicon : 'data:,';
  return [
    '<meta charset="utf-8">',
    '<meta name="viewport" content="width=device-width, initial-scale=1">',
    '<meta name="referrer" content="no-referrer">',
    refresh === null ? '' : `<meta http-equiv="refresh" content="${escapeHtml(refresh)}">`,
    `<title>${escapeHtml(title)}</title>`,
    `<link rel="icon" href="${escapeHtml(icon)}">`,
    `<style nonce="${nonce}">${BASE_CSS}</style>`,
  ].join('\n');
}

function percent(value: number | null): string {
  return value === null ? '—' : `${(value * 100).toFixed(2)}%`;
}

function ms(value: number | null): string {
  if (value === null) return '—';
  return value >= 10_000 ? `${(value / 1000).toFixed(1)} s` : `${Math.round(value)} ms`;
}

function utc(at: number): string {
  return new Date(at).toISOString().replace('T', ' ').slice(0, 16);
}

const CHART_W = 600;
const CHART_H = 120;
const PAD_TOP = 14;
const PAD_BOTTOM = 16;

/** One point per bucket that has results (a <circle> with a <title>), joined by lines across consecutive buckets. */
export function renderChart(check: Pick<PageCheck, 'name'>, figures: CheckFigures, range: ChartRange): string {
  const { buckets } = figures;
  const { bucketMs, label } = CHART_RANGES[range];
  const max = Math.max(1, ...buckets.filter((b) => b.count > 0).map((b) => b.mean));
  const step = CHART_W / buckets.length;
  const x = (i: number) => (i + 0.5) * step;
  const y = (v: number) => PAD_TOP + (CHART_H - PAD_TOP - PAD_BOTTOM) * (1 - v / max);
  const points: string[] = [];
  const lines: string[] = [];
  let run: string[] = [];
  buckets.forEach((bucket, i) => {
    if (bucket.count === 0) {
      if (run.length > 1) lines.push(run.join(' '));
      run = [];
      return;
    }
    const cx = x(i).toFixed(1);
    const cy = y(bucket.mean).toFixed(1);
    run.push(`${cx},${cy}`);
    const title = `${utc(bucket.from)}–${utc(bucket.from + bucketMs).slice(11)} UTC: ${ms(bucket.mean)} mean of ${bucket.count} result${bucket.count === 1 ? '' : 's'}`;
    points.push(`<circle class="pt" cx="${cx}" cy="${cy}" r="3" data-from="${bucket.from}" data-count="${bucket.count}" data-mean="${bucket.mean}"><title>${escapeHtml(title)}</title></circle>`);
  });
  if (run.length > 1) lines.push(run.join(' '));
  const name = `Response time of ${check.name}, ${label}`;
  return [
    `<svg class="chart" viewBox="0 0 ${CHART_W} ${CHART_H}" role="img" aria-label="${escapeHtml(name)}" data-buckets="${buckets.length}" xmlns="http://www.w3.org/2000/svg">`,
    `<title>${escapeHtml(name)}</title>`,
    `<line class="axis" x1="0" y1="${CHART_H - PAD_BOTTOM}" x2="${CHART_W}" y2="${CHART_H - PAD_BOTTOM}"/>`,
    `<text x="2" y="11">${escapeHtml(ms(max))}</text>`,
    `<text x="2" y="${CHART_H - 3}">${escapeHtml(label)}</text>`,
    ...lines.map((l) => `<polyline class="line" points="${l}"/>`),
    ...points,
    '</svg>',
  ].join('');
}

function statusPill(status: CheckStatus): string {
  return `<span class="status status-${status.replace(' ', '-')}" data-status="${status}">${status}</span>`;
}

function renderCheck(check: PageCheck, page: DashboardPage): string {
  const { dashboard, range } = page;
  const f = check.figures;
  const figure = (name: string, key: string, value: string, raw: number | null) =>
    `<div><dt>${name}</dt><dd data-figure="${key}" data-value="${raw === null ? '' : String(raw)}">${escapeHtml(value)}</dd></div>`;
  const figures = [
    figure('24 h', 'uptime-24h', percent(f.uptime['24h']), f.uptime['24h']),
    figure('7 d', 'uptime-7d', percent(f.uptime['7d']), f.uptime['7d']),
    figure('30 d', 'uptime-30d', percent(f.uptime['30d']), f.uptime['30d']),
    dashboard.showP95 ? figure('P95', 'p95', ms(f.p95), f.p95) : '',
    dashboard.showP99 ? figure('P99', 'p99', ms(f.p99), f.p99) : '',
  ].join('');
  const tags = dashboard.hideTags || check.tags.length === 0 ? '' : `<ul class="tags">${check.tags.map((t) => `<li>${escapeHtml(t)}</li>`).join('')}</ul>`;
  const locations = check.locations
    .map((l) => `<li data-location="${escapeHtml(l.id)}">${escapeHtml(l.name)}: ${statusPill(l.status)} ${l.responseTime === null ? '' : escapeHtml(ms(l.responseTime))}</li>`)
    .join('');
  return [
    `<article class="check" data-check="${escapeHtml(check.id)}">`,
    `<div class="row"><h3>${escapeHtml(check.name)}</h3>${statusPill(check.status)}</div>`,
    check.inMaintenance ? '<div class="maint">in a maintenance window</div>' : '',
    tags,
    `<dl class="figures" aria-label="Uptime and response time">${figures}</dl>`,
    renderChart(check, f, range),
    `<details${dashboard.expandChecks ? ' open' : ''}><summary>${escapeHtml(check.checkType)} · ${check.locations.length} location${check.locations.length === 1 ? '' : 's'} · ${f.samples} results, ${escapeHtml(CHART_RANGES[range].label)}</summary><ul class="locations">${locations}</ul></details>`,
    '</article>',
  ].join('');
}

function latestUpdate(incident: IncidentRecord) {
  return incident.incidentUpdates[0];
}

/** When an incident begins: its startedAt, else its first update. */
function beginsAt(incident: IncidentRecord): number | null {
  const begins = incident.startedAt ?? incident.incidentUpdates.at(-1)?.created_at ?? null;
  return begins === null ? null : Date.parse(begins);
}

/** An incident in effect at `now`: begun, not stopped, and its newest update not RESOLVED. */
export function incidentActive(incident: IncidentRecord, now: number): boolean {
  const begins = beginsAt(incident);
  if (begins !== null && begins > now) return false;
  if (incident.stoppedAt !== null && Date.parse(incident.stoppedAt) <= now) return false;
  return latestUpdate(incident)?.status !== 'RESOLVED';
}

/** An incident that begins after `now` (a maintenance announced ahead). */
export function incidentScheduled(incident: IncidentRecord, now: number): boolean {
  const begins = beginsAt(incident);
  return begins !== null && begins > now;
}

type IncidentState = 'active' | 'scheduled' | 'past';

const INCIDENT_PREFIX: Record<IncidentState, string> = { active: '', scheduled: 'Scheduled: ', past: 'Past incident: ' };

function renderIncident(incident: IncidentRecord, state: IncidentState): string {
  const active = state === 'active';
  const updates = incident.incidentUpdates
    .map((u) => `<li data-update="${escapeHtml(u.id)}"><strong>${escapeHtml(u.status)}</strong> <time datetime="${escapeHtml(u.created_at)}">${escapeHtml(utc(Date.parse(u.created_at)))} UTC</time> — ${escapeHtml(u.description)}</li>`)
    .join('');
  return `<section class="banner incident impact-${incident.impact}" data-incident="${escapeHtml(incident.id)}" data-active="${active}" data-state="${state}"><h2>${INCIDENT_PREFIX[state]}${escapeHtml(incident.name)} <small>(${escapeHtml(incident.impact)})</small></h2><ul class="updates">${updates}</ul></section>`;
}

function pageLink(page: DashboardPage, number: number): string {
  const query = new URLSearchParams(page.keep);
  if (number > 1) query.set('page', String(number));
  const text = query.toString();
  return text === '' ? '?' : `?${text}`;
}

export function renderDashboardPage(page: DashboardPage): string {
  const { dashboard, nonce, now } = page;
  const title = dashboard.header ?? dashboard.dashboardId;
  const rotating = dashboard.paginate && page.pages > 1;
  // Rotating pages: the next page after paginationRate (each page is drawn fresh); otherwise this page again after refreshRate.
  const refresh = rotating ? `${dashboard.paginationRate};url=${pageLink(page, page.page >= page.pages ? 1 : page.page + 1)}` : `${dashboard.refreshRate};url=${pageLink(page, page.page)}`;
  const logo = dashboard.logo?.startsWith('data:') ? `<img class="logo" src="${escapeHtml(dashboard.logo)}" alt="">` : '';
  const heading = dashboard.link ? `<a href="${escapeHtml(dashboard.link)}" rel="noopener noreferrer">${logo}</a>` : logo;
  const header = dashboard.showHeader
    ? `<header class="dash-header">${heading}<h1>${escapeHtml(title)}</h1></header>${dashboard.description ? `<p class="description">${escapeHtml(dashboard.description)}</p>` : ''}`
    : '';
  const active = page.incidents.filter((i) => incidentActive(i, now));
  const scheduled = page.incidents.filter((i) => incidentScheduled(i, now));
  const past = page.incidents.filter((i) => !incidentActive(i, now) && !incidentScheduled(i, now)).slice(0, 5);
  const incidents = dashboard.enableIncidents ? [...active.map((i) => renderIncident(i, 'active')), ...scheduled.map((i) => renderIncident(i, 'scheduled'))].join('') : '';
  const maintenance = page.maintenance
    .map((w) => `<section class="banner maintenance" data-maintenance="${w.id}"><h2>Maintenance in progress: ${escapeHtml(w.name)}</h2>Checks in this window may fail without alerting.</section>`)
    .join('');
  const groups = page.groups
    .map((g) => `<section class="group">${dashboard.showGroupNames && g.name !== null ? `<h2>${escapeHtml(g.name)}</h2>` : ''}<div class="checks">${g.checks.map((c) => renderCheck(c, page)).join('')}</div></section>`)
    .join('');
  const nav =
    page.pages > 1
      ? `<nav class="pages" aria-label="Pages">${Array.from({ length: page.pages }, (_, i) => i + 1)
          .map((n) => (n === page.page ? `<span class="current" aria-current="page">${n}</span>` : `<a href="${escapeHtml(pageLink(page, n))}">${n}</a>`))
          .join('')}</nav>`
      : '';
  const custom = dashboard.customCSS.trim() === '' ? '' : `<style nonce="${nonce}">@scope (.dash-scope) {\n${dashboard.customCSS}\n}</style>`;
  const pastSection = dashboard.enableIncidents && past.length > 0 ? `<section class="past"><h2>Past incidents</h2>${past.map((i) => renderIncident(i, 'past')).join('')}</section>` : '';
  return [
    '<!doctype html>',
    `<html lang="en"${themeClass(page.theme)}>`,
    '<head>',
    head(title, nonce, dashboard.favicon, refresh),
    custom,
    '</head>',
    `<body><div class="dash-frame width-${dashboard.width.toLowerCase()}"><main class="dash-scope" data-now="${now}" data-page="${page.page}" data-pages="${page.pages}" data-range="${page.range}">`,
    header,
    incidents,
    maintenance,
    page.totalChecks === 0 ? '<p class="description">No checks match this dashboard.</p>' : groups,
    pastSection,
    nav,
    `<footer>Updated ${escapeHtml(utc(now))} UTC · charts: ${escapeHtml(CHART_RANGES[page.range].label)}, one point per ${escapeHtml(CHART_RANGES[page.range].bucketLabel)} · ${['24h', '7d', '30d']
      .map((r) => (r === page.range ? escapeHtml(r) : `<a href="${escapeHtml(rangeLink(page, r))}">${r}</a>`))
      .join(' ')}</footer>`,
    '</main></div></body></html>',
  ].join('\n');
}

function rangeLink(page: DashboardPage, range: string): string {
  const query = new URLSearchParams(page.keep);
  if (range === '24h') query.delete('range');
  else query.set('range', range);
  const text = query.toString();
  return text === '' ? '?' : `?${text}`;
}

/** A private dashboard without a valid key: the form only, nothing of the dashboard's checks, header or style. */
export function renderLoginPage(options: { action: string; nonce: string; theme: Theme; failed: boolean }): string {
  return [
    '<!doctype html>',
    `<html lang="en"${themeClass(options.theme)}>`,
    '<head>',
    head('Private dashboard', options.nonce, null, null),
    '</head>',
    '<body><div class="dash-frame">',
    `<form class="login" method="post" action="${escapeHtml(options.action)}">`,
    '<h1>Private dashboard</h1>',
    '<p>This dashboard needs an access key.</p>',
    options.failed ? '<p class="error" role="alert">That key does not open this dashboard.</p>' : '',
    '<label for="key">Access key</label>',
    '<input id="key" name="key" type="password" autocomplete="current-password" required maxlength="256">',
    '<button type="submit">Open</button>',
    '</form></div></body></html>',
  ].join('\n');
}
