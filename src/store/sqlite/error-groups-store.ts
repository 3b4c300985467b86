// Error groups on SQLite (the model is ../error-groups.ts). `recordFailures`
// is synchronous: acceptResults calls it inside its own transaction, so a
// result and its groups are stored together or not at all.

import { randomUUID } from 'node:crypto';
import type { SQLInputValue } from 'node:sqlite';
import type { CheckResultEntry } from '../../core/result-entry.js';
import { type ErrorGroupPatch, type ErrorGroupRecord, type ErrorGroupStore, failureGroups } from '../error-groups.js';
import type { Row } from '../rows.js';
import { type ArchiveState, errorGroupOf, nextArchiveState } from '../feature-rows.js';

/**
 * sqlite-store.ts's SqliteAccess, restated: that file calls this one from
 * acceptResults, so importing its type back would be an import cycle.
 */
export interface ErrorGroupAccess {
  run(sql: string, ...params: SQLInputValue[]): number;
  get(sql: string, ...params: SQLInputValue[]): Row | undefined;
  all(sql: string, ...params: SQLInputValue[]): Row[];
  tx<T>(work: () => T): T;
}

export class SqliteErrorGroupStore implements ErrorGroupStore {
  constructor(private readonly db: ErrorGroupAccess) {}

  /**
   * Inside the caller's transaction: joins a failing result to its check's
   * groups (made when new, lastSeen moved on, an archived-until-next-event
   * group reopened) and returns their ids; a passing result gets [].
   */
  recordFailures(checkId: string, result: CheckResultEntry, now: Date): string[] {
    const groups = failureGroups(result);
    if (groups.length === 0) return [];
    const startedMs = Date.parse(result.startedAt);
    const seen = Number.isFinite(startedMs) ? startedMs : now.getTime();
    const ids: string[] = [];
    for (const { raw, cleaned, hash } of groups) {
      const existing = this.db.get('SELECT id FROM error_groups WHERE check_id = ? AND error_hash = ?', checkId, hash);
      if (existing) {
        // The latest raw message is kept: the one a reader most likely wants to compare with.
        this.db.run(
          `UPDATE error_groups SET raw_message = ?, first_seen = MIN(first_seen, ?), last_seen = MAX(last_seen, ?),
             archive_state = CASE archive_state WHEN 'UNTIL_NEXT_EVENT' THEN 'OPEN' ELSE archive_state END
           WHERE id = ?`,
          raw,
          seen,
          seen,
          String(existing.id),
        );
        ids.push(String(existing.id));
      } else {
        const id = randomUUID();
        this.db.run(
          `INSERT INTO error_groups (id, check_id, error_hash, raw_message, cleaned_message, first_seen, last_seen, archive_state)
           VALUES (?, ?, ?, ?, ?, ?, ?, 'OPEN')`,
          id,
          checkId,
          hash,
          raw,
          cleaned,
          seen,
          seen,
        );
        ids.push(id);
      }
    }
    return ids;
  }

  async group(id: string): Promise<ErrorGroupRecord | undefined> {
    const row = this.db.get('SELECT * FROM error_groups WHERE id = ?', id);
    return row && errorGroupOf(row);
  }

  async patch(id: string, patch: ErrorGroupPatch, _now: Date): Promise<ErrorGroupRecord | undefined> {
    return this.db.tx(() => {
      const row = this.db.get('SELECT * FROM error_groups WHERE id = ?', id);
      if (!row) return undefined;
      const state = nextArchiveState(String(row.archive_state) as ArchiveState, patch);
      this.db.run('UPDATE error_groups SET archive_state = ? WHERE id = ?', state, id);
      return errorGroupOf({ ...row, archive_state: state });
    });
  }

  async groupsOf(checkId: string): Promise<ErrorGroupRecord[]> {
    return this.db.all('SELECT * FROM error_groups WHERE check_id = ? ORDER BY last_seen DESC, id', checkId).map(errorGroupOf);
  }

  async prune(before: Date, batch: number): Promise<number> {
    const limit = Math.max(1, Math.floor(batch));
    return this.db.tx(() =>
      this.db.run('DELETE FROM error_groups WHERE id IN (SELECT id FROM error_groups WHERE last_seen < ? ORDER BY last_seen LIMIT ?)', before.getTime(), limit),
    );
  }
}
