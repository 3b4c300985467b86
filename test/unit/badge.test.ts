// The badge renderer (src/server/badge.ts) on its own: text widths from the
// font table and the fallback, truncation of long names, XML escaping, and
// well-formed SVG for every style and theme. Rendering in Chromium is
// test/integration/badges.test.ts.

import { describe, expect, it } from 'vitest';
import {
  BADGE_STYLES,
  BADGE_THEMES,
  type BadgeStatus,
  escapeXml,
  FALLBACK_EM,
  MAX_LABEL_WIDTH,
  renderBadge,
  tableCodePoints,
  tableWidth,
  textWidth,
  truncate,
  xmlSafe,
} from '../../src/server/badge.js';

const STATUSES: BadgeStatus[] = ['passing', 'degraded', 'failing', 'no data'];
const FALLBACK = FALLBACK_EM * 11;

/**
 * A small well-formedness check of XML 1.0 as the renderer writes it: one
 * root element, every tag closed in order, attributes quoted and unique, only
 * the predefined and numeric entities, no markup character loose in text.
 */
function xmlProblems(xml: string): string[] {
  const problems: string[] = [];
  const stack: string[] = [];
  let roots = 0;
  const checkText = (text: string, where: string) => {
    if (/[<>]/.test(text)) problems.push(`a loose < or > in ${where}`);
    for (const m of text.matchAll(/&([^;\s]*)(;?)/g)) {
      if (m[2] !== ';' || !/^(amp|lt|gt|quot|apos|#\d+|#x[0-9a-fA-F]+)$/.test(m[1] as string)) problems.push(`a bad entity &${m[1]} in ${where}`);
    }
    // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what XML 1.0 forbids
    if (/[\u0000-\u0008\u000b\u000c\u000e-\u001f\ufffe\uffff]/.test(text)) problems.push(`a character XML forbids in ${where}`);
  };
  const tag = /<(\/?)([A-Za-z][\w:-]*)((?:\s+[\w:-]+\s*=\s*(?:"[^"]*"|'[^']*'))*)\s*(\/?)>/y;
  let i = 0;
  while (i < xml.length) {
    const lt = xml.indexOf('<', i);
    const text = xml.slice(i, lt === -1 ? xml.length : lt);
    if (text.trim() !== '' && stack.length === 0) problems.push(`text outside the root: ${text.slice(0, 20)}`);
    checkText(text, 'text');
    if (lt === -1) break;
    tag.lastIndex = lt;
    const m = tag.exec(xml);
    if (!m) {
      problems.push(`a malformed tag at ${lt}: ${xml.slice(lt, lt + 40)}`);
      break;
    }
    const [, close, name, attrs, selfClose] = m as unknown as [string, string, string, string, string];
    if (close) {
      if (stack.pop() !== name) problems.push(`</${name}> closes another element`);
    } else {
      if (stack.length === 0) roots++;
      const names = new Set<string>();
      for (const a of (attrs ?? '').matchAll(/([\w:-]+)\s*=\s*(?:"([^"]*)"|'([^']*)')/g)) {
        if (names.has(a[1] as string)) problems.push(`attribute ${a[1]} twice on <${name}>`);
        names.add(a[1] as string);
        checkText(a[2] ?? a[3] ?? '', `attribute ${a[1]}`);
      }
      if (!selfClose) stack.push(name);
    }
    i = tag.lastIndex;
  }
  if (stack.length > 0) problems.push(`unclosed: ${stack.join(', ')}`);
  if (roots !== 1) problems.push(`${roots} root elements`);
  return problems;
}

describe('text widths', () => {
  it('adds up the table for ASCII and Latin-1 text', () => {
    expect(textWidth('')).toBe(0);
    const word = 'Zürich';
    expect(textWidth(word)).toBeCloseTo([...word].reduce((sum, ch) => sum + (tableWidth(ch.codePointAt(0) as number) as number), 0), 6);
    // The font's figures share one width: a response time does not make the badge jitter.
    expect(textWidth('1234567890')).toBeCloseTo(10 * textWidth('0'), 6);
    expect(textWidth('W')).toBeGreaterThan(textWidth('i'));
  });

  it('scales with the font size and adds letter spacing between characters', () => {
    expect(textWidth('abc', 22)).toBeCloseTo(2 * textWidth('abc'), 6);
    expect(textWidth('abc', 11, 2)).toBeCloseTo(textWidth('abc') + 4, 6);
  });

  it('counts characters outside the table wider than any glyph of the table', () => {
    const widest = Math.max(...tableCodePoints().map((cp) => tableWidth(cp) as number));
    for (const ch of ['東', 'ж', 'λ', '✓', '€']) expect(textWidth(ch)).toBe(FALLBACK);
    expect(FALLBACK).toBeGreaterThan(widest);
    // An emoji outside the Basic Multilingual Plane is one character (a surrogate pair), not two.
    expect(textWidth('🚀')).toBe(FALLBACK);
    expect(textWidth('東京 🚀')).toBeCloseTo(3 * FALLBACK + textWidth(' '), 6);
  });
});

describe('long names', () => {
  it('cuts a name wider than the maximum and ends it with an ellipsis', () => {
    const long = 'The intranet home page of the lab network, checked from every office '.repeat(3);
    const cut = truncate(long, MAX_LABEL_WIDTH);
    expect(cut.endsWith('…')).toBe(true);
    expect(long.startsWith(cut.slice(0, -1))).toBe(true);
    expect(textWidth(cut)).toBeLessThanOrEqual(MAX_LABEL_WIDTH);
    // As long as fits: one more character would not.
    const next = long.slice(0, cut.length);
    expect(textWidth(`${next}…`)).toBeGreaterThan(MAX_LABEL_WIDTH - textWidth('W'));
    expect(truncate('short', MAX_LABEL_WIDTH)).toBe('short');
  });

  it('never cuts inside a surrogate pair', () => {
    const cut = truncate('🚀'.repeat(100), MAX_LABEL_WIDTH);
    expect(cut.endsWith('…')).toBe(true);
    expect(xmlSafe(cut)).toBe(cut);
    expect([...cut.slice(0, -1)].every((ch) => ch === '🚀')).toBe(true);
  });

  it('keeps the badge within the maximum in every style', () => {
    for (const style of BADGE_STYLES) {
      const narrow = renderBadge({ label: 'x', status: 'passing', style });
      const wide = renderBadge({ label: '東'.repeat(500), status: 'passing', style });
      expect(wide.width).toBeLessThanOrEqual(narrow.width + MAX_LABEL_WIDTH + 2);
      expect(wide.svg).toContain('…');
    }
  });
});

describe('XML', () => {
  it('escapes markup characters in names', () => {
    expect(escapeXml(`<a href="x">Tom & 'Jerry'</a>`)).toBe('&lt;a href=&quot;x&quot;&gt;Tom &amp; &apos;Jerry&apos;&lt;/a&gt;');
    const { svg } = renderBadge({ label: `</text><script>alert("x")</script> & ]]>`, status: 'failing' });
    expect(svg).not.toContain('<script');
    expect(svg).toContain('&lt;/text&gt;&lt;script&gt;');
    expect(xmlProblems(svg)).toEqual([]);
  });

  it('replaces what XML 1.0 cannot carry', () => {
    expect(xmlSafe('a\u0000b\u001bc\nd\t\ud800e\uffff')).toBe('a\ufffdb\ufffdc\ufffdd\ufffd\ufffde\ufffd');
    const { svg } = renderBadge({ label: 'bell\u0007 tab\t lone\udc00', status: 'passing' });
    expect(xmlProblems(svg)).toEqual([]);
  });

  it('finds what is not well-formed (the check itself)', () => {
    expect(xmlProblems('<svg><g></svg>')).not.toEqual([]);
    expect(xmlProblems('<svg a="1" a="2"/>')).not.toEqual([]);
    expect(xmlProblems('<svg>&nbsp;</svg>')).not.toEqual([]);
    expect(xmlProblems('<svg>a < b</svg>')).not.toEqual([]);
    expect(xmlProblems('<svg/><svg/>')).not.toEqual([]);
    expect(xmlProblems('<svg x="&amp;">&#x41;</svg>')).toEqual([]);
  });

  it('renders well-formed SVG for every style, theme and status, with and without a response time', () => {
    for (const style of BADGE_STYLES) {
      for (const theme of BADGE_THEMES) {
        for (const status of STATUSES) {
          for (const responseTimeMs of [undefined, 1234.6]) {
            const badge = renderBadge({ label: 'Café <Zürich> & 東京 🚀', status, style, theme, ...(responseTimeMs === undefined ? {} : { responseTimeMs }) });
            expect(badge.svg.startsWith('<svg')).toBe(true);
            expect(xmlProblems(badge.svg), `${style} ${theme} ${status}`).toEqual([]);
            expect(badge.svg).toContain(`width="${badge.width}" height="${badge.height}"`);
            expect(Number.isInteger(badge.width)).toBe(true);
            const shown = style === 'for-the-badge' ? status.toUpperCase() : status;
            expect(badge.svg).toContain(`>${shown}${responseTimeMs !== undefined && status !== 'no data' ? (style === 'for-the-badge' ? ' | 1235 MS' : ' | 1235 ms') : ''}</text>`);
          }
        }
      }
    }
  });

  it('differs between themes and styles', () => {
    const svgs = new Set<string>();
    for (const style of BADGE_STYLES) for (const theme of BADGE_THEMES) svgs.add(renderBadge({ label: 'x', status: 'passing', style, theme }).svg);
    expect(svgs.size).toBe(BADGE_STYLES.length * BADGE_THEMES.length);
  });
});
