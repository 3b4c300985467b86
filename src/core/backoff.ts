// Waiting between attempts: exponential backoff with full jitter, a sliding
// window rate limit, and an abortable sleep. Small so it is easy to trust.

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted || ms <= 0) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}

export class Backoff {
  private attempt = 0;

  constructor(
    private readonly baseMs = 500,
    private readonly capMs = 30_000,
    private readonly random: () => number = Math.random,
  ) {}

  /** Full jitter: a uniform wait in [base, min(cap, base·2^n)]. */
  next(): number {
    const ceiling = Math.min(this.capMs, this.baseMs * 2 ** this.attempt);
    this.attempt = Math.min(this.attempt + 1, 30);
    return Math.min(this.capMs, Math.round(this.baseMs + this.random() * Math.max(0, ceiling - this.baseMs)));
  }

  reset(): void {
    this.attempt = 0;
  }
}

/** Parses Retry-After (delta-seconds or an HTTP date) into milliseconds, capped. */
export function parseRetryAfter(value: string | string[] | undefined, capMs = 300_000, now = Date.now()): number | undefined {
  const text = Array.isArray(value) ? value[0] : value;
  if (!text) return undefined;
  if (/^\s*\d+(\.\d+)?\s*$/.test(text)) return Math.min(capMs, Math.round(Number(text) * 1000));
  // An HTTP date names a weekday and month; V8's Date.parse would also read junk like "-1" as a date.
  if (!/[a-z]{3}/i.test(text)) return undefined;
  const date = Date.parse(text);
  if (Number.isNaN(date)) return undefined;
  return Math.min(capMs, Math.max(0, date - now));
}

/**
 * At most `limit` requests in any `windowMs`. The agent routes allow 3,000 per
 * 60 s per key; the agent keeps a margin below that for clock skew between the
 * two sides' windows.
 *
 * Deferrable requests (claims) may use only `deferrableShare` of the window,
 * so the others (leases, results) always find room: a control plane that
 * answers every claim at once cannot make the agent spend its whole budget
 * on claims while leases expire.
 */
export class SlidingWindowLimiter {
  private readonly stamps: number[] = [];
  private readonly deferrableStamps: number[] = [];
  readonly deferrableLimit: number;

  constructor(
    readonly limit: number,
    readonly windowMs: number,
    private readonly now: () => number = Date.now,
    deferrableShare = 1,
  ) {
    this.deferrableLimit = Math.max(1, Math.floor(limit * deferrableShare));
  }

  /** Milliseconds to wait before the next request may go; 0 when it may go now. */
  delay(deferrable = false): number {
    const now = this.now();
    const since = now - this.windowMs;
    for (const stamps of [this.stamps, this.deferrableStamps]) {
      while (stamps.length > 0 && (stamps[0] as number) <= since) stamps.shift();
    }
    let wait = this.stamps.length < this.limit ? 0 : (this.stamps[0] as number) + this.windowMs - now;
    if (deferrable && this.deferrableStamps.length >= this.deferrableLimit) {
      wait = Math.max(wait, (this.deferrableStamps[0] as number) + this.windowMs - now);
    }
    return wait;
  }

  async acquire(signal?: AbortSignal, deferrable = false): Promise<void> {
    for (let wait = this.delay(deferrable); wait > 0; wait = this.delay(deferrable)) {
      await sleep(wait, signal);
      if (signal?.aborted) return;
    }
    const now = this.now();
    this.stamps.push(now);
    if (deferrable) this.deferrableStamps.push(now);
  }

  /** Requests made in the current window (for tests and /health). */
  get used(): number {
    this.delay();
    return this.stamps.length;
  }
}
