// GET /v1/badges/checks/{checkId} over real HTTP: the real router and badge
// route in front of a real SQLite store, FINAL results seeded through the
// agent's own flows (createSession, claimJobs, acceptResults); then every
// style and theme rendered in headless Chromium (/usr/bin/chromium through
// the runtime's playwright-core): the screenshot has the SVG's declared size
// and no text reaches outside its box, for long, non-ASCII and markup names.

import { mkdtemp, rm } from 'node:fs/promises';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AGENT_ROUTE_LIMIT_PER_MINUTE } from '../../src/core/protocol.js';
import { BADGE_STYLES, BADGE_THEMES, tableCodePoints, tableWidth } from '../../src/server/badge.js';
import { badgeRoutes } from '../../src/server/badge-api.js';
import { RateLimiter } from '../../src/server/http/rate-limit.js';
import { closeApiServer, Router, startApiServer } from '../../src/server/http/router.js';
import { readRoutes } from '../../src/server/read-api.js';
import type { Store } from '../../src/store/store.js';
import { type Browser, CHROMIUM_FLAGS, chromium, measureWidths, type Page } from '../support/badge-font-widths.js';
import { openTestStore, runSessions, storedCheck } from '../support/server-store.js';

const logger = pino({ level: 'silent' });
const PUBLIC_KEY = 'badge-test-public-key';
const A = 'loc-a';
const B = 'loc-b';

const NAMES = {
  ascii: 'Intranet home page',
  long: 'The intranet home page of the lab network, as every office sees it, every minute of the day and night',
  latin: 'Café Zürich — Ünïcödé ÆØÅ œ ß',
  wide: '東京リージョン 監視 🚀👩‍👩‍👧 Проверка',
  markup: `<b>Tom & "Jerry"</b> 'quoted' ]]>`,
  empty: '',
} as const;

const nodata = storedCheck({ id: 'nodata', name: NAMES.ascii, locations: [A, B] });
const passing = storedCheck({ id: 'passing', name: NAMES.ascii, locations: [A, B] });
const degraded = storedCheck({ id: 'degraded', name: NAMES.latin, locations: [A, B] });
const failing = storedCheck({ id: 'failing', name: NAMES.wide, locations: [A, B] });
const long = storedCheck({ id: 'long', name: NAMES.long, locations: [A] });
const markup = storedCheck({ id: 'markup', name: NAMES.markup, locations: [A] });
const empty = storedCheck({ id: 'empty', name: NAMES.empty, locations: [A] });
const doomed = storedCheck({ id: 'doomed', locations: [A] });

let dir: string;
let store: Store;
let server: Server;
let base: string;
let browser: Browser | undefined;

function router(anonymousLimit = 600): Router {
  return new Router([...readRoutes({ store }), ...badgeRoutes({ store })], {
    publicKey: PUBLIC_KEY,
    agentKey: async () => undefined,
    publicLimiter: new RateLimiter(600, 60),
    agentLimiter: new RateLimiter(AGENT_ROUTE_LIMIT_PER_MINUTE, 60),
    anonymousLimiter: new RateLimiter(anonymousLimit, 60),
    logger,
  });
}

async function listen(r: Router): Promise<{ server: Server; base: string }> {
  const started = await startApiServer(r, { host: '127.0.0.1', port: 0 });
  return { server: started, base: `http://127.0.0.1:${(started.address() as AddressInfo).port}` };
}

/** No Authorization header, no account header: as a README's image is fetched. */
async function badge(route: string, headers: Record<string, string> = {}, at = base) {
  const response = await fetch(`${at}${route}`, { headers });
  const text = await response.text();
  return { status: response.status, headers: response.headers, text };
}

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'outpost-badges-'));
  store = await openTestStore(dir);
  await store.syncLocations([
    { id: A, name: 'Office A' },
    { id: B, name: 'Office B' },
  ]);
  const checks = [nodata, passing, degraded, failing, long, markup, empty, doomed];
  await store.syncChecks(checks, new Date());
  // passing: failed in A first, then recovered; the latest FINAL of each location counts.
  await runSessions(store, passing, [A, B], 1, () => [{ hasFailures: true, responseTime: 900 }]);
  // B's result is the newest (it stopped last), whatever order the two are stored in.
  const stopped = Date.now();
  await runSessions(store, passing, [A, B], 1, (job) => [
    job.runLocation === A ? { responseTime: 123.4, startedAt: new Date(stopped - 1_000) } : { responseTime: 77, startedAt: new Date(stopped) },
  ]);
  await runSessions(store, degraded, [A, B], 1, (job) => [{ isDegraded: job.runLocation === B, responseTime: 2500 }]);
  // failing: one location fails, the other is degraded; an ATTEMPT is not a FINAL.
  await runSessions(store, failing, [A, B], 1, (job) =>
    job.runLocation === A ? [{ resultType: 'ATTEMPT', hasFailures: true }, { hasFailures: true, responseTime: 30_000 }] : [{ isDegraded: true }],
  );
  for (const check of [long, markup, empty, doomed]) await runSessions(store, check, [A], 1);
  ({ server, base } = await listen(router()));
});

