// AnalyticsStore on PostgreSQL (analytics-schema.ts, migrations.ts step 7),
// read the way ../sqlite/analytics-store.ts reads: one aggregate query per
// location whose string_agg columns come back as a few long strings, parsed
// into typed arrays by the same parser. node-postgres builds a JS object per
// row (and a string per bigint), which for a million rows costs more than
// the answer; a few strings per location cost one allocation each. All
// string_agg columns of one query are fed the same rows in the same order
// (one aggregate over one scan), so index i of every column is one result;
// the parser checks each has `n` items. Flags and attempts travel as one
// number (flags + 4 × attempts).

import type { AnalyticsStore, LocationColumns, ReportedAddress } from '../analytics.js';
import { MAX_ADDRESSES_PER_LOCATION, WindowTooLargeError } from '../analytics.js';
import { parseIntegerList } from '../integer-list.js';
import { num, type PgDatabase, str } from './db.js';

/** More locations than any checks file holds; bounds the loose index scan. */
const MAX_LOCATIONS = 10_000;

/** SQLite's order (bytes of UTF-8 text), whatever the database's collation. */
const byCodePoint = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

export class PgAnalyticsStore implements AnalyticsStore {
  constructor(private readonly db: PgDatabase) {}

  async window(checkId: string, fromMs: number, toMs: number, maxResults: number): Promise<LocationColumns[]> {
    // The locations of the check, one index seek each (a loose index scan of the primary key).
    const locations = (
      await this.db.rows(
        `WITH RECURSIVE l(location) AS (
           SELECT MIN(location) FROM result_metrics WHERE check_id = $1
           UNION ALL
           SELECT (SELECT MIN(location) FROM result_metrics WHERE check_id = $1 AND location > l.location) FROM l WHERE l.location IS NOT NULL
         ) SELECT location FROM l WHERE location IS NOT NULL LIMIT ${MAX_LOCATIONS}`,
        [checkId],
      )
    )
      .map((row) => str(row, 'location'))
      .sort(byCodePoint);
    const columns: LocationColumns[] = [];
    let total = 0;
    for (const location of locations) {
      // At most one row more than the answer may still take: the strings never outgrow the bound.
      const room = maxResults - total + 1;
      const row = await this.db.row(
        `SELECT count(*)::int AS n, string_agg(t::text, ',') AS t, string_agg(r::text, ',') AS r, string_agg(fa::text, ',') AS fa FROM (
           SELECT started_at - $1::bigint AS t, response_time AS r, flags + 4 * attempts AS fa
           FROM result_metrics WHERE check_id = $2 AND location = $3 AND started_at >= $1::bigint AND started_at < $4::bigint LIMIT $5) w`,
        [fromMs, checkId, location, toMs, room],
      );
      const n = row ? num(row, 'n') : 0;
      if (n === 0 || !row) continue;
      total += n;
      if (total > maxResults) throw new WindowTooLargeError(total, maxResults);
      const packed = parseIntegerList(row.fa, n, new Float64Array(n));
      const flags = new Uint8Array(n);
      const attempts = new Uint16Array(n);
      for (let i = 0; i < n; i++) {
        const v = packed[i] as number;
        flags[i] = v % 4;
        attempts[i] = Math.floor(v / 4);
      }
      columns.push({
        location,
        startedAt: parseIntegerList(row.t, n, new Float64Array(n), fromMs),
        responseTime: parseIntegerList(row.r, n, new Float64Array(n)),
        flags,
        attempts,
      });
    }
    return columns;
  }

  async reportAddresses(location: string, agentId: string, addresses: readonly string[], now: Date, forgetBefore: Date): Promise<number> {
    return this.db.tx(async (sql) => {
      await sql.run('DELETE FROM agent_addresses WHERE last_seen < $1', [forgetBefore.getTime()]);
      if (addresses.length === 0) return 0;
      // Sorted and distinct: one row per address, and replicas upserting the same ones lock them in the same order.
      const unique = [...new Set(addresses)].sort(byCodePoint);
      const kept = await sql.rows('SELECT address FROM agent_addresses WHERE location = $1 AND address = ANY($2::text[])', [location, unique]);
      const known = new Set(kept.map((row) => str(row, 'address')));
      const count = num((await sql.row('SELECT count(*)::int AS n FROM agent_addresses WHERE location = $1', [location])) ?? { n: 0 }, 'n');
      let room = MAX_ADDRESSES_PER_LOCATION - count;
      const recorded = unique.filter((address) => known.has(address) || room-- > 0);
      if (recorded.length > 0) {
        await sql.run(
          `INSERT INTO agent_addresses (address, location, agent_id, last_seen) SELECT a, $2, $3, $4 FROM unnest($1::text[]) AS a
           ON CONFLICT (address) DO UPDATE SET location = excluded.location, agent_id = excluded.agent_id, last_seen = excluded.last_seen`,
          [recorded, location, agentId, now.getTime()],
        );
      }
      return unique.length - recorded.length;
    });
  }

  async addressesSince(since: Date): Promise<ReportedAddress[]> {
    const rows = await this.db.rows('SELECT * FROM agent_addresses WHERE last_seen >= $1', [since.getTime()]);
    return rows
      .map((row) => ({
        address: str(row, 'address'),
        location: str(row, 'location'),
        agentId: str(row, 'agent_id'),
        lastSeen: new Date(num(row, 'last_seen')),
      }))
      .sort((a, b) => byCodePoint(a.address, b.address));
  }
}
