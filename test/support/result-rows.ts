// Many results of one check written straight into the results table of
// either store (one statement, so tens of thousands take a second), with the
// model that says what listResults must answer for them: for the results
// list's tests of every filter (store-conformance, sqlite-store and
// postgres-store tests). The rows are shaped to catch a list that reads more
// than its page: a check type the check has only briefly had, five failures
// at the oldest end, a location with 1 % of the results, results that came
// in late (their start far behind their neighbours'), another check's
// results interleaved, and a check removed long ago whose results are all
// older than the rest (PostgreSQL's planner reads its list from the newest
// result of any check down, filtering, unless told otherwise).

import { PgStore } from '../../src/store/postgres/pg-store.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import type { ResultQuery, Store } from '../../src/store/store.js';

/** Results of the big check: more than twice the results a page may read (SCAN_BUDGET, src/store/result-list.ts), so the budgeted reads show. */
export const BIG_N = 50_000;
export const BIG_CHECK = 'big';
const OTHER_CHECK = 'other';
export const ROWS_T0 = Date.UTC(2026, 0, 1);
/** One result a second; every LATE-th comes in LATE_MS after it started. */
const STEP_MS = 1000;
const LATE = 997;
const LATE_MS = 20_000 * STEP_MS;

export interface ResultRow {
  /** Its place in the order stored, from 1: the list is newest first by it. */
  i: number;
  id: string;
  checkId: string;
  location: string;
  checkType: string;
  resultType: 'FINAL' | 'ATTEMPT';
  hasFailures: boolean;
  startedAt: number;
}

/** Result i of the big check (1 = the oldest); every 7th row stored is the other check's. */
function bigRow(i: number): ResultRow {
  return {
    i,
    id: `big-${i}`,
    checkId: BIG_CHECK,
    location: i % 100 === 0 ? 'c' : i % 2 === 0 ? 'a' : 'b',
    // Ten results of a type the check had once, long ago.
    checkType: i > 10 && i <= 20 ? 'TCP' : 'API',
    // The five oldest runs failed an attempt and then for good.
    resultType: i <= 5 ? 'ATTEMPT' : 'FINAL',
    hasFailures: i <= 10,
    startedAt: ROWS_T0 + (i % LATE === 0 ? i * STEP_MS - LATE_MS : i * STEP_MS),
  };
}

/** Results of a check removed before the big one began, all older than the rest. */
const RETIRED_N = 5_000;
export const RETIRED_CHECK = 'retired';

/** Every row in the order stored: the retired check's, then the big check's with the other check's between them. */
export function resultRows(): ResultRow[] {
  const rows: ResultRow[] = [];
  for (let i = 1; i <= RETIRED_N; i++) {
    rows.push({ i, id: `retired-${i}`, checkId: RETIRED_CHECK, location: 'a', checkType: 'API', resultType: 'FINAL', hasFailures: false, startedAt: ROWS_T0 - (RETIRED_N - i + 1) * STEP_MS });
  }
  for (let i = 1; i <= BIG_N; i++) {
    rows.push(bigRow(i));
    if (i % 7 === 0) {
      rows.push({ i, id: `other-${i}`, checkId: OTHER_CHECK, location: 'a', checkType: 'TCP', resultType: i % 2 ? 'ATTEMPT' : 'FINAL', hasFailures: true, startedAt: ROWS_T0 + i * STEP_MS });
    }
  }
  return rows;
}

/** Writes the rows into the store's results table, in their order, with bodies listResults hands back. */
export async function insertResultRows(store: Store, rows: readonly ResultRow[]): Promise<void> {
  const json = JSON.stringify(
    rows.map((r) => ({
      id: r.id,
      check_id: r.checkId,
      location: r.location,
      check_type: r.checkType,
      result_type: r.resultType,
      has_failures: r.hasFailures ? 1 : 0,
      started_at: r.startedAt,
      body: JSON.stringify({ id: r.id, checkId: r.checkId, checkType: r.checkType, resultType: r.resultType, runLocation: r.location, hasFailures: r.hasFailures, startedAt: new Date(r.startedAt).toISOString() }),
    })),
  );
  const columns = 'id, check_id, job_id, session_id, location, result_type, has_failures, started_at, check_type, received_at, body';
  if (store instanceof SqliteStore) {
    store.access.run(
      `INSERT INTO results (${columns})
       SELECT j.value ->> 'id', j.value ->> 'check_id', 'job', 'session', j.value ->> 'location', j.value ->> 'result_type', j.value ->> 'has_failures',
              j.value ->> 'started_at', j.value ->> 'check_type', j.value ->> 'started_at', j.value ->> 'body'
       FROM json_each(?) AS j ORDER BY j.key`,
      json,
    );
    // The planner's statistics, as a server that was restarted once has them (PRAGMA optimize at close).
    store.access.run('ANALYZE');
  } else if (store instanceof PgStore) {
    await store.db.run(
      `INSERT INTO results (${columns})
       SELECT e.value ->> 'id', e.value ->> 'check_id', 'job', 'session', e.value ->> 'location', e.value ->> 'result_type', (e.value ->> 'has_failures')::smallint,
              (e.value ->> 'started_at')::bigint, e.value ->> 'check_type', (e.value ->> 'started_at')::bigint, e.value ->> 'body'
       FROM jsonb_array_elements($1::jsonb) WITH ORDINALITY AS e(value, n) ORDER BY e.n`,
      [json],
    );
    await store.db.run('ANALYZE results');
  } else {
    throw new Error('insertResultRows knows the SQLite and PostgreSQL stores only');
  }
}

