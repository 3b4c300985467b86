// Requests per key in a sliding window of one-second buckets: the public API
// allows 600 per 60 s per key, the agent routes their own limit. Memory is
// bounded: keys idle for a whole window are forgotten, and at most
// `maxKeys` keys are tracked (the oldest-seen is dropped first).

export interface RateDecision {
  allowed: boolean;
  /** When refused: whole seconds until a request would be allowed. */
  retryAfterSeconds: number;
}

interface Window {
  /** Requests per second bucket, keyed by the bucket's second. */
  buckets: Map<number, number>;
  total: number;
}

export class RateLimiter {
  private readonly windows = new Map<string, Window>();

  constructor(
    readonly limit: number,
    readonly windowSeconds: number,
    private readonly maxKeys = 100_000,
  ) {}

  take(key: string, nowMs: number): RateDecision {
    const second = Math.floor(nowMs / 1000);
    let window = this.windows.get(key);
    if (!window) {
      if (this.windows.size >= this.maxKeys) this.evict(second);
      window = { buckets: new Map(), total: 0 };
      this.windows.set(key, window);
    }
    this.expire(window, second);
    if (window.total >= this.limit) {
      const oldest = Math.min(...window.buckets.keys());
      return { allowed: false, retryAfterSeconds: Math.max(1, oldest + this.windowSeconds - second) };
    }
    window.buckets.set(second, (window.buckets.get(second) ?? 0) + 1);
    window.total++;
    return { allowed: true, retryAfterSeconds: 0 };
  }

  /** Whether `take` would refuse `key` now, without counting a request. */
  peek(key: string, nowMs: number): RateDecision {
    const window = this.windows.get(key);
    if (!window) return { allowed: true, retryAfterSeconds: 0 };
    const second = Math.floor(nowMs / 1000);
    this.expire(window, second);
    if (window.total < this.limit) return { allowed: true, retryAfterSeconds: 0 };
    const oldest = Math.min(...window.buckets.keys());
    return { allowed: false, retryAfterSeconds: Math.max(1, oldest + this.windowSeconds - second) };
  }

  private expire(window: Window, second: number): void {
    for (const [bucket, count] of window.buckets) {
      if (bucket > second - this.windowSeconds) continue;
      window.buckets.delete(bucket);
      window.total -= count;
    }
  }

  private evict(second: number): void {
    for (const [key, window] of this.windows) {
      this.expire(window, second);
      if (window.total === 0) this.windows.delete(key);
    }
    // Still full: drop the key seen first (Map keeps insertion order).
    if (this.windows.size >= this.maxKeys) {
      const first = this.windows.keys().next();
      if (!first.done) this.windows.delete(first.value);
    }
  }
}
