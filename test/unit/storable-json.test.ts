// storableJson (src/core/nul.ts): the JSON text both stores keep for a result
// holds neither `\u0000` nor a lone surrogate's escape, which PostgreSQL's
// json refuses; everything else, escaped pairs included, stays as it was.

import { describe, expect, it } from 'vitest';
import { storableJson } from '../../src/core/nul.js';

describe('storableJson', () => {
  it('replaces U+0000 and lone surrogates with U+FFFD, as JSON.parse then reads them', () => {
    const cases: Array<[string, string]> = [
      ['caf\ud800', 'caf\ufffd'],
      ['\udc00x', '\ufffdx'],
      ['x\ud83d', 'x\ufffd'],
      ['\udd11\ud83d', '\ufffd\ufffd'],
      ['a\u0000b', 'a\ufffdb'],
      ['🔑 é', '🔑 é'],
      ['a\\ud800 \\u0000 \\\\', 'a\\ud800 \\u0000 \\\\'],
    ];
    for (const [value, stored] of cases) {
      expect(JSON.parse(storableJson(JSON.stringify({ [value]: value }))), JSON.stringify(value)).toEqual({ [stored]: stored });
    }
  });

  it('keeps a surrogate pair written as escapes, in either case, and answers a text without escapes as it is', () => {
    expect(storableJson('["\\ud83d\\udd11","\\uD83D\\uDD11","\\uD800"]')).toBe('["\\ud83d\\udd11","\\uD83D\\uDD11","\\ufffd"]');
    const plain = JSON.stringify({ name: 'café', list: [1, 2, 3] });
    expect(storableJson(plain)).toBe(plain);
  });
});