/** The big check's rows a query asks for, newest first (its cursor aside). */
export function expectedRows(rows: readonly ResultRow[], query: Omit<ResultQuery, 'limit' | 'nextId'>): ResultRow[] {
  return rows
    .filter(
      (r) =>
        r.checkId === query.checkId &&
        (query.resultType === 'ALL' || r.resultType === query.resultType) &&
        (query.location === undefined || r.location === query.location) &&
        (query.checkType === undefined || r.checkType === query.checkType) &&
        (!query.hasFailures || r.hasFailures) &&
        (query.from === undefined || r.startedAt >= query.from.getTime()) &&
        (query.to === undefined || r.startedAt < query.to.getTime()),
    )
    .reverse();
}

const at = (fraction: number) => new Date(ROWS_T0 + Math.round(BIG_N * fraction) * STEP_MS);

export interface FilterCase {
  name: string;
  /** The big check's unless given. */
  checkId?: string;
  query: Omit<ResultQuery, 'checkId' | 'limit' | 'nextId'>;
  /** The first page reads its window only as far as the budget goes: it comes back short, with a nextId. */
  budgeted?: boolean;
}

/** A query for every way listResults reads (result-list.ts): direct, kinds, a small window, a large one. */
export const FILTER_CASES: readonly FilterCase[] = [
  { name: 'no filter', query: { resultType: 'FINAL' } },
  { name: 'resultType=ALL', query: { resultType: 'ALL' } },
  { name: 'resultType=ATTEMPT', query: { resultType: 'ATTEMPT' } },
  { name: 'location=c', query: { resultType: 'FINAL', location: 'c' } },
  { name: 'location=c, resultType=ALL', query: { resultType: 'ALL', location: 'c' } },
  { name: 'checkType=TCP (ten, long ago)', query: { resultType: 'FINAL', checkType: 'TCP' } },
  { name: 'checkType=DNS (none)', query: { resultType: 'ALL', checkType: 'DNS' } },
  { name: 'hasFailures (the oldest five)', query: { resultType: 'FINAL', hasFailures: true } },
  { name: 'hasFailures, resultType=ALL', query: { resultType: 'ALL', hasFailures: true } },
  { name: 'location=a, checkType=API, hasFailures', query: { resultType: 'FINAL', location: 'a', checkType: 'API', hasFailures: true } },
  { name: 'from the last 1 %', query: { resultType: 'FINAL', from: at(0.99) } },
  { name: 'a window at 10 %', query: { resultType: 'ALL', from: at(0.1), to: at(0.105) } },
  { name: 'a window at 40 %, location=b', query: { resultType: 'FINAL', from: at(0.4), to: at(0.45), location: 'b' } },
  { name: 'to half way (a large window, far back)', query: { resultType: 'FINAL', to: at(0.5) }, budgeted: true },
  { name: 'to half way, checkType=TCP, resultType=ALL', query: { resultType: 'ALL', to: at(0.5), checkType: 'TCP' } },
  { name: 'from the future', query: { resultType: 'ALL', from: at(2) } },
  { name: 'from the first, hasFailures', query: { resultType: 'ALL', from: at(0), hasFailures: true } },
  { name: 'from 10 %, location=c', query: { resultType: 'FINAL', from: at(0.1), location: 'c' } },
  { name: 'location=edge (none there)', query: { resultType: 'FINAL', location: 'edge' } },
  { name: 'a check removed long ago', checkId: RETIRED_CHECK, query: { resultType: 'FINAL' } },
  { name: 'a check removed long ago, resultType=ALL', checkId: RETIRED_CHECK, query: { resultType: 'ALL' } },
];
