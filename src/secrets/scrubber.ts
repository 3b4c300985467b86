// The one scrubber: removes secret values, in the encoded forms
// they travel in, from everything that leaves the agent — results, log lines,
// observability events and artifacts. docs/secrets.md describes
// the rules; this file is the only implementation of them.
//
// Engine. Every secret is expanded once into its encoded forms (see
// `secretForms`); all forms of all secrets of a scrubber sit in one index and
// a text is scanned once, whatever the number of secrets. The index is a
// multi-pattern hash of each pattern's first four code units (every pattern
// is at least four long): at each position of the text the four units under
// the window are hashed (rolling, one `charCodeAt` per position), a bit set
// answers "might a pattern start here?" (almost always no), and only then a
// bucket of candidates is compared for real. All of it lives in typed arrays:
// no allocation per character. On a long text, when every pattern is at
// least eight long, the index is searched Wu–Manber style instead: a window
// as long as the shortest pattern is judged by its last four units, and
// moves on by up to its length less three without reading what it skips
// (a shift table over every pattern's first window), so most characters are
// never read; where the table says a pattern may start, the same candidate
// check runs, so the matches are the same. Matches are merged: every position covered by
// any match is redacted, and each run of overlapping matches becomes one
// `*****` — so when secrets overlap the longest match wins, and no piece of a
// longer secret survives next to a shorter one. With at most
// NATIVE_SEARCH_MAX_PATTERNS patterns (one plain secret) V8's own indexOf is
// faster than any JavaScript loop and is used instead, with the same result.
// Both re-read a pattern wherever it may start, which is quadratic when text
// and secret repeat themselves; past a work budget linear in the input they
// give up, and an Aho–Corasick automaton over the same patterns
// (src/secrets/automaton.ts, built on first need) gives the same runs in
// linear time, whatever the content.
//
// Its API for the rest of the agent (results: src/secrets/policy.ts; artifacts: src/artifacts/scrub.ts):
//   scrubber.scrubText(text)     → text with every secret form replaced by `*****`
//   scrubber.scrubBuffer(bytes)  → bytes with the UTF-8 of every form replaced
//                                  (byte-exact elsewhere, so binary files stay intact;
//                                  the result may be shorter or longer: compute sizes after)
//   scrubber.scrubValue(value)   → every string (keys too) scrubbed, copy-on-write
// A streamed artifact must be scrubbed as a whole (or in chunks that overlap by
// `scrubber.maxPatternBytes - 1`); compressed or encrypted content cannot be
// scrubbed at all (docs/secrets.md).

import { Buffer } from 'node:buffer';
import { domainToASCII } from 'node:url';
import { Automaton } from './automaton.js';
import { foldedRegions, jsonHasBreak, jsonMayFold, unfoldJson } from './folding.js';

/** What every secret form is replaced with. */
export const REDACTED = '*****';
const REDACTED_BYTES = Buffer.from(REDACTED, 'latin1');

/**
 * Secrets shorter than this many characters (Unicode code points) are not
 * scrubbed: replacing every "abc" in every result would destroy them and
 * protect nothing. The agent warns about each such variable once, by key.
 */
export const MIN_SECRET_LENGTH = 4;

/**
 * Up to this many patterns (one or two secrets), V8's own string search
 * (`indexOf`, one pass per pattern, skipping ahead Boyer–Moore style) beats
 * one pass of the index; beyond it the index wins, by more the more patterns.
 */
const NATIVE_SEARCH_MAX_PATTERNS = 12;

/**
 * The fast searches re-read a candidate pattern at each position it may start
 * at: cheap on real text, quadratic on repetitive text and secrets. They may
 * do this much work (candidates looked at plus characters compared) per
 * character of input, plus WORK_ALLOWANCE, before giving up to the
 * Aho–Corasick automaton (src/secrets/automaton.ts), which is linear whatever
 * the content. Real text stays far below it.
 */
const WORK_PER_UNIT = 8;
/** Small: scrubValue scans every string of a result, and the allowance is paid per string. */
const WORK_ALLOWANCE = 256;

function workBudget(length: number): number {
  return WORK_PER_UNIT * length + WORK_ALLOWANCE;
}

/**
 * The skipping search (TextIndex.scan): used on texts at least this long, when
 * every pattern is at least SKIP_MIN_WINDOW long; its window is the shortest
 * pattern, at most SKIP_MAX_WINDOW (the shifts fit a byte).
 */
const SKIP_MIN_TEXT = 1024;
const SKIP_MIN_WINDOW = 8;
const SKIP_MAX_WINDOW = 64;

/** The embedded base64 forms (a secret in the middle of a longer base64 text) must be at least this long. */
const MIN_EMBEDDED_BASE64 = 6;

/** Whether a value is long enough to be scrubbed (counted in code points, not UTF-16 units). */
export function isScrubbable(value: string): boolean {
  if (value.length < MIN_SECRET_LENGTH) return false;
  if (value.length >= MIN_SECRET_LENGTH * 2) return true;
  let points = 0;
  for (const _ of value) if (++points >= MIN_SECRET_LENGTH) return true;
  return false;
}

// ---------------------------------------------------------------------------
// Encoded forms

function setterForm(apply: (url: URL) => string): string | undefined {
  try {
    return apply(new URL('http://h/'));
  } catch {
    return undefined;
  }
}

const HEX_ESCAPE = /%[0-9A-F]{2}/g;

function lowerHex(text: string): string {
  return text.replace(HEX_ESCAPE, (m) => m.toLowerCase());
}

