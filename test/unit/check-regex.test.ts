// Regular expressions from check definitions run in linear time or are
// refused at validation, naming the field: an assertion's `regex` and the
// patterns of JSONPath match() and search().

import { describe, expect, it } from 'vitest';
import { evaluate } from '../../src/checks/assertions/assertions.js';
import { compileIRegexp, iRegexpSource } from '../../src/checks/assertions/jsonpath-regex.js';
import { evaluateJsonPath, queryJsonPath } from '../../src/checks/assertions/jsonpath.js';
import { LINEAR_RETRY } from '../../src/checks/assertions/bounded-match.js';
import { regexProblem } from '../../src/checks/assertions/regex.js';
import { unrollCounts } from '../../src/checks/assertions/regex-unroll.js';
import { assertion, assertionProblems as problems } from '../support/assertion-fixtures.js';

// Exponential for a backtracking engine: hours at 40 characters. A test that regressed
// would not return before the test timeout, and fail by it.
const EVIL = `${'a'.repeat(40)}b`;



describe('an assertion regex', () => {
  it('a catastrophic-backtracking pattern runs in linear time', { timeout: 20_000 }, () => {
    const outcome = evaluate(assertion({ regex: '^(a+)+$' }), EVIL);
    expect(outcome).toMatchObject({ actual: null, passed: false });
    expect(outcome.error).toBeUndefined();
    expect(evaluate(assertion({ regex: '(a+)+c', comparison: 'IS_NULL' }), EVIL).passed).toBe(true);
    expect(evaluate(assertion({ regex: '^(a+)+$', target: 'aaaa' }), 'aaaa').passed).toBe(true);
  });

  it.each([
    ['(a)\\1', 'backreference'],
    ['(?<x>a)\\k<x>', 'named backreference'],
    ['(?=a)a', 'lookahead'],
    ['(?!a)b', 'negative lookahead'],
    ['(x){17}', 'a capture repeated more than 16 times'],
  ])('%s (%s) is refused at validation, naming the field', (regex) => {
    expect(problems([{ source: 'TEXT_BODY', comparison: 'NOT_NULL', regex }])).toMatch(/^check\.assertions\[0\]\.regex: cannot be evaluated in linear time/);
  });

  it('a lookbehind is refused exactly where V8 cannot run it in linear time (Node 20 cannot; Node 24 can)', () => {
    let linear = true;
    const lookbehind = '(?<=a)b';
    try {
      // The constructor, not a literal: a literal with the `l` flag is a syntax error where the flag is off.
      new RegExp(lookbehind, 'l');
    } catch {
      linear = false;
    }
    const problem = problems([{ source: 'TEXT_BODY', comparison: 'NOT_NULL', regex: '(?<=a)b' }]);
    if (linear) expect(problem).toBe('');
    else expect(problem).toMatch(/^check\.assertions\[0\]\.regex: cannot be evaluated in linear time/);
  });

  it('a pattern past V8 size limit fails validation, naming the field', () => {
    expect(problems([{ source: 'TEXT_BODY', comparison: 'NOT_NULL' }, { source: 'TEXT_BODY', comparison: 'NOT_NULL', regex: 'a'.repeat(100_000) }])).toBe(
      'check.assertions[1].regex: must be at most 10000 characters (got 100000)',
    );
    // V8 compiles lazily: the size limit shows on the first match, which validation makes.
    expect(regexProblem('a'.repeat(100_000))).toBe('is not a valid regular expression (Regular expression too large)');
  });

  it('keeps the usual patterns', () => {
    for (const regex of ['^(\\d{3})', '"token":"([^"]+)"', '\\d{1,3}(\\.\\d{1,3}){3}', '[0-9a-f]{16}[0-9a-f]{16}', 'v(\\d+)\\.(\\d+)']) {
      expect(regexProblem(regex), regex).toBeNull();
    }
    expect(problems([{ source: 'TEXT_BODY', comparison: 'NOT_NULL', regex: '(' }])).toMatch(/^check\.assertions\[0\]\.regex: is not a valid regular expression \(Unterminated group\)$/);
  });

  it('a refused pattern that reaches evaluation is an error on the assertion, not an exception', () => {
    expect(evaluate(assertion({ regex: '(a)\\1' }), 'aa')).toMatchObject({ passed: false, error: expect.stringContaining('linear time') });
  });
});

