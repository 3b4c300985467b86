// A check's status badge as SVG (pure: no I/O). Text is set in DejaVu Sans
// at 11px; its width comes from FONT_WIDTHS, the font's advance widths
// measured in Chromium (test/support/badge-font-widths.ts rebuilds the table,
// test/unit/badge.test.ts checks it). A character outside the table (CJK,
// emoji, other scripts) counts as FALLBACK_EM of the font size, wider than
// any such glyph, so a label is never drawn wider than its box; each text
// element also carries its computed width as textLength, so a viewer whose
// fallback font (Verdana, another sans-serif) is narrower or wider still
// fills exactly the box. A label wider than MAX_LABEL_WIDTH is cut and ends
// with an ellipsis; the badge never grows past it.

/** The badge styles of the service's API, `flat` first (the default). */
export const BADGE_STYLES = ['flat', 'plastic', 'flat-square', 'for-the-badge', 'social'] as const;
export type BadgeStyle = (typeof BADGE_STYLES)[number];

export const BADGE_THEMES = ['default', 'light', 'dark'] as const;
export type BadgeTheme = (typeof BADGE_THEMES)[number];

export type BadgeStatus = 'passing' | 'degraded' | 'failing' | 'no data';

export interface BadgeInput {
  /** The left part: the check's name. */
  label: string;
  status: BadgeStatus;
  /** The last FINAL result's response time in ms, shown after the status when given. */
  responseTimeMs?: number;
  style?: BadgeStyle;
  theme?: BadgeTheme;
}

export interface Badge {
  svg: string;
  width: number;
  height: number;
}

/** The font the table measures; the others follow when a viewer lacks it. */
export const FONT_FAMILY = "'DejaVu Sans',Verdana,Geneva,sans-serif";
/** The size FONT_WIDTHS holds widths for. */
export const TABLE_FONT_SIZE = 11;
/** Width of a character the table lacks, in ems: wider than CJK (1 em) and colour emoji (about 1.25 em). */
export const FALLBACK_EM = 1.3;
/** The widest a label's text may be, in px at 11px; longer names are cut with an ellipsis. */
export const MAX_LABEL_WIDTH = 240;

/** Advance widths in hundredths of a px at 11px, per run of consecutive code points from the first. */
const FONT_TABLE: ReadonlyArray<readonly [number, string]> = [
  [0x20, '350,441,506,922,700,1045,858,302,429,429,550,922,350,397,350,371,700,700,700,700,700,700,700,700,700,700,371,371,922,922,922,584,1100,753,755,768,847,695,633,852,827,324,324,721,613,949,823,866,663,866,764,698,672,805,753,1088,754,672,754,429,371,429,922,550,550,674,698,605,698,677,379,698,697,306,306,637,306,1072,697,673,698,698,452,573,431,697,651,900,651,651,577,700,371,700,922'],
  [0xa0, '350,441,700,700,700,700,371,550,550,1100,518,673,922,0,1100,550,550,922,441,441,550,700,700,350,550,441,518,673,1066,1066,1066,584,753,753,753,753,753,753,1072,768,695,695,695,695,324,324,324,324,852,823,866,866,866,866,866,922,866,805,805,805,805,672,666,693,674,674,674,674,674,674,1080,605,677,677,677,677,306,306,306,306,673,697,673,673,673,673,673,922,673,697,697,697,697,651,698,651,753,674,753,674,753,674,768,605,768,605,768,605,768,605,847,698,852,698,695,677,695,677,695,677,695,677,695,677,852,698,852,698,852,698,852,698,827,697,1008,764,324,306,324,306,324,306,324,306,324,306,649,611,324,306,721,637,637,613,306,613,306,613,413,613,376,618,313,823,697,823,697,823,697,895,823,697,866,673,866,673,866,673,1177,1125,764,452,764,452,764,452,698,573,698,573,698,573,698,573,672,431,672,431,672,431,805,697,805,697,805,697,805,697,805,697,805,697,1088,900,672,651,672,754,577,754,577,754,577,387'],
  [0x2026, '1100'],
];

