// Wakes the claim long polls of a location when a job was queued there: the
// scheduler calls notify() after createSession, and every waiting claim of
// that location claims again at once instead of at the end of its wait.
// A generation counter per location closes the gap between an empty claim
// and the start of the wait: a notify in between is not lost.

export class JobSignal {
  private readonly generations = new Map<string, number>();
  private readonly waiters = new Map<string, Set<() => void>>();

  /** The location's current generation; pass it to wait() to see a notify that came after this call. */
  generation(location: string): number {
    return this.generations.get(location) ?? 0;
  }

  /** A job was queued for the location (or went back to its queue). */
  notify(location: string): void {
    this.generations.set(location, this.generation(location) + 1);
    const waiting = this.waiters.get(location);
    if (!waiting) return;
    this.waiters.delete(location);
    for (const wake of waiting) wake();
  }

  /**
   * Resolves when the location's generation moves past `since` (at once if it
   * has already), after `ms`, or when `signal` aborts, whichever is first.
   * True when woken by a notify.
   */
  wait(location: string, since: number, ms: number, signal?: AbortSignal): Promise<boolean> {
    if (this.generation(location) !== since) return Promise.resolve(true);
    if (ms <= 0 || signal?.aborted) return Promise.resolve(false);
    return new Promise<boolean>((resolve) => {
      const done = (woken: boolean) => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        const waiting = this.waiters.get(location);
        waiting?.delete(wake);
        if (waiting?.size === 0) this.waiters.delete(location);
        resolve(woken);
      };
      const wake = () => done(true);
      const onAbort = () => done(false);
      const timer = setTimeout(() => done(false), ms);
      signal?.addEventListener('abort', onAbort, { once: true });
      let waiting = this.waiters.get(location);
      if (!waiting) {
        waiting = new Set();
        this.waiters.set(location, waiting);
      }
      waiting.add(wake);
    });
  }

  /** Long polls waiting now, for tests and metrics. */
  waiting(location: string): number {
    return this.waiters.get(location)?.size ?? 0;
  }
}
