// compare / extract / evaluate (docs/checks/README.md, assertions).

import { describe, expect, it } from 'vitest';
import { type Assertion, COMPARISONS, compare, evaluate, extractWithOrigin, parseAssertions } from '../../src/checks/assertions/assertions.js';
import { DefinitionError, Fields } from '../../src/checks/fields.js';

describe('compare: numbers vs strings', () => {
  it('compares numerically when both sides are finite numbers', () => {
    expect(compare('EQUALS', '200', '200')).toBe(true);
    expect(compare('EQUALS', 200, '200')).toBe(true);
    expect(compare('EQUALS', 200, '200.0')).toBe(true);
    expect(compare('EQUALS', '200', '201')).toBe(false);
    expect(compare('NOT_EQUALS', 200, '200.0')).toBe(false);
    expect(compare('NOT_EQUALS', 200, '404')).toBe(true);
    expect(compare('GREATER_THAN', '10', '9')).toBe(true);
    expect(compare('GREATER_THAN', 10, '10')).toBe(false);
    expect(compare('LESS_THAN', '9', '10')).toBe(true);
    expect(compare('LESS_THAN', 10, '10')).toBe(false);
    expect(compare('LESS_THAN', -1.5, '0')).toBe(true);
  });

  it('compares strings exactly and case-sensitively otherwise', () => {
    expect(compare('EQUALS', 'abc', 'abc')).toBe(true);
    expect(compare('EQUALS', 'abc', 'ABC')).toBe(false);
    expect(compare('NOT_EQUALS', 'abc', 'ABC')).toBe(true);
    expect(compare('EQUALS', '200 OK', '200')).toBe(false);
  });

  it('GREATER_THAN and LESS_THAN are false unless both sides are numbers', () => {
    expect(compare('GREATER_THAN', 'abc', 'abd')).toBe(false);
    expect(compare('GREATER_THAN', 'abd', 'abc')).toBe(false);
    expect(compare('LESS_THAN', 'abc', 'abd')).toBe(false);
    expect(compare('GREATER_THAN', '10', 'abc')).toBe(false);
    expect(compare('LESS_THAN', null, '10')).toBe(false);
    expect(compare('GREATER_THAN', '', '-1')).toBe(false);
  });

  it('compares non-string values by their JSON text', () => {
    expect(compare('EQUALS', true, 'true')).toBe(true);
    expect(compare('EQUALS', { a: 1 }, '{"a":1}')).toBe(true);
    expect(compare('EQUALS', null, '')).toBe(true);
  });
});

describe('compare: every comparison', () => {
  it('CONTAINS / NOT_CONTAINS', () => {
    expect(compare('CONTAINS', 'hello world', 'lo w')).toBe(true);
    expect(compare('CONTAINS', 'hello world', 'World')).toBe(false);
    expect(compare('NOT_CONTAINS', 'hello world', 'World')).toBe(true);
    expect(compare('NOT_CONTAINS', 'hello world', 'world')).toBe(false);
    expect(compare('CONTAINS', 12345, '234')).toBe(true);
    expect(compare('CONTAINS', ['a', 'b'], '"b"')).toBe(true);
  });

  it('IS_EMPTY / NOT_EMPTY', () => {
    for (const empty of ['', [], {}, null, undefined]) {
      expect(compare('IS_EMPTY', empty, '')).toBe(true);
      expect(compare('NOT_EMPTY', empty, '')).toBe(false);
    }
    for (const full of ['x', [0], { a: null }, 0, false]) {
      expect(compare('IS_EMPTY', full, '')).toBe(false);
      expect(compare('NOT_EMPTY', full, '')).toBe(true);
    }
  });

  it('IS_NULL / NOT_NULL', () => {
    expect(compare('IS_NULL', null, '')).toBe(true);
    expect(compare('IS_NULL', undefined, '')).toBe(true);
    expect(compare('IS_NULL', '', '')).toBe(false);
    expect(compare('IS_NULL', 0, '')).toBe(false);
    expect(compare('NOT_NULL', 'x', '')).toBe(true);
    expect(compare('NOT_NULL', null, '')).toBe(false);
  });

  it('HAS_KEY / NOT_HAS_KEY on objects', () => {
    const body = { status: 'up', count: 3, nested: { deep: true } };
    expect(compare('HAS_KEY', body, 'status')).toBe(true);
    expect(compare('HAS_KEY', body, 'deep')).toBe(false);
    expect(compare('HAS_KEY', body, 'toString')).toBe(false);
    expect(compare('NOT_HAS_KEY', body, 'missing')).toBe(true);
    expect(compare('NOT_HAS_KEY', body, 'count')).toBe(false);
    expect(compare('HAS_KEY', 'status', 'status')).toBe(false);
    expect(compare('HAS_KEY', null, 'status')).toBe(false);
    expect(compare('NOT_HAS_KEY', null, 'status')).toBe(true);
  });

  it('HAS_VALUE / NOT_HAS_VALUE on objects and arrays, numbers compared as numbers', () => {
    const body = { status: 'up', count: 3 };
    expect(compare('HAS_VALUE', body, 'up')).toBe(true);
    expect(compare('HAS_VALUE', body, '3')).toBe(true);
    expect(compare('HAS_VALUE', body, '3.0')).toBe(true);
    expect(compare('HAS_VALUE', body, 'down')).toBe(false);
    expect(compare('NOT_HAS_VALUE', body, 'down')).toBe(true);
    expect(compare('NOT_HAS_VALUE', body, 'up')).toBe(false);
    expect(compare('HAS_VALUE', ['a', 'b'], 'b')).toBe(true);
    expect(compare('HAS_VALUE', 'up', 'up')).toBe(false);
    expect(compare('NOT_HAS_VALUE', null, 'up')).toBe(true);
  });

  it('every listed comparison is handled (returns a boolean)', () => {
    expect(COMPARISONS).toHaveLength(14);
    for (const comparison of COMPARISONS) expect(typeof compare(comparison, 'x', 'y')).toBe('boolean');
  });
});