const FONT_WIDTHS: ReadonlyMap<number, number> = new Map(
  FONT_TABLE.flatMap(([first, widths]) => widths.split(',').map((w, i) => [first + i, Number(w) / 100] as const)),
);

/** The table's width of a code point at 11px; undefined outside it. */
export function tableWidth(codePoint: number): number | undefined {
  return FONT_WIDTHS.get(codePoint);
}

/** The code points the table holds (for the test that measures them again). */
export function tableCodePoints(): number[] {
  return [...FONT_WIDTHS.keys()];
}

/** Width of a text in px at `fontSize`, plus `letterSpacing` after each character but the last. */
export function textWidth(text: string, fontSize = TABLE_FONT_SIZE, letterSpacing = 0): number {
  let width = 0;
  let count = 0;
  for (const ch of text) {
    const cp = ch.codePointAt(0) as number;
    width += ((FONT_WIDTHS.get(cp) ?? FALLBACK_EM * TABLE_FONT_SIZE) * fontSize) / TABLE_FONT_SIZE;
    count++;
  }
  return width + letterSpacing * Math.max(0, count - 1);
}

/**
 * What XML 1.0 can carry: control characters (tab, newline and the like
 * included: a badge is one line), lone surrogates and U+FFFE/U+FFFF become
 * U+FFFD; runs of spaces stay (the text is laid out with its spaces).
 */
export function xmlSafe(text: string): string {
  let out = '';
  for (const ch of text) {
    const cp = ch.codePointAt(0) as number;
    const bad = cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) || (cp >= 0xd800 && cp <= 0xdfff) || cp === 0xfffe || cp === 0xffff;
    out += bad ? '\uFFFD' : ch;
  }
  return out;
}

/** Escapes text for an XML element or a double- or single-quoted attribute. */
export function escapeXml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&apos;' })[c] as string);
}

/** The text cut to at most `maxWidth`, with an ellipsis when cut. */
export function truncate(text: string, maxWidth: number, fontSize = TABLE_FONT_SIZE, letterSpacing = 0): string {
  if (textWidth(text, fontSize, letterSpacing) <= maxWidth) return text;
  const chars = [...text];
  while (chars.length > 0 && textWidth(`${chars.join('').trimEnd()}…`, fontSize, letterSpacing) > maxWidth) chars.pop();
  return `${chars.join('').trimEnd()}…`;
}

interface Palette {
  labelBg: string;
  labelText: string;
  messageText: string;
  /** Message background per status. */
  message: Record<BadgeStatus, string>;
  /** White text gets a dark shadow in the styles that have one. */
  shadow: boolean;
}

const PALETTES: Record<BadgeTheme, Palette> = {
  default: {
    labelBg: '#555',
    labelText: '#fff',
    messageText: '#fff',
    message: { passing: '#3c9a1f', degraded: '#b98d00', failing: '#d2452f', 'no data': '#8a8a8a' },
    shadow: true,
  },
  light: {
    labelBg: '#eaeef2',
    labelText: '#24292f',
    messageText: '#24292f',
    message: { passing: '#aceebb', degraded: '#fae17d', failing: '#ffcecb', 'no data': '#d0d7de' },
    shadow: false,
  },
  dark: {
    labelBg: '#24292f',
    labelText: '#e6edf3',
    messageText: '#fff',
    message: { passing: '#238636', degraded: '#9e6a03', failing: '#da3633', 'no data': '#484f58' },
    shadow: true,
  },
};

/** The status words the message shows; the response time follows when asked for. */
export function badgeMessage(status: BadgeStatus, responseTimeMs?: number): string {
  if (responseTimeMs === undefined || status === 'no data') return status;
  return `${status} | ${Math.round(responseTimeMs)} ms`;
}

