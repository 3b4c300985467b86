// How both stores answer listResults (GET /v2/check-results/{checkId},
// docs/server.md) with work bounded by the page, whatever the filters. The
// list is newest first by `seq`; a filter that an index cannot answer in
// that order makes the database walk every result of the check looking for
// matches (0.2–0.9 s at 300,000 results, blocking SQLite's one thread), so
// each query takes one of three ways, all over indexes that hold every column
// they test (migration 11 of both stores):
//
//   - direct (SQLite): no time filter, and the other filters are the leading
//     columns of an index in seq order (none, resultType, or location with a
//     resultType): one range of it, limit + 1 entries. PostgreSQL cannot be
//     told which index to take, and takes the primary key backwards,
//     filtering, when its statistics make the check's (or the type's)
//     results look common: through every newer result of every check when
//     they are old. It reads these as kinds, whose every column is equal,
//     which it does not get wrong.
//   - kinds: a kind is one combination of the equality filters' values
//     (location, check type, result type, failed or not) that the check's
//     results have; each is one range of results_by_kind in seq order. The
//     check's kinds are found with a loose index scan (one lookup each), the
//     query's kinds read limit + 1 entries each, and the pages merge. A
//     check has few kinds (its locations × its types × 2 × 2), however many
//     results it has.
//   - window: with `from` or `to`, when the time window holds at most
//     SCAN_BUDGET results of the asked types, the window itself is read from
//     results_by_check_time and its newest matches taken. A larger window is
//     read as kinds instead, each kind's entries tested against the window,
//     at most SCAN_BUDGET entries in all: when that runs out first, the page
//     holds the matches found so far (maybe none) and its nextId is where the
//     reading stopped, so the next page goes on from there. Paging until
//     nextId is null still yields every match once.

import type { CheckResultEntry } from '../core/result-entry.js';
import { InvalidQueryError, type ResultPage, type ResultQuery } from './store.js';

/**
 * The largest window read whole, and the entries a larger one's kinds read
 * in all. With the window's count and where each kind stopped, a page reads
 * at most about four times this many index entries beyond its limit + 1 per
 * kind: a few ms (docs/development.md "Benchmark").
 */
export const SCAN_BUDGET = 20_000;

/** The values of every equality filter of the list that one result has; each kind is one range of results_by_kind. */
export interface ResultKind {
  location: string;
  checkType: string;
  resultType: string;
  hasFailures: boolean;
}

/** `from` (inclusive) and `to` (exclusive) on the result's start, in ms; an absent side is open. */
export interface TimeWindow {
  fromMs: number;
  toMs: number;
}

/** Edges of an open side of a window: no result's start (a Date's ms) is beyond them. */
export const EARLIEST_MS = Number.MIN_SAFE_INTEGER;
export const LATEST_MS = Number.MAX_SAFE_INTEGER;

/** The filters of a query the window way tests, other than the window. */
export interface ResultFilter {
  checkId: string;
  resultTypes: readonly string[];
  location?: string;
  checkType?: string;
  /** hasFailures=true: only results that are down. */
  failedOnly: boolean;
}

/** What reading one kind found. */
export interface KindScan {
  /** Seqs of the kind's matching results below the page's start, newest first. */
  seqs: number[];
  /** Every result of the kind from this seq up to the page's start was read; 0 when all of them were. */
  known: number;
}

/** How the kinds are read: below `before`, `want` matches at most each; with a window, at most `budget` entries each. */
export interface KindRead {
  before: number;
  want: number;
  window?: TimeWindow & { budget: number };
}

/** The SQL half of listResults, one implementation per store (sqlite/results-reader.ts, postgres/results-reader.ts). */
export interface ResultListReader {
  /** A directly indexed query (directlyIndexed): its newest limit + 1 results. Absent: such queries are read as kinds. */
  direct?(query: ResultQuery): Promise<Array<{ seq: number; entry: CheckResultEntry }>>;
  /** One more than the newest stored seq: a first page reads below it, so results stored meanwhile never split it. */
  nextSeq(): Promise<number>;
  /** Every kind the check's results have (in the location, when given). */
  kinds(checkId: string, location?: string): Promise<ResultKind[]>;
  /** Reads each kind (KindScan), in the order given. */
  readKinds(checkId: string, kinds: readonly ResultKind[], read: KindRead): Promise<KindScan[]>;
  /** Results of the filter's types started in the window with a seq below `before`, counted up to `cap`. */
  windowSize(filter: ResultFilter, window: TimeWindow, before: number, cap: number): Promise<number>;
  /** The newest `want` seqs below `before` in the window that pass the filter, reading no more than `cap` of its results of each type. */
  windowPage(filter: ResultFilter, window: TimeWindow, before: number, want: number, cap: number): Promise<number[]>;
  /** The results with these seqs, in this order. */
  entries(seqs: readonly number[]): Promise<CheckResultEntry[]>;
}