function jsonAscii(json: string, upper: boolean): string {
  let out = '';
  for (let i = 0; i < json.length; i++) {
    const c = json.charCodeAt(i);
    if (c > 0x7e) {
      const hex = c.toString(16).padStart(4, '0');
      out += `\\u${upper ? hex.toUpperCase() : hex}`;
    } else out += json[i];
  }
  return out;
}

function htmlForms(secret: string): string[] {
  const base = secret.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
  const quoted = base.replace(/"/g, '&quot;');
  return [base, quoted, quoted.replace(/'/g, '&#39;'), quoted.replace(/'/g, '&#x27;'), quoted.replace(/'/g, '&apos;')];
}

/** Each byte (or code unit) of `values` written as `prefix` + hex (`digits` wide) + `suffix`, in both hex cases. */
function eachEscaped(values: Iterable<number>, prefix: string, digits: number, suffix = ''): [string, string] {
  let lower = '';
  for (const v of values) lower += `${prefix}${v.toString(16).padStart(digits, '0')}${suffix}`;
  const upper = lower.replace(/[a-f]/g, (c) => c.toUpperCase());
  // The prefix's own letters (`\x`, `&#x`) keep their case.
  const fixedUpper = prefix === '' ? upper : lower.replace(/[0-9a-f]+(?=[^0-9a-f]|$)/g, (hex) => hex.toUpperCase());
  return [lower, prefix === '' ? upper : fixedUpper];
}

function utf16Bytes(secret: string, littleEndian: boolean): number[] {
  const out: number[] = [];
  for (let i = 0; i < secret.length; i++) {
    const c = secret.charCodeAt(i);
    if (littleEndian) out.push(c & 0xff, c >>> 8);
    else out.push(c >>> 8, c & 0xff);
  }
  return out;
}

/**
 * Whole-secret escapings that no single library call writes but a script
 * or a target easily does: hex of the UTF-8 bytes (plain, `\x`, `%` before
 * every byte) and of the UTF-16 code units (LE and BE bytes), `\u` before
 * every code unit, HTML decimal and hex entities for every code point —
 * each with lower- and upper-case hex.
 */
function escapedForms(secret: string): string[] {
  const utf8 = Buffer.from(secret, 'utf8');
  const units: number[] = [];
  for (let i = 0; i < secret.length; i++) units.push(secret.charCodeAt(i));
  const points: number[] = [];
  for (const ch of secret) points.push(ch.codePointAt(0) as number);
  let decimal = '';
  for (const p of points) decimal += `&#${p};`;
  return [
    ...eachEscaped(utf8, '', 2),
    ...eachEscaped(utf8, '\\x', 2),
    ...eachEscaped(utf8, '%', 2),
    ...eachEscaped(utf16Bytes(secret, true), '', 2),
    ...eachEscaped(utf16Bytes(secret, false), '', 2),
    ...eachEscaped(units, '\\u', 4),
    ...eachEscaped(points, '&#x', 1, ';'),
    decimal,
  ];
}

/**
 * Base64 and base64url of the secret's UTF-8 bytes: on its own (padded and
 * not), and embedded in a longer encoded text at each of the three byte
 * alignments — the characters that depend only on the secret's bytes, and,
 * for a secret at the end of the encoded data (`Basic base64(user:secret)`),
 * those plus the last partial character and padding.
 */
function base64Forms(secret: string): string[] {
  const bytes = Buffer.from(secret, 'utf8');
  const n = bytes.length;
  const forms: string[] = [];
  for (let align = 0; align < 3; align++) {
    const shifted = align === 0 ? bytes : Buffer.concat([Buffer.alloc(align), bytes]);
    const std = shifted.toString('base64');
    const start = Math.ceil((8 * align) / 6);
    const determined = Math.floor((8 * align + 8 * n) / 6);
    for (const alphabet of [std, std.replace(/\+/g, '-').replace(/\//g, '_')]) {
      const middle = alphabet.slice(start, determined);
      if (middle.length >= MIN_EMBEDDED_BASE64 || (align === 0 && n % 3 === 0)) forms.push(middle);
      const atEnd = alphabet.slice(start);
      forms.push(atEnd, atEnd.replace(/=+$/, ''));
    }
  }
  return forms;
}

/**
 * Every form in which `secret` is looked for (docs/secrets.md): raw and
 * lower-cased (host names are lower-cased by URL parsing); URL-encoded
 * (encodeURIComponent, the same with `!'()*` encoded too (RFC 3986),
 * form encoding with `+`, the WHATWG URL path, query,
 * userinfo and fragment encodings, upper- and lower-case hex); base64 and
 * base64url (see base64Forms); JSON-escaped (as JSON.stringify writes it,
 * ASCII-only with \u escapes, with `\/`, and JSON inside JSON); HTML-escaped;
 * punycode for internationalised host names. Forms shorter than four code
 * units are dropped (none are, for a secret that is long enough).
 */
export function secretForms(secret: string): string[] {
  const forms: Array<string | undefined> = [secret, secret.toLowerCase(), secret.toUpperCase()];
  let component: string | undefined;
  try {
    component = encodeURIComponent(secret);
  } catch {
    // A lone surrogate cannot be URL-encoded; nothing can send it that way either.
  }
  if (component !== undefined) {
    const plus = component.replace(/%20/g, '+');
    const twice = encodeURIComponent(component);
    // RFC 3986 strict (`!'()*` encoded too): how a `{{NAME}}` lands in a URL's path or query (src/checks/variables.ts).
    const strict = component.replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
    forms.push(component, lowerHex(component), plus, lowerHex(plus), twice, lowerHex(twice), strict, lowerHex(strict));
    try {
      const uri = encodeURI(secret);
      forms.push(uri, lowerHex(uri));
    } catch {
      // As above.
    }
  }
  const form = new URLSearchParams([['', secret]]).toString().slice(1);
  const path = setterForm((u) => {
    u.pathname = `/${secret}`;
    return u.pathname.slice(1);
  });
  const query = setterForm((u) => {
    u.search = `?${secret}`;
    return u.search.slice(1);
  });
  const userinfo = setterForm((u) => {
    u.password = secret;
    return u.password;
  });
  const fragment = setterForm((u) => {
    u.hash = `#${secret}`;
    return u.hash.slice(1);
  });
  for (const encoded of [form, path, query, userinfo, fragment]) {
    if (encoded !== undefined) forms.push(encoded, lowerHex(encoded));
  }
  forms.push(...base64Forms(secret));
  const json = JSON.stringify(secret).slice(1, -1);
  forms.push(json, jsonAscii(json, false), jsonAscii(json, true), json.replace(/\//g, '\\/'), JSON.stringify(json).slice(1, -1));
  // A JSON document holding the secret, base64-encoded (a JWT payload, a data: URL): the escaped form's base64.
  if (json !== secret) forms.push(...base64Forms(json));
  forms.push(...escapedForms(secret));
  forms.push(...htmlForms(secret));
  if (/[\u0080-\uffff]/.test(secret)) {
    const puny = domainToASCII(secret);
    if (puny) forms.push(puny);
  }
  const unique = new Set<string>();
  for (const f of forms) if (f !== undefined && f.length >= MIN_SECRET_LENGTH) unique.add(f);
  return [...unique];
}

/**
 * What a serialized JSON text is scanned for (Scrubber.mayHoldSecret): every
 * form, and each form as it reads inside a JSON string. Only for that scan:
 * scrubText keeps to secretForms, or these escaped forms would themselves be
 * forms whose own escapings a line would need, without end.
 */
export function jsonLineForms(secret: string): string[] {
  const unique = new Set(cachedForms(secret));
  for (const f of cachedForms(secret)) for (const escaped of inJsonString(f)) unique.add(escaped);
  return [...unique];
}

function jsonEscape(text: string): string {
  return JSON.stringify(text).slice(1, -1);
}

/**
 * How `form` is written inside a JSON string by JSON.stringify, when that
 * differs from the form itself (quotes, backslashes, control characters, lone
 * surrogates). A lone surrogate at either end of the form may pair with its
 * neighbour in the text and then stays raw: both spellings of each end.
 */
function inJsonString(form: string): string[] {
  const escaped = jsonEscape(form);
  if (escaped === form) return [];
  const first = form.charCodeAt(0);
  const last = form.charCodeAt(form.length - 1);
  const lowFirst = first >= 0xdc00 && first <= 0xdfff;
  const highLast = last >= 0xd800 && last <= 0xdbff;
  if (!lowFirst && !highLast) return [escaped];
  const head = lowFirst ? form.slice(0, 1) : '';
  const tail = highLast ? form.slice(-1) : '';
  const middle = jsonEscape(form.slice(head.length, form.length - tail.length));
  const out: string[] = [];
  for (const h of lowFirst ? [head, jsonEscape(head)] : ['']) {
    for (const t of highLast ? [tail, jsonEscape(tail)] : ['']) out.push(h + middle + t);
  }
  return out;
}

/** Forms are computed once per distinct secret value (bounded). */
const formsCache = new Map<string, readonly string[]>();
const FORMS_CACHE_MAX = 10_000;

function cachedForms(secret: string): readonly string[] {
  let forms = formsCache.get(secret);
  if (forms === undefined) {
    forms = secretForms(secret);
    if (formsCache.size >= FORMS_CACHE_MAX) formsCache.delete(formsCache.keys().next().value as string);
    formsCache.set(secret, forms);
  }
  return forms;
}

const lineFormsCache = new Map<string, readonly string[]>();

function cachedLineForms(secret: string): readonly string[] {
  let forms = lineFormsCache.get(secret);
  if (forms === undefined) {
    forms = jsonLineForms(secret);
    if (lineFormsCache.size >= FORMS_CACHE_MAX) lineFormsCache.delete(lineFormsCache.keys().next().value as string);
    lineFormsCache.set(secret, forms);
  }
  return forms;
}

// ---------------------------------------------------------------------------
// The pattern index over UTF-16 code units

const M1 = 0x9e3779b1 | 0;
const M2 = 0x85ebca77 | 0;

function hash4(w1: number, w2: number): number {
  return Math.imul(w1 ^ Math.imul(w2, M2), M1);
}

/** A growable multi-pattern index; patterns are reference-counted, so overlapping secret sets can share it. */
class TextIndex {
  private hbits = 0;
  private heads = new Int32Array(0);
  private fbits = 0;
  private filter = new Uint8Array(0);
  private next = new Int32Array(0);
  private k1 = new Int32Array(0);
  private k2 = new Int32Array(0);
  private lens = new Int32Array(0);
  private refs = new Int32Array(0);
  private patterns: Array<string | undefined> = [];
  private readonly slots = new Map<string, number>();
  private freeSlots: number[] = [];
  private stale = 0;
  size = 0;
  /** Bumped on every change (the byte index is rebuilt lazily from it). */
  version = 0;
  /** The skipping search's shift table, rebuilt lazily when the version moved (undefined window: not usable). */
  private skip: { version: number; window: number; bits: number; shifts: Uint8Array } | undefined;
  /** The shift table came from the index this one was copied from: copied before it is changed. */
  private skipShared = false;

  constructor(copyFrom?: TextIndex) {
    if (copyFrom) {
      this.hbits = copyFrom.hbits;
      this.heads = copyFrom.heads.slice();
      this.fbits = copyFrom.fbits;
      this.filter = copyFrom.filter.slice();
      this.next = copyFrom.next.slice();
      this.k1 = copyFrom.k1.slice();
      this.k2 = copyFrom.k2.slice();
      this.lens = copyFrom.lens.slice();
      this.refs = copyFrom.refs.slice();
      this.patterns = copyFrom.patterns.slice();
      for (const [k, v] of copyFrom.slots) this.slots.set(k, v);
      this.freeSlots = copyFrom.freeSlots.slice();
      this.stale = copyFrom.stale;
      this.size = copyFrom.size;
      // A job's index starts from the agent-wide one: its shift table too, until the job adds a pattern.
      this.version = copyFrom.version;
      this.skip = copyFrom.skip;
      this.skipShared = true;
    } else {
      this.resize(16);
    }
  }

  livePatterns(): string[] {
    return [...this.slots.keys()];
  }

  add(pattern: string): void {
    const existing = this.slots.get(pattern);
    if (existing !== undefined) {
      this.refs[existing] = (this.refs[existing] as number) + 1;
      return;
    }
    if ((this.size + 1) * 2 > this.heads.length) this.resize((this.size + 1) * 4);
    let slot = this.freeSlots.pop();
    if (slot === undefined) {
      slot = this.patterns.length;
      this.patterns.push(undefined);
      if (slot >= this.next.length) this.grow(Math.max(16, this.next.length * 2));
    }
    this.patterns[slot] = pattern;
    this.lens[slot] = pattern.length;
    this.refs[slot] = 1;
    this.slots.set(pattern, slot);
    this.link(slot);
    this.size++;
    this.extendSkip(pattern);
    this.version++;
  }

  remove(pattern: string): void {
    const slot = this.slots.get(pattern);
    if (slot === undefined) return;
    const left = (this.refs[slot] as number) - 1;
    this.refs[slot] = left;
    if (left > 0) return;
    const h = hash4(this.k1[slot] as number, this.k2[slot] as number);
    const bucket = h >>> (32 - this.hbits);
    let prev = -1;
    for (let j = this.heads[bucket] as number; j !== -1; prev = j, j = this.next[j] as number) {
      if (j !== slot) continue;
      if (prev === -1) this.heads[bucket] = this.next[j] as number;
      else this.next[prev] = this.next[j] as number;
      break;
    }
    this.slots.delete(pattern);
    this.patterns[slot] = undefined;
    this.freeSlots.push(slot);
    this.size--;
    this.version++;
    // The filter bit may be shared with other patterns; rebuild it once stale bits dominate.
    if (++this.stale > Math.max(64, this.size)) this.resize(Math.max(16, this.size * 4));
  }

  private grow(capacity: number): void {
    const copy = (a: Int32Array) => {
      const b = new Int32Array(capacity);
      b.set(a);
      return b;
    };
    this.next = copy(this.next);
    this.k1 = copy(this.k1);
    this.k2 = copy(this.k2);
    this.lens = copy(this.lens);
    this.refs = copy(this.refs);
  }

  private link(slot: number): void {
    const p = this.patterns[slot] as string;
    const w1 = (p.charCodeAt(0) << 16) | p.charCodeAt(1);
    const w2 = (p.charCodeAt(2) << 16) | p.charCodeAt(3);
    this.k1[slot] = w1;
    this.k2[slot] = w2;
    const h = hash4(w1, w2);
    const bucket = h >>> (32 - this.hbits);
    this.next[slot] = this.heads[bucket] as number;
    this.heads[bucket] = slot;
    const f = h >>> (32 - this.fbits);
    this.filter[f >>> 3] = (this.filter[f >>> 3] as number) | (1 << (f & 7));
  }

  /** Re-hashes every live pattern into tables sized for `slotsWanted` buckets. */
  private resize(slotsWanted: number): void {
    this.hbits = Math.min(24, Math.max(4, Math.ceil(Math.log2(slotsWanted))));
    this.heads = new Int32Array(1 << this.hbits).fill(-1);
    // About 32 filter bits per bucket: a random window passes the filter rarely.
    this.fbits = Math.min(26, this.hbits + 5);
    this.filter = new Uint8Array(Math.max(1, (1 << this.fbits) >>> 3));
    this.stale = 0;
    for (const slot of this.slots.values()) this.link(slot);
  }

  /**
   * Calls `onMatch(start, end)` for the longest pattern starting at each
   * position where one starts, left to right. The four-unit window rolls (one
   * `charCodeAt` per position); its hash is tested against the bit set, which
   * almost always says no — a branch the CPU predicts well, which is what
   * keeps the loop fast (sieves that pass half the time cost more than they
   * save). Only a window that passes looks at its bucket of candidates.
   */
  scan(text: string, onMatch: (start: number, end: number) => void): boolean {
    const n = text.length;
    if (this.size === 0 || n < 4) return true;
    if (n >= SKIP_MIN_TEXT) {
      const skip = this.skipTable();
      if (skip.window > 0) return this.scanSkipping(text, onMatch, skip);
    }
    const { heads, filter, next, k1, k2, lens, patterns } = this;
    let work = workBudget(n);
    const hshift = 32 - this.hbits;
    const fshift = 32 - this.fbits;
    let c0 = text.charCodeAt(0);
    let c1 = text.charCodeAt(1);
    let c2 = text.charCodeAt(2);
    for (let i = 0; i + 3 < n; i++) {
      const c3 = text.charCodeAt(i + 3);
      const w1 = (c0 << 16) | c1;
      const w2 = (c2 << 16) | c3;
      const h = Math.imul(w1 ^ Math.imul(w2, M2), M1);
      const f = h >>> fshift;
      if ((filter[f >>> 3] as number) & (1 << (f & 7))) {
        let best = 0;
        for (let j = heads[h >>> hshift] as number; j !== -1; j = next[j] as number) {
          work--;
          if (k1[j] !== w1 || k2[j] !== w2) continue;
          const len = lens[j] as number;
          if (len <= best || i + len > n) continue;
          work -= len;
          if (len === 4 || text.startsWith(patterns[j] as string, i)) best = len;
        }
        if (work < 0) return false;
        if (best > 0) onMatch(i, i + best);
      }
      c0 = c1;
      c1 = c2;
      c2 = c3;
    }
    return true;
  }

  /**
   * Wu–Manber's shift table over the first `window` units of every pattern
   * (`window` = the shortest pattern): for each four-unit block, how far a
   * window ending in it may move on without passing the start of any
   * pattern. A block that ends no pattern's prefix lets the search jump
   * `window - 3` units; hash collisions only make shifts smaller (never
   * unsafe). Unusable (window 0) when a pattern is shorter than SKIP_MIN_WINDOW.
   */
  /** Adds a pattern's blocks to a current shift table (shifts only shrink); one shorter than the window leaves the table to be rebuilt. */
  private extendSkip(pattern: string): void {
    const skip = this.skip;
    if (!skip || skip.version !== this.version || skip.window === 0 || pattern.length < skip.window) return;
    const shifts = this.skipShared ? skip.shifts.slice() : skip.shifts;
    this.skipShared = false;
    this.addShifts(pattern, skip.window, skip.bits, shifts);
    this.skip = { version: this.version + 1, window: skip.window, bits: skip.bits, shifts };
  }

  private addShifts(p: string, window: number, bits: number, shifts: Uint8Array): void {
    for (let end = 4; end <= window; end++) {
      const w1 = (p.charCodeAt(end - 4) << 16) | p.charCodeAt(end - 3);
      const w2 = (p.charCodeAt(end - 2) << 16) | p.charCodeAt(end - 1);
      const slot = hash4(w1, w2) >>> (32 - bits);
      if (window - end < (shifts[slot] as number)) shifts[slot] = window - end;
    }
  }

  private skipTable(): { window: number; bits: number; shifts: Uint8Array } {
    if (this.skip?.version === this.version) return this.skip;
    let shortest = SKIP_MAX_WINDOW;
    for (const p of this.slots.keys()) if (p.length < shortest) shortest = p.length;
    if (shortest < SKIP_MIN_WINDOW) {
      this.skip = { version: this.version, window: 0, bits: 0, shifts: new Uint8Array(0) };
      return this.skip;
    }
    const window = shortest;
    const blocks = this.size * (window - 3);
    // About eight slots per block: most of the text's blocks then find their slot at the full shift.
    // At most 1 MB: a scrubber with thousands of secrets gets shorter shifts, not a larger table.
    const bits = Math.min(20, Math.max(10, Math.ceil(Math.log2(blocks * 8))));
    const shifts = new Uint8Array(1 << bits).fill(window - 3);
    for (const p of this.slots.keys()) this.addShifts(p, window, bits, shifts);
    this.skip = { version: this.version, window, bits, shifts };
    this.skipShared = false;
    return this.skip;
  }

  /**
   * The same matches as the plain scan, in the same order, reading far fewer
   * characters (Wu–Manber): the window [pos, pos + window) is judged by its
   * last four units; a non-zero shift moves it on, a zero shift means a
   * pattern may start at pos, which is then checked exactly as the plain scan
   * does. No pattern can start past n - window (none is shorter).
   */
  private scanSkipping(text: string, onMatch: (start: number, end: number) => void, skip: { window: number; bits: number; shifts: Uint8Array }): boolean {
    const n = text.length;
    const { heads, filter, next, k1, k2, lens, patterns } = this;
    const { window, shifts } = skip;
    const sshift = 32 - skip.bits;
    const hshift = 32 - this.hbits;
    const fshift = 32 - this.fbits;
    let work = workBudget(n);
    let pos = 0;
    while (pos + window <= n) {
      const e = pos + window;
      const b1 = (text.charCodeAt(e - 4) << 16) | text.charCodeAt(e - 3);
      const b2 = (text.charCodeAt(e - 2) << 16) | text.charCodeAt(e - 1);
      const shift = shifts[Math.imul(b1 ^ Math.imul(b2, M2), M1) >>> sshift] as number;
      if (shift > 0) {
        pos += shift;
        continue;
      }
      const w1 = (text.charCodeAt(pos) << 16) | text.charCodeAt(pos + 1);
      const w2 = (text.charCodeAt(pos + 2) << 16) | text.charCodeAt(pos + 3);
      const h = Math.imul(w1 ^ Math.imul(w2, M2), M1);
      const f = h >>> fshift;
      work--;
      if ((filter[f >>> 3] as number) & (1 << (f & 7))) {
        let best = 0;
        for (let j = heads[h >>> hshift] as number; j !== -1; j = next[j] as number) {
          work--;
          if (k1[j] !== w1 || k2[j] !== w2) continue;
          const len = lens[j] as number;
          if (len <= best || pos + len > n) continue;
          work -= len;
          if (len === 4 || text.startsWith(patterns[j] as string, pos)) best = len;
        }
        if (best > 0) onMatch(pos, pos + best);
      }
      if (work < 0) return false;
      pos++;
    }
    return true;
  }
}

/** The same index over UTF-8 bytes, built from a snapshot of the text index's patterns. */
class ByteIndex {
  private readonly hbits: number;
  private readonly heads: Int32Array;
  private readonly fbits: number;
  private readonly filter: Uint8Array;
  private readonly next: Int32Array;
  private readonly keys: Int32Array;
  private readonly patterns: Buffer[];
  readonly maxLength: number;

  constructor(texts: string[]) {
    const unique = new Map<string, Buffer>();
    for (const t of texts) {
      const b = Buffer.from(t, 'utf8');
      unique.set(b.toString('latin1'), b);
    }
    this.patterns = [...unique.values()];
    const count = this.patterns.length;
    this.hbits = Math.min(24, Math.max(4, Math.ceil(Math.log2(Math.max(16, count * 2)))));
    this.heads = new Int32Array(1 << this.hbits).fill(-1);
    this.fbits = Math.min(26, this.hbits + 5);
    this.filter = new Uint8Array(Math.max(1, (1 << this.fbits) >>> 3));
    this.next = new Int32Array(count);
    this.keys = new Int32Array(count);
    let max = 0;
    this.patterns.forEach((p, slot) => {
      max = Math.max(max, p.length);
      const w = (((p[0] as number) << 24) | ((p[1] as number) << 16) | ((p[2] as number) << 8) | (p[3] as number)) | 0;
      this.keys[slot] = w;
      const h = Math.imul(w, M1);
      const bucket = h >>> (32 - this.hbits);
      this.next[slot] = this.heads[bucket] as number;
      this.heads[bucket] = slot;
      const f = h >>> (32 - this.fbits);
      this.filter[f >>> 3] = (this.filter[f >>> 3] as number) | (1 << (f & 7));
    });
    this.maxLength = max;
  }

  scan(bytes: Uint8Array, onMatch: (start: number, end: number) => void): boolean {
    const n = bytes.length;
    if (this.patterns.length === 0 || n < 4) return true;
    const { heads, filter, next, keys, patterns } = this;
    let work = workBudget(n);
    const hshift = 32 - this.hbits;
    const fshift = 32 - this.fbits;
    let w = ((bytes[0] as number) << 16) | ((bytes[1] as number) << 8) | (bytes[2] as number);
    for (let i = 0; i + 3 < n; i++) {
      w = (w << 8) | (bytes[i + 3] as number);
      const h = Math.imul(w, M1);
      const f = h >>> fshift;
      if ((filter[f >>> 3] as number) & (1 << (f & 7))) {
        let best = 0;
        for (let j = heads[h >>> hshift] as number; j !== -1; j = next[j] as number) {
          work--;
          if (keys[j] !== w) continue;
          const p = patterns[j] as Buffer;
          const len = p.length;
          if (len <= best || i + len > n) continue;
          let k = 4;
          while (k < len && bytes[i + k] === p[k]) k++;
          work -= k;
          if (k === len) best = len;
        }
        if (work < 0) return false;
        if (best > 0) onMatch(i, i + best);
      }
    }
    return true;
  }

  /** The patterns, for the automaton. */
  get all(): readonly Buffer[] {
    return this.patterns;
  }
}

/** The usual answer, found without allocating anything: no pattern occurs. */
function containsAny(text: string, patterns: readonly string[]): boolean {
  for (let i = 0; i < patterns.length; i++) if (text.includes(patterns[i] as string)) return true;
  return false;
}

/**
 * Every occurrence of every pattern by the engine's own search: the same runs
 * a scan of the index gives. False (nothing added) past the work budget: each
 * occurrence found costs its length (the engine compared that much).
 */
function nativeSearch(find: (pattern: number, from: number) => number, lengths: number[], haystackLength: number, runs: Runs): boolean {
  const found: Array<[number, number]> = [];
  let work = workBudget(haystackLength);
  for (let p = 0; p < lengths.length; p++) {
    const length = lengths[p] as number;
    for (let at = find(p, 0); at !== -1; at = find(p, at + 1)) {
      work -= length;
      if (work < 0) return false;
      found.push([at, at + length]);
    }
  }
  found.sort((a, b) => a[0] - b[0] || b[1] - a[1]);
  for (const [start, end] of found) runs.add(start, end);
  return true;
}

/** Collects match intervals and merges overlapping ones into redacted runs. */
class Runs {
  starts: number[] = [];
  ends: number[] = [];
  private openStart = -1;
  private openEnd = -1;

  add = (start: number, end: number): void => {
    if (this.openStart !== -1 && start < this.openEnd) {
      if (end > this.openEnd) this.openEnd = end;
      return;
    }
    if (this.openStart !== -1) {
      this.starts.push(this.openStart);
      this.ends.push(this.openEnd);
    }
    this.openStart = start;
    this.openEnd = end;
  };

  close(): void {
    if (this.openStart !== -1) {
      this.starts.push(this.openStart);
      this.ends.push(this.openEnd);
      this.openStart = -1;
    }
  }
}

// ---------------------------------------------------------------------------
// The scrubber

/**
 * A compiled set of secrets. Secrets are reference-counted: the same value
 * added twice needs removing twice. Copying a scrubber (`new Scrubber(base)`)
 * copies its compiled tables, so a job's scrubber starts from the agent-wide
 * one at the cost of a few array copies.
 */
export class Scrubber {
  private readonly index: TextIndex;
  private readonly secrets: Map<string, number>;
  private bytes: ByteIndex | undefined;
  private bytesVersion = -1;
  private textAutomaton: { version: number; automaton: Automaton } | undefined;
  private byteAutomaton: { version: number; automaton: Automaton } | undefined;
  private few: { version: number; texts: string[]; buffers: Buffer[] } | undefined;

  /** The JSON-line index (jsonLineForms of every secret), built on the first mayHoldSecret, then kept up to date. */
  private lineIndex: TextIndex | undefined;
  private lineFew: { version: number; texts: string[] } | undefined;

  constructor(base?: Scrubber) {
    this.index = new TextIndex(base?.index);
    this.secrets = new Map(base?.secrets);
    if (base?.lineIndex) this.lineIndex = new TextIndex(base.lineIndex);
  }

  /** A scrubber for these values (short ones are skipped). */
  static of(values: Iterable<string>): Scrubber {
    const scrubber = new Scrubber();
    for (const value of values) scrubber.add(value);
    return scrubber;
  }

  /** Number of distinct secret values. */
  get secretCount(): number {
    return this.secrets.size;
  }

  /** Number of distinct patterns (all forms of all secrets). */
  get patternCount(): number {
    return this.index.size;
  }

  /** Longest pattern in UTF-8 bytes: chunks of a stream must overlap by one less than this. */
  get maxPatternBytes(): number {
    return this.byteIndex().maxLength;
  }

  has(secret: string): boolean {
    return this.secrets.has(secret);
  }

  /** Adds a secret; false (and nothing added) when it is empty or shorter than MIN_SECRET_LENGTH. */
  add(secret: string): boolean {
    if (!isScrubbable(secret)) return false;
    const count = this.secrets.get(secret) ?? 0;
    this.secrets.set(secret, count + 1);
    if (count === 0) {
      for (const form of cachedForms(secret)) this.index.add(form);
      if (this.lineIndex) for (const form of cachedLineForms(secret)) this.lineIndex.add(form);
    }
    return true;
  }

  remove(secret: string): void {
    const count = this.secrets.get(secret);
    if (count === undefined) return;
    if (count > 1) {
      this.secrets.set(secret, count - 1);
      return;
    }
    this.secrets.delete(secret);
    for (const form of cachedForms(secret)) this.index.remove(form);
    if (this.lineIndex) for (const form of cachedLineForms(secret)) this.lineIndex.remove(form);
  }

  /** `text` with every form of every secret replaced by `*****` (the same string when nothing matched). */
  scrubText(text: string): string {
    const { starts, ends } = this.findRuns(text);
    if (starts.length === 0) return text;
    let out = '';
    let last = 0;
    for (let r = 0; r < starts.length; r++) {
      out += text.slice(last, starts[r]) + REDACTED;
      last = ends[r] as number;
    }
    return out + text.slice(last);
  }

  /**
   * Where secrets occur in `text`: each run of overlapping matches of any form
   * of any secret, as `[starts[i], ends[i])`, left to right (what scrubText replaces).
   */
  findRuns(text: string): { starts: readonly number[]; ends: readonly number[] } {
    const direct = this.directRuns(text);
    if (this.index.size === 0 || text.length < 4 || text.indexOf('\n') === -1) return direct;
    const regions = foldedRegions(text);
    if (regions.length === 0) return direct;
    // Forms cut by line breaks (folded base64), found in the joined stretches and mapped back: each covers its breaks too.
    const found: Array<[number, number]> = direct.starts.map((start, r) => [start, direct.ends[r] as number]);
    for (const { joined, origin } of regions) {
      const runs = this.directRuns(joined);
      for (let r = 0; r < runs.starts.length; r++) {
        found.push([origin[runs.starts[r] as number] as number, (origin[(runs.ends[r] as number) - 1] as number) + 1]);
      }
    }
    found.sort((a, b) => a[0] - b[0] || b[1] - a[1]);
    const merged = new Runs();
    for (const [start, end] of found) merged.add(start, end);
    merged.close();
    return merged;
  }

  private directRuns(text: string): { starts: readonly number[]; ends: readonly number[] } {
    const runs = new Runs();
    if (this.index.size === 0 || text.length < 4) return runs;
    let done: boolean;
    if (this.index.size <= NATIVE_SEARCH_MAX_PATTERNS) {
      const { texts } = this.fewPatterns();
      if (!containsAny(text, texts)) return runs;
      done = nativeSearch((p, from) => text.indexOf(texts[p] as string, from), texts.map((t) => t.length), text.length, runs);
    } else done = this.index.scan(text, runs.add);
    if (!done) return this.automatonForText().scan(text.length, (i) => text.charCodeAt(i));
    runs.close();
    return runs;
  }

  /**
   * Whether a JSON text, as JSON.stringify wrote it, may hold a form of a
   * secret in one of its strings (keys included), folded base64 too. Never
   * false when `scrubValue` of the parsed value would change it: the text is
   * scanned for every form and every form as it reads inside a JSON string
   * (jsonLineForms), and line breaks written as `\n` / `\r` escapes are read
   * as breaks for the folded forms. It may be true for a match outside a
   * string (a number, across syntax) or when the fast search gives up: the
   * caller then scrubs the value itself. One scan of the text; a text with
   * escaped line breaks is read once more, with them as breaks.
   */
  mayHoldSecret(json: string): boolean {
    if (this.index.size === 0 || json.length < 4) return false;
    if (this.lineIndexHit(json)) return true;
    // Most lines cannot fold (no break at all, or none between base64 lines): asked without a copy.
    if (!jsonHasBreak(json) || !jsonMayFold(json)) return false;
    for (const { joined } of foldedRegions(unfoldJson(json))) if (this.directRuns(joined).starts.length > 0) return true;
    return false;
  }

  /**
   * `bytes` with the UTF-8 encoding of every form replaced by the bytes of
   * `*****`; other bytes are untouched (binary data stays binary). Returns the
   * same object when nothing matched.
   */
  scrubBuffer<T extends Uint8Array>(bytes: T): T | Buffer {
    if (this.index.size === 0 || bytes.length < 4) return bytes;
    const fast = new Runs();
    let done: boolean;
    if (this.index.size <= NATIVE_SEARCH_MAX_PATTERNS) {
      const { buffers } = this.fewPatterns();
      const haystack = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length);
      done = nativeSearch((p, from) => haystack.indexOf(buffers[p] as Buffer, from), buffers.map((b) => b.length), bytes.length, fast);
    } else done = this.byteIndex().scan(bytes, fast.add);
    fast.close();
    const { starts, ends } = done ? fast : this.automatonForBytes().scan(bytes.length, (i) => bytes[i] as number);
    if (starts.length === 0) return bytes;
    const parts: Uint8Array[] = [];
    let last = 0;
    for (let r = 0; r < starts.length; r++) {
      parts.push(bytes.subarray(last, starts[r]), REDACTED_BYTES);
      last = ends[r] as number;
    }
    parts.push(bytes.subarray(last));
    return Buffer.concat(parts);
  }

  /**
   * A JSON-like value with every string scrubbed — object keys as well as
   * values (a key may carry a secret: an echoed header name, a JSON body).
   * Copy-on-write: what contains no secret is returned as is (the very same
   * object, so the common case allocates nothing); what does is copied, and
   * the input is never modified. Buffers are scrubbed as bytes; numbers,
   * booleans, null and Dates are kept; other objects are treated as plain
   * objects of their own enumerable properties. Two keys that both scrub to
   * `*****` collapse into one (the later wins).
   */
  scrubValue<T>(value: T): T {
    if (this.index.size === 0) return value;
    return this.deep(value, 0, undefined) as T;
  }

  private deep(value: unknown, depth: number, path: Set<object> | undefined): unknown {
    if (typeof value === 'string') return this.scrubText(value);
    if (value === null || typeof value !== 'object') return value;
    if (value instanceof Date) return value;
    if (value instanceof Uint8Array) return this.scrubBuffer(value);
    // Results are shallow trees; only a value this deep can be a cycle worth checking for.
    if (depth > 100) return '[Too deep]';
    let seen = path;
    if (depth >= 20) {
      seen ??= new Set();
      if (seen.has(value)) return '[Circular]';
      seen.add(value);
    }
    try {
      if (Array.isArray(value)) {
        let copy: unknown[] | undefined;
        for (let i = 0; i < value.length; i++) {
          const item: unknown = value[i];
          const scrubbed = this.deep(item, depth + 1, seen);
          if (scrubbed !== item && copy === undefined) copy = value.slice(0, i);
          copy?.push(scrubbed);
        }
        return copy ?? value;
      }
      const entries = Object.entries(value);
      let copy: Record<string, unknown> | undefined;
      for (let i = 0; i < entries.length; i++) {
        const [key, item] = entries[i] as [string, unknown];
        const scrubbedKey = this.scrubText(key);
        const scrubbed = this.deep(item, depth + 1, seen);
        if ((scrubbed !== item || scrubbedKey !== key) && copy === undefined) {
          copy = {};
          for (let k = 0; k < i; k++) {
            const [earlierKey, earlier] = entries[k] as [string, unknown];
            copy[earlierKey] = earlier;
          }
        }
        if (copy) copy[scrubbedKey] = scrubbed;
      }
      return copy ?? value;
    } finally {
      if (depth >= 20) seen?.delete(value);
    }
  }

  /** Any JSON-line form in `json` (true also when the search gives up on its work budget). */
  private lineIndexHit(json: string): boolean {
    if (!this.lineIndex) {
      this.lineIndex = new TextIndex();
      for (const secret of this.secrets.keys()) for (const form of cachedLineForms(secret)) this.lineIndex.add(form);
    }
    const index = this.lineIndex;
    if (index.size <= NATIVE_SEARCH_MAX_PATTERNS) {
      if (this.lineFew?.version !== index.version) this.lineFew = { version: index.version, texts: index.livePatterns() };
      return containsAny(json, this.lineFew.texts);
    }
    let hit = false;
    const done = index.scan(json, () => {
      hit = true;
    });
    return hit || !done;
  }

  private fewPatterns(): { texts: string[]; buffers: Buffer[] } {
    if (!this.few || this.few.version !== this.index.version) {
      const texts = this.index.livePatterns();
      this.few = { version: this.index.version, texts, buffers: texts.map((t) => Buffer.from(t, 'utf8')) };
    }
    return this.few;
  }

  /** Built on the first input the fast search gives up on, then kept until the secrets change. */
  private automatonForText(): Automaton {
    if (this.textAutomaton?.version !== this.index.version) {
      const patterns = this.index.livePatterns().map((p) => {
        const units = new Uint16Array(p.length);
        for (let i = 0; i < p.length; i++) units[i] = p.charCodeAt(i);
        return units;
      });
      this.textAutomaton = { version: this.index.version, automaton: new Automaton(patterns, 0x10000) };
    }
    return this.textAutomaton.automaton;
  }

  private automatonForBytes(): Automaton {
    if (this.byteAutomaton?.version !== this.index.version) {
      this.byteAutomaton = { version: this.index.version, automaton: new Automaton(this.byteIndex().all, 0x100) };
    }
    return this.byteAutomaton.automaton;
  }

  private byteIndex(): ByteIndex {
    if (!this.bytes || this.bytesVersion !== this.index.version) {
      this.bytes = new ByteIndex(this.index.livePatterns());
      this.bytesVersion = this.index.version;
    }
    return this.bytes;
  }
}

/**
 * Scrubs one serialized JSON log line. A match is first found on the text;
 * the line is then parsed, scrubbed value by value and serialized again, so
 * that it stays valid JSON even when a secret form sat next to JSON syntax.
 */
export function scrubJsonLine(line: string, scrubber: Scrubber): string {
  const once = scrubber.scrubText(line);
  if (once === line) return line;
  try {
    const parsed: unknown = JSON.parse(line);
    const newline = line.endsWith('\n') ? '\n' : '';
    return scrubber.scrubText(JSON.stringify(scrubber.scrubValue(parsed))) + newline;
  } catch {
    return once;
  }
}
