// Dashboards' parts in this process: the field set's bounds and defaults
// (src/checks/dashboard-fields.ts), customCSS confinement, the percentile
// definition shared with the analytics routes (src/server/stats/percentile.ts),
// the figures and buckets (src/server/dashboard-stats.ts), incident activity
// and the page's escaping (src/server/dashboard-page.ts).

import { describe, expect, it } from 'vitest';
import { customCssProblem, parseDashboard, parseDashboards, parseIncidents } from '../../src/checks/dashboard-fields.js';
import { Fields } from '../../src/checks/fields.js';
import type { DashboardDefinition } from '../../src/core/dashboard.js';
import type { IncidentRecord, ResultSample } from '../../src/store/dashboards.js';
import { bucketStarts, checkFigures } from '../../src/server/dashboard-stats.js';
import { escapeHtml, incidentActive, incidentScheduled, pageHeaders, renderDashboardPage, renderLoginPage } from '../../src/server/dashboard-page.js';
import { keyOpens } from '../../src/server/dashboards-api.js';
import { keyHash } from '../../src/server/http/credentials.js';
import { percentileCont } from '../../src/server/stats/percentile.js';

function parse(body: unknown, fromFile = false) {
  const fields = Fields.root(body, '$');
  const parsed = parseDashboard(fields, fromFile ? { fromFile } : { dashboardId: 'd1', fromFile });
  return { parsed, problems: fields.issues.map((i) => `${i.path}: ${i.problem}`) };
}

