// The results list's reads on PostgreSQL (../result-list.ts says which and
// why), each over an index that holds every column it tests. PostgreSQL has
// no index hints, so each statement is written so that one index is the
// plan: every kind is read with all its columns equal and seq in order
// (results_by_kind, index-only), and a time window in start order under a
// LIMIT (results_by_check_time), never as "newest first, filtered", which a
// planner guessing the matches evenly spread reads through the primary key
// from the newest result of any check down. So it has no direct way: a
// query of no filter is read as the check's kinds too. All kinds are read
// in one statement (LATERAL over arrays): one round trip whatever their
// number.

import type { CheckResultEntry } from '../../core/result-entry.js';
import type { KindRead, KindScan, ResultFilter, ResultKind, ResultListReader, TimeWindow } from '../result-list.js';
import { json, num, type Sql, str } from './db.js';

const KIND_COLUMNS = 'location, check_type, result_type, has_failures';

/**
 * A check's kinds (in one location with `inLocation`), one index lookup
 * each: a loose index scan of results_by_kind. Parameters: the check, the
 * location. Each step compares only the columns after the fixed ones: a row
 * comparison that repeats the equal location starts the scan there but no
 * longer ends it, and the last step would read the check's other locations.
 */
function kindsSql(inLocation: boolean): string {
  const fixed = inLocation ? 'check_id = $1 AND location = $2' : 'check_id = $1';
  const after = inLocation ? ['check_type', 'result_type', 'has_failures'] : ['location', 'check_type', 'result_type', 'has_failures'];
  return `WITH RECURSIVE kinds AS (
      (SELECT ${KIND_COLUMNS} FROM results WHERE ${fixed} ORDER BY ${KIND_COLUMNS} LIMIT 1)
      UNION ALL
      SELECT next.* FROM kinds CROSS JOIN LATERAL (
        SELECT ${KIND_COLUMNS} FROM results
        WHERE ${fixed} AND (${after.join(', ')}) > (${after.map((c) => `kinds.${c}`).join(', ')})
        ORDER BY ${KIND_COLUMNS} LIMIT 1
      ) next
    ) SELECT ${KIND_COLUMNS} FROM kinds`;
}

/** The kinds as parameters $2–$5, numbered by their place (k.i, from 1). */
const KINDS = `unnest($2::text[], $3::text[], $4::text[], $5::smallint[]) WITH ORDINALITY AS k(location, check_type, result_type, has_failures, i)`;
const ONE_KIND = 'check_id = $1 AND location = k.location AND check_type = k.check_type AND result_type = k.result_type AND has_failures = k.has_failures';

/** Each kind's newest seqs below $6, at most $7. */
const KINDS_READ_SQL = `SELECT k.i::int AS i, s.seq FROM ${KINDS} CROSS JOIN LATERAL (
    SELECT seq FROM results WHERE ${ONE_KIND} AND seq < $6 ORDER BY seq DESC LIMIT $7
  ) s`;

/** Each kind's newest seqs below $6 started in [$9, $10), at most $7, among at most $8 of its newest entries. */
const KINDS_IN_WINDOW_SQL = `SELECT k.i::int AS i, s.seq FROM ${KINDS} CROSS JOIN LATERAL (
    SELECT w.seq FROM (SELECT seq, started_at FROM results WHERE ${ONE_KIND} AND seq < $6 ORDER BY seq DESC LIMIT $8) w
    WHERE w.started_at >= $9 AND w.started_at < $10 ORDER BY w.seq DESC LIMIT $7
  ) s`;

/** Where each kind's budgeted read stopped: its entry $7 deep below $6 (0-based); null when it ended first. */
const KINDS_STOP_SQL = `SELECT k.i::int AS i, (
    SELECT seq FROM results WHERE ${ONE_KIND} AND seq < $6 ORDER BY seq DESC OFFSET $7 LIMIT 1
  ) AS stop FROM ${KINDS}`;

/**
 * A window's entries of each asked type in start order, at most $5 each
 * (parameters: check, from, to, below seq, cap, the types from $6 on).
 */
function windowEntries(types: number, columns: string): string {
  return Array.from(
    { length: types },
    (_, t) => `(SELECT ${columns} FROM results WHERE check_id = $1 AND result_type = $${6 + t} AND started_at >= $2 AND started_at < $3 AND seq < $4 ORDER BY started_at LIMIT $5)`,
  ).join(' UNION ALL ');
}

function windowSizeSql(types: number): string {
  return `SELECT count(*)::int AS n FROM (${windowEntries(types, '1 AS one')}) w`;
}

