// The leader lease (../leader-lease.ts) as a row of leader_lease, timed by
// the database's clock so that replicas' clocks never matter: taken when
// free or run out, renewed by its holder, in one statement.

import type { LeaderLease } from '../leader-lease.js';
import type { PgDatabase } from './db.js';

export class PgLeaderLease implements LeaderLease {
  constructor(private readonly db: PgDatabase) {}

  async acquire(name: string, holder: string, ttlMs: number): Promise<boolean> {
    const row = await this.db.row(
      `INSERT INTO leader_lease (name, holder, expires_at) VALUES ($1, $2, clock_timestamp() + $3 * interval '1 millisecond')
       ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
       WHERE leader_lease.holder = excluded.holder OR leader_lease.expires_at < clock_timestamp()
       RETURNING holder`,
      [name, holder, ttlMs],
    );
    return row !== undefined && row.holder === holder;
  }

  async release(name: string, holder: string): Promise<void> {
    await this.db.run('DELETE FROM leader_lease WHERE name = $1 AND holder = $2', [name, holder]);
  }
}
