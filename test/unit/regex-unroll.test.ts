// Long repetition counts (`[0-9a-f]{32}`, `.{0,100}`) are written out as
// shorter consecutive ones that V8's linear-time engine runs, and match exactly
// as the pattern the user wrote: checked against V8's own backtracking engine
// on random patterns and texts.

import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { evaluate } from '../../src/checks/assertions/assertions.js';
import { queryJsonPath } from '../../src/checks/assertions/jsonpath.js';
import { linearSource } from '../../src/checks/assertions/regex.js';
import { MAX_UNROLLED_LENGTH, unrollCounts } from '../../src/checks/assertions/regex-unroll.js';
import { assertion, assertionProblems as problems } from '../support/assertion-fixtures.js';
import { mulberry32 } from '../support/random.js';

/** A random pattern whose every repeated group takes at least one character per turn. */
function randomPattern(next: () => number, depth = 0): string {
  const pick = <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)] as T;
  const count = () => Math.floor(next() * 21);
  const terms = 1 + Math.floor(next() * 3);
  let out = '';
  for (let i = 0; i < terms; i++) {
    // Groups that can end in more than one place tell apart orders of trying turns (lazy counts above all).
    let atom = pick(['a', 'b', '.', '[ab]', '\\d', '-', '[^a]', '(?:a|ab)', '(?:a|abc|b)', '(?:b|a-)']);
    if (depth < 2 && next() < 0.35) {
      const inner = next() < 0.3 ? `${randomPattern(next, depth + 1)}|${randomPattern(next, depth + 1)}` : randomPattern(next, depth + 1);
      atom = `${next() < 0.15 ? '(' : '(?:'}${inner})`;
    }
    const n = count();
    const m = n + count();
    // The first term of a group is never optional, so that each turn of a repeated group takes a character.
    const quantifier =
      i === 0 && depth > 0 ? pick(['', '+', `{${n + 1}}`, `{${n + 1},}`, `{${n + 1},${m + 1}}`]) : pick(['', '', '*', '+', '?', `{${n}}`, `{${n},}`, `{${n},${m}}`]);
    out += atom + quantifier + (quantifier !== '' && next() < 0.3 ? '?' : '');
  }
  return out;
}

const MAX_TEXT = 24;

/**
 * Runs both patterns on the texts in a worker thread: V8's backtracking engine, the oracle, can take
 * exponential time on a random pattern, and a pattern that needs unrolling has no linear-time
 * fallback to rescue it. A pattern not done within ORACLE_MS is dropped (and counted), the worker
 * ended and another started.
 */
class Oracle {
  private worker = Oracle.start();
  static start(): Worker {
    return new Worker(
      `const { parentPort } = require('node:worker_threads');
       parentPort.on('message', ({ pattern, source, texts }) => {
         const a = new RegExp(pattern), b = new RegExp(source);
         const as = (m) => m && [m.index, ...m];
         parentPort.postMessage(texts.map((t) => [as(a.exec(t)), as(b.exec(t))]));
       });`,
      { eval: true },
    );
  }
  async run(pattern: string, source: string, texts: string[]): Promise<Array<[unknown, unknown]> | 'slow'> {
    const worker = this.worker;
    let timer: NodeJS.Timeout | undefined;
    const answered = new Promise<Array<[unknown, unknown]>>((resolve) => worker.once('message', resolve));
    worker.postMessage({ pattern, source, texts });
    const answer = await Promise.race([
      answered,
      new Promise<'slow'>((resolve) => {
        timer = setTimeout(() => resolve('slow'), ORACLE_MS);
      }),
    ]);
    clearTimeout(timer);
    if (answer === 'slow') {
      await worker.terminate();
      this.worker = Oracle.start();
    }
    return answer;
  }
  stop(): Promise<number> {
    return this.worker.terminate();
  }
}
const ORACLE_MS = 500;

