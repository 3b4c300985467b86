// Backoff, parseRetryAfter and SlidingWindowLimiter, with injected randomness and clocks.

import { describe, expect, it, vi } from 'vitest';
import { Backoff, parseRetryAfter, SlidingWindowLimiter, sleep } from '../../src/core/backoff.js';

describe('Backoff', () => {
  it('waits the base when the jitter is 0', () => {
    const backoff = new Backoff(500, 30_000, () => 0);
    for (let i = 0; i < 10; i++) expect(backoff.next()).toBe(500);
  });

  it('doubles the ceiling each attempt up to the cap when the jitter is at its top', () => {
    const backoff = new Backoff(500, 30_000, () => 1);
    const waits = Array.from({ length: 10 }, () => backoff.next());
    expect(waits).toEqual([500, 1000, 2000, 4000, 8000, 16_000, 30_000, 30_000, 30_000, 30_000]);
  });

  it('stays within [base, min(cap, base·2^n)] for any jitter', () => {
    let i = 0;
    const randoms = [0.1, 0.9, 0.5, 0.33, 0.99, 0.01, 0.75, 0.5, 0.2, 0.6, 0.95, 0.05];
    const backoff = new Backoff(100, 5000, () => randoms[i++ % randoms.length] as number);
    for (let n = 0; n < 40; n++) {
      const wait = backoff.next();
      expect(wait).toBeGreaterThanOrEqual(100);
      expect(wait).toBeLessThanOrEqual(Math.min(5000, 100 * 2 ** n));
    }
  });

  it('is a uniform pick in the window (half-way jitter lands half-way)', () => {
    const backoff = new Backoff(1000, 60_000, () => 0.5);
    expect([backoff.next(), backoff.next(), backoff.next()]).toEqual([1000, 1500, 2500]);
  });

  it('starts over after reset', () => {
    const backoff = new Backoff(500, 30_000, () => 1);
    backoff.next();
    backoff.next();
    expect(backoff.next()).toBe(2000);
    backoff.reset();
    expect(backoff.next()).toBe(500);
    expect(backoff.next()).toBe(1000);
  });

  it('never overflows after very many attempts', () => {
    const backoff = new Backoff(500, 30_000, () => 1);
    for (let i = 0; i < 5000; i++) backoff.next();
    expect(backoff.next()).toBe(30_000);
  });

  it('uses Math.random by default and stays in bounds', () => {
    const backoff = new Backoff(10, 1000);
    for (let n = 0; n < 20; n++) {
      const wait = backoff.next();
      expect(wait).toBeGreaterThanOrEqual(10);
      expect(wait).toBeLessThanOrEqual(1000);
    }
  });
});

describe('parseRetryAfter', () => {
  const now = Date.parse('2026-03-01T12:00:00Z');

  it('parses delta-seconds', () => {
    expect(parseRetryAfter('2', 300_000, now)).toBe(2000);
    expect(parseRetryAfter('0', 300_000, now)).toBe(0);
    expect(parseRetryAfter(' 7 ', 300_000, now)).toBe(7000);
  });

  it('parses decimal seconds', () => {
    expect(parseRetryAfter('1.5', 300_000, now)).toBe(1500);
    expect(parseRetryAfter('0.25', 300_000, now)).toBe(250);
  });

  it('parses an HTTP date relative to now', () => {
    expect(parseRetryAfter('Sun, 01 Mar 2026 12:00:30 GMT', 300_000, now)).toBe(30_000);
  });

  it('treats an HTTP date in the past as no wait', () => {
    expect(parseRetryAfter('Sun, 01 Mar 2026 11:00:00 GMT', 300_000, now)).toBe(0);
  });

  it('caps both forms', () => {
    expect(parseRetryAfter('3600', 300_000, now)).toBe(300_000);
    expect(parseRetryAfter('Mon, 02 Mar 2026 12:00:00 GMT', 300_000, now)).toBe(300_000);
    expect(parseRetryAfter('10', 5000, now)).toBe(5000);
  });

  it('takes the first of several header values', () => {
    expect(parseRetryAfter(['3', '9'], 300_000, now)).toBe(3000);
  });

  it('ignores missing values and garbage', () => {
    expect(parseRetryAfter(undefined, 300_000, now)).toBeUndefined();
    expect(parseRetryAfter('', 300_000, now)).toBeUndefined();
    expect(parseRetryAfter([], 300_000, now)).toBeUndefined();
    expect(parseRetryAfter('soon', 300_000, now)).toBeUndefined();
    expect(parseRetryAfter('5 apples', 300_000, now)).toBeUndefined();
  });

  it('ignores values that are neither delta-seconds nor an HTTP date', () => {
    // V8's lenient Date.parse reads "-1" and "1.5.2" as dates in 2001; taken
    // as "retry now" they turn a misbehaving server's 429s into a tight loop.
    expect(parseRetryAfter('-1', 300_000, now)).toBeUndefined();
    expect(parseRetryAfter('1.5.2', 300_000, now)).toBeUndefined();
  });
});

