// Error groups on PostgreSQL (the model is ../error-groups.ts). recordFailures
// runs on the caller's transaction (acceptResults'), so a result and its
// groups are stored together or not at all; a group two replicas create at
// once is one row (the UNIQUE (check_id, error_hash) upsert).

import { randomUUID } from 'node:crypto';
import type { CheckResultEntry } from '../../core/result-entry.js';
import { type ErrorGroupPatch, type ErrorGroupRecord, type ErrorGroupStore, failureGroups } from '../error-groups.js';
import type { PgDatabase, Sql } from './db.js';
import { type ArchiveState, errorGroupOf, nextArchiveState } from '../feature-rows.js';

export class PgErrorGroupStore implements ErrorGroupStore {
  constructor(private readonly db: PgDatabase) {}

  /** On the caller's transaction: joins a failing result to its check's groups and returns their ids; a passing result gets []. */
  async recordFailures(sql: Sql, checkId: string, result: CheckResultEntry, now: Date): Promise<string[]> {
    const groups = failureGroups(result);
    if (groups.length === 0) return [];
    const startedMs = Date.parse(result.startedAt);
    const seen = Number.isFinite(startedMs) ? startedMs : now.getTime();
    const ids: string[] = [];
    for (const { raw, cleaned, hash } of groups) {
      const row = await sql.row(
        `INSERT INTO error_groups (id, check_id, error_hash, raw_message, cleaned_message, first_seen, last_seen, archive_state)
         VALUES ($1, $2, $3, $4, $5, $6, $6, 'OPEN')
         ON CONFLICT (check_id, error_hash) DO UPDATE SET raw_message = excluded.raw_message,
           first_seen = LEAST(error_groups.first_seen, excluded.first_seen), last_seen = GREATEST(error_groups.last_seen, excluded.last_seen),
           archive_state = CASE error_groups.archive_state WHEN 'UNTIL_NEXT_EVENT' THEN 'OPEN' ELSE error_groups.archive_state END
         RETURNING id`,
        [randomUUID(), checkId, hash, raw, cleaned, seen],
      );
      if (row) ids.push(String(row.id));
    }
    return ids;
  }

  async group(id: string): Promise<ErrorGroupRecord | undefined> {
    const row = await this.db.row('SELECT * FROM error_groups WHERE id = $1', [id]);
    return row && errorGroupOf(row);
  }

  async patch(id: string, patch: ErrorGroupPatch, _now: Date): Promise<ErrorGroupRecord | undefined> {
    return this.db.tx(async (sql) => {
      const row = await sql.row('SELECT * FROM error_groups WHERE id = $1 FOR UPDATE', [id]);
      if (!row) return undefined;
      const state = nextArchiveState(String(row.archive_state) as ArchiveState, patch);
      await sql.run('UPDATE error_groups SET archive_state = $1 WHERE id = $2', [state, id]);
      return errorGroupOf({ ...row, archive_state: state });
    });
  }

  async groupsOf(checkId: string): Promise<ErrorGroupRecord[]> {
    return (await this.db.rows('SELECT * FROM error_groups WHERE check_id = $1 ORDER BY last_seen DESC, id', [checkId])).map(errorGroupOf);
  }

  async prune(before: Date, batch: number): Promise<number> {
    const limit = Math.max(1, Math.floor(batch));
    return this.db.run('DELETE FROM error_groups WHERE id IN (SELECT id FROM error_groups WHERE last_seen < $1 ORDER BY last_seen LIMIT $2)', [before.getTime(), limit]);
  }
}
