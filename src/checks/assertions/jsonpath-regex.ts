// JSONPath's match() and search() function extensions take an I-Regexp
// (RFC 9485) pattern, from the expression or from the document itself.
// jsonpath-rfc9535 compiles it in Unicode mode, which V8's linear-time engine
// cannot run on Node.js 20 or 24 (probed below, not assumed): no fallback,
// so a pattern like (a+)+ froze the event loop. Its two declarations are replaced here by
// ones that compile through compileCheckRegex, so they run in linear time (or
// fail with a clear error) whichever Node.js the agent runs on.

import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import parseJsonPath from 'jsonpath-rfc9535/parser';
import { boundedRun } from './bounded-match.js';
import { CheckRegexError, compileLinear, MATCH_TIME_REASON, execCheckRegex, MAX_REGEX_WORK, tooMuchWork, workLength } from './regex.js';

const UNICODE_LINEAR = (() => {
  try {
    // biome-ignore lint/complexity/useRegexLiterals: a literal with the l flag would not even parse before ./regex.js enables it.
    new RegExp('a', 'ul');
    return true;
  } catch {
    return false;
  }
})();

const SURROGATE_PAIR = '[\\uD800-\\uDBFF][\\uDC00-\\uDFFF]';
const SURROGATES = '\\uD800-\\uDFFF';

/**
 * The ECMAScript source for an I-Regexp: `.` excludes only CR and LF. Without
 * Unicode mode, `.` and negated classes also take a surrogate pair as one
 * character, as Unicode mode would; a pattern that needs Unicode mode itself
 * (non-ASCII, \p{…}, \u{…}) gives null then.
 */
export function iRegexpSource(pattern: string, unicode: boolean): string | null {
  const anyChar = unicode ? '[^\\n\\r]' : `(?:${SURROGATE_PAIR}|[^\\n\\r${SURROGATES}])`;
  const needsUnicode = (code: number | undefined) => !unicode && code !== undefined && (code > 0x7f || code === 0x70 || code === 0x50 || code === 0x75);
  let out = '';
  for (let i = 0; i < pattern.length; i++) {
    const ch = pattern[i] as string;
    if (ch === '\\') {
      if (needsUnicode(pattern.charCodeAt(i + 1))) return null;
      out += pattern.slice(i, i + 2);
      i++;
    } else if (ch === '[') {
      let end = i + 1;
      if (pattern[end] === '^') end++;
      while (end < pattern.length && pattern[end] !== ']') {
        if (pattern[end] === '\\') {
          if (needsUnicode(pattern.charCodeAt(end + 1))) return null;
          end++;
        } else if (!unicode && pattern.charCodeAt(end) > 0x7f) {
          return null;
        }
        end++;
      }
      const cls = pattern.slice(i, end + 1);
      out += !unicode && cls.startsWith('[^') && cls.endsWith(']') ? `(?:${SURROGATE_PAIR}|${cls.slice(0, -1)}${SURROGATES}])` : cls;
      i = end;
    } else if (ch === '.') {
      out += anyChar;

    } else {
      if (!unicode && ch.charCodeAt(0) > 0x7f) return null;
      out += ch;
    }
  }
  return out;
}

const compiled = new Map<string, RegExp | null>();
const MAX_CACHED = 256;

/**
 * The RegExp for a match() (anchored) or search() pattern; null when it is not
 * a valid pattern (the function is then false, as RFC 9535 says). Throws
 * CheckRegexError when it could take more than linear time.
 */
export function compileIRegexp(pattern: string, anchored: boolean): RegExp | null {
  const key = `${anchored ? 'm' : 's'}${pattern}`;
  const cached = compiled.get(key);
  if (cached !== undefined) return cached;
  const body = iRegexpSource(pattern, UNICODE_LINEAR);
  if (body === null) {
    throw new CheckRegexError(pattern, 'needs Unicode mode (non-ASCII characters, \\p{…}), which this Node.js cannot run in linear time');
  }
  const source = anchored ? `^(?:${body})$` : body;
  const flags = UNICODE_LINEAR ? 'u' : '';
  let regex: RegExp | null;
  try {
    new RegExp(source, flags);
    // match() and search() never read a capture: a repeated group may be written out like any other.
    const linear = compileLinear(source, flags, pattern, { capturesRead: false });
    if (linear instanceof CheckRegexError) throw linear;
    regex = linear;
  } catch (error) {
    if (error instanceof CheckRegexError) throw error;
    regex = null;
  }
  if (compiled.size >= MAX_CACHED) compiled.clear();
  compiled.set(key, regex);
  return regex;
}

type Declaration = (ctx: unknown, value: unknown, pattern: unknown) => boolean;
interface FunctionExtension {
  declaration: Declaration;
}

async function extension(name: 'match' | 'search'): Promise<FunctionExtension> {
  // The package exports only its entry points; the function table is the one
  // jsonpath-rfc9535's own query() uses (the same module instance).
  const packageDir = path.dirname(createRequire(import.meta.url).resolve('jsonpath-rfc9535/package.json'));
  const file = pathToFileURL(path.join(packageDir, 'dist', 'esm', 'core', 'functions', `${name}.js`)).href;
  const module = (await import(file)) as { default?: Partial<FunctionExtension> };
  if (typeof module.default?.declaration !== 'function') {
    throw new Error(`jsonpath-rfc9535 has no ${name}() declaration at ${file}: update src/checks/assertions/jsonpath-regex.ts for this version`);
  }
  return module.default as FunctionExtension;
}