describe('SlidingWindowLimiter', () => {
  function clock(start = 1_000_000) {
    let t = start;
    return { now: () => t, advance: (ms: number) => (t += ms) };
  }

  it('lets `limit` requests go at once, then asks to wait until the oldest leaves the window', async () => {
    const c = clock();
    const limiter = new SlidingWindowLimiter(3, 60_000, c.now);
    await limiter.acquire(); // t = 0
    c.advance(10_000);
    await limiter.acquire(); // t = 10 s
    c.advance(5_000);
    await limiter.acquire(); // t = 15 s
    expect(limiter.used).toBe(3);
    c.advance(1_000); // t = 16 s
    expect(limiter.delay()).toBe(60_000 - 16_000);
    c.advance(44_000 - 1); // 1 ms before the first stamp leaves
    expect(limiter.delay()).toBe(1);
    c.advance(1);
    expect(limiter.delay()).toBe(0);
    expect(limiter.used).toBe(2);
    // Next in line is the stamp at 10 s.
    await limiter.acquire();
    expect(limiter.delay()).toBe(10_000);
  });

  it('reports 0 delay while under the limit and counts only the current window', () => {
    const c = clock();
    const limiter = new SlidingWindowLimiter(2, 1000, c.now);
    expect(limiter.delay()).toBe(0);
    expect(limiter.used).toBe(0);
    return limiter.acquire().then(() => {
      expect(limiter.delay()).toBe(0);
      expect(limiter.used).toBe(1);
      c.advance(1000);
      expect(limiter.used).toBe(0);
    });
  });

  it('acquire waits exactly until the oldest stamp leaves the window (fake timers)', async () => {
    vi.useFakeTimers({ now: 5_000_000 });
    try {
      const limiter = new SlidingWindowLimiter(1, 60_000, () => Date.now());
      await limiter.acquire();
      let done = false;
      const second = limiter.acquire().then(() => {
        done = true;
      });
      await vi.advanceTimersByTimeAsync(59_999);
      expect(done).toBe(false);
      await vi.advanceTimersByTimeAsync(1);
      await second;
      expect(done).toBe(true);
      expect(limiter.used).toBe(1);
    } finally {
      vi.useRealTimers();
    }
  });

  it('keeps room for other requests: deferrable ones (claims) use only their share of the window', async () => {
    const c = clock();
    const limiter = new SlidingWindowLimiter(10, 60_000, c.now, 0.5);
    for (let i = 0; i < 5; i++) await limiter.acquire(undefined, true);
    // Claims have had their half; a lease or a result still goes at once.
    expect(limiter.delay(true)).toBe(60_000);
    expect(limiter.delay()).toBe(0);
    for (let i = 0; i < 5; i++) await limiter.acquire();
    expect(limiter.used).toBe(10);
    expect(limiter.delay()).toBe(60_000);
    // When the first claims leave the window, claims may go again.
    c.advance(60_000);
    expect(limiter.delay(true)).toBe(0);
  });

  it('deferrable requests also count towards the whole limit', async () => {
    const c = clock();
    const limiter = new SlidingWindowLimiter(4, 60_000, c.now, 0.5);
    for (let i = 0; i < 3; i++) await limiter.acquire();
    c.advance(1_000);
    await limiter.acquire(undefined, true);
    expect(limiter.used).toBe(4);
    expect(limiter.delay(true)).toBe(59_000);
  });

  it('acquire returns without taking a slot when aborted', async () => {
    const c = clock();
    const limiter = new SlidingWindowLimiter(1, 60_000, c.now);
    await limiter.acquire();
    const controller = new AbortController();
    controller.abort();
    await limiter.acquire(controller.signal);
    expect(limiter.used).toBe(1);
  });
});

describe('sleep', () => {
  it('resolves at once when already aborted or for 0 ms', async () => {
    const controller = new AbortController();
    controller.abort();
    await expect(sleep(60_000, controller.signal)).resolves.toBeUndefined();
    await expect(sleep(0)).resolves.toBeUndefined();
  });

  it('resolves early on abort', async () => {
    const controller = new AbortController();
    const done = sleep(60_000, controller.signal);
    controller.abort();
    await expect(done).resolves.toBeUndefined();
  });
});
