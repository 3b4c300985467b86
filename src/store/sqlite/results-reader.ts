// The results list's reads on SQLite (../result-list.ts says which and why).
// Every statement names its index (INDEXED BY): which one the planner takes
// otherwise changes with the statistics PRAGMA optimize leaves at a clean
// close, and with some of them it walked every result of the check. Each
// reads an index that holds every column it tests, so no result row is read
// but the page's own. The statements are exported for the query-plan test
// (test/unit/sqlite-store.test.ts).

import type { SQLInputValue } from 'node:sqlite';
import type { CheckResultEntry } from '../../core/result-entry.js';
import {
  decodeCursor,
  directlyIndexed,
  type KindRead,
  type KindScan,
  type ResultFilter,
  type ResultKind,
  type ResultListReader,
  type TimeWindow,
} from '../result-list.js';
import { json, num, type Row, str } from '../rows.js';
import type { ResultQuery } from '../store.js';

/**
 * sqlite-store.ts's SqliteAccess, the reading half, restated: that file
 * makes this reader, so importing its type back would be an import cycle.
 */
export interface ResultReadAccess {
  get(sql: string, ...params: SQLInputValue[]): Row | undefined;
  all(sql: string, ...params: SQLInputValue[]): Row[];
}

/** The query of a directly indexed list (directlyIndexed) and its parameters, the limit last. Exported for the query-plan test. */
export function listSql(query: ResultQuery): { sql: string; params: SQLInputValue[] } {
  if (!directlyIndexed(query)) throw new Error('listSql is for a query one index answers in seq order (directlyIndexed)');
  const where = ['check_id = ?'];
  const params: SQLInputValue[] = [query.checkId];
  if (query.nextId !== undefined) {
    where.push('seq < ?');
    params.push(decodeCursor(query.nextId));
  }
  if (query.location !== undefined) {
    where.push('location = ?');
    params.push(query.location);
  }
  if (query.resultType !== 'ALL') {
    where.push('result_type = ?');
    params.push(query.resultType);
  }
  // One more than asked: whether it comes back says if there is a next page.
  params.push(query.limit + 1);
  const index = query.location !== undefined ? 'results_by_location' : query.resultType !== 'ALL' ? 'results_list_by_type' : 'results_list';
  return { sql: `SELECT seq, body FROM results INDEXED BY ${index} WHERE ${where.join(' AND ')} ORDER BY seq DESC LIMIT ?`, params };
}

/** results_by_kind's columns after check_id, in its order: one kind is one value of each. */
const KIND_COLUMNS = ['location', 'check_type', 'result_type', 'has_failures'] as const;
const ONE_KIND = `check_id = ? AND ${KIND_COLUMNS.map((c) => `${c} = ?`).join(' AND ')}`;

/**
 * One step of the loose index scan that finds a check's kinds: the first
 * value of the column at `depth` under the values before it (after `after`
 * when given), one lookup in results_by_kind.
 */
export function kindStepSql(depth: number, after: boolean): string {
  const column = KIND_COLUMNS[depth] as string;
  const where = ['check_id = ?', ...KIND_COLUMNS.slice(0, depth).map((c) => `${c} = ?`), ...(after ? [`${column} > ?`] : [])];
  return `SELECT MIN(${column}) AS value FROM results INDEXED BY results_by_kind WHERE ${where.join(' AND ')}`;
}

/** A kind's newest seqs below a seq; parameters: the kind, the seq, the limit. */
export const KIND_SQL = `SELECT seq FROM results INDEXED BY results_by_kind WHERE ${ONE_KIND} AND seq < ? ORDER BY seq DESC LIMIT ?`;

/**
 * A kind's newest seqs below a seq that started in a window, among at most
 * as many of its newest entries as the budget; parameters: the kind, the
 * seq, the budget, the window's edges, the limit.
 */
export const KIND_IN_WINDOW_SQL = `SELECT seq FROM (
    SELECT seq, started_at FROM results INDEXED BY results_by_kind WHERE ${ONE_KIND} AND seq < ? ORDER BY seq DESC LIMIT ?
  ) WHERE started_at >= ? AND started_at < ? ORDER BY seq DESC LIMIT ?`;

/** The seq a budgeted read of a kind stopped at: its entry at that depth below a seq; none when the kind ended first. */
export const KIND_STOP_SQL = `SELECT seq FROM results INDEXED BY results_by_kind WHERE ${ONE_KIND} AND seq < ? ORDER BY seq DESC LIMIT 1 OFFSET ?`;

/** A window's results of one or two types below a seq, in results_by_check_time (its leading columns: check, type, start). */
const WINDOW = 'check_id = ? AND result_type IN (?, ?) AND started_at >= ? AND started_at < ? AND seq < ?';

export const WINDOW_SIZE_SQL = `SELECT COUNT(*) AS n FROM (SELECT 1 FROM results INDEXED BY results_by_check_time WHERE ${WINDOW} LIMIT ?)`;