describe('dashboard fields', () => {
  it('applies the reference defaults to an empty body', () => {
    const { parsed, problems } = parse({});
    expect(problems).toEqual([]);
    expect(parsed.definition).toEqual({
      dashboardId: 'd1',
      customUrl: null,
      customDomain: null,
      logo: null,
      favicon: null,
      link: null,
      description: null,
      header: null,
      width: 'FULL',
      refreshRate: 60,
      paginate: true,
      paginationRate: 60,
      checksPerPage: 15,
      useTagsAndOperator: false,
      hideTags: false,
      enableIncidents: false,
      expandChecks: false,
      tags: [],
      showHeader: true,
      showCheckRunLinks: false,
      showGroupNames: true,
      customCSS: '',
      isPrivate: false,
      showP95: true,
      showP99: true,
    } satisfies DashboardDefinition);
    expect(parsed.keys).toEqual([]);
  });

  it('accepts every allowed value at the bounds', () => {
    for (const refreshRate of [60, 300, 600]) expect(parse({ refreshRate }).problems).toEqual([]);
    for (const paginationRate of [30, 60, 300]) expect(parse({ paginationRate }).problems).toEqual([]);
    for (const checksPerPage of [1, 20]) expect(parse({ checksPerPage }).parsed.definition.checksPerPage).toBe(checksPerPage);
    expect(parse({ checksPerPage: null }).parsed.definition.checksPerPage).toBe(15);
    expect(parse({ useTagsAndOperator: null }).parsed.definition.useTagsAndOperator).toBe(false);
    for (const width of ['FULL', '960PX']) expect(parse({ width }).parsed.definition.width).toBe(width);
    expect(parse({ customCSS: null }).parsed.definition.customCSS).toBe('');
    const full = parse({
      customUrl: 'lab-status',
      customDomain: 'status.example.com',
      logo: 'https://example.com/logo.png',
      favicon: 'data:image/png;base64,iVBORw0KGgo=',
      link: 'https://example.com/',
      description: 'd',
      header: 'h',
      tags: ['a', 'b', 'a'],
      isPrivate: true,
      keys: [{ id: 'k', rawKey: 'a-long-enough-key-123' }],
    });
    expect(full.problems).toEqual([]);
    expect(full.parsed.definition.tags).toEqual(['a', 'b']);
    expect(full.parsed.keys).toEqual([{ id: 'k', rawKey: 'a-long-enough-key-123' }]);
  });

  it('refuses every value out of bounds, naming its path', () => {
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ refreshRate: 61 }, '$.refreshRate'],
      [{ refreshRate: '60' }, '$.refreshRate'],
      [{ paginationRate: 120 }, '$.paginationRate'],
      [{ checksPerPage: 0 }, '$.checksPerPage'],
      [{ checksPerPage: 21 }, '$.checksPerPage'],
      [{ checksPerPage: 1.5 }, '$.checksPerPage'],
      [{ width: '800PX' }, '$.width'],
      [{ paginate: 'yes' }, '$.paginate'],
      [{ showP95: 1 }, '$.showP95'],
      [{ tags: 'web' }, '$.tags'],
      [{ tags: [''] }, '$.tags[0]'],
      [{ customUrl: 'Not A Subdomain' }, '$.customUrl'],
      [{ customDomain: 'not a domain' }, '$.customDomain'],
      [{ logo: 'javascript:alert(1)' }, '$.logo'],
      [{ favicon: 'data:text/html;base64,PHNjcmlwdD4=' }, '$.favicon'],
      [{ link: 'ftp://example.com/' }, '$.link'],
      [{ header: 'x'.repeat(501) }, '$.header'],
      [{ customCSS: 'a { color: red' }, '$.customCSS'],
      [{ keys: [{ rawKey: 'short' }] }, '$.keys[0].rawKey'],
      [{ keys: [{ id: 'a b', rawKey: 'a-long-enough-key-123' }] }, '$.keys[0].id'],
      [{ keys: Array.from({ length: 21 }, (_, i) => ({ id: `k${i}`, rawKey: `a-long-enough-key-${i}00` })) }, '$.keys'],
      [{ dashboardId: 'other' }, '$.dashboardId'],
    ];
    for (const [body, path] of cases) {
      const { problems } = parse(body);
      expect(problems.length, JSON.stringify(body)).toBeGreaterThan(0);
      expect(problems[0], JSON.stringify(body)).toContain(`${path}:`);
    }
  });

  it('in the checks file: dashboardId required, unique ids and customUrls, a private dashboard has keys', () => {
    const root = Fields.root(
      {
        dashboards: [{ customUrl: 'x' }, { dashboardId: 'a', customUrl: 'x' }, { dashboardId: 'a', customUrl: 'y' }, { dashboardId: 'p', isPrivate: true }],
      },
      '$',
    );
    parseDashboards(root);
    const problems = root.issues.map((i) => `${i.path}: ${i.problem}`);
    expect(problems).toEqual([
      '$.dashboards[0].dashboardId: is required',
      '$.dashboards[1].customUrl: x is already used by $.dashboards[0]',
      '$.dashboards[2].dashboardId: a is already used by $.dashboards[1]',
      '$.dashboards[3].keys: is required for a private dashboard: at least one {"id", "rawKey"}',
    ]);
  });

  it('in the checks file, a key may use the file’s variables', () => {
    const root = Fields.root({ dashboards: [{ dashboardId: 'p', isPrivate: true, keys: [{ id: 'a', rawKey: 'k-{{TV_KEY}}' }, { id: 'b', rawKey: '{{NOPE}}' }, { id: 'c', rawKey: '{{SHORT}}' }] }] }, '$');
    const [parsed] = parseDashboards(root, [
      { key: 'TV_KEY', value: 'from-a-variable-0123', secret: true },
      { key: 'SHORT', value: 'short' },
    ]);
    expect(parsed?.keys[0]).toEqual({ id: 'a', rawKey: 'k-from-a-variable-0123' });
    expect(root.issues.map((i) => `${i.path}: ${i.problem}`)).toEqual([
      '$.dashboards[0].keys[1].rawKey: uses the unknown variable {{NOPE}}: define it in $.environmentVariables',
      '$.dashboards[0].keys[2].rawKey: must be 16 to 256 printable ASCII characters without spaces once its variables are filled in',
    ]);
  });

  it('incidents: impact default MINOR, a known dashboard, 1 to 100 updates with a status of the set', () => {
    const root = Fields.root(
      {
        incidents: [
          { id: 'i1', name: 'Slow', dashboard: 'wall', incidentUpdates: [{ status: 'INVESTIGATING', description: 'd', created_at: '2026-11-24T01:00:00Z' }] },
          { id: 'i2', name: 'Bad', dashboard: 'nope', impact: 'HUGE', incidentUpdates: [] },
          { id: 'i3', name: 'Odd', dashboard: 'wall', incidentUpdates: [{ status: 'DONE', description: 'd', created_at: 'yesterday' }] },
        ],
      },
      '$',
    );
    const incidents = parseIncidents(root, new Set(['wall']));
    expect(incidents[0]).toMatchObject({ impact: 'MINOR', incidentUpdates: [{ id: 'i1-1', status: 'INVESTIGATING', created_at: '2026-11-24T01:00:00.000Z' }] });
    expect(root.issues.map((i) => i.path)).toEqual([
      '$.incidents[1].impact',
      '$.incidents[1].dashboard',
      '$.incidents[1].incidentUpdates',
      '$.incidents[2].incidentUpdates[0].status',
      '$.incidents[2].incidentUpdates[0].created_at',
    ]);
  });
});

