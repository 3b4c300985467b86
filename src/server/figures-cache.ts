// A short-lived cache of what a dashboard page computes per check (its
// figures and per-location status, src/server/dashboards-api.ts). Pages take
// no key and are fetched by wall screens every refreshRate; without it every
// request recomputed a 30-day chart of each check shown, seconds of the
// server's one thread (docs/dashboards.md "Figures"). With it a check's
// figures for one range are computed at most once per TTL however many
// requests, pages or dashboards ask, and concurrent requests share the one
// computation in progress. Bounded: at most `maxEntries` keys, expired ones
// dropped first, then the oldest.

/** How long computed figures are served: a page's figures are at most this much older than the page. */
export const FIGURES_TTL_MS = 15_000;
/** Keys kept: one per (check, chart range, locations); more than a server's dashboards show. */
export const FIGURES_MAX_ENTRIES = 2_000;

interface Entry<T> {
  computedAt: number;
  value: Promise<T>;
}

export class FiguresCache<T> {
  private readonly entries = new Map<string, Entry<T>>();

  constructor(
    private readonly ttlMs = FIGURES_TTL_MS,
    private readonly maxEntries = FIGURES_MAX_ENTRIES,
  ) {}

  /** The value of `key` computed less than the TTL before `nowMs`, else `compute()`'s (shared with callers that ask meanwhile). */
  get(key: string, nowMs: number, compute: () => Promise<T>): Promise<T> {
    const hit = this.entries.get(key);
    if (hit && nowMs - hit.computedAt < this.ttlMs && nowMs >= hit.computedAt) return hit.value;
    this.entries.delete(key);
    if (this.entries.size >= this.maxEntries) this.evict(nowMs);
    const value = compute();
    const entry = { computedAt: nowMs, value };
    this.entries.set(key, entry);
    // A failed computation is not served to the next request: it tries again.
    value.catch(() => {
      if (this.entries.get(key) === entry) this.entries.delete(key);
    });
    return value;
  }

  get size(): number {
    return this.entries.size;
  }

  private evict(nowMs: number): void {
    for (const [key, entry] of this.entries) {
      if (nowMs - entry.computedAt >= this.ttlMs) this.entries.delete(key);
    }
    // Still full: drop the oldest (a Map keeps insertion order).
    while (this.entries.size >= this.maxEntries) {
      const first = this.entries.keys().next();
      if (first.done) break;
      this.entries.delete(first.value);
    }
  }
}
