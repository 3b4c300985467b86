// The bound that decides whether a result may be serialized whole before it
// is cut (src/results/result-size.ts jsonBytesAtMost): never below the real
// size of the JSON, on random values with the characters JSON escapes most.

import { describe, expect, it } from 'vitest';
import { jsonBytesAtMost } from '../../src/results/result-size.js';
import { mulberry32 } from '../support/random.js';

describe('jsonBytesAtMost', () => {
  it('is true only when the JSON really fits (random values, escapes, non-ASCII)', () => {
    const random = mulberry32(11);
    const alphabet = ['a', '"', '\\', '\u0000', '\n', 'é', '€', '🔑', '\ud800'];
    const text = () => Array.from({ length: Math.floor(random() * 40) }, () => alphabet[Math.floor(random() * alphabet.length)]).join('');
    const value = (depth: number): unknown => {
      const roll = random();
      if (depth > 4 || roll < 0.4) return roll < 0.1 ? random() * 1e12 : roll < 0.15 ? null : roll < 0.2 ? true : text();
      if (roll < 0.7) return Array.from({ length: Math.floor(random() * 5) }, () => value(depth + 1));
      return Object.fromEntries(Array.from({ length: Math.floor(random() * 5) }, () => [text(), value(depth + 1)]));
    };
    let fits = 0;
    for (let n = 0; n < 3000; n++) {
      const v = value(0);
      const bytes = Buffer.byteLength(JSON.stringify(v));
      const limit = Math.floor(random() * 4000);
      if (jsonBytesAtMost(v, limit)) {
        fits++;
        expect(bytes).toBeLessThanOrEqual(limit);
      }
    }
    expect(fits).toBeGreaterThan(300);
  });

  it('says no to a body of ten million NUL characters without reading it all', () => {
    expect(jsonBytesAtMost({ response: { body: '\u0000'.repeat(10_000_000) } }, 4 * 1024 * 1024)).toBe(false);
    expect(jsonBytesAtMost({ response: { body: 'ok' } }, 4 * 1024 * 1024)).toBe(true);
  });
});