describe('extractWithOrigin', () => {
  const extract = (regex: string | null, value: unknown) => extractWithOrigin(regex, value).value;

  it('returns the value unchanged without a regex', () => {
    const value = { a: 1 };
    expect(extract(null, value)).toBe(value);
    expect(extract('', 'text')).toBe('text');
  });

  it('returns the first capture group', () => {
    expect(extract('version (\\d+)\\.(\\d+)', 'version 12.7')).toBe('12');
  });

  it('returns the whole match when the regex has no group', () => {
    expect(extract('\\d+', 'abc 42 def')).toBe('42');
  });

  it('returns null when nothing matches', () => {
    expect(extract('(\\d+)', 'no digits')).toBeNull();
  });

  it('matches against the text of non-string values', () => {
    expect(extract('^(\\d)', 404)).toBe('4');
    expect(extract('"id":(\\d+)', { id: 77 })).toBe('77');
  });
});

describe('evaluate', () => {
  const base: Assertion = { source: 'TEXT_BODY', property: '', comparison: 'EQUALS', target: '12', regex: 'v(\\d+)' };

  it('applies the regex, then compares, and reports the extracted actual', () => {
    const outcome = evaluate(base, 'build v12 ok');
    expect(outcome).toEqual({ ...base, actual: '12', passed: true });
  });

  it('fails an EQUALS when the regex does not match (actual null)', () => {
    const outcome = evaluate(base, 'nothing here');
    expect(outcome.actual).toBeNull();
    expect(outcome.passed).toBe(false);
  });

  it('passes IS_NULL when the regex does not match', () => {
    expect(evaluate({ ...base, comparison: 'IS_NULL' }, 'nothing here').passed).toBe(true);
  });

  it('works without a regex on a status code', () => {
    const status: Assertion = { source: 'STATUS_CODE', property: '', comparison: 'LESS_THAN', target: '300', regex: null };
    expect(evaluate(status, 204)).toMatchObject({ actual: 204, passed: true });
    expect(evaluate(status, 500)).toMatchObject({ actual: 500, passed: false });
  });
});

describe('parseAssertions', () => {
  it('turns numeric and boolean targets into strings and fills defaults', () => {
    const fields = Fields.root(
      { assertions: [{ source: 'STATUS_CODE', comparison: 'EQUALS', target: 200 }, { source: 'STATUS_CODE', comparison: 'NOT_NULL' }] },
      '$',
    );
    const parsed = parseAssertions(fields, ['STATUS_CODE']);
    expect(fields.issues).toEqual([]);
    expect(parsed).toEqual([
      { source: 'STATUS_CODE', property: '', comparison: 'EQUALS', target: '200', regex: null },
      { source: 'STATUS_CODE', property: '', comparison: 'NOT_NULL', target: '', regex: null },
    ]);
  });

  it('records each problem with its JSON path', () => {
    const fields = Fields.root(
      { assertions: [{ source: 'BODY', comparison: 'SIMILAR', regex: '(' }] },
      '$.checks[0]',
    );
    parseAssertions(fields, ['STATUS_CODE']);
    const paths = fields.issues.map((i) => i.path);
    expect(paths).toContain('$.checks[0].assertions[0].source');
    expect(paths).toContain('$.checks[0].assertions[0].comparison');
    expect(paths).toContain('$.checks[0].assertions[0].regex');
    expect(() => fields.assertValid()).toThrow(DefinitionError);
  });
});
