// RFC 9535's own examples (Table 2, the bookstore) through the wrapper the
// JSON_BODY and JSON_ANSWER assertions use, and expressions that must not run code.

import { describe, expect, it } from 'vitest';
import { queryJsonPath } from '../../src/checks/assertions/jsonpath.js';
import { BOOKSTORE } from '../support/bookstore.js';

const STORE = BOOKSTORE;
const [rees, waugh, melville, tolkien] = STORE.store.book;
const AUTHORS = ['Nigel Rees', 'Evelyn Waugh', 'Herman Melville', 'J. R. R. Tolkien'];

function values(expression: string): unknown[] {
  const result = queryJsonPath(STORE, expression);
  if (!result.ok) throw new Error(result.error);
  return result.values;
}

const sorted = (list: unknown[]) => [...list].sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b)));

describe('RFC 9535 Table 2', () => {
  it.each([
    ['$.store.book[*].author', AUTHORS],
    ['$..author', AUTHORS],
    ['$..book[2]', [melville]],
    ['$..book[2].author', ['Herman Melville']],
    ['$..book[2].publisher', []],
    ['$..book[-1]', [tolkien]],
    ['$..book[0,1]', [rees, waugh]],
    ['$..book[:2]', [rees, waugh]],
    ['$..book[?@.isbn]', [melville, tolkien]],
    ['$..book[?@.price<10]', [rees, melville]],
  ])('%s', (expression, expected) => {
    expect(values(expression)).toEqual(expected);
  });

  it('$.store.* selects the book list and the bicycle', () => {
    expect(sorted(values('$.store.*'))).toEqual(sorted([STORE.store.book, STORE.store.bicycle]));
  });

  it('$.store..price selects every price', () => {
    expect(sorted(values('$.store..price'))).toEqual(sorted([8.95, 12.99, 8.99, 22.99, 399]));
  });

  it('$..* selects every member value and array element', () => {
    // 1 store + (1 book list + 4 books + 18 book members) + (1 bicycle + 2 members) = 27
    expect(values('$..*')).toHaveLength(27);
  });
});

describe('function extensions and filters', () => {
  it('supports length(), match() and search() with I-Regexp', () => {
    expect(values('$.store.book[?length(@.title) > 15].title')).toEqual(['Sayings of the Century', 'The Lord of the Rings']);
    expect(values("$.store.book[?match(@.author, 'J.*')].title")).toEqual(['The Lord of the Rings']);
    expect(values("$.store.book[?search(@.title, 'of')].author")).toEqual(['Nigel Rees', 'Evelyn Waugh', 'J. R. R. Tolkien']);
  });
});

describe('expressions are parsed, never evaluated', () => {
  it.each([
    '$..book[?(@.price < 10 && process.exit(1))]',
    '$[?(require("child_process").execSync("touch /tmp/pwned"))]',
    "$..book[?(@.constructor.constructor('return process')())]",
    '$.store.book[',
    'store.book',
  ])('rejects %s with a clear error', (expression) => {
    const result = queryJsonPath(STORE, expression);
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.error).toMatch(/^invalid JSONPath /);
  });
});