describe('customCSS confinement', () => {
  it('accepts ordinary CSS, nested rules, strings with braces, and the allowed at-rules', () => {
    for (const css of [
      'h3 { color: #c00; } .check > .row { gap: 2px }',
      '@media (max-width: 600px) { .check { padding: 2px } }',
      '@supports (display: grid) { .checks { display: grid } }',
      '.x::after { content: "} { not a brace"; }',
      '/* a } comment */ .y { color: red }',
      '@keyframes pulse { from { opacity: 1 } to { opacity: .5 } }',
    ]) {
      expect(customCssProblem(css), css).toBeUndefined();
    }
  });

  it('refuses what could leave its <style> element, its scope, or load anything', () => {
    for (const css of [
      '</style><script>alert(1)</script>',
      '</STYLE >',
      'a { color: red } </style',
      '} body { display: none } .x {',
      'a { color: red',
      'a { color: red }}',
      '@import "https://evil.example/x.css";',
      '@IMPORT url(x.css);',
      '@font-face { font-family: x; }',
      '@scope (body) { * { color: red } }',
      '@namespace svg url(http://www.w3.org/2000/svg);',
      'body { background: url(https://evil.example/track.png) }',
      'body { background: URL( "//evil.example/x" ) }',
      'body { background-image: image-set("x.png" 1x) }',
      'a { b: expression(alert(1)) }',
      'a { background: u\\72l(x) }',
      '.x { content: "unterminated }',
      '/* unterminated',
      `a { color: red }${String.fromCharCode(0)}`,
      'x'.repeat(64 * 1024 + 1),
    ]) {
      expect(customCssProblem(css), css.slice(0, 60)).toBeDefined();
    }
  });
});

describe('percentileCont (linear interpolation between closest ranks)', () => {
  it('answers what numpy.percentile and PostgreSQL percentile_cont answer', () => {
    expect(percentileCont([1, 2, 3, 4], 0.95)).toBeCloseTo(3.85, 12);
    expect(percentileCont([15, 20, 35, 40, 50], 0.4)).toBeCloseTo(29, 12);
    expect(percentileCont(Float64Array.from([10, 20]), 0.5)).toBe(15);
    expect(percentileCont([7], 0.99)).toBe(7);
    expect(percentileCont([1, 2, 3], 0)).toBe(1);
    expect(percentileCont([1, 2, 3], 1)).toBe(3);
    expect(percentileCont([], 0.5)).toBeNaN();
    expect(percentileCont([1, 2], 1.5)).toBeNaN();
  });

  it('equals a brute-force computation on random data', () => {
    let seed = 7;
    const random = () => {
      seed = (Math.imul(seed, 48271) + 11) % 2147483647;
      return (seed >>> 0) / 2147483647;
    };
    for (let round = 0; round < 50; round++) {
      const n = 1 + Math.floor(random() * 300);
      const values = Array.from({ length: n }, () => Math.round(random() * 10_000) / 10);
      const sorted = [...values].sort((a, b) => a - b);
      for (const p of [0.5, 0.9, 0.95, 0.99]) {
        const rank = p * (n - 1);
        const lo = sorted[Math.floor(rank)] as number;
        const hi = sorted[Math.ceil(rank)] as number;
        expect(percentileCont(sorted, p)).toBeCloseTo(lo + (hi - lo) * (rank - Math.floor(rank)), 9);
      }
    }
  });
});

