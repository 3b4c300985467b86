// Measures the advance width of each character of the badge font's table
// (src/server/badge.ts FONT_WIDTHS) in headless Chromium: DejaVu Sans at
// 11px, each character repeated 20 times in an SVG text element and the
// length divided, so that kerning-free advances come out to 0.01 px. Run it
// with `node test/support/badge-font-widths.ts` to rebuild the table (it
// prints the ranges as badge.ts holds them); test/unit/badge.test.ts checks
// the table against the same measurement.

import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { installRuntime } from './scripted-run.js';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

/** The code point ranges the table covers: ASCII, Latin-1, Latin Extended-A and the ellipsis truncation uses. */
export const TABLE_RANGES: ReadonlyArray<readonly [number, number]> = [
  [0x20, 0x7e],
  [0xa0, 0x17f],
  [0x2026, 0x2026],
];

/** What the tests use of playwright-core's Page and Browser. */
export interface Page {
  setContent(html: string): Promise<void>;
  goto(url: string): Promise<unknown>;
  evaluate<R, A>(fn: (arg: A) => R, arg: A): Promise<R>;
  locator(selector: string): { screenshot(): Promise<Buffer> };
}
export interface Browser {
  newPage(options?: { bypassCSP?: boolean }): Promise<Page>;
  close(): Promise<void>;
}
/** What the page functions use of the browser's globals (the test tsconfig has no DOM library). */
export interface BrowserWindow {
  document: { getElementById(id: string): { textContent: string | null; getComputedTextLength(): number } };
}
export interface Chromium {
  launch(options: { executablePath: string; args: string[]; headless: boolean }): Promise<Browser>;
}

/** playwright-core of the runtime the repository ships (runtimes/2026-04), installed first on a fresh clone. */
export async function chromium(): Promise<Chromium> {
  await installRuntime();
  const require = createRequire(path.join(REPO, 'runtimes', '2026-04', 'node_modules', 'x.js'));
  return (require('playwright-core') as { chromium: Chromium }).chromium;
}

export const CHROMIUM_FLAGS = ['--no-sandbox', '--disable-gpu', '--font-render-hinting=none'];

/** Rendered advance of each code point, in px at 11px, from Chromium. */
export async function measureWidths(family: string, codePoints: readonly number[]): Promise<Map<number, number>> {
  const browser = await (await chromium()).launch({ executablePath: '/usr/bin/chromium', args: CHROMIUM_FLAGS, headless: true });
  try {
    const page = await browser.newPage();
    await page.setContent(`<svg xmlns="http://www.w3.org/2000/svg"><text id="t" x="0" y="20" font-family="${family}" font-size="11" style="font-kerning:none;white-space:pre"></text></svg>`);
    const widths = await page.evaluate((points: number[]) => {
      const text = (globalThis as unknown as BrowserWindow).document.getElementById('t');
      return points.map((cp) => {
        text.textContent = String.fromCodePoint(cp).repeat(20);
        return text.getComputedTextLength() / 20;
      });
    }, [...codePoints]);
    return new Map(codePoints.map((cp, i) => [cp, widths[i] as number]));
  } finally {
    await browser.close();
  }
}

export function tableCodePoints(): number[] {
  return TABLE_RANGES.flatMap(([from, to]) => Array.from({ length: to - from + 1 }, (_, i) => from + i));
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const widths = await measureWidths('DejaVu Sans', tableCodePoints());
  for (const [from, to] of TABLE_RANGES) {
    const row: string[] = [];
    for (let cp = from; cp <= to; cp++) row.push(String(Math.round((widths.get(cp) ?? 0) * 100)));
    process.stdout.write(`[0x${from.toString(16)}, '${row.join(',')}'],\n`);
  }
}
