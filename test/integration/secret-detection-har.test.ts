// The false-positive figure of runtime secret detection (src/secrets/detection.ts,
// docs/secrets.md): Chromium (Debian's, driven by runtime 2026-04's
// playwright-core) browses a site that a real nginx serves — HTML, minified
// application JavaScript and CSS (Playwright's own bundles), fonts, SVG, PNG and
// JPEG images (screenshots of the site), JSON documents and a paged JSON API —
// recording a HAR with every body embedded, of nearly 10 MB (the largest
// artifact a script run hands over). Searched as a run's artifact is, it gives
// no detection; the same HAR with three credentials added gives exactly those.

import { chmodSync, copyFileSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { browserPath } from '../../src/checks/scripted/runtimes.js';
import { SecretDetector } from '../../src/secrets/detection.js';
import { REPO, tempDir } from '../support/agent-process.js';
import { type Nginx, startNginx } from '../support/nginx.js';
import { mulberry32 } from '../support/random.js';
import { installRuntime, RUNTIME_DIR } from '../support/scripted-run.js';

/** What this file uses of playwright-core (the runtime's; the agent itself does not depend on it). */
interface Page {
  goto(url: string): Promise<unknown>;
  waitForFunction(fn: string, arg?: unknown, options?: { timeout: number }): Promise<unknown>;
  screenshot(options: { path: string; fullPage?: boolean; type?: 'png' | 'jpeg'; quality?: number }): Promise<unknown>;
  setViewportSize(size: { width: number; height: number }): Promise<void>;
}
interface Context {
  newPage(): Promise<Page>;
  close(): Promise<void>;
}
interface Browser {
  newContext(options?: { recordHar?: { path: string; content: 'embed' } }): Promise<Context>;
  close(): Promise<void>;
}
type Chromium = { launch(options: { executablePath?: string; args: string[] }): Promise<Browser> };

const VITE = path.join(RUNTIME_DIR, 'node_modules', 'playwright-core', 'lib', 'vite');
const TYPESCRIPT_LOCALES = path.join(REPO, 'node_modules', 'typescript', 'lib');
const BIOME_SCHEMA = path.join(REPO, 'node_modules', '@biomejs', 'biome', 'configuration_schema.json');
const MB = 1_000_000;

let nginx: Nginx | undefined;
let har = '';

/** Every file under `dir` whose name ends with one of `extensions`, largest first. */
function filesOf(dir: string, extensions: string[]): string[] {
  const out: string[] = [];
  const walk = (at: string, depth: number) => {
    if (depth > 4) return;
    for (const name of readdirSync(at)) {
      const file = path.join(at, name);
      if (statSync(file).isDirectory()) walk(file, depth + 1);
      else if (extensions.some((ext) => name.endsWith(ext))) out.push(file);
    }
  };
  walk(dir, 0);
  return out.sort((a, b) => statSync(b).size - statSync(a).size);
}

/** A shop's paged product API: the ids, hashes, timestamps and cursors of ordinary JSON traffic. */
function productPage(page: number, pages: number): string {
  const random = mulberry32(page);
  const hex = (n: number) => Array.from({ length: n }, () => Math.floor(random() * 16).toString(16)).join('');
  const uuid = () => `${hex(8)}-${hex(4)}-4${hex(3)}-a${hex(3)}-${hex(12)}`;
  const items = Array.from({ length: 40 }, (_, i) => ({
    id: uuid(),
    sku: `SKU-${page}-${i}`,
    name: `Product ${page * 40 + i}`,
    price: Math.round(random() * 10_000) / 100,
    currency: 'EUR',
    image: `/site/img/${hex(32)}.webp`,
    etag: `W/"${hex(40)}"`,
    createdAt: new Date(1_700_000_000_000 + Math.floor(random() * 1e10)).toISOString(),
    tags: ['new', 'sale', 'eco'].filter(() => random() > 0.5),
  }));
  const next = page < pages ? Buffer.from(`{"page":${page + 1},"sort":"name"}`).toString('base64url') : null;
  return JSON.stringify({ items, page, pages, nextPageToken: next, requestId: uuid() });
}

function buildSite(): string {
  const dir = tempDir('outpost-har-site-');
  const sub = (name: string) => {
    mkdirSync(path.join(dir, name), { recursive: true });
    return path.join(dir, name);
  };
  const copy = (files: string[], to: string) => files.map((file) => {
    const name = `${path.basename(path.dirname(file))}-${path.basename(file)}`;
    copyFileSync(file, path.join(sub(to), name));
    return `${to}/${name}`;
  });
  const scripts = copy(filesOf(VITE, ['.js']), 'js');
  const styles = copy(filesOf(VITE, ['.css']), 'css');
  const fonts = copy(filesOf(VITE, ['.ttf']).slice(0, 1), 'fonts');
  const svgs = copy(filesOf(VITE, ['.svg']), 'img');
  const locales = readdirSync(TYPESCRIPT_LOCALES).filter((l) => statSync(path.join(TYPESCRIPT_LOCALES, l, 'diagnosticMessages.generated.json'), { throwIfNoEntry: false }));
  const documents = locales.slice(0, 11).map((locale) => {
    copyFileSync(path.join(TYPESCRIPT_LOCALES, locale, 'diagnosticMessages.generated.json'), path.join(sub('data'), `messages-${locale}.json`));
    return `data/messages-${locale}.json`;
  });
  copyFileSync(BIOME_SCHEMA, path.join(sub('data'), 'configuration_schema.json'));
  documents.push('data/configuration_schema.json');
  const pages = 12;
  const api = Array.from({ length: pages }, (_, i) => {
    writeFileSync(path.join(sub('api'), `products-${i + 1}.json`), productPage(i + 1, pages));
    return `api/products-${i + 1}.json`;
  });
  writeFileSync(
    path.join(dir, 'shop.html'),
    `<!doctype html><html><head><meta charset="utf-8"><title>Shop</title>
<style>@font-face{font-family:codicon;src:url(${fonts[0]})}body{font:15px system-ui;margin:0}header{background:#24292f;color:#fff;padding:12px 24px}
ul{display:grid;grid-template-columns:repeat(auto-fill,minmax(180px,1fr));gap:12px;padding:24px;list-style:none}li{border:1px solid #d0d7de;border-radius:6px;padding:12px}
.price{color:#1a7f37;font-weight:600}</style></head>
<body><header><img src="${svgs[0]}" width="24" height="24" alt=""> Outpost shop</header><ul id="list"></ul>
<script>fetch('${api[0]}').then((r) => r.json()).then((page) => {
  document.getElementById('list').innerHTML = page.items.map((p) => '<li><b>' + p.name + '</b><br><span class="price">' + p.price.toFixed(2) + ' ' + p.currency + '</span><br><small>' + p.tags.join(', ') + '</small></li>').join('');
  document.title = 'done';
});</script></body></html>`,
  );
  writeFileSync(
    path.join(dir, 'index.html'),
    `<!doctype html><html><head><meta charset="utf-8"><title>Loading</title>
${styles.map((href) => `<link rel="stylesheet" href="${href}">`).join('\n')}
</head><body><h1>Outpost</h1>
${svgs.map((src) => `<img src="${src}" width="32" height="32" alt="">`).join('\n')}
<img src="shots/wide.png" alt=""><img src="shots/narrow.png" alt=""><img src="shots/photo.jpg" alt="">
<script>
const texts = ${JSON.stringify([...scripts, ...documents])};
const apis = ${JSON.stringify(api)};
const images = [...document.images].map((img) => img.decode().catch(() => undefined));
Promise.all([...texts.map((u) => fetch(u).then((r) => r.text())), ...apis.map((u) => fetch(u, { headers: { accept: 'application/json' } }).then((r) => r.json())), ...images])
  .then(() => { document.title = 'done'; });
</script></body></html>`,
  );
  // nginx's workers run as nobody when the tests run as root.
  chmodSync(dir, 0o755);
  return dir;
}

beforeAll(async () => {
  await installRuntime();
  const chromiumPath = browserPath();
  if (!chromiumPath) throw new Error("Debian's chromium is needed (test/setup/provision.sh installs it)");
  const site = buildSite();
  nginx = await startNginx({ serverConfig: `    location /site/ { alias ${site}/; include /etc/nginx/mime.types; }\n`, accessLog: false });
  const { chromium } = createRequire(import.meta.url)(path.join(RUNTIME_DIR, 'node_modules', 'playwright-core')) as { chromium: Chromium };
  const browser = await chromium.launch({ executablePath: chromiumPath, args: ['--no-sandbox', '--disable-gpu'] });
  try {
    // The site's images: screenshots of its shop page, as a site has product photos.
    const shots = path.join(site, 'shots');
    mkdirSync(shots);
    const plain = await browser.newContext();
    const shop = await plain.newPage();
    await shop.goto(`${nginx.url}/site/shop.html`);
    await shop.waitForFunction("document.title === 'done'", undefined, { timeout: 30_000 });
    await shop.screenshot({ path: path.join(shots, 'wide.png'), fullPage: true });
    await shop.setViewportSize({ width: 480, height: 900 });
    await shop.screenshot({ path: path.join(shots, 'narrow.png'), fullPage: true });
    await shop.setViewportSize({ width: 1600, height: 1200 });
    await shop.screenshot({ path: path.join(shots, 'photo.jpg'), type: 'jpeg', quality: 85 });
    await plain.close();
    for (const name of readdirSync(site, { recursive: true }) as string[]) chmodSync(path.join(site, name), statSync(path.join(site, name)).isDirectory() ? 0o755 : 0o644);
    const harFile = path.join(tempDir('outpost-har-'), 'network.har');
    const context = await browser.newContext({ recordHar: { path: harFile, content: 'embed' } });
    for (const page of ['shop.html', 'index.html']) {
      const tab = await context.newPage();
      await tab.goto(`${nginx.url}/site/${page}`);
      await tab.waitForFunction("document.title === 'done'", undefined, { timeout: 60_000 });
    }
    await context.close();
    har = readFileSync(harFile, 'utf8');
  } finally {
    await browser.close();
  }
}, 240_000);

afterAll(async () => {
  await nginx?.stop();
});

describe('secret detection on ordinary traffic', () => {
  it('finds nothing in a HAR of nearly 10 MB of HTML, minified JS, CSS, fonts, images and JSON APIs', () => {
    const entries = (JSON.parse(har) as { log: { entries: Array<{ response: { content: { mimeType?: string } } }> } }).log.entries;
    const types = new Set(entries.map((e) => (e.response.content.mimeType ?? '').split(';')[0]));
    expect([...types]).toEqual(expect.arrayContaining(['text/html', 'application/javascript', 'text/css', 'application/json', 'image/png', 'image/jpeg', 'image/svg+xml']));
    // What a run hands over: at most 10 MB a file (src/checks/scripted/runner.ts).
    const bytes = Buffer.byteLength(har);
    expect(bytes).toBeGreaterThan(8 * MB);
    expect(bytes).toBeLessThanOrEqual(10 * MB);
    const detector = new SecretDetector();
    const started = performance.now();
    detector.scan(har, 'artifact network.har');
    const ms = performance.now() - started;
    // The figure for docs/secrets.md (the time is information, not asserted).
    console.info(
      `secret detection: ${entries.length} requests, ${(bytes / MB).toFixed(2)} MB of HAR (${detector.searched} characters searched), ${detector.candidates} pattern matches judged, ${detector.detections.length} detections, ${ms.toFixed(0)} ms`,
    );
    expect(detector.detections).toEqual([]);
    expect(detector.values).toEqual([]);
    // Searched to its end.
    expect(detector.notes).toEqual([]);
  });

  it('finds exactly the credentials added to that HAR', () => {
    const jwt =
      'eyJhbGciOiJSUzI1NiIsImtpZCI6IjEifQ.eyJpc3MiOiJodHRwczovL2lkcC5leGFtcGxlIiwic3ViIjoiNDIifQ.Zm9vYmFyYmF6cXV4cXV1eGNvcmdlZ3JhdWx0Z2FycGx5d2FsZG9mcmVk';
    const withCredentials = har.replace('"headers": [', `"headers": [{"name": "authorization", "value": "Bearer ${jwt}"}, {"name": "x-aws", "value": "AKIAQ3EGRZLN7VW2KX5D"}, {"name": "x-session-note", "value": "password=Xk9mQ2vL7pR4z"},`);
    const detector = new SecretDetector();
    detector.scan(withCredentials, 'artifact network.har');
    expect(detector.values.sort()).toEqual(['AKIAQ3EGRZLN7VW2KX5D', 'Xk9mQ2vL7pR4z', jwt].sort());
  });
});
