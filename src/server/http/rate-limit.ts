// Requests per key in a sliding window of one-second buckets: the public API
// allows 600 per 60 s per key, the agent routes their own limit. Memory is
// bounded: keys idle for a whole window are forgotten, and at most
// `maxKeys` keys are tracked (the oldest-seen are dropped first).

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

/**
 * A full limiter sweeps down to this share of `maxKeys`, so the next sweep
 * comes only after a tenth of `maxKeys` new keys: a sweep walks every window,
 * and one per new key made each new address cost O(maxKeys) (with 100,000
 * addresses, 3.3 ms a request). Amortized, a new key costs O(1).
 */
export const SWEEP_DOWN_TO = 0.9;

export class RateLimiter {
  private readonly windows = new Map<string, Window>();
  /** Sweeps of every window since start (tests and benchmarks count them). */
  sweeps = 0;

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
    this.sweeps++;
    const target = Math.min(this.maxKeys - 1, Math.floor(this.maxKeys * SWEEP_DOWN_TO));
    for (const [key, window] of this.windows) {
      this.expire(window, second);
      if (window.total === 0) this.windows.delete(key);
    }
    // Still above the mark: drop the keys seen first (a Map iterates in insertion order; deleting while iterating is safe).
    for (const key of this.windows.keys()) {
      if (this.windows.size <= target) break;
      this.windows.delete(key);
    }
  }
}