interface Layout {
  height: number;
  fontSize: number;
  /** Text baseline. */
  baseline: number;
  padding: number;
  letterSpacing: number;
  upperCase: boolean;
  radius: number;
  fontWeight: 'normal' | 'bold';
}

const LAYOUTS: Record<BadgeStyle, Layout> = {
  flat: { height: 20, fontSize: 11, baseline: 14, padding: 6, letterSpacing: 0, upperCase: false, radius: 3, fontWeight: 'normal' },
  plastic: { height: 18, fontSize: 11, baseline: 13, padding: 6, letterSpacing: 0, upperCase: false, radius: 4, fontWeight: 'normal' },
  'flat-square': { height: 20, fontSize: 11, baseline: 14, padding: 6, letterSpacing: 0, upperCase: false, radius: 0, fontWeight: 'normal' },
  'for-the-badge': { height: 28, fontSize: 10, baseline: 18, padding: 10, letterSpacing: 1.2, upperCase: true, radius: 0, fontWeight: 'normal' },
  social: { height: 20, fontSize: 11, baseline: 14, padding: 6, letterSpacing: 0, upperCase: false, radius: 2, fontWeight: 'normal' },
};

/** Gap between the social style's label and its message bubble, the bubble's arrow inside it. */
const SOCIAL_GAP = 6;

interface Part {
  text: string;
  /** Width of the text as laid out. */
  textWidth: number;
  /** Width of its box. */
  boxWidth: number;
}

function part(raw: string, layout: Layout, maxWidth: number): Part {
  const cased = layout.upperCase ? raw.toUpperCase() : raw;
  const text = truncate(xmlSafe(cased), maxWidth, layout.fontSize, layout.letterSpacing);
  const width = textWidth(text, layout.fontSize, layout.letterSpacing);
  return { text, textWidth: width, boxWidth: Math.ceil(width) + 2 * layout.padding };
}

function num(n: number): string {
  return String(Math.round(n * 100) / 100);
}

/** One text element with its width fixed (textLength) and, when asked, its shadow one px below. */
function textElement(p: Part, x: number, layout: Layout, fill: string, shadow: boolean, className: string): string {
  const common = `x="${num(x + layout.padding)}" textLength="${num(p.textWidth)}" lengthAdjust="spacing"`;
  const text = escapeXml(p.text);
  const shade = shadow ? `<text class="${className}-shadow" ${common} y="${layout.baseline + 1}" fill="#010101" fill-opacity=".3" aria-hidden="true">${text}</text>` : '';
  return `${shade}<text class="${className}" ${common} y="${layout.baseline}" fill="${fill}">${text}</text>`;
}

export function renderBadge(input: BadgeInput): Badge {
  const style = input.style ?? 'flat';
  const theme = input.theme ?? 'default';
  const layout = LAYOUTS[style];
  const palette = PALETTES[theme];
  const message = badgeMessage(input.status, input.responseTimeMs);
  const maxWidth = (MAX_LABEL_WIDTH * layout.fontSize) / TABLE_FONT_SIZE;
  const label = part(input.label === '' ? ' ' : input.label, layout, maxWidth);
  const msg = part(message, layout, maxWidth);
  const h = layout.height;
  const title = escapeXml(`${xmlSafe(input.label)}: ${message}`);
  const font = `font-family="${escapeXml(FONT_FAMILY)}" font-size="${layout.fontSize}" font-weight="${layout.fontWeight}"`;

  if (style === 'social') return social(label, msg, layout, theme, input.status, title, font);

  const width = label.boxWidth + msg.boxWidth;
  const shadow = palette.shadow && style !== 'flat-square' && style !== 'for-the-badge';
  const gradient =
    style === 'flat'
      ? '<linearGradient id="s" x2="0" y2="100%"><stop offset="0" stop-color="#bbb" stop-opacity=".1"/><stop offset="1" stop-opacity=".1"/></linearGradient>'
      : style === 'plastic'
        ? '<linearGradient id="s" x2="0" y2="100%"><stop offset="0" stop-color="#fff" stop-opacity=".7"/><stop offset=".1" stop-color="#aaa" stop-opacity=".1"/><stop offset=".9" stop-opacity=".3"/><stop offset="1" stop-opacity=".5"/></linearGradient>'
        : '';
  const clip = layout.radius > 0 ? `<clipPath id="r"><rect width="${width}" height="${h}" rx="${layout.radius}" fill="#fff"/></clipPath>` : '';
  const svg = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${h}" viewBox="0 0 ${width} ${h}" role="img" aria-label="${title}">`,
    `<title>${title}</title>`,
    gradient,
    clip,
    `<g${clip ? ' clip-path="url(#r)"' : ''}>`,
    `<rect class="label-box" width="${label.boxWidth}" height="${h}" fill="${palette.labelBg}"/>`,
    `<rect class="message-box" x="${label.boxWidth}" width="${msg.boxWidth}" height="${h}" fill="${palette.message[input.status]}"/>`,
    gradient ? `<rect width="${width}" height="${h}" fill="url(#s)"/>` : '',
    '</g>',
    `<g ${font}>`,
    textElement(label, 0, layout, palette.labelText, shadow, 'label'),
    textElement(msg, label.boxWidth, layout, palette.messageText, shadow, 'message'),
    '</g>',
    '</svg>',
  ].join('');
  return { svg, width, height: h };
}

