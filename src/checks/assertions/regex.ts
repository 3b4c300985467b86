// Regular expressions from check definitions (an assertion's `regex`, the
// pattern of a JSONPath match() or search()) run on the event loop, against
// bodies the checked service chooses. A backtracking engine can take
// exponential time on them, so only patterns V8's linear-time engine can
// handle are accepted, V8 is told to switch to that engine when a
// backtracking match runs too long, and matches over more than a few
// kilobytes run under a watchdog (./bounded-match.ts). See
// docs/regular-expressions.md.

import v8 from 'node:v8';
import { boundedRunEngine, MATCH_TIME_LIMIT_MS } from './bounded-match.js';
import { boundaryRun, MAX_BOUNDARY_RUN, type UnrollOptions, unrollCounts } from './regex-unroll.js';

// Both flags are read when a RegExp is created, not at process start, so
// setting them here covers every RegExp made after this module is imported,
// whichever way the process was started (`npm start`, the images, tests).
// They cannot go in NODE_OPTIONS: Node.js refuses these V8 flags there.
v8.setFlagsFromString('--enable-experimental-regexp-engine');
v8.setFlagsFromString('--enable-experimental-regexp-engine-on-excessive-backtracks');

const NOT_LINEAR =
  'cannot be evaluated in linear time (backreferences, lookahead and, on Node.js 20, lookbehind are not supported, nor repetition counts above 16 in a pattern with an octal escape or groups nested over 200 deep)';

/** The source a check's pattern runs as, or why it cannot run. */
export type LinearSource = { source: string; problem?: undefined } | { problem: string; source?: undefined };

/**
 * The source to compile for `pattern`: the pattern itself when V8's linear engine accepts it, else the
 * same pattern with its long repetition counts written out (src/checks/assertions/regex-unroll.ts)
 * when that is what it refused; or why the pattern cannot be used as a check's regular expression.
 */
export function linearSource(pattern: string, flags = '', options: UnrollOptions = {}): LinearSource {
  try {
    new RegExp(pattern, flags);
  } catch (error) {
    return { problem: `is not a valid regular expression (${plain(error)})` };
  }
  let source = pattern;
  const refusal = linearRefusal(source, flags);
  if (refusal !== null) {
    if (!/linear time/.test(refusal)) return { problem: `is not a valid regular expression (${refusal})` };
    const unrolled = unrollCounts(pattern, flags.includes('u'), options);
    if (unrolled && 'problem' in unrolled) return { problem: `cannot be evaluated in linear time: it ${unrolled.problem}` };
    // The rewriting keeps every capture (it refuses to copy one), so the groups are numbered as written. Matching
    // `pattern` itself to count them would not do: the backtracking engine, without its linear fallback for
    // this pattern, can take exponential time even on an empty text.
    if (!unrolled || linearRefusal(unrolled.source, flags) !== null) return { problem: NOT_LINEAR };
    source = unrolled.source;
  }
  if (boundaryRunTooLong(pattern, flags) || boundaryRunTooLong(source, flags)) {
    return {
      problem: `has more than ${MAX_BOUNDARY_RUN} word boundaries (\\b, \\B) in a row with nothing between them that must take a character, which V8 compiles in exponential time: keep one where words meet`,
    };
  }
  try {
    // V8 compiles lazily: a pattern past its size limit fails on the first match, not in the constructor.
    new RegExp(source, flags).exec('');
  } catch (error) {
    return { problem: `is not a valid regular expression (${plain(error)})` };
  }
  return { source };
}

/**
 * Whether `source` has a run of word boundaries too long to compile (MAX_BOUNDARY_RUN); where the
 * parser is unsure of the syntax, every \b and \B outside a class counts. Checked before anything
 * compiles it.
 */
function boundaryRunTooLong(source: string, flags: string): boolean {
  return (boundaryRun(source, flags.includes('u')) ?? boundaryEscapes(source)) > MAX_BOUNDARY_RUN;
}

/** The most \b and \B in one top-level alternative of `source`, outside character classes (where \b is a backspace). */
function boundaryEscapes(source: string): number {
  let most = 0;
  let count = 0;
  let inClass = false;
  let depth = 0;
  for (let i = 0; i < source.length; i++) {
    const ch = source[i];
    if (ch === '\\') {
      const next = source[i + 1];
      if (!inClass && (next === 'b' || next === 'B')) most = Math.max(most, ++count);
      i++;
    } else if (inClass) {
      if (ch === ']') inClass = false;
    } else if (ch === '[') {
      inClass = true;
    } else if (ch === '(') {
      depth++;
    } else if (ch === ')') {
      depth--;
    } else if (ch === '|' && depth === 0) {
      count = 0;
    }
  }
  return most;
}

/**
 * Why V8's linear engine does not compile `source`, or null when it does: it refuses, at compile
 * time, exactly what it cannot run, and a pattern it accepts also gets its fallback when a
 * backtracking match runs too long.
 */
function linearRefusal(source: string, flags: string): string | null {
  try {
    new RegExp(source, `${flags}l`);
    return null;
  } catch (error) {
    return plain(error);
  }
}