/** The newest seqs of a window that pass the filter, among at most a cap of its entries; the index holds every column tested. */
export function windowPageSql(filter: ResultFilter): string {
  const where: string[] = [];
  if (filter.location !== undefined) where.push('location = ?');
  if (filter.checkType !== undefined) where.push('check_type = ?');
  if (filter.failedOnly) where.push('has_failures = 1');
  return `SELECT seq FROM (
      SELECT seq, location, check_type, has_failures FROM results INDEXED BY results_by_check_time WHERE ${WINDOW} LIMIT ?
    ) ${where.length > 0 ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY seq DESC LIMIT ?`;
}

/** The bodies of the page's results, one primary-key lookup each; parameter: their seqs as a JSON array. */
export const ENTRIES_SQL = 'SELECT r.seq, r.body FROM json_each(?) AS j CROSS JOIN results AS r ON r.seq = j.value';

/** A kind from its values in KIND_COLUMNS' order. */
function kindOf(values: readonly SQLInputValue[]): ResultKind {
  const row: Row = Object.fromEntries(KIND_COLUMNS.map((column, i) => [column, values[i]]));
  return { location: str(row, 'location'), checkType: str(row, 'check_type'), resultType: str(row, 'result_type'), hasFailures: num(row, 'has_failures') !== 0 };
}

function kindParams(checkId: string, kind: ResultKind): SQLInputValue[] {
  return [checkId, kind.location, kind.checkType, kind.resultType, kind.hasFailures ? 1 : 0];
}

function windowParams(filter: ResultFilter, window: TimeWindow, before: number): SQLInputValue[] {
  const [first, second] = filter.resultTypes;
  return [filter.checkId, first ?? null, second ?? first ?? null, window.fromMs, window.toMs, before];
}

export class SqliteResultReader implements ResultListReader {
  constructor(private readonly db: ResultReadAccess) {}

  async direct(query: ResultQuery): Promise<Array<{ seq: number; entry: CheckResultEntry }>> {
    const { sql, params } = listSql(query);
    return this.db.all(sql, ...params).map((row) => ({ seq: num(row, 'seq'), entry: json<CheckResultEntry>(row, 'body') }));
  }

  async nextSeq(): Promise<number> {
    return num(this.db.get('SELECT COALESCE(MAX(seq), 0) + 1 AS next FROM results') ?? { next: 1 }, 'next');
  }

  async kinds(checkId: string, location?: string): Promise<ResultKind[]> {
    const kinds: ResultKind[] = [];
    // Depth first through the index: each column's values under the ones before it, one lookup per value.
    const walk = (prefix: SQLInputValue[]) => {
      const depth = prefix.length - 1;
      const next = (after?: SQLInputValue) => {
        const value = after === undefined ? this.db.get(kindStepSql(depth, false), ...prefix)?.value : this.db.get(kindStepSql(depth, true), ...prefix, after)?.value;
        return value === null || value === undefined ? undefined : (value as SQLInputValue);
      };
      for (let value = next(); value !== undefined; value = next(value)) {
        if (depth < KIND_COLUMNS.length - 1) walk([...prefix, value]);
        else kinds.push(kindOf([...prefix.slice(1), value]));
      }
    };
    walk(location === undefined ? [checkId] : [checkId, location]);
    return kinds;
  }

  async readKinds(checkId: string, kinds: readonly ResultKind[], read: KindRead): Promise<KindScan[]> {
    return kinds.map((kind) => {
      const at = kindParams(checkId, kind);
      const { window } = read;
      const seqs = (
        window
          ? this.db.all(KIND_IN_WINDOW_SQL, ...at, read.before, window.budget, window.fromMs, window.toMs, read.want)
          : this.db.all(KIND_SQL, ...at, read.before, read.want)
      ).map((row) => num(row, 'seq'));
      if (seqs.length === read.want) return { seqs, known: seqs[read.want - 1] as number };
      if (!window) return { seqs, known: 0 };
      const stop = this.db.get(KIND_STOP_SQL, ...at, read.before, window.budget - 1);
      return { seqs, known: stop ? num(stop, 'seq') : 0 };
    });
  }

  async windowSize(filter: ResultFilter, window: TimeWindow, before: number, cap: number): Promise<number> {
    return num(this.db.get(WINDOW_SIZE_SQL, ...windowParams(filter, window, before), cap) ?? { n: 0 }, 'n');
  }

  async windowPage(filter: ResultFilter, window: TimeWindow, before: number, want: number, cap: number): Promise<number[]> {
    const params = [...windowParams(filter, window, before), cap];
    if (filter.location !== undefined) params.push(filter.location);
    if (filter.checkType !== undefined) params.push(filter.checkType);
    return this.db.all(windowPageSql(filter), ...params, want).map((row) => num(row, 'seq'));
  }

  async entries(seqs: readonly number[]): Promise<CheckResultEntry[]> {
    if (seqs.length === 0) return [];
    const bodies = new Map(this.db.all(ENTRIES_SQL, JSON.stringify(seqs)).map((row) => [num(row, 'seq'), row]));
    // Pruning may remove a result between the page's reads and this one: the page goes without it.
    return seqs.flatMap((seq) => {
      const row = bodies.get(seq);
      return row ? [json<CheckResultEntry>(row, 'body')] : [];
    });
  }
}