/** GitHub's social look: a light label button and the message in a bubble beside it. */
function social(label: Part, msg: Part, layout: Layout, theme: BadgeTheme, status: BadgeStatus, title: string, font: string): Badge {
  const h = layout.height;
  const dark = theme === 'dark';
  const light = theme === 'light';
  const top = dark ? '#2d333b' : light ? '#fff' : '#fcfcfc';
  const bottom = dark ? '#22272e' : light ? '#f6f8fa' : '#eee';
  const stroke = dark ? '#545d68' : light ? '#d0d7de' : '#d5d5d5';
  const text = dark ? '#adbac7' : light ? '#24292f' : '#333';
  const bubble = dark ? '#22272e' : light ? '#fff' : '#fafafa';
  const statusText: Record<BadgeStatus, string> = dark
    ? { passing: '#57ab5a', degraded: '#c69026', failing: '#e5534b', 'no data': '#adbac7' }
    : { passing: '#1a7f37', degraded: '#7d4e00', failing: '#cf222e', 'no data': '#57606a' };
  const bubbleX = label.boxWidth + SOCIAL_GAP;
  const width = bubbleX + msg.boxWidth;
  const mid = h / 2;
  const svg = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${h}" viewBox="0 0 ${width} ${h}" role="img" aria-label="${title}">`,
    `<title>${title}</title>`,
    `<linearGradient id="s" x2="0" y2="100%"><stop offset="0" stop-color="${top}"/><stop offset="1" stop-color="${bottom}"/></linearGradient>`,
    `<rect class="label-box" x=".5" y=".5" width="${label.boxWidth - 1}" height="${h - 1}" rx="${layout.radius}" fill="url(#s)" stroke="${stroke}"/>`,
    `<rect class="message-box" x="${bubbleX + 0.5}" y=".5" width="${msg.boxWidth - 1}" height="${h - 1}" rx="${layout.radius}" fill="${bubble}" stroke="${stroke}"/>`,
    // The bubble's arrow, pointing at the label, drawn over the bubble's left border.
    `<path d="M${bubbleX + 0.5} ${mid - 4}l-4 4 4 4" fill="${bubble}" stroke="${stroke}"/>`,
    `<rect x="${bubbleX + 0.5}" y="${mid - 3.5}" width="1" height="7" fill="${bubble}"/>`,
    `<g ${font}>`,
    textElement(label, 0, layout, text, false, 'label'),
    textElement(msg, bubbleX, layout, statusText[status], false, 'message'),
    '</g>',
    '</svg>',
  ].join('');
  return { svg, width, height: h };
}