describe('figures', () => {
  const now = Date.UTC(2026, 10, 24, 3, 30);
  const HOUR = 3_600_000;
  const sample = (hoursAgo: number, responseTime: number, up = true): ResultSample => ({ at: now - hoursAgo * HOUR, responseTime, up, location: 'a' });

  it('buckets the range from now − range: 24 × 1 h, 28 × 6 h, 30 × 1 day', () => {
    expect(bucketStarts(now, '24h')).toHaveLength(24);
    expect(bucketStarts(now, '24h')[0]).toBe(now - 24 * HOUR);
    expect(bucketStarts(now, '7d')).toHaveLength(28);
    expect(bucketStarts(now, '30d')).toHaveLength(30);
  });

  it('uptime per window, points only for buckets with results, P95/P99 over the chart’s window', () => {
    const samples = [sample(24 * 20, 100, false), sample(24 * 3, 50, false), sample(23.5, 10), sample(23.4, 30), sample(0.5, 20), sample(0.2, 40, false)];
    const f = checkFigures(samples, now, '24h');
    expect(f.uptime).toEqual({ '24h': 3 / 4, '7d': 3 / 5, '30d': 3 / 6 });
    expect(f.counts).toEqual({ '24h': 4, '7d': 5, '30d': 6 });
    expect(f.buckets.filter((b) => b.count > 0).map((b) => [b.count, b.mean])).toEqual([
      [2, 20],
      [2, 30],
    ]);
    expect(f.p95).toBeCloseTo(percentileCont([10, 20, 30, 40], 0.95), 12);
    expect(f.p99).toBeCloseTo(percentileCont([10, 20, 30, 40], 0.99), 12);
    expect(checkFigures([], now, '7d')).toMatchObject({ uptime: { '24h': null, '7d': null, '30d': null }, p95: null, p99: null, samples: 0 });
  });
});

const incident = (over: Partial<IncidentRecord>): IncidentRecord => ({
  id: 'i',
  name: 'n',
  impact: 'MINOR',
  dashboardId: 1,
  startedAt: null,
  stoppedAt: null,
  created_at: '2026-11-24T00:00:00.000Z',
  updated_at: null,
  incidentUpdates: [{ id: 'u', status: 'INVESTIGATING', description: 'd', incidentId: 'i', created_at: '2026-11-24T01:00:00.000Z', updated_at: null }],
  ...over,
});

