// What the fuzz of check definitions found: an error result stays short
// however many problems or however long a value a definition has.

import { describe, expect, it } from 'vitest';
import { parseCheck } from '../../src/checks/parse-definition.js';
import type { Executor } from '../../src/checks/executor.js';
import { DefinitionError, MAX_LISTED_ISSUES } from '../../src/checks/fields.js';
import { defaultRegistry } from '../../src/checks/registry.js';
import { playwrightExecutor } from '../../src/checks/scripted/executors.js';

const registry = defaultRegistry().with(playwrightExecutor as Executor);

function definitionError(raw: unknown): DefinitionError {
  try {
    parseCheck(raw, 'check', registry);
  } catch (error) {
    if (error instanceof DefinitionError) return error;
    throw error;
  }
  throw new Error('the definition was accepted');
}

describe('a DefinitionError message', () => {
  it(`lists at most ${MAX_LISTED_ISSUES} problems and counts the rest; all stay in issues`, () => {
    const assertions = Array.from({ length: 2_000 }, () => ({ source: 'NOWHERE', comparison: 'EQUALS' }));
    const error = definitionError({ id: 'x', checkType: 'URL', request: { url: 'http://127.0.0.1/' }, assertions });
    expect(error.issues).toHaveLength(2_000);
    expect(error.message.split('; ')).toHaveLength(MAX_LISTED_ISSUES + 1);
    expect(error.message).toMatch(/^check\.assertions\[0\]\.source: must be one of STATUS_CODE.*; and 1980 more problems$/);
  });

  it('describes each bad value from its start only: thousands of large bad values are not serialized whole', () => {
    // Before the fix, 1,836 of these made the parser serialize 550 MB to show 57 characters of each.
    const big = ['a'.repeat(300_000)];
    const assertions = Array.from({ length: 2_000 }, () => ({ source: 'STATUS_CODE', comparison: big, target: '200' }));
    const heapBefore = process.memoryUsage().heapUsed;
    const error = definitionError({ id: 'x', checkType: 'URL', request: { url: 'http://127.0.0.1/' }, assertions });
    const grown = process.memoryUsage().heapUsed - heapBefore;
    expect(error.issues).toHaveLength(2_000);
    expect(error.issues[0]?.problem).toMatch(/ \(got \["a{55}\.\.\.\)$/);
    expect(grown, `the heap grew by ${Math.round(grown / 2 ** 20)} MB`).toBeLessThan(64 * 2 ** 20);
  });

  it('describes an object and an array by their first characters, keys and nesting kept', () => {
    const error = definitionError({ id: 'x', checkType: 'URL', request: { url: 'http://127.0.0.1/' }, frequency: { a: [1, { b: 'c' }], d: null } });
    expect(error.issues).toEqual([{ path: 'check.frequency', problem: 'must be a whole number of seconds (got {"a":[1,{"b":"c"}],"d":null})' }]);
  });

  it('cuts one very long problem', () => {
    const error = new DefinitionError([{ path: 'check.x', problem: `is bad: ${'y'.repeat(100_000)}` }]);
    expect(error.message.length).toBeLessThanOrEqual(500);
    expect(error.message.endsWith('...')).toBe(true);
  });
});

describe('a PLAYWRIGHT file path over its limit', () => {
  it('is one problem, without the path in it', () => {
    const path = 'a/'.repeat(150_000);
    const error = definitionError({ id: 'pw', checkType: 'PLAYWRIGHT', script: 'x', files: [{ path, content: '' }] });
    expect(error.issues).toEqual([{ path: 'check.files[0].path', problem: 'must be at most 200 characters (got 300000)' }]);
  });
});

describe('API request headers', () => {
  it('refuses a header name or value that cannot be sent, naming the field; one with {{variables}} waits until they are filled in', () => {
    const api = (headers: unknown[]) => ({ id: 'x', checkType: 'API', request: { url: 'http://127.0.0.1/', headers } });
    expect(definitionError(api([{ key: 'ok', value: '1' }, { key: 'bad key', value: '1' }])).message).toBe(
      `check.request.headers[1].key: must be a header name: letters, digits and !#$%&'*+-.^_\`|~, no spaces (got "bad key")`,
    );
    for (const value of ['one\r\nx-injected: two', 'nul\u0000', '日本']) {
      expect(definitionError(api([{ key: 'x-a', value }])).message).toBe(
        'check.request.headers[0].value: must hold only tabs, printable ASCII and Latin-1 characters: no line break or other control character',
      );
    }
    expect(() => parseCheck(api([{ key: 'x-a', value: 'tab\there, café' }]), 'check', registry)).not.toThrow();
    expect(() => parseCheck(api([{ key: '{{NAME}}', value: '{{VALUE}}' }, { key: 'x-b', value: 'a b' }]), 'check', registry)).not.toThrow();
  });
});