/** Why `pattern` cannot be used as a check's regular expression, or null when it can. */
export function regexProblem(pattern: string, flags = ''): string | null {
  return linearSource(pattern, flags).problem ?? null;
}

export class CheckRegexError extends Error {
  /** `pattern` null: the problem is not one pattern's, and says whose it is. */
  constructor(pattern: string | null, problem: string) {
    super(pattern === null ? problem : `regular expression ${JSON.stringify(pattern.length > 60 ? `${pattern.slice(0, 57)}...` : pattern)} ${problem}`);
    this.name = 'CheckRegexError';
  }
}

/**
 * Compiles a check's regular expression for matching; throws CheckRegexError
 * when it could run in more than linear time or does not compile. The
 * backtracking engine does the work (it is much faster on the usual
 * patterns); V8 falls back to the linear engine when it backtracks too much.
 */
export function compileCheckRegex(pattern: string, flags = ''): RegExp {
  const key = `${flags}/${pattern}`;
  let compiled = recent.get(key);
  if (compiled === undefined) {
    compiled = compileLinear(pattern, flags);
    if (recent.size >= MAX_RECENT) recent.clear();
    recent.set(key, compiled);
  }
  if (compiled instanceof CheckRegexError) throw compiled;
  return compiled;
}

/** `pattern` compiled as linearSource says, or the CheckRegexError that says why it cannot be. */
export function compileLinear(pattern: string, flags: string, shownAs = pattern, options: UnrollOptions = {}): RegExp | CheckRegexError {
  const { source, problem } = linearSource(pattern, flags, options);
  if (problem !== undefined) return new CheckRegexError(shownAs, problem);
  // Without g or y a RegExp keeps no state between matches: one object serves every assertion.
  const regex = new RegExp(source, flags);
  if (source !== pattern) unrolledBy.set(regex, source.length / Math.max(pattern.length, 1));
  return regex;
}

/** How much longer unrolling made a compiled pattern than the one it was compiled from. */
const unrolledBy = new WeakMap<RegExp, number>();

/** The pattern length a match of `regex`, compiled from `pattern`, is charged: its long counts written out. */
export function workLength(pattern: string, regex: RegExp): number {
  return Math.ceil(Math.max(pattern.length, 1) * (unrolledBy.get(regex) ?? 1));
}

/**
 * Most work one match of a check definition's pattern may cost, counted as pattern length × text
 * length: the linear engine's cost grows with both (10,000 characters of pattern on 100 KB took
 * 29 s). 30 characters on a 10 MB body, or 300 on 1 MB, are within it.
 */
export const MAX_REGEX_WORK = 300_000_000;

/**
 * Why `pattern` may not run on a text of `length` characters with `limit` work, as a CheckRegexError;
 * `patternLength` is its workLength.
 */
export function tooMuchWork(pattern: string, patternLength: number, length: number, limit: number): CheckRegexError {
  const counted = patternLength === pattern.length ? 'pattern length' : 'pattern length with its long counts written out';
  return new CheckRegexError(
    pattern,
    `would cost more than ${limit} (${counted} × text length: ${patternLength} × ${length}); use a shorter pattern or select less text (docs/regular-expressions.md)`,
  );
}

/**
 * Runs a compiled check regex on `text`, on the engine a bounded run chose (./bounded-match.ts),
 * else on the backtracking engine. That engine recurses as it matches and, on a long text, a
 * pattern such as `(.|\n)*c` overflows its stack (a RangeError) whatever the fallback: such a
 * match runs again on the linear engine, which keeps no stack.
 */
export function execCheckRegex(regex: RegExp, text: string): RegExpExecArray | null {
  if (boundedRunEngine() === 'linear') return linearTwin(regex).exec(text);
  try {
    return regex.exec(text);
  } catch (error) {
    if (!(error instanceof RangeError)) throw error;
    return linearTwin(regex).exec(text);
  }
}

/** The time limit, and the way out, in the errors of matches stopped by it. */
export const MATCH_TIME_REASON = `a check's regex matches may take ${MATCH_TIME_LIMIT_MS / 1000} s together; use a shorter or more specific pattern, or select less text (docs/regular-expressions.md)`;

/** Why the matches of `pattern` on `read` (what they read, in words) were stopped (./bounded-match.ts). */
export function tooSlow(pattern: string, read: string): CheckRegexError {
  return new CheckRegexError(
    pattern,
    `ran out of time on ${read}: ${MATCH_TIME_REASON}`,
  );
}

const linearTwins = new WeakMap<RegExp, RegExp>();

function linearTwin(regex: RegExp): RegExp {
  let twin = linearTwins.get(regex);
  if (twin === undefined) {
    // regexProblem accepted this pattern only because the linear engine compiles it.
    twin = new RegExp(regex.source, `${regex.flags}l`);
    linearTwins.set(regex, twin);
  }
  return twin;
}

/** Patterns compiled lately: a JSONPath assertion applies its regex to every node it selects. */
const recent = new Map<string, RegExp | CheckRegexError>();
const MAX_RECENT = 256;

function plain(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  return message.replace(/^Invalid regular expression: \/.*\/[a-z]*: /s, '');
}
