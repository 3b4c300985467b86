// FiguresCache (src/server/figures-cache.ts): what a dashboard page computes
// per check, served for a TTL, shared by concurrent callers, bounded in keys.

import { describe, expect, it } from 'vitest';
import { FiguresCache } from '../../src/server/figures-cache.js';

describe('FiguresCache', () => {
  it('computes a key once per TTL; callers that ask meanwhile share the computation in progress', async () => {
    const cache = new FiguresCache<number>(1000, 10);
    let computed = 0;
    let release = () => {};
    const slow = () => {
      computed++;
      return new Promise<number>((resolve) => {
        release = () => resolve(computed);
      });
    };
    const waiting = [cache.get('k', 0, slow), cache.get('k', 10, slow), cache.get('k', 999, slow)];
    release();
    expect(await Promise.all(waiting)).toEqual([1, 1, 1]);
    expect(computed).toBe(1);
    const again = cache.get('k', 1000, async () => ++computed);
    expect(await again).toBe(2);
    // A clock that went back does not keep a value forever.
    expect(await cache.get('k', 500, async () => ++computed)).toBe(3);
  });

  it('does not keep a failed computation', async () => {
    const cache = new FiguresCache<number>(1000, 10);
    await expect(cache.get('k', 0, async () => Promise.reject(new Error('store down')))).rejects.toThrow('store down');
    expect(await cache.get('k', 1, async () => 7)).toBe(7);
  });

  it('holds at most maxEntries keys: expired ones go first, then the oldest', async () => {
    const cache = new FiguresCache<string>(1000, 3);
    await cache.get('a', 0, async () => 'a');
    await cache.get('b', 500, async () => 'b');
    await cache.get('c', 600, async () => 'c');
    // Full at 1200: 'a' has expired and goes.
    await cache.get('d', 1200, async () => 'd');
    expect(cache.size).toBe(3);
    expect(await cache.get('b', 1200, async () => 'b again')).toBe('b');
    // Full with none expired: the oldest ('b') goes.
    await cache.get('e', 1300, async () => 'e');
    expect(cache.size).toBe(3);
    expect(await cache.get('b', 1300, async () => 'b recomputed')).toBe('b recomputed');
    expect(cache.size).toBe(3);
  });
});