describe('JSONPath match() and search()', () => {
  it('a catastrophic pattern in the expression runs in linear time', { timeout: 20_000 }, () => {
    expect(queryJsonPath([EVIL, 'aaa'], "$[?search(@, '^(a+)+$')]")).toEqual({ ok: true, values: ['aaa'] });
    expect(queryJsonPath([EVIL, 'aaa'], "$[?match(@, '(a+)+')]")).toEqual({ ok: true, values: ['aaa'] });
  });

  it('a catastrophic pattern from the document runs in linear time', { timeout: 20_000 }, () => {
    const doc = { p: '(a+)+', items: [{ s: EVIL }, { s: 'aa' }] };
    expect(queryJsonPath(doc, '$.items[?match(@.s, $.p)].s')).toEqual({ ok: true, values: ['aa'] });
  });

  it('a backreference from the document fails the assertion with the reason', () => {
    const doc = { p: '(a)\\1', items: [{ s: 'aa' }] };
    const outcome = evaluateJsonPath(assertion({ source: 'JSON_BODY', property: '$.items[?match(@.s, $.p)]', comparison: 'NOT_EMPTY' }), doc);
    expect(outcome.passed).toBe(false);
    expect(outcome.error).toMatch(/^cannot evaluate JSONPath .*: regular expression "\(a\)\\\\1" cannot be evaluated in linear time/);
  });

  it('a literal pattern that cannot run in linear time is refused at validation, naming the field', () => {
    expect(problems([{ source: 'JSON_BODY', property: "$[?search(@.a, '(?=a)b')]", comparison: 'NOT_EMPTY' }])).toMatch(
      /^check\.assertions\[0\]\.property: search\(\) regular expression "\(\?=a\)b" cannot be evaluated in linear time/,
    );
    expect(problems([{ source: 'JSON_BODY', property: "$[?match(@.a, 'b{1,3}')]", comparison: 'NOT_EMPTY' }])).toBe('');
    // Not a JSONPath source: the property is not an expression.
    expect(problems([{ source: 'TEXT_BODY', property: "$[?search(@.a, '(?<=a)b')]", comparison: 'NOT_EMPTY' }])).toBe('');
  });

  it('keeps I-Regexp semantics: whole-string match(), one character per code point', () => {
    const values = (expression: string, doc: unknown) => {
      const result = queryJsonPath(doc, expression);
      if (!result.ok) throw new Error(result.error);
      return result.values;
    };
    expect(values("$[?match(@, 'a|b')]", ['a', 'b', 'ab'])).toEqual(['a', 'b']);
    expect(values("$[?match(@, '.')]", ['😀', 'ab', '\n'])).toEqual(['😀']);
    expect(values("$[?match(@, '..')]", ['😀', 'ab'])).toEqual(['ab']);
    expect(values("$[?match(@, '[^a]')]", ['😀', 'a', 'b'])).toEqual(['😀', 'b']);
    expect(values("$[?search(@, 'b.r')]", ['foobar', 'bxz'])).toEqual(['foobar']);
    // An invalid pattern makes the function false (RFC 9535), it does not fail the query.
    expect(values("$[?match(@, '(')]", ['(', 'a'])).toEqual([]);
  });

  it('translates to a source the linear engine accepts without Unicode mode', () => {
    expect(iRegexpSource('a.b', false)).toBe('a(?:[\\uD800-\\uDBFF][\\uDC00-\\uDFFF]|[^\\n\\r\\uD800-\\uDFFF])b');
    expect(iRegexpSource('[^xy]\\.', false)).toBe('(?:[\\uD800-\\uDBFF][\\uDC00-\\uDFFF]|[^xy\\uD800-\\uDFFF])\\.');
    expect(iRegexpSource('\\p{L}', false)).toBeNull();
    expect(iRegexpSource('é', false)).toBeNull();
    expect(iRegexpSource('a.[.]', true)).toBe('a[^\\n\\r][.]');
    expect(compileIRegexp('x{3}', true)?.test('xxx')).toBe(true);
  });
});

