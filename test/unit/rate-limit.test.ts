// RateLimiter (src/server/http/rate-limit.ts): a sliding window of
// one-second buckets per key, with a bound on the keys it remembers.

import { describe, expect, it } from 'vitest';
import { RateLimiter } from '../../src/server/http/rate-limit.js';

const S = 1000;

describe('RateLimiter', () => {
  it('allows `limit` requests per window and refuses the next', () => {
    const limiter = new RateLimiter(3, 60);
    const t = 1_000_000 * S;
    for (let i = 0; i < 3; i++) expect(limiter.take('k', t + i).allowed).toBe(true);
    const refused = limiter.take('k', t + 10);
    expect(refused.allowed).toBe(false);
    expect(refused.retryAfterSeconds).toBe(60);
  });

  it('slides: requests leave the window one second bucket at a time', () => {
    const limiter = new RateLimiter(3, 10);
    const t = 2_000_000 * S;
    expect(limiter.take('k', t).allowed).toBe(true);
    expect(limiter.take('k', t + 4 * S).allowed).toBe(true);
    expect(limiter.take('k', t + 5 * S).allowed).toBe(true);
    // Full at t+9 s: the oldest request (t) leaves at t+10 s.
    const refused = limiter.take('k', t + 9 * S);
    expect(refused).toEqual({ allowed: false, retryAfterSeconds: 1 });
    expect(limiter.take('k', t + 10 * S).allowed).toBe(true);
    // Full again: the next to leave is the one of t+4 s, at t+14 s.
    expect(limiter.take('k', t + 11 * S)).toEqual({ allowed: false, retryAfterSeconds: 3 });
    expect(limiter.take('k', t + 14 * S).allowed).toBe(true);
  });

  it('counts a refused request against nothing', () => {
    const limiter = new RateLimiter(1, 5);
    const t = 3_000_000 * S;
    expect(limiter.take('k', t).allowed).toBe(true);
    for (let i = 0; i < 100; i++) expect(limiter.take('k', t + S).allowed).toBe(false);
    expect(limiter.take('k', t + 5 * S).allowed).toBe(true);
  });

  it('peek says what take would, without counting a request', () => {
    const limiter = new RateLimiter(2, 10);
    const t = 3_500_000 * S;
    expect(limiter.peek('k', t)).toEqual({ allowed: true, retryAfterSeconds: 0 });
    for (let i = 0; i < 5; i++) expect(limiter.peek('k', t).allowed).toBe(true);
    expect(limiter.take('k', t).allowed).toBe(true);
    expect(limiter.take('k', t + 2 * S).allowed).toBe(true);
    expect(limiter.peek('k', t + 3 * S)).toEqual({ allowed: false, retryAfterSeconds: 7 });
    expect(limiter.peek('k', t + 10 * S).allowed).toBe(true);
    expect(limiter.take('k', t + 10 * S).allowed).toBe(true);
  });

  it('keeps one budget per key', () => {
    const limiter = new RateLimiter(1, 60);
    const t = 4_000_000 * S;
    expect(limiter.take('a', t).allowed).toBe(true);
    expect(limiter.take('a', t).allowed).toBe(false);
    expect(limiter.take('b', t).allowed).toBe(true);
  });

  it('remembers at most maxKeys keys: idle ones go first, else the oldest seen', () => {
    const limiter = new RateLimiter(1, 10, 3);
    const t = 5_000_000 * S;
    for (const key of ['a', 'b', 'c']) expect(limiter.take(key, t).allowed).toBe(true);
    // A fourth key while all three are active: 'a' (seen first) is forgotten, so it gets a fresh budget.
    expect(limiter.take('d', t).allowed).toBe(true);
    expect(limiter.take('b', t).allowed).toBe(false);
    expect(limiter.take('a', t).allowed).toBe(true);
    // Now 'b' was seen first but 'c' and 'd' are just as active; after a whole window all are idle and evicted together.
    const later = t + 20 * S;
    for (const key of ['e', 'f', 'g']) expect(limiter.take(key, later).allowed).toBe(true);
    for (const key of ['e', 'f', 'g']) expect(limiter.take(key, later).allowed).toBe(false);
    // Millions of keys never grow it past the bound (the refused answers above prove the recent ones are still tracked).
    for (let i = 0; i < 10_000; i++) limiter.take(`x${i}`, later);
    expect((limiter as unknown as { windows: Map<string, unknown> }).windows.size).toBeLessThanOrEqual(3);
  });

  it('sweeps its windows once per tenth of maxKeys new keys, not once per new key, when full of active keys', () => {
    const limiter = new RateLimiter(1, 60, 1_000);
    const t = 6_000_000 * S;
    for (let i = 0; i < 1_000; i++) limiter.take(`a${i}`, t);
    expect(limiter.sweeps).toBe(0);
    // 10,000 new addresses while all are active: each sweep makes room for 100.
    for (let i = 0; i < 10_000; i++) expect(limiter.take(`b${i}`, t).allowed).toBe(true);
    expect(limiter.sweeps).toBeLessThanOrEqual(100);
    expect((limiter as unknown as { windows: Map<string, unknown> }).windows.size).toBeLessThanOrEqual(1_000);
    // The newest keys are still tracked.
    expect(limiter.take('b9999', t).allowed).toBe(false);
  });
});