/** The newest seqs of a window that pass the filter; its last parameter is the limit. */
function windowPageSql(filter: ResultFilter): string {
  const types = filter.resultTypes.length;
  const where: string[] = [];
  let next = 6 + types;
  if (filter.location !== undefined) where.push(`location = $${next++}`);
  if (filter.checkType !== undefined) where.push(`check_type = $${next++}`);
  if (filter.failedOnly) where.push('has_failures = 1');
  return `SELECT seq FROM (${windowEntries(types, 'seq, location, check_type, has_failures')}) w
    ${where.length > 0 ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY seq DESC LIMIT $${next}`;
}

function windowParams(filter: ResultFilter, window: TimeWindow, before: number, cap: number): unknown[] {
  return [filter.checkId, window.fromMs, window.toMs, before, cap, ...filter.resultTypes];
}

function kindParams(checkId: string, kinds: readonly ResultKind[]): unknown[] {
  return [checkId, kinds.map((k) => k.location), kinds.map((k) => k.checkType), kinds.map((k) => k.resultType), kinds.map((k) => (k.hasFailures ? 1 : 0))];
}

export class PgResultReader implements ResultListReader {
  constructor(private readonly db: Sql) {}

  async nextSeq(): Promise<number> {
    return num((await this.db.row('SELECT COALESCE(MAX(seq), 0) + 1 AS next FROM results')) ?? { next: 1 }, 'next');
  }

  async kinds(checkId: string, location?: string): Promise<ResultKind[]> {
    const rows = location === undefined ? await this.db.rows(kindsSql(false), [checkId]) : await this.db.rows(kindsSql(true), [checkId, location]);
    return rows.map((row) => ({
      location: str(row, 'location'),
      checkType: str(row, 'check_type'),
      resultType: str(row, 'result_type'),
      hasFailures: num(row, 'has_failures') !== 0,
    }));
  }

  async readKinds(checkId: string, kinds: readonly ResultKind[], read: KindRead): Promise<KindScan[]> {
    const params = [...kindParams(checkId, kinds), read.before, read.want];
    const { window } = read;
    const rows = window ? await this.db.rows(KINDS_IN_WINDOW_SQL, [...params, window.budget, window.fromMs, window.toMs]) : await this.db.rows(KINDS_READ_SQL, params);
    const seqs: number[][] = kinds.map(() => []);
    for (const row of rows) seqs[num(row, 'i') - 1]?.push(num(row, 'seq'));
    for (const list of seqs) list.sort((a, b) => b - a);
    const known = seqs.map((list) => (list.length === read.want ? (list[read.want - 1] as number) : 0));
    const short = kinds.filter((_, i) => known[i] === 0);
    if (window && short.length > 0) {
      const stops = await this.db.rows(KINDS_STOP_SQL, [...kindParams(checkId, short), read.before, window.budget - 1]);
      const shortIndex = kinds.flatMap((_, i) => (known[i] === 0 ? [i] : []));
      for (const row of stops) {
        const at = shortIndex[num(row, 'i') - 1];
        if (at !== undefined && row.stop !== null) known[at] = num(row, 'stop');
      }
    }
    return seqs.map((list, i) => ({ seqs: list, known: known[i] as number }));
  }

  async windowSize(filter: ResultFilter, window: TimeWindow, before: number, cap: number): Promise<number> {
    return num((await this.db.row(windowSizeSql(filter.resultTypes.length), windowParams(filter, window, before, cap))) ?? { n: 0 }, 'n');
  }

  async windowPage(filter: ResultFilter, window: TimeWindow, before: number, want: number, cap: number): Promise<number[]> {
    const params = windowParams(filter, window, before, cap);
    if (filter.location !== undefined) params.push(filter.location);
    if (filter.checkType !== undefined) params.push(filter.checkType);
    return (await this.db.rows(windowPageSql(filter), [...params, want])).map((row) => num(row, 'seq'));
  }

  async entries(seqs: readonly number[]): Promise<CheckResultEntry[]> {
    if (seqs.length === 0) return [];
    const bodies = new Map((await this.db.rows('SELECT seq, body FROM results WHERE seq = ANY($1::bigint[])', [seqs])).map((row) => [num(row, 'seq'), row]));
    // Pruning may remove a result between the page's reads and this one: the page goes without it.
    return seqs.flatMap((seq) => {
      const row = bodies.get(seq);
      return row ? [json<CheckResultEntry>(row, 'body')] : [];
    });
  }
}