describe('the work a check regex may cost', () => {
  // Pattern size × text length: the linear engine's cost, which without a bound ran to seconds and more.
  it('a long pattern read from the document is refused with the reason, before it runs', () => {
    const doc = { p: `${'.*a'.repeat(100)}x`, items: ['b'] };
    const outcome = evaluateJsonPath(assertion({ source: 'JSON_BODY', property: '$.items[?search(@, $.p)]', comparison: 'IS_EMPTY' }), doc);
    expect(outcome.passed).toBe(false);
    expect(outcome.error).toMatch(/^cannot evaluate JSONPath .*: regular expression ".*" is longer than 256 characters, the most a pattern read from the document may have/);
  });

  it('a literal pattern may be longer than a pattern read from the document', () => {
    const literal = 'a?'.repeat(200);
    expect(queryJsonPath(['b', ''], `$[?match(@, '${literal}')]`)).toEqual({ ok: true, values: [''] });
  });

  it('match() and search() refuse, with the reason, more work than the limit over the whole query', { timeout: 20_000 }, () => {
    // 250 characters of pattern on 4 values of 10,000 characters: 1e7, at the limit; on 5, past it.
    const pattern = `${'.*a'.repeat(83)}x`;
    const within = queryJsonPath({ p: pattern, items: Array.from({ length: 4 }, () => 'a'.repeat(10_000)) }, '$.items[?search(@, $.p)]');
    expect(within).toEqual({ ok: true, values: [] });
    const past = queryJsonPath({ p: pattern, items: Array.from({ length: 5 }, () => 'a'.repeat(10_000)) }, '$.items[?search(@, $.p)]');
    expect(past.ok).toBe(false);
    expect(!past.ok && past.error).toMatch(/regular expression ".*" would cost more than 10000000 in this query/);
    // The same pattern written in the expression is the check's own: bounded per value, by MAX_REGEX_WORK.
    const items = Array.from({ length: 5 }, () => 'a'.repeat(10_000));
    expect(queryJsonPath(items, `$[?search(@, '${pattern}')]`)).toEqual({ ok: true, values: [] });
  });

  it('an assertion regex refuses, with the reason, a text too long for its length', () => {
    // The longest regex allowed (10,000 characters) on a 10 MB body would take most of an hour.
    const outcome = evaluate(assertion({ regex: 'x'.repeat(10_000) }), 'a'.repeat(30_001));
    expect(outcome).toMatchObject({ passed: false, actual: null, error: expect.stringMatching(/would cost more than 300000000 \(pattern length × text length: 10000 × 30001\)/) });
    expect(evaluate(assertion({ regex: `(${'a?'.repeat(49)})` }), 'a'.repeat(1_000_000)).actual).toBe('a'.repeat(49));
  });
});

describe('a check regex the backtracking engine cannot run on a long text', () => {
  // These recurse per character in V8's backtracking engine: a stack overflow on a 10 MB body.
  const inner = 'y'.repeat(10_000_000);

  it('runs on the linear engine instead of failing', { timeout: 60_000 }, () => {
    expect(evaluate(assertion({ regex: '"data":"((?:[^"\\\\]|\\\\.)*)"' }), `{"data":"${inner}"}`).actual).toBe(inner);
    // Node.js 20's linear engine is about three times slower: there this one may use up the check's 5 s instead.
    const slower = evaluate(assertion({ regex: '(\\w|-)+@' }), `${inner}@`);
    if (LINEAR_RETRY || slower.error === undefined) expect(slower.actual).toBe('y');
    else expect(slower.error).toMatch(/ran out of time on 10000001 characters of text/);
    expect(evaluate(assertion({ regex: '(.|\\n)*c' }), `${inner}c`).actual).toBe('y');
  });

  it('in JSONPath match() and search() too', { timeout: 60_000 }, () => {
    expect(queryJsonPath([`${inner}c`, 'b'], "$[?match(@, '(y|z)*c')]")).toEqual({ ok: true, values: [`${inner}c`] });
    expect(queryJsonPath([`${inner}c`, 'b'], "$[?search(@, '(y|z)*c')]")).toEqual({ ok: true, values: [`${inner}c`] });
  });
});

