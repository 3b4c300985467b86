// AnalyticsStore on the server's SQLite database (migrations.ts step 7,
// analytics-schema.ts). A window is read with one aggregate query per
// location whose group_concat columns come back as a few long strings and are
// parsed here into typed arrays: node:sqlite builds a JS object per row, which
// for a million rows costs more than the whole answer may take, while the
// strings cost one allocation each. All group_concat columns of one query are
// fed the same rows in the same order (one scan of one range), so index i of
// every column is one result; the parser checks each has `n` items. Flags
// and attempts travel as one number (flags + 4 × attempts). Each location is
// its own read: results stored in between may be in the later ones.

import type { AnalyticsStore, LocationColumns, ReportedAddress } from '../analytics.js';
import { MAX_ADDRESSES_PER_LOCATION, WindowTooLargeError } from '../analytics.js';
import { parseIntegerList } from '../integer-list.js';
import { num, str } from '../rows.js';
import type { SqliteAccess } from './sqlite-store.js';

/** More locations than any checks file holds; bounds the loose index scan. */
const MAX_LOCATIONS = 10_000;

export class SqliteAnalyticsStore implements AnalyticsStore {
  constructor(private readonly db: SqliteAccess) {}

  async window(checkId: string, fromMs: number, toMs: number, maxResults: number): Promise<LocationColumns[]> {
    // The locations of the check, one index seek each (a loose index scan of the primary key).
    const locations = this.db
      .all(
        `WITH RECURSIVE l(location) AS (
           SELECT MIN(location) FROM result_metrics WHERE check_id = ?
           UNION ALL
           SELECT (SELECT MIN(location) FROM result_metrics WHERE check_id = ? AND location > l.location) FROM l WHERE l.location IS NOT NULL
           LIMIT ${MAX_LOCATIONS}
         ) SELECT location FROM l WHERE location IS NOT NULL`,
        checkId,
        checkId,
      )
      .map((row) => str(row, 'location'));
    const columns: LocationColumns[] = [];
    let total = 0;
    for (const [index, location] of locations.entries()) {
      // node:sqlite blocks the event loop while it reads: between locations, claims and results get their turn.
      if (index > 0) await new Promise((resolve) => setImmediate(resolve));
      // At most one row more than the answer may still take: the strings never outgrow the bound.
      const room = maxResults - total + 1;
      const row = this.db.get(
        `SELECT COUNT(*) AS n, group_concat(t) AS t, group_concat(r) AS r, group_concat(fa) AS fa FROM (
           SELECT started_at - CAST(? AS INTEGER) AS t, response_time AS r, flags + 4 * attempts AS fa
           FROM result_metrics WHERE check_id = ? AND location = ? AND started_at >= ? AND started_at < ? LIMIT ?)`,
        fromMs,
        checkId,
        location,
        fromMs,
        toMs,
        room,
      );
      const n = row ? num(row, 'n') : 0;
      if (n === 0 || !row) continue;
      total += n;
      if (total > maxResults) throw new WindowTooLargeError(total, maxResults);
      const packed = parseIntegerList(row.fa ?? null, n, new Float64Array(n));
      const flags = new Uint8Array(n);
      const attempts = new Uint16Array(n);
      for (let i = 0; i < n; i++) {
        const v = packed[i] as number;
        flags[i] = v % 4;
        attempts[i] = Math.floor(v / 4);
      }
      columns.push({
        location,
        startedAt: parseIntegerList(row.t ?? null, n, new Float64Array(n), fromMs),
        responseTime: parseIntegerList(row.r ?? null, n, new Float64Array(n)),
        flags,
        attempts,
      });
    }
    return columns;
  }

  async reportAddresses(location: string, agentId: string, addresses: readonly string[], now: Date, forgetBefore: Date): Promise<number> {
    return this.db.tx(() => {
      this.db.run('DELETE FROM agent_addresses WHERE last_seen < ?', forgetBefore.getTime());
      let room = MAX_ADDRESSES_PER_LOCATION - num(this.db.get('SELECT count(*) AS n FROM agent_addresses WHERE location = ?', location) ?? { n: 0 }, 'n');
      let dropped = 0;
      for (const address of new Set(addresses)) {
        const known = this.db.get('SELECT location FROM agent_addresses WHERE address = ?', address);
        if (known === undefined || str(known, 'location') !== location) {
          if (room <= 0) {
            dropped++;
            continue;
          }
          room--;
        }
        this.db.run(
          `INSERT INTO agent_addresses (address, location, agent_id, last_seen) VALUES (?, ?, ?, ?)
           ON CONFLICT (address) DO UPDATE SET location = excluded.location, agent_id = excluded.agent_id, last_seen = excluded.last_seen`,
          address,
          location,
          agentId,
          now.getTime(),
        );
      }
      return dropped;
    });
  }

  async addressesSince(since: Date): Promise<ReportedAddress[]> {
    return this.db.all('SELECT * FROM agent_addresses WHERE last_seen >= ? ORDER BY address', since.getTime()).map((row) => ({
      address: str(row, 'address'),
      location: str(row, 'location'),
      agentId: str(row, 'agent_id'),
      lastSeen: new Date(num(row, 'last_seen')),
    }));
  }
}
