// Who does a server's one-at-a-time work (scheduling, sweeping, retention,
// heartbeat deadlines, alert evaluation) when several replicas share one
// database: the holder of a named lease that runs out unless renewed.
// src/server/leadership.ts renews it; docs/postgres.md states the bounds.

export interface LeaderLease {
  /**
   * Takes the lease for `holder` (or renews it when `holder` has it) until
   * `ttlMs` from now by the database's clock; false while another holder's
   * lease runs.
   */
  acquire(name: string, holder: string, ttlMs: number): Promise<boolean>;
  /** Gives the lease up at once (a clean shutdown), when `holder` has it. */
  release(name: string, holder: string): Promise<void>;
}

/** One server on its own database (SQLite): it is always the leader. */
export const SOLE_LEASE: LeaderLease = {
  acquire: async () => true,
  release: async () => undefined,
};
