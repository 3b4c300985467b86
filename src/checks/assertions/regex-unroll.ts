// V8's linear-time engine runs a bounded repetition by writing its body out
// once per count, and refuses a pattern in which that replication (a count,
// times the counts of the repetitions around it) passes 16: `[0-9a-f]{32}`,
// `.{0,100}`, `(?:\d{4}-){8}` are refused as they are. Written as consecutive
// shorter repetitions (`[0-9a-f]{16}[0-9a-f]{16}`) the same pattern runs
// there, and matches exactly as before as long as the repeated part captures
// nothing: with no capture, whether the rest of the pattern matches depends
// only on where the repetitions end, and the consecutive ones reach those
// places in the same order. See docs/regular-expressions.md.

/** V8's kMaxReplicationFactor (src/regexp/experimental/experimental-compiler.cc). */
export const MAX_REPLICATION = 16;

/** Longest pattern unrolling may produce: the linear engine's work grows with it. */
export const MAX_UNROLLED_LENGTH = 20_000;

/** Deepest group nesting unrolled; deeper patterns are left as they are (and refused if they need it). */
const MAX_DEPTH = 200;

export interface UnrollOptions {
  /**
   * Whether the match's captures are read (an assertion's first group); true by default. When they are
   * not (JSONPath match() and search()), a capturing group is copied like any other.
   */
  capturesRead?: boolean;
}

/** The unrolled source, why it cannot be, or null when the parser is not sure of this pattern's syntax. */
export type Unrolled = { source: string } | { problem: string } | null;

interface Quantifier {
  min: number;
  /** Infinity for `*`, `+`, `{n,}`. */
  max: number;
  lazy: boolean;
  text: string;
}

interface Term {
  /** A character, escape, class or `.`, or a whole group with its brackets. */
  atom: string;
  /** For a group: its opening (`(`, `(?:`, `(?<name>`, …) and alternatives. */
  group?: { open: string; alternatives: Term[][] };
  captures: boolean;
  /** Whether every match of the atom takes at least one character. */
  consumes: boolean;
  /** Whether it is a word boundary (`\b`, `\B`) or a non-capturing group of nothing else (see boundaryRun). */
  boundaryOnly: boolean;
  quantifier?: Quantifier;
}

class Unsure extends Error {}
class TooLong extends Error {}
class CaptureRepeated extends Error {}
class LazyUnsplittable extends Error {}

/** Most turns of a lazy group's optional part written out as nested optional groups. */
const MAX_NESTED_LAZY = 200;

/**
 * `source` (a valid ECMAScript pattern; Unicode mode when `unicode`) with
 * every repetition whose replication passes MAX_REPLICATION written as
 * consecutive repetitions that do not.
 */
export function unrollCounts(source: string, unicode: boolean, options: UnrollOptions = {}): Unrolled {
  try {
    const parser = new Parser(source, unicode);
    const alternatives = parser.alternatives(0);
    if (parser.at < source.length) return null;
    return { source: writeAlternatives(alternatives, 1, options.capturesRead ?? true) };
  } catch (error) {
    if (error instanceof Unsure) return null;
    if (error instanceof CaptureRepeated) {
      return { problem: `repeats a capturing group more than ${MAX_REPLICATION} times in all, which V8's linear-time engine cannot run: make the group non-capturing, (?:…)` };
    }
    if (error instanceof LazyUnsplittable) {
      return {
        problem: `repeats a group lazily ({n,m}?) more than ${MAX_REPLICATION} times in all where it may match nothing or more than ${MAX_NESTED_LAZY} optional times, which cannot be written out for the linear-time engine without changing what it matches: make it greedy, or use *?`,
      };
    }
    if (error instanceof TooLong) {
      return { problem: `has repetition counts that, written out for the linear-time engine, come to more than ${MAX_UNROLLED_LENGTH} characters` };
    }
    throw error;
  }
}

/**
 * Most word boundaries (`\b`, `\B`) a pattern may have in a row, where "in a row" means with no
 * term between them that must take a character: V8 drops or passes through empty groups, zero
 * counts, optional parts, anchors and lookarounds, so those do not end a run, and a repeated group
 * counts once per turn (up to MAX_REPLICATION turns). V8's backtracking compiler takes time
 * exponential in such a run (`(?:\b)` 14 times: 0.4 s, 16 times: 2.6 s, 20 times: it aborts the
 * process with "invalid size"), and nothing stops a compile: the only safe answer is not to compile
 * one. A term that must take a character ends the run ( `((?:\b)×8 a)` 300 times compiles in 6 ms).
 */