/** The cursor of listResults: base64url of a seq the next page reads below. Opaque to clients. */
export function encodeCursor(seq: number): string {
  return Buffer.from(String(seq)).toString('base64url');
}
export function decodeCursor(cursor: string): number {
  const text = Buffer.from(cursor, 'base64url').toString();
  if (!/^[1-9][0-9]{0,15}$/.test(text) || Buffer.from(text).toString('base64url') !== cursor) {
    throw new InvalidQueryError('nextId', 'nextId is not a cursor this server returned');
  }
  return Number(text);
}

export function checkLimit(limit: number): void {
  if (!Number.isInteger(limit) || limit < 1 || limit > 100) throw new InvalidQueryError('limit', 'limit must be an integer from 1 to 100');
}

/** The query's time window, undefined without `from` and `to`. */
export function timeWindow(query: ResultQuery): TimeWindow | undefined {
  for (const [name, date] of [
    ['from', query.from],
    ['to', query.to],
  ] as const) {
    if (date !== undefined && !Number.isFinite(date.getTime())) throw new InvalidQueryError(name, `${name} is not a valid time`);
  }
  if (query.from === undefined && query.to === undefined) return undefined;
  return { fromMs: query.from?.getTime() ?? EARLIEST_MS, toMs: query.to?.getTime() ?? LATEST_MS };
}

/**
 * Whether one index answers the query in seq order with nothing else to
 * test: results_list (no filter), results_list_by_type (resultType) or
 * results_by_location (location and a resultType).
 */
export function directlyIndexed(query: ResultQuery): boolean {
  if (query.from !== undefined || query.to !== undefined || query.checkType !== undefined || query.hasFailures) return false;
  return query.location === undefined || query.resultType !== 'ALL';
}

export function filterOf(query: ResultQuery): ResultFilter {
  const filter: ResultFilter = {
    checkId: query.checkId,
    resultTypes: query.resultType === 'ALL' ? ['FINAL', 'ATTEMPT'] : [query.resultType],
    failedOnly: query.hasFailures === true,
  };
  if (query.location !== undefined) filter.location = query.location;
  if (query.checkType !== undefined) filter.checkType = query.checkType;
  return filter;
}

export function kindsOf(kinds: readonly ResultKind[], filter: ResultFilter): ResultKind[] {
  return kinds.filter(
    (kind) =>
      filter.resultTypes.includes(kind.resultType) &&
      (filter.location === undefined || kind.location === filter.location) &&
      (filter.checkType === undefined || kind.checkType === filter.checkType) &&
      (!filter.failedOnly || kind.hasFailures),
  );
}

/**
 * A page from the kinds' reads: every kind was read down to the highest of
 * their `known` seqs, so the matches from there up are all there are. More
 * than `limit` of them: the newest `limit`, and the next page below the
 * last. Fewer: all of them, and the next page below where the reading
 * stopped (null when every kind was read to its end).
 */
export function mergeKinds(scans: readonly KindScan[], limit: number): { seqs: number[]; next: number | null } {
  const floor = scans.reduce((max, scan) => Math.max(max, scan.known), 0);
  const matches = scans.flatMap((scan) => scan.seqs.filter((seq) => seq >= floor)).sort((a, b) => b - a);
  if (matches.length > limit) return { seqs: matches.slice(0, limit), next: matches[limit - 1] as number };
  return { seqs: matches, next: floor > 0 ? floor : null };
}

/** listResults: checks the query, reads the page the cheapest bounded way, and makes its cursor. */
export async function listResultPage(reader: ResultListReader, query: ResultQuery): Promise<ResultPage> {
  checkLimit(query.limit);
  const cursor = query.nextId === undefined ? undefined : decodeCursor(query.nextId);
  const window = timeWindow(query);
  if (reader.direct && directlyIndexed(query)) {
    const rows = await reader.direct(query);
    const page = rows.slice(0, query.limit);
    const last = page.at(-1);
    return { entries: page.map((row) => row.entry), nextId: rows.length > query.limit && last ? encodeCursor(last.seq) : null };
  }
  const before = cursor ?? (await reader.nextSeq());
  const filter = filterOf(query);
  const want = query.limit + 1;
  let found: { seqs: number[]; next: number | null };
  if (window && (await reader.windowSize(filter, window, before, SCAN_BUDGET + 1)) <= SCAN_BUDGET) {
    // The cap holds the read to the window measured, should results come into it meanwhile.
    const seqs = await reader.windowPage(filter, window, before, want, SCAN_BUDGET + 1);
    found = seqs.length > query.limit ? { seqs: seqs.slice(0, query.limit), next: seqs[query.limit - 1] as number } : { seqs, next: null };
  } else {
    const kinds = kindsOf(await reader.kinds(query.checkId, query.location), filter);
    if (kinds.length === 0) return { entries: [], nextId: null };
    const read: KindRead = { before, want };
    // Split evenly: a check's locations run as often as each other, so their kinds reach back about as far.
    if (window) read.window = { ...window, budget: Math.max(want, Math.ceil(SCAN_BUDGET / kinds.length)) };
    found = mergeKinds(await reader.readKinds(query.checkId, kinds, read), query.limit);
  }
  return { entries: await reader.entries(found.seqs), nextId: found.next === null ? null : encodeCursor(found.next) };
}
