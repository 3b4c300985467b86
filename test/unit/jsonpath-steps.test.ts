// A JSONPath query's work is bounded (src/checks/assertions/jsonpath-steps.ts):
// queries that select a node once per ancestor or per repeated selector stop
// with the reason instead of taking minutes and gigabytes, ordinary queries
// answer as the library does, and what they select is the plain value.

import { types } from 'node:util';
import { query } from 'jsonpath-rfc9535';
import { describe, expect, it } from 'vitest';
import { evaluateJsonPath, queryJsonPath } from '../../src/checks/assertions/jsonpath.js';
import { countedView, MAX_QUERY_READS, QueryTooLarge } from '../../src/checks/assertions/jsonpath-steps.js';
import { assertion } from '../support/assertion-fixtures.js';

/** Every level holds a wide array and the rest of the document: 4 MB of JSON, 250 levels. */
function deepAndWide(depth = 250, width = 8_000): unknown {
  const leaf = `[${Array(width).fill('1').join(',')}]`;
  return JSON.parse(`${'{"a":'.concat(leaf, ',"n":').repeat(depth)}1${'}'.repeat(depth)}`);
}

const STORE = {
  store: {
    book: [
      { category: 'reference', author: 'Nigel Rees', title: 'Sayings of the Century', price: 8.95 },
      { category: 'fiction', author: 'Herman Melville', title: 'Moby Dick', isbn: '0-553-21311-3', price: 8.99 },
    ],
    bicycle: { color: 'red', price: 399 },
  },
  limit: 9,
};

describe('JSONPath work bound', () => {
  it('stops a query that selects every node once per ancestor, naming the bound', () => {
    const found = queryJsonPath(deepAndWide(), '$..*..*');
    expect(found).toEqual({
      ok: false,
      error: `JSONPath "$..*..*" reads more than ${MAX_QUERY_READS.toLocaleString('en-US')} values of this document: select less (fewer descendant segments \`..\`, or no repeated selectors)`,
    });
  }, 60_000);

  it('stops repeated selectors that multiply with every segment, even on a tiny document', () => {
    const expression = `$${'[0,0,0,0,0,0,0,0,0,0]'.repeat(9)}`;
    const found = queryJsonPath([[[[[[[[[1]]]]]]]]], expression);
    expect(found.ok).toBe(false);
    expect(found.ok ? '' : found.error).toContain('reads more than');
    // The assertion fails with the reason rather than the check.
    expect(evaluateJsonPath(assertion({ source: 'JSON_BODY', property: expression, comparison: 'NOT_NULL', target: '' }), [[[[[[[[[1]]]]]]]]])).toMatchObject({ passed: false, error: expect.stringContaining('reads more than') });
  }, 60_000);

  it('answers ordinary queries as the library does, with plain values', () => {
    for (const expression of ['$..price', '$.store.book[0,1].title', '$.store.book[?@.price < $.limit].author', '$..book[*]', '$.store.*', '$["store"]["bicycle"]', '$..nothing']) {
      const found = queryJsonPath(STORE, expression);
      expect(found, expression).toEqual({ ok: true, values: query(STORE as Parameters<typeof query>[0], expression) });
      if (found.ok) for (const value of found.values) expect(types.isProxy(value), expression).toBe(false);
    }
    // A query bounded by the document itself still reads a deep one whole.
    expect(queryJsonPath(deepAndWide(20, 10), '$..n')).toMatchObject({ ok: true });
    // One `..` selects each node once: not counted, however large the document (4,000,000 values: 8 MB of JSON).
    const large = { data: new Array<number>(4_000_000).fill(0), id: 7 };
    expect(queryJsonPath(large, '$..[?@ > 5]')).toEqual({ ok: true, values: [7] });
    expect(queryJsonPath(large, '$..id')).toEqual({ ok: true, values: [7] });
  });

  it('counts reads: a view stops past its budget and hands back the plain values', () => {
    const document = { a: { b: [1, 2, 3] } };
    const { view, unwrap } = countedView(document, 3);
    const a = (view as { a: { b: unknown } }).a;
    expect(types.isProxy(a)).toBe(true);
    expect(unwrap(a)).toBe(document.a);
    expect((a.b as unknown[]).length).toBe(3);
    expect(() => (a.b as unknown[])[0]).toThrow(QueryTooLarge);
  });
});