// V8's backtracking compiler takes time exponential in a run of word boundaries that holds a
// non-capturing group, and at 20 of them aborts the whole process ("invalid size"): a test that
// regressed would take its worker down with it.
describe('a run of word boundaries, which V8 cannot compile', () => {
  const boundaries = (n: number) => '(?:\\b)'.repeat(n);

  it('is refused at validation, naming the field and the way out, before anything compiles it', () => {
    const message =
      'has more than 8 word boundaries (\\b, \\B) in a row with nothing between them that must take a character, which V8 compiles in exponential time: keep one where words meet';
    const refused = [
      `${boundaries(20)}(a|)?(a|)?`,
      `(${boundaries(20)}${'(a|)?'.repeat(20)}){0,16}`,
      '(?:(?:\\b)\\B){5}',
      '(?:\\b){17}x',
      '\\01(?:\\b)(?:\\B)'.repeat(5),
      // What V8 drops or passes through does not end a run: empty groups, zero counts, optional parts, lookarounds.
      '(?:\\b)a{0}'.repeat(20),
      '\\b(?:)'.repeat(20),
      `${boundaries(8)}a?`.repeat(20),
      `${boundaries(6)}[]?${boundaries(6)}`,
      `a(?<=\\b(?:)${'\\b'.repeat(9)})b`,
      '(?:\\b[]?){9}',
    ];
    for (const pattern of refused) expect(regexProblem(pattern)).toBe(message);
    expect(problems([{ source: 'TEXT_BODY', comparison: 'NOT_NULL', target: '', regex: `x${boundaries(20)}` }])).toMatch(/check\.assertions\[0\]\.regex: has more than 8 word boundaries \(\\b, \\B\) in a row/);
  });

  it('read from the document, fails the assertion with the reason', () => {
    const document = { p: '((?:\\b){17}(a|){0,20}){0,20}', v: ['a'] };
    expect(queryJsonPath(document, '$.v[?match(@, $.p)]')).toEqual({
      ok: false,
      error: expect.stringMatching(/^cannot evaluate JSONPath ".*": regular expression ".*" has more than 8 word boundaries/),
    });
  });

  it('keeps the word boundaries patterns use', () => {
    const kept = [
      '\\bfoo\\b|\\bbar\\b|\\bbaz\\b|\\bqux\\b|\\bquux\\b',
      // Syntax the parser is not sure of (an octal escape): each top-level alternative counts on its own.
      '\\bfoo\\b|\\bbar\\b|\\bbaz\\b|\\bqux\\b|\\bquux\\b|\\01',
      `${boundaries(8)}x`,
      // A term that must take a character ends the run: 50 runs of 8 compile in milliseconds.
      `${boundaries(8)}a`.repeat(50),
      '(?:\\b){4}(?:\\b){4}',
      '(?:\\b\\w*\\b\\s*){4}',
      '\\b\\w+\\b'.repeat(20),
      '(\\b)'.repeat(8),
      // In a class, \b is a backspace.
      '[\\b]'.repeat(20),
    ];
    for (const pattern of kept) {
      expect(regexProblem(pattern)).toBeNull();
    }
  });

  it('a long count of one is written out once, not copied into a run', () => {
    expect(unrollCounts('(?:\\b){17}', false)).toEqual({ source: '(?:\\b)' });
    expect(unrollCounts('(?:\\b|\\B){0,17}', false)).toEqual({ source: '(?:\\b|\\B)?' });
    expect(unrollCounts('(?:\\b){0,17}?', false)).toEqual({ source: '(?:\\b)??' });
  });
});