describe('incidents and pages', () => {
  it('an incident is active from its start until stopped or its newest update is RESOLVED', () => {
    const t = Date.parse('2026-11-24T02:00:00Z');
    expect(incidentActive(incident({}), t)).toBe(true);
    expect(incidentActive(incident({}), Date.parse('2026-11-24T00:30:00Z'))).toBe(false);
    expect(incidentActive(incident({ startedAt: '2026-11-24T03:00:00.000Z' }), t)).toBe(false);
    expect(incidentScheduled(incident({ startedAt: '2026-11-24T03:00:00.000Z' }), t)).toBe(true);
    expect(incidentScheduled(incident({}), t)).toBe(false);
    expect(incidentActive(incident({ stoppedAt: '2026-11-24T01:30:00.000Z' }), t)).toBe(false);
    const resolved = incident({});
    resolved.incidentUpdates.unshift({ id: 'v', status: 'RESOLVED', description: 'ok', incidentId: 'i', created_at: '2026-11-24T01:10:00.000Z', updated_at: null });
    expect(incidentActive(resolved, t)).toBe(false);
  });

  it('escapes every text: names, tags, header, description, incidents', () => {
    const hostile = `<script>alert('x')</script>"&`;
    const { parsed } = parse({ header: hostile, description: hostile, enableIncidents: true, tags: [hostile] });
    const html = renderDashboardPage({
      dashboard: parsed.definition,
      groups: [
        {
          name: hostile,
          checks: [
            {
              id: hostile,
              name: hostile,
              checkType: 'API',
              tags: [hostile],
              status: 'passing',
              locations: [{ id: hostile, name: hostile, status: 'passing', responseTime: 5 }],
              figures: checkFigures([{ at: Date.parse('2026-11-24T02:00:00Z'), responseTime: 5, up: true, location: 'a' }], Date.parse('2026-11-24T03:00:00Z'), '24h'),
              inMaintenance: false,
            },
          ],
        },
      ],
      page: 1,
      pages: 1,
      totalChecks: 1,
      range: '24h',
      theme: 'auto',
      now: Date.parse('2026-11-24T03:00:00Z'),
      nonce: 'n0nce',
      keep: new URLSearchParams({ key: `"><script>` }),
      incidents: [incident({ name: hostile, incidentUpdates: [{ id: hostile, status: 'INVESTIGATING', description: hostile, incidentId: 'i', created_at: '2026-11-24T01:00:00.000Z', updated_at: null }] })],
      maintenance: [{ id: 1, name: hostile, tags: [], startsAt: '2026-11-24T00:00:00.000Z', endsAt: '2026-11-25T00:00:00.000Z', repeatUnit: null, repeatInterval: null, repeatEndsAt: null }],
    });
    expect(html).not.toContain('<script');
    expect(html).not.toContain(hostile);
    expect(html).not.toContain(`'x'`);
    expect(html).toContain(escapeHtml(hostile));
    expect(html.split(escapeHtml(hostile)).length).toBeGreaterThan(8);
    // No inline style attribute and no script anywhere: the CSP allows neither.
    expect(html).not.toMatch(/\sstyle=/);
    expect(html).not.toMatch(/<script|\son[a-z]+=/i);
    expect(html.match(/<style nonce="n0nce">/g)).toHaveLength(1);
  });

  it('the login page has the form and nothing of the dashboard', () => {
    const html = renderLoginPage({ action: '/dashboards/x/login', nonce: 'n', theme: 'dark', failed: true });
    expect(html).toContain('<form class="login" method="post" action="/dashboards/x/login">');
    expect(html).toContain('class="theme-dark"');
    expect(html).not.toContain('article');
  });

  it('the headers: a strict CSP without script-src, no referrer, no framing', () => {
    const headers = pageHeaders('abc', '<html>', true);
    const csp = headers['content-security-policy'] as string;
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("style-src 'nonce-abc'");
    expect(csp).toContain("form-action 'self'");
    expect(csp).toContain("frame-ancestors 'none'");
    expect(csp).not.toContain('script-src');
    expect(csp).not.toContain('unsafe');
    expect(headers['referrer-policy']).toBe('no-referrer');
    expect(headers['cache-control']).toBe('private, no-store');
  });

  it('a key opens its dashboard by digest, whichever of its keys it is', () => {
    const keys = ['first-key-0123456789', 'second-key-0123456789'].map((raw, i) => ({ id: `k${i}`, hash: keyHash(raw), maskedKey: '', created_at: '', updated_at: null }));
    expect(keyOpens(keys, 'first-key-0123456789')).toBe(true);
    expect(keyOpens(keys, 'second-key-0123456789')).toBe(true);
    expect(keyOpens(keys, 'second-key-012345678')).toBe(false);
    expect(keyOpens(keys, undefined)).toBe(false);
    expect(keyOpens(keys, '')).toBe(false);
    expect(keyOpens([], 'first-key-0123456789')).toBe(false);
  });
});
