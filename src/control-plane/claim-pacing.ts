// How long to wait before the next claim after one came back empty. A control
// plane that holds a claim open for waitSeconds needs no pause; one that
// answers every claim at once, empty, would otherwise be asked again in a
// tight loop (thousands a minute, the whole request budget).

/** The least time between the starts of two claims when the last came back empty sooner than asked. */
export const EMPTY_CLAIM_FLOOR_MS = 1_000;
/** The pause doubles while answers stay empty and early, up to the wait asked for, at most this. */
export const EMPTY_CLAIM_CAP_MS = 30_000;

export class ClaimPacer {
  private pauseMs = EMPTY_CLAIM_FLOOR_MS;

  /**
   * Milliseconds to wait before the next claim, given the last one's answer:
   * `jobs` received, after `elapsedMs`, for a claim that asked the service to
   * wait up to `askedWaitMs`.
   */
  next(jobs: number, elapsedMs: number, askedWaitMs: number): number {
    if (jobs > 0 || (askedWaitMs > 0 && elapsedMs >= askedWaitMs)) {
      // Work came, or the service held the claim open as asked: claim again at once.
      this.pauseMs = EMPTY_CLAIM_FLOOR_MS;
      return 0;
    }
    const wait = Math.max(0, this.pauseMs - elapsedMs);
    const cap = Math.min(EMPTY_CLAIM_CAP_MS, Math.max(EMPTY_CLAIM_FLOOR_MS, askedWaitMs));
    this.pauseMs = Math.min(cap, this.pauseMs * 2);
    return wait;
  }
}