/** Longest pattern match() or search() takes from the document rather than from the expression. */
export const MAX_DOCUMENT_PATTERN_LENGTH = 256;

/**
 * Most work the patterns read from the document may cost in one query, summed over every value they
 * are applied to (pattern length × text length): both sides are then the checked service's choice.
 * At the limit, the worst pattern measured ('.*a' repeated to 256 characters, on 39 KB) took 0.9 s.
 */
export const MAX_DOCUMENT_PATTERN_WORK = 10_000_000;

/** The query being evaluated: the patterns its expression spells out, and the work of the others so far. */
let current: { literals: ReadonlySet<string>; documentWork: number } | null = null;

/**
 * Runs `query` (of `expression`) with match() and search() counting the work of patterns read from
 * the document; when the expression calls either, within the matches' time limit (./bounded-match.ts).
 */
export function withPatternBudget<T>(expression: string, query: () => T): T {
  const outer = current;
  const { literals, calls } = regexFunctions(expression);
  const run = () => {
    // From the start on each engine: a run the watchdog stopped left its count behind.
    current = { literals: new Set(literals.map((p) => p.pattern)), documentWork: 0 };
    return query();
  };
  try {
    if (calls === 0) return run();
    return boundedRun(run, () => {
      // One pattern is named only when it is the query's only one: the time may have gone to any.
      const shown = literals.length === 1 && calls === 1 ? (literals[0] as { pattern: string }).pattern : null;
      return new CheckRegexError(shown, `${shown === null ? 'the match() and search() patterns ' : ''}ran out of time in this query: ${MATCH_TIME_REASON}`);
    });
  } finally {
    current = outer;
  }
}

function matches(value: unknown, pattern: unknown, anchored: boolean): boolean {
  if (typeof value !== 'string' || typeof pattern !== 'string') return false;
  // Outside withPatternBudget the expression is unknown: every pattern counts as read from the document.
  const fromDocument = current === null || !current.literals.has(pattern);
  if (fromDocument && pattern.length > MAX_DOCUMENT_PATTERN_LENGTH) {
    throw new CheckRegexError(pattern, `is longer than ${MAX_DOCUMENT_PATTERN_LENGTH} characters, the most a pattern read from the document may have`);
  }
  const regex = compileIRegexp(pattern, anchored);
  if (regex === null) return false;
  const patternLength = workLength(pattern, regex);
  const work = patternLength * value.length;
  if (!fromDocument) {
    if (work > MAX_REGEX_WORK) throw tooMuchWork(pattern, patternLength, value.length, MAX_REGEX_WORK);
  } else {
    const spent = (current?.documentWork ?? 0) + work;
    if (current) current.documentWork = spent;
    if (spent > MAX_DOCUMENT_PATTERN_WORK) {
      throw new CheckRegexError(
        pattern,
        `would cost more than ${MAX_DOCUMENT_PATTERN_WORK} in this query, the most patterns read from the document may (pattern length × text length, summed over the values they are applied to: ${spent} here)`,
      );
    }
  }
  return execCheckRegex(regex, value) !== null;
}

const [match, search] = await Promise.all([extension('match'), extension('search')]);
match.declaration = (_ctx, value, pattern) => matches(value, pattern, true);
search.declaration = (_ctx, value, pattern) => matches(value, pattern, false);

/** Most AST nodes looked at when validating an expression. */
const MAX_NODES = 100_000;

/**
 * Problems with the literal patterns of match() and search() in a JSONPath
 * expression, for the check's validation. An expression that does not parse
 * is left to evaluation, which reports it. Patterns read from the document are
 * checked when they are used.
 */
export function jsonPathRegexProblems(expression: string): string[] {
  const problems: string[] = [];
  for (const { fn, pattern } of literalPatterns(expression)) {
    try {
      compileIRegexp(pattern, fn === 'match');
    } catch (error) {
      if (!(error instanceof CheckRegexError)) throw error;
      problems.push(`${fn}() ${error.message}`);
    }
  }
  return problems;
}

/** The patterns of match() and search() written in `expression` itself; none when it does not parse. */
function literalPatterns(expression: string): Array<{ fn: 'match' | 'search'; pattern: string }> {
  return regexFunctions(expression).literals;
}

/**
 * How many times `expression` calls match() or search(), and the patterns written in it; none when
 * it does not parse.
 */
function regexFunctions(expression: string): { literals: Array<{ fn: 'match' | 'search'; pattern: string }>; calls: number } {
  let ast: unknown;
  try {
    ast = parseJsonPath(expression);
  } catch {
    return { literals: [], calls: 0 };
  }
  let calls = 0;
  const found: Array<{ fn: 'match' | 'search'; pattern: string }> = [];
  const stack: unknown[] = [ast];
  for (let seen = 0; stack.length > 0 && seen < MAX_NODES; seen++) {
    const node = stack.pop();
    if (node === null || typeof node !== 'object') continue;
    const fn = node as { type?: unknown; name?: unknown; arguments?: unknown };
    if (fn.type === 'FunctionExpr' && (fn.name === 'match' || fn.name === 'search') && Array.isArray(fn.arguments)) {
      calls++;
      const pattern = fn.arguments[1] as { type?: unknown; value?: unknown } | undefined;
      if (pattern?.type === 'Literal' && typeof pattern.value === 'string') found.push({ fn: fn.name, pattern: pattern.value });
    }
    for (const child of Object.values(node)) stack.push(child);
  }
  return { literals: found, calls };
}