afterAll(async () => {
  await browser?.close();
  if (server) await closeApiServer(server, 1_000);
  await store?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('GET /v1/badges/checks/:checkId', () => {
  it('answers an SVG without credentials, cacheable for less than a minute', async () => {
    const answer = await badge('/v1/badges/checks/passing');
    expect(answer.status).toBe(200);
    expect(answer.headers.get('content-type')).toBe('image/svg+xml; charset=utf-8');
    expect(answer.text.startsWith('<svg')).toBe(true);
    const maxAge = Number(/max-age=(\d+)/.exec(answer.headers.get('cache-control') ?? '')?.[1]);
    expect(maxAge).toBeGreaterThan(0);
    expect(maxAge).toBeLessThanOrEqual(60);
    expect(answer.headers.get('etag')).toMatch(/^"[A-Za-z0-9_-]+"$/);
    expect(answer.headers.get('x-content-type-options')).toBe('nosniff');
  });

  it('says the worst of the latest FINAL result of each location', async () => {
    const status = async (id: string) => /<title>.*: ([a-z ]+)<\/title>/.exec((await badge(`/v1/badges/checks/${id}`)).text)?.[1];
    expect(await status('nodata')).toBe('no data');
    expect(await status('passing')).toBe('passing');
    expect(await status('degraded')).toBe('degraded');
    expect(await status('failing')).toBe('failing');
  });

  it('adds the newest FINAL result’s response time when asked', async () => {
    expect((await badge('/v1/badges/checks/passing?responseTime=true')).text).toContain('>passing | 77 ms</text>');
    expect((await badge('/v1/badges/checks/passing?responseTime=false')).text).toContain('>passing</text>');
    expect((await badge('/v1/badges/checks/nodata?responseTime=true')).text).toContain('>no data</text>');
    expect((await badge('/v1/badges/checks/passing?responseTime=true&style=for-the-badge')).text).toContain('>PASSING | 77 MS</text>');
  });

  it('escapes the check name', async () => {
    const { text } = await badge('/v1/badges/checks/markup');
    expect(text).toContain('&lt;b&gt;Tom &amp; &quot;Jerry&quot;&lt;/b&gt; &apos;quoted&apos; ]]&gt;');
    expect(text).not.toContain('<b>');
  });

  it('answers 304 to a cache that has the current badge, and a new badge once the status changes', async () => {
    const first = await badge('/v1/badges/checks/doomed');
    const etag = first.headers.get('etag') as string;
    const again = await badge('/v1/badges/checks/doomed', { 'if-none-match': etag });
    expect(again.status).toBe(304);
    expect(again.text).toBe('');
    expect(again.headers.get('cache-control')).toBe(first.headers.get('cache-control'));
    // Another style is another badge.
    expect((await badge('/v1/badges/checks/doomed?style=plastic', { 'if-none-match': etag })).status).toBe(200);
    await runSessions(store, doomed, [A], 1, () => [{ hasFailures: true }]);
    const changed = await badge('/v1/badges/checks/doomed', { 'if-none-match': etag });
    expect(changed.status).toBe(200);
    expect(changed.text).toContain('failing');
    expect(changed.headers.get('etag')).not.toBe(etag);
  });

  it('refuses bad parameters with a 400 that names them', async () => {
    for (const [query, parameter] of [
      ['style=round', 'style'],
      ['theme=blue', 'theme'],
      ['responseTime=yes', 'responseTime'],
      ['stlye=flat', 'stlye'],
      ['style=flat&style=plastic', 'style'],
    ] as const) {
      const answer = await badge(`/v1/badges/checks/passing?${query}`);
      expect(answer.status, query).toBe(400);
      expect(answer.headers.get('content-type')).toContain('application/json');
      const body = JSON.parse(answer.text);
      expect(body).toMatchObject({ statusCode: 400, error: 'Bad Request', attributes: { parameter } });
      expect(body.message).toContain(parameter);
    }
  });

  it('answers 404 with the error body for an unknown or deleted check', async () => {
    const unknown = await badge('/v1/badges/checks/nope');
    expect(unknown.status).toBe(404);
    expect(JSON.parse(unknown.text)).toMatchObject({ statusCode: 404, error: 'Not Found', attributes: { id: 'nope' } });
    const other = storedCheck({ id: 'deleted', locations: [A] });
    await store.syncChecks([nodata, passing, degraded, failing, long, markup, empty, doomed, other], new Date());
    expect((await badge('/v1/badges/checks/deleted')).status).toBe(200);
    await store.deleteCheck('deleted', new Date());
    expect((await badge('/v1/badges/checks/deleted')).status).toBe(404);
  });

  it('is rate limited per client address', async () => {
    const limited = await listen(router(3));
    try {
      for (let i = 0; i < 3; i++) expect((await badge('/v1/badges/checks/passing', {}, limited.base)).status).toBe(200);
      const refused = await badge('/v1/badges/checks/passing', {}, limited.base);
      expect(refused.status).toBe(429);
      expect(refused.headers.get('retry-after')).toMatch(/^\d+$/);
    } finally {
      await closeApiServer(limited.server, 1_000);
    }
  });
});

interface Box {
  x: number;
  y: number;
  width: number;
  height: number;
}
interface SvgElement {
  getAttribute(name: string): string | null;
  removeAttribute(name: string): void;
  getBBox(): Box;
  getComputedTextLength(): number;
  localName: string;
  textContent: string | null;
}
interface SvgDocument {
  documentElement: SvgElement;
  querySelector(selector: string): SvgElement | null;
  querySelectorAll(selector: string): ArrayLike<SvgElement>;
}

interface Geometry {
  root: string;
  width: number;
  height: number;
  problems: string[];
}

/** In the page: the root's declared size, and every text that reaches outside its box or the badge. */
function geometry(): Geometry {
  const doc = (globalThis as unknown as { document: SvgDocument }).document;
  const root = doc.documentElement;
  const width = Number(root.getAttribute('width'));
  const height = Number(root.getAttribute('height'));
  const problems: string[] = [];
  const texts = Array.from(doc.querySelectorAll('text'));
  if (texts.length < 2) problems.push(`${texts.length} text elements`);
  for (const text of texts) {
    const kind = (text.getAttribute('class') ?? '').replace(/-shadow$/, '');
    const rect = doc.querySelector(`rect.${kind}-box`);
    if (!rect) {
      problems.push(`no box for ${kind}`);
      continue;
    }
    const box = rect.getBBox();
    const t = text.getBBox();
    const slack = 0.5;
    if (t.x < box.x - slack || t.x + t.width > box.x + box.width + slack) problems.push(`${kind} text x ${t.x}+${t.width} outside its box ${box.x}+${box.width}`);
    if (t.y < -slack || t.y + t.height > height + slack) problems.push(`${kind} text y ${t.y}+${t.height} outside the badge height ${height}`);
    // The table must not be narrower than the font this browser draws: without textLength the text fits all the same.
    const declared = Number(text.getAttribute('textLength'));
    text.removeAttribute('textLength');
    const natural = text.getComputedTextLength();
    if (natural > declared + slack) problems.push(`${kind} text is ${natural} px wide in the font, the table says ${declared}: "${text.textContent}"`);
  }
  return { root: root.localName, width, height, problems };
}

/** PNG width and height, from the IHDR chunk. */
function pngSize(png: Buffer): { width: number; height: number } {
  expect(png.subarray(1, 4).toString('latin1')).toBe('PNG');
  return { width: png.readUInt32BE(16), height: png.readUInt32BE(20) };
}

async function openBrowser(): Promise<Page> {
  browser ??= await (await chromium()).launch({ executablePath: '/usr/bin/chromium', args: CHROMIUM_FLAGS, headless: true });
  // The badge's CSP sandboxes it when opened on its own; the test reads its geometry all the same.
  return browser.newPage({ bypassCSP: true });
}

describe('badges in headless Chromium', () => {
  it('the width table is the font Chromium draws', async () => {
    const measured = await measureWidths('DejaVu Sans', tableCodePoints());
    const off = tableCodePoints().filter((cp) => Math.abs((measured.get(cp) as number) - (tableWidth(cp) as number)) > 0.01);
    expect(off.map((cp) => `U+${cp.toString(16)}: table ${tableWidth(cp)}, font ${measured.get(cp)}`)).toEqual([]);
  });

  it('every style and theme: a screenshot of the declared size, no text outside its box', { timeout: 180_000 }, async () => {
    const page = await openBrowser();
    // The badge as a README shows it: an img in an HTML page.
    const readme = await openBrowser();
    const ids = ['passing', 'degraded', 'failing', 'long', 'markup', 'empty', 'nodata'];
    for (const style of BADGE_STYLES) {
      for (const theme of BADGE_THEMES) {
        const shots = new Map<string, Buffer>();
        for (const id of ids) {
          const url = `${base}/v1/badges/checks/${id}?style=${style}&theme=${theme}&responseTime=true`;
          await page.goto(url);
          const g = await page.evaluate(geometry, undefined);
          const where = `${id} ${style} ${theme}`;
          // A document that is not well-formed XML would be Chromium's error page, not an svg root.
          expect(g.root, where).toBe('svg');
          expect(g.problems, where).toEqual([]);
          await readme.setContent(`<body style="margin:0;background:#fff"><img id="badge" src="${url}"></body>`);
          const natural = await readme.evaluate(async () => {
            const img = (globalThis as unknown as { document: { getElementById(id: string): { decode(): Promise<void>; naturalWidth: number; naturalHeight: number } } }).document.getElementById('badge');
            await img.decode();
            return { width: img.naturalWidth, height: img.naturalHeight };
          }, undefined);
          expect(natural, where).toEqual({ width: g.width, height: g.height });
          const shot = await readme.locator('#badge').screenshot();
          expect(pngSize(shot), where).toEqual({ width: g.width, height: g.height });
          shots.set(id, shot);
        }
        // Something was drawn: the status shows in the picture.
        expect(shots.get('passing')?.equals(shots.get('failing') as Buffer)).toBe(false);
      }
    }
  });
});