describe('unrolled repetition counts', () => {
  it('match exactly as the written pattern on V8 backtracking engine: index, match and every capture (3,000 random patterns)', { timeout: 120_000 }, async () => {
    const next = mulberry32(20261124);
    const oracle = new Oracle();
    let unrolled = 0;
    let refusedForCaptures = 0;
    let slow = 0;
    try {
      for (let i = 0; i < 3_000; i++) {
        const pattern = randomPattern(next);
        const result = unrollCounts(pattern, false);
        expect(result, pattern).not.toBeNull();
        if (result === null || 'problem' in result) {
          expect(result?.problem, pattern).toMatch(/capturing group|more than 20000 characters|lazily/);
          refusedForCaptures++;
          continue;
        }
        expect(linearSource(pattern).problem, pattern).toBeUndefined();
        if (result.source !== pattern) unrolled++;
        const texts = Array.from({ length: 12 }, () =>
          Array.from({ length: Math.floor(next() * (MAX_TEXT + 1)) }, () => 'aabc1-'[Math.floor(next() * 6)]).join(''),
        );
        const answers = await oracle.run(pattern, result.source, texts);
        if (answers === 'slow') {
          slow++;
          continue;
        }
        for (const [j, [written, rewritten]] of answers.entries()) {
          expect(rewritten, `${pattern} → ${result.source} on ${JSON.stringify(texts[j])}`).toEqual(written);
        }
      }
    } finally {
      await oracle.stop();
    }
    // The generator is meant to reach both cases often, and the oracle to answer nearly always:
    // a change that made either stop would test nothing.
    expect(unrolled).toBeGreaterThan(1_200);
    expect(refusedForCaptures).toBeGreaterThan(50);
    expect(slow).toBeLessThan(30);
  });

  it('lazy ranges of a group that can end in more than one place try turns in the written order (600 patterns)', { timeout: 120_000 }, async () => {
    const next = mulberry32(7);
    const pick = <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)] as T;
    const oracle = new Oracle();
    let compared = 0;
    try {
      for (let i = 0; i < 600; i++) {
        const group = pick(['(?:a|abc|b)', '(?:a|ab)', '(?:ab|a)', '(?:b|a|c)', '(?:\\.|[^"])', '(?:a|b(?:c|cd))']);
        // A last lazy range of a few turns is where trying turns in another order shows.
        const min = Math.floor(next() * 2);
        const max = min + 17 + Math.floor(next() * 3);
        const pattern = `${pick(['^', '', '"'])}${group}{${min},${max}}?${pick(['[cd]', 'c', '"', '$', 'b', '(c)'])}`;
        const result = unrollCounts(pattern, false);
        if (result === null || 'problem' in result) throw new Error(`${pattern}: ${JSON.stringify(result)}`);
        // Texts made of the groups' own pieces, so that turns can end in different places.
        const texts = Array.from({ length: 12 }, () =>
          Array.from({ length: Math.floor(next() * 12) }, () => pick(['a', 'ab', 'abc', 'b', 'c', 'cd', 'd', '"', '\\"'])).join(''),
        );
        const answers = await oracle.run(pattern, result.source, texts);
        if (answers === 'slow') continue;
        compared++;
        for (const [j, [written, rewritten]] of answers.entries()) {
          expect(rewritten, `${pattern} → ${result.source} on ${JSON.stringify(texts[j])}`).toEqual(written);
        }
      }
    } finally {
      await oracle.stop();
    }
    expect(compared).toBeGreaterThan(550);
  });

  it.each([
    ['[0-9a-f]{32}', '[0-9a-f]{16}[0-9a-f]{16}'],
    ['.{0,40}', '.{0,16}.{0,16}.{0,8}'],
    ['x{17,}?', 'x{16}x{1}x*?'],
    ['a{2,40}?b', 'a{2}a{0,16}?a{0,16}?a{0,6}?b'],
    ['(?:\\d{4}-){8}', '(?:\\d{2}\\d{2}-){8}'],
    ['(?:ab){17}', '(?:ab){16}(?:ab)'],
    ['(a)x{20}(b)', '(a)x{16}x{4}(b)'],
    ['[0-9a-f]{16}', '[0-9a-f]{16}'],
    // Outside Unicode mode these are a literal x, u and p, an escaped ] in a class, and braces that are not a count.
    ['\\x{17}41', '\\x{16}\\x{1}41'],
    ['\\u{20}', '\\u{16}\\u{4}'],
    ['\\p{L}{17}', '\\p{L}{16}}{1}'],
    ['[\\]a]{17}', '[\\]a]{16}[\\]a]{1}'],
    ['{{17}5}', '{{16}{{1}5}'],
    ['\\0{17}1', '\\0{16}\\0{1}1'],
  ])('%s runs as %s', (pattern, source) => {
    expect(unrollCounts(pattern, false)).toEqual({ source });
    expect(linearSource(pattern)).toEqual({ source: pattern === source ? pattern : source });
    for (const text of ['', `${'x'.repeat(17)}41`, '0123456789abcdef'.repeat(3), `${'{'.repeat(17)}5}`, `${'\0'.repeat(17)}1`, 'u'.repeat(20)]) {
      const a = new RegExp(pattern).exec(text);
      const b = new RegExp(source).exec(text);
      expect(b && [b.index, ...b], `${pattern} on ${JSON.stringify(text)}`).toEqual(a && [a.index, ...a]);
    }
  });

  it('validating a pattern never runs it: one that backtracks exponentially even on an empty text is checked at once', () => {
    // Before, the written pattern was matched against '' to count its groups: hours for this one.
    expect(linearSource(`a{0,17}${'(?:|)'.repeat(40)}\\b`).source).toBeDefined();
  });

  it('a lazy range of a group is written as nested optional groups, and refused where that would not be exact', () => {
    expect(unrollCounts('(?:ab){2,19}?', false)).toEqual({ source: `(?:ab){2}${'(?:(?:ab)'.repeat(17)}${')??'.repeat(17)}` });
    const quoted = '"((?:\\\\.|[^"]){0,100}?)"';
    expect(evaluate(assertion({ regex: quoted, target: '\\"abcd' }), 'v="\\"abcd"')).toMatchObject({ passed: true, actual: '\\"abcd' });
    expect(new RegExp(quoted).exec('v="\\"abcd"')?.[1]).toBe('\\"abcd');
    // A group that may match nothing, or more than 200 optional turns: refused, with the way out.
    expect(linearSource('(?:a?){0,40}?b').problem).toMatch(/repeats a group lazily .* make it greedy, or use \*\?$/);
    expect(linearSource('(?:ab){0,300}?').problem).toMatch(/repeats a group lazily/);
    expect(linearSource('(?:ab){0,300}').source).toBeDefined();
    expect(linearSource('a{0,300}?').source).toBeDefined();
  });

  it('leaves alone what it cannot read for certain: octal escapes and backreferences stay refused', () => {
    expect(unrollCounts('\\12{20}', false)).toBeNull();
    expect(linearSource('\\12{20}').problem).toMatch(/^cannot be evaluated in linear time/);
    expect(linearSource('(a)\\1{20}').problem).toMatch(/^cannot be evaluated in linear time \(backreferences/);
  });

  it('in Unicode mode, a surrogate pair or an escaped one is one character', () => {
    expect(unrollCounts('😀{17}', true)).toEqual({ source: '😀{16}😀{1}' });
    expect(unrollCounts('\\uD83D\\uDE00{17}', true)).toEqual({ source: '\\uD83D\\uDE00{16}\\uD83D\\uDE00{1}' });
    expect(unrollCounts('\\u{1F600}{17}', true)).toEqual({ source: '\\u{1F600}{16}\\u{1F600}{1}' });
    expect(unrollCounts('\\p{L}{17}', true)).toEqual({ source: '\\p{L}{16}\\p{L}{1}' });
    // Outside it, the count takes the trail surrogate alone.
    expect(unrollCounts('😀{17}', false)).toEqual({ source: '\uD83D\uDE00{16}\uDE00{1}' });
  });

  it('refuses, naming the field and the way out, a repeated capture and a count too long to write out', () => {
    expect(problems([{ source: 'TEXT_BODY', comparison: 'NOT_NULL', regex: '([0-9a-f]){32}' }])).toMatch(
      /^check\.assertions\[0\]\.regex: cannot be evaluated in linear time: it repeats a capturing group more than 16 times in all, .*make the group non-capturing, \(\?:…\)/,
    );
    expect(problems([{ source: 'TEXT_BODY', comparison: 'NOT_NULL', regex: 'a{1,99999}' }])).toMatch(
      new RegExp(`^check\\.assertions\\[0\\]\\.regex: cannot be evaluated in linear time: it has repetition counts that, written out .* more than ${MAX_UNROLLED_LENGTH} characters`),
    );
    expect(linearSource('x{99999999999999999999}').problem).toMatch(/more than 20000 characters/);
    // Nested counts multiply: 16 × 16 x's written out one by one in each of 19 groups of 16 (300 = 18 × 16 + 12).
    expect(linearSource('(?:(?:x{16}){16}){300}').problem).toMatch(/more than 20000 characters/);
    expect(linearSource('(?:(?:x{16}){16}){16}').source).toBe(`(?:${`(?:${'x{1}'.repeat(16)})`.repeat(16)}){16}`);
    expect(linearSource('(?:x{17}){0}b').source).toBe('(?:x{16}x{1}){0}b');
  });

  it('an assertion regex with a long count validates, matches and extracts its capture', () => {
    const id = '0123456789abcdef0123456789abcdef';
    expect(problems([{ source: 'TEXT_BODY', comparison: 'EQUALS', target: id, regex: 'id=([0-9a-f]{32})' }])).toBe('');
    expect(evaluate(assertion({ regex: 'id=([0-9a-f]{32})', target: id }), `{"id=${id}"}`)).toMatchObject({ passed: true, actual: id });
    expect(evaluate(assertion({ regex: 'id=([0-9a-f]{32})', comparison: 'IS_NULL' }), `id=${id.slice(1)}`)).toMatchObject({ passed: true, actual: null });
    // Catastrophic inside a long count still runs in linear time.
    expect(evaluate(assertion({ regex: '^(?:a+){20}$', comparison: 'IS_NULL' }), `${'a'.repeat(40)}b`).passed).toBe(true);
  });

  it('JSONPath match() and search() take long counts too', () => {
    const doc = { items: ['2026112400000000001', '12', 'x2026112400000000002y'] };
    expect(queryJsonPath(doc, "$.items[?match(@, '[0-9]{19}')]")).toEqual({ ok: true, values: ['2026112400000000001'] });
    expect(queryJsonPath(doc, "$.items[?search(@, '[0-9]{19}')]")).toEqual({ ok: true, values: ['2026112400000000001', 'x2026112400000000002y'] });
    // I-Regexp groups capture nothing match() or search() could read: they are repeated like any other.
    expect(problems([{ source: 'JSON_BODY', property: "$[?match(@, '([0-9]){19}')]", comparison: 'NOT_NULL' }])).toBe('');
    expect(queryJsonPath(doc, "$.items[?match(@, '([0-9]){19}')]")).toEqual({ ok: true, values: ['2026112400000000001'] });
  });

  it('the work a match may cost counts the pattern as written out', () => {
    // 9 characters as written, 440 written out: on 1 MB past the limit, on 100 KB within it.
    const pattern = '.{0,1000}';
    const long = evaluate(assertion({ regex: pattern, comparison: 'NOT_NULL' }), 'a'.repeat(1_000_000));
    expect(long.error).toMatch(/would cost more than 300000000 \(pattern length with its long counts written out × text length: 440 × 1000000\)/);
    expect(evaluate(assertion({ regex: pattern, comparison: 'NOT_NULL' }), 'a'.repeat(100_000))).toMatchObject({ passed: true });
  });
});
