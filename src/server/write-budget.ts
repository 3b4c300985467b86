// What each location's agents may make the server store: bytes of result and
// event request bodies per minute, a token bucket per location (it holds a
// minute's worth; it refills at a sixtieth of that a second). A request is
// let in while the bucket is not empty and then charged its whole body, so a
// single batch larger than what is left still goes through (an honest agent
// is delayed by the budget, never refused for good); the next waits until the
// debt is paid back, told so by 429 and Retry-After, which the agent honours
// with its results kept in its spool. Per server process: N replicas behind a
// load balancer allow up to N times the budget.

/**
 * LOCATION_WRITE_BYTES_PER_MINUTE's default: 512 MiB, above what a 256-in-flight agent sends flat out
 * (about 5,000 URL results a second of about 1.4 KB, 391 MiB a minute; docs/server.md, "Write limits").
 */
export const DEFAULT_WRITE_BYTES_PER_MINUTE = 512 * 1024 * 1024;
/** A location over budget is told of in the log at most this often. */
export const OVER_BUDGET_WARNING_MS = 60 * 60 * 1000;

export type WriteDecision =
  | { allowed: true }
  | {
      allowed: false;
      retryAfterSeconds: number;
      /** True at most once per OVER_BUDGET_WARNING_MS per location: the caller's cue to log it. */
      warn: boolean;
    };

interface Bucket {
  /** Bytes that may still be written; negative while a request's overshoot is paid back. */
  tokens: number;
  at: number;
  warnedAt?: number;
}

export class WriteBudget {
  /** Locations come from the checks file (agent keys name them): few, so nothing is evicted. */
  private readonly buckets = new Map<string, Bucket>();
  private readonly perMs: number;

  constructor(
    readonly bytesPerMinute: number,
    private readonly now: () => number = Date.now,
  ) {
    this.perMs = bytesPerMinute / 60_000;
  }

  /** Whether the location may send a body now. */
  admit(location: string): WriteDecision {
    const bucket = this.refilled(location);
    if (bucket.tokens > 0) return { allowed: true };
    // Whole seconds until the bucket holds a byte again.
    const retryAfterSeconds = Math.max(1, Math.ceil((1 - bucket.tokens) / this.perMs / 1000));
    const now = bucket.at;
    const warn = bucket.warnedAt === undefined || now - bucket.warnedAt >= OVER_BUDGET_WARNING_MS;
    if (warn) bucket.warnedAt = now;
    return { allowed: false, retryAfterSeconds, warn };
  }

  /** Counts a body the location sent (let in by admit). */
  charge(location: string, bytes: number): void {
    this.refilled(location).tokens -= bytes;
  }

  private refilled(location: string): Bucket {
    const now = this.now();
    let bucket = this.buckets.get(location);
    if (!bucket) {
      bucket = { tokens: this.bytesPerMinute, at: now };
      this.buckets.set(location, bucket);
    }
    bucket.tokens = Math.min(this.bytesPerMinute, bucket.tokens + Math.max(0, now - bucket.at) * this.perMs);
    bucket.at = now;
    return bucket;
  }
}
