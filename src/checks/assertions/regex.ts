// Regular expressions from check definitions (an assertion's `regex`, the
// pattern of a JSONPath match() or search()) run on the event loop, against
// bodies the checked service chooses. A backtracking engine can take
// exponential time on them, so only patterns V8's linear-time engine can
// handle are accepted, and V8 is told to switch to that engine when a
// backtracking match runs too long. See docs/regular-expressions.md.

import v8 from 'node:v8';

// Both flags are read when a RegExp is created, not at process start, so
// setting them here covers every RegExp made after this module is imported,
// whichever way the process was started (`npm start`, the images, tests).
// They cannot go in NODE_OPTIONS: Node.js refuses these V8 flags there.
v8.setFlagsFromString('--enable-experimental-regexp-engine');
v8.setFlagsFromString('--enable-experimental-regexp-engine-on-excessive-backtracks');

const NOT_LINEAR =
  'cannot be evaluated in linear time (backreferences, lookahead, repetition counts above 16 and, on Node.js 20, lookbehind are not supported; split a long count, e.g. x{16}x{16})';

/** Why `pattern` cannot be used as a check's regular expression, or null when it can. */
export function regexProblem(pattern: string, flags = ''): string | null {
  try {
    new RegExp(pattern, flags);
  } catch (error) {
    return `is not a valid regular expression (${plain(error)})`;
  }
  try {
    // The linear engine refuses, at compile time, exactly what it cannot run; a pattern
    // it accepts also gets its fallback when a backtracking match runs too long.
    new RegExp(pattern, `${flags}l`);
  } catch (error) {
    return /linear time/.test(plain(error)) ? NOT_LINEAR : `is not a valid regular expression (${plain(error)})`;
  }
  try {
    // V8 compiles lazily: a pattern past its size limit fails on the first match, not in the constructor.
    new RegExp(pattern, flags).exec('');
  } catch (error) {
    return `is not a valid regular expression (${plain(error)})`;
  }
  return null;
}

export class CheckRegexError extends Error {
  constructor(pattern: string, problem: string) {
    super(`regular expression ${JSON.stringify(pattern.length > 60 ? `${pattern.slice(0, 57)}...` : pattern)} ${problem}`);
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
    const problem = regexProblem(pattern, flags);
    // Without g or y a RegExp keeps no state between matches: one object serves every assertion.
    compiled = problem ? new CheckRegexError(pattern, problem) : new RegExp(pattern, flags);
    if (recent.size >= MAX_RECENT) recent.clear();
    recent.set(key, compiled);
  }
  if (compiled instanceof CheckRegexError) throw compiled;
  return compiled;
}

/**
 * Most work one match of a check definition's pattern may cost, counted as pattern length × text
 * length: the linear engine's cost grows with both (10,000 characters of pattern on 100 KB took
 * 29 s). 30 characters on a 10 MB body, or 300 on 1 MB, are within it.
 */
export const MAX_REGEX_WORK = 300_000_000;

/** Why `pattern` may not run on a text of `length` characters with `limit` work, as a CheckRegexError. */
export function tooMuchWork(pattern: string, length: number, limit: number): CheckRegexError {
  return new CheckRegexError(
    pattern,
    `would cost more than ${limit} (pattern length × text length: ${pattern.length} × ${length}); use a shorter pattern or select less text (docs/regular-expressions.md)`,
  );
}

/**
 * Runs a compiled check regex on `text`. V8's backtracking engine recurses as it matches and, on
 * a long text, a pattern such as `(.|\n)*c` overflows its stack (a RangeError) whatever the
 * fallback: such a match runs again on the linear engine, which keeps no stack.
 */
export function execCheckRegex(regex: RegExp, text: string): RegExpExecArray | null {
  try {
    return regex.exec(text);
  } catch (error) {
    if (!(error instanceof RangeError)) throw error;
    return linearTwin(regex).exec(text);
  }
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