export const MAX_BOUNDARY_RUN = 8;

/** The longest run of word boundaries in `source` (see MAX_BOUNDARY_RUN), or null when the parser is not sure of its syntax. */
export function boundaryRun(source: string, unicode: boolean): number | null {
  try {
    const parser = new Parser(source, unicode);
    const alternatives = parser.alternatives(0);
    if (parser.at < source.length) return null;
    return runsOf(alternatives).longest;
  } catch (error) {
    if (error instanceof Unsure || error instanceof TooLong) return null;
    throw error;
  }
}

/**
 * Word-boundary runs in `alternatives` (the worst alternative for each figure): `open` is whether one
 * may match without taking a character; `whole` the boundaries of such a one; `head` those before its
 * first term that must take a character, `tail` those after its last; `longest` the longest run inside.
 */
interface Runs {
  open: boolean;
  whole: number;
  head: number;
  tail: number;
  longest: number;
}

function runsOf(alternatives: Term[][]): Runs {
  const all: Runs = { open: false, whole: 0, head: 0, tail: 0, longest: 0 };
  for (const terms of alternatives) {
    // `run` counts since the last term that must take a character; `head` stays open until one.
    let run = 0;
    let head = 0;
    let closed = false;
    for (const term of terms) {
      const turns = term.quantifier ? Math.min(MAX_REPLICATION, Math.max(1, term.quantifier.max === Number.POSITIVE_INFINITY ? term.quantifier.min + 1 : term.quantifier.max)) : 1;
      let inner: Runs;
      if (term.group) {
        inner = runsOf(term.group.alternatives);
        // A lookaround takes nothing where it stands, whatever it reads.
        if (/^\(\?<?[=!]/.test(term.group.open)) inner = { open: true, whole: inner.whole + inner.head + inner.tail, head: 0, tail: 0, longest: inner.longest };
      } else {
        const boundary = term.atom === '\\b' || term.atom === '\\B';
        inner = { open: !term.consumes, whole: boundary ? 1 : 0, head: 0, tail: 0, longest: boundary ? 1 : 0 };
      }
      all.longest = Math.max(all.longest, inner.longest);
      const mustTake = !inner.open && (term.quantifier?.min ?? 1) > 0;
      if (!mustTake) {
        // Optional or empty: its boundaries join the run, once per turn.
        run += Math.max(inner.whole, inner.head + inner.tail) * turns;
      } else {
        run += inner.head;
        if (!closed) head = run;
        all.longest = Math.max(all.longest, run, turns > 1 ? inner.tail + inner.head : 0);
        closed = true;
        run = inner.tail;
      }
      all.longest = Math.max(all.longest, run);
    }
    if (closed) {
      all.head = Math.max(all.head, head);
      all.tail = Math.max(all.tail, run);
    } else {
      all.open = true;
      all.whole = Math.max(all.whole, run);
    }
  }
  return all;
}

function writeAlternatives(alternatives: Term[][], ambient: number, capturesRead: boolean): string {
  const parts: string[] = [];
  let length = 0;
  for (const [i, terms] of alternatives.entries()) {
    if (i > 0) parts.push('|');
    for (const term of terms) {
      const written = writeTerm(term, ambient, capturesRead);
      length += written.length;
      if (length > MAX_UNROLLED_LENGTH) throw new TooLong();
      parts.push(written);
    }
  }
  return parts.join('');
}

function writeAtom(term: Term, ambient: number, capturesRead: boolean): string {
  if (!term.group) return term.atom;
  return `${term.group.open}${writeAlternatives(term.group.alternatives, ambient, capturesRead)})`;
}

function writeTerm(term: Term, ambient: number, capturesRead: boolean): string {
  const q = term.quantifier;
  if (!q) return writeAtom(term, ambient, capturesRead);
  // V8 refuses a count above the limit even where the replication around it is 0 (`(?:x{17}){0}`);
  // counting that as 1 unrolls such a count as well.
  const replication = Math.max(1, q.max === Number.POSITIVE_INFINITY ? q.min + 1 : q.max);
  if (ambient * replication <= MAX_REPLICATION) return writeAtom(term, ambient * replication, capturesRead) + q.text;
  // Repeating a place is matching it once (or not at all); copies would make a run (see boundaryRun).
  if (term.boundaryOnly) return writeAtom(term, ambient, capturesRead) + (q.min > 0 ? '' : `?${q.lazy ? '?' : ''}`);
  if (term.captures && capturesRead) throw new CaptureRepeated();
  const chunk = Math.floor(MAX_REPLICATION / ambient);
  const atom = writeAtom(term, ambient * chunk, capturesRead);
  const lazy = q.lazy ? '?' : '';
  // A single group needs no count; a character keeps `{1}`, lest it join what follows (`\x` then `41`, `{` then `5}`).
  const exactly = (n: number) => (n === 1 && term.group ? '' : `{${n}}`);
  const upTo = (n: number) => (n === 1 ? `?${lazy}` : `{0,${n}}${lazy}`);
  const pieces: Array<[string, number]> = [];
  if (q.min >= chunk) pieces.push([exactly(chunk), Math.floor(q.min / chunk)]);
  if (q.min % chunk > 0) pieces.push([exactly(q.min % chunk), 1]);
  const optional = q.max - q.min;
  // Consecutive lazy ranges try fewer turns of the first before more of the second, so a group that can
  // end in more than one place would match differently (`(?:a|abc|b){0,17}?` on "abcd"). Nested optional
  // groups, `(?:X(?:X)??)??`, try turns in the original's order; exact when X takes a character each turn.
  const nested = q.lazy && optional > chunk && term.group !== undefined;
  if (nested && (!term.consumes || optional > MAX_NESTED_LAZY)) throw new LazyUnsplittable();
  if (q.max === Number.POSITIVE_INFINITY) {
    pieces.push([`*${lazy}`, 1]);
  } else if (!nested) {
    if (optional >= chunk) pieces.push([upTo(chunk), Math.floor(optional / chunk)]);
    if (optional % chunk > 0) pieces.push([upTo(optional % chunk), 1]);
  }
  const inner = nested ? writeAtom(term, ambient, capturesRead) : '';
  let length = nested ? (inner.length + 6) * optional : 0;
  for (const [suffix, times] of pieces) length += (atom.length + suffix.length) * times;
  if (length > MAX_UNROLLED_LENGTH) throw new TooLong();
  const written = pieces.map(([suffix, times]) => (atom + suffix).repeat(times)).join('');
  return nested ? written + `(?:${inner}`.repeat(optional) + ')??'.repeat(optional) : written;
}

/** Atoms that match a place, not a character. */
const ASSERTIONS = new Set(['^', '$', '\\b', '\\B']);
const GROUP_OPEN = /\((?:\?(?::|=|!|<=|<!|<[^>]*>|[a-zA-Z-]+:))?/y;
const COUNT = /\{(\d+)(,(\d*))?\}/y;
const HEX = /^[0-9a-fA-F]$/;
const isHex = (text: string) => text.length > 0 && [...text].every((c) => HEX.test(c));
const isLead = (code: number) => code >= 0xd800 && code <= 0xdbff;
const isTrail = (code: number) => code >= 0xdc00 && code <= 0xdfff;

/** Reads the pattern's terms; throws Unsure on syntax whose extent it does not know for certain. */
class Parser {
  at = 0;
  constructor(
    private readonly source: string,
    private readonly unicode: boolean,
  ) {}

  alternatives(depth: number): Term[][] {
    if (depth > MAX_DEPTH) throw new Unsure();
    const alternatives: Term[][] = [[]];
    while (this.at < this.source.length) {
      const ch = this.source[this.at];
      if (ch === ')') break;
      if (ch === '|') {
        this.at++;
        alternatives.push([]);
        continue;
      }
      const term = this.term(depth);
      term.quantifier = this.quantifier();
      (alternatives.at(-1) as Term[]).push(term);
    }
    return alternatives;
  }

  private term(depth: number): Term {
    const s = this.source;
    const start = this.at;
    const ch = s[start];
    if (ch === '(') {
      GROUP_OPEN.lastIndex = start;
      const open = GROUP_OPEN.exec(s)?.[0];
      if (open === undefined || (open === '(' && s[start + 1] === '?')) throw new Unsure();
      const capturing = open === '(' || (open.startsWith('(?<') && !open.startsWith('(?<=') && !open.startsWith('(?<!'));
      this.at += open.length;
      const alternatives = this.alternatives(depth + 1);
      if (s[this.at] !== ')') throw new Unsure();
      this.at++;
      const captures = capturing || alternatives.some((terms) => terms.some((t) => t.captures));
      const lookaround = /^\(\?<?[=!]/.test(open);
      const consumes = !lookaround && alternatives.every((terms) => terms.some((t) => t.consumes && (t.quantifier?.min ?? 1) > 0));
      const boundaryOnly = open === '(?:' && alternatives.every((terms) => terms.length > 0 && terms.every((t) => t.boundaryOnly));
      return { atom: s.slice(start, this.at), group: { open, alternatives }, captures, consumes, boundaryOnly };
    }
    if (ch === '[') this.at = this.classEnd(start);
    else if (ch === '\\') this.at = start + this.escapeLength(start);
    else if (this.unicode && isLead(s.charCodeAt(start)) && isTrail(s.charCodeAt(start + 1))) this.at = start + 2;
    else this.at = start + 1;
    const atom = s.slice(start, this.at);
    return { atom, captures: false, consumes: !ASSERTIONS.has(atom), boundaryOnly: atom === '\\b' || atom === '\\B' };
  }

  /** Index just past the class opening at `start`. */
  private classEnd(start: number): number {
    const s = this.source;
    let i = start + 1;
    if (s[i] === '^') i++;
    while (i < s.length && s[i] !== ']') i += s[i] === '\\' ? 2 : 1;
    if (i >= s.length) throw new Unsure();
    return i + 1;
  }

  /** Length of the escape at `start` (the backslash included). */
  private escapeLength(start: number): number {
    const s = this.source;
    const next = s[start + 1];
    if (next === undefined) throw new Unsure();
    // \1–\9 are backreferences or (outside Unicode mode) octal escapes of up to three digits; \k a named one.
    if (/[1-9k]/.test(next) || (next === '0' && /[0-9]/.test(s[start + 2] ?? ''))) throw new Unsure();
    if (next === 'x') return isHex(s.slice(start + 2, start + 4)) && s.slice(start + 2, start + 4).length === 2 ? 4 : 2;
    if (next === 'c') {
      if (/[a-zA-Z]/.test(s[start + 2] ?? '')) return 3;
      throw new Unsure();
    }
    if (next === 'u') {
      if (this.unicode && s[start + 2] === '{') {
        const end = s.indexOf('}', start + 3);
        if (end < 0) throw new Unsure();
        return end + 1 - start;
      }
      const hex = s.slice(start + 2, start + 6);
      if (hex.length !== 4 || !isHex(hex)) return 2;
      // In Unicode mode an escaped surrogate pair is one character.
      if (this.unicode && isLead(Number.parseInt(hex, 16)) && s.slice(start + 6, start + 8) === '\\u') {
        const trail = s.slice(start + 8, start + 12);
        if (trail.length === 4 && isHex(trail) && isTrail(Number.parseInt(trail, 16))) return 12;
      }
      return 6;
    }
    if (this.unicode && (next === 'p' || next === 'P')) {
      const end = s.indexOf('}', start + 2);
      if (s[start + 2] !== '{' || end < 0) throw new Unsure();
      return end + 1 - start;
    }
    if (this.unicode && isLead(s.charCodeAt(start + 1)) && isTrail(s.charCodeAt(start + 2))) return 3;
    return 2;
  }

  quantifier(): Quantifier | undefined {
    const s = this.source;
    const start = this.at;
    let min: number;
    let max: number;
    const ch = s[start];
    if (ch === '*' || ch === '+' || ch === '?') {
      min = ch === '+' ? 1 : 0;
      max = ch === '?' ? 1 : Number.POSITIVE_INFINITY;
      this.at++;
    } else if (ch === '{') {
      COUNT.lastIndex = start;
      const braces = COUNT.exec(s);
      // Outside Unicode mode a brace that is not a count is a literal character, read as the next term.
      if (!braces) return undefined;
      min = Number(braces[1]);
      max = braces[2] === undefined ? min : braces[3] === '' ? Number.POSITIVE_INFINITY : Number(braces[3]);
      // A count this large could never be written out within MAX_UNROLLED_LENGTH.
      if (!Number.isSafeInteger(min) || (max !== Number.POSITIVE_INFINITY && !Number.isSafeInteger(max))) throw new TooLong();
      this.at += braces[0].length;
    } else {
      return undefined;
    }
    const lazy = s[this.at] === '?';
    if (lazy) this.at++;
    return { min, max, lazy, text: s.slice(start, this.at) };
  }
}
