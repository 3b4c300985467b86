// Migration step 7 (migrations.ts): what the analytics routes read, kept
// narrow so that a 30-day window of a busy check is a range scan of small
// rows, never a JSON parse per result (docs/analytics.md).
//
// result_metrics holds one row per FINAL result. Triggers on `results` fill
// and empty it, so every path that stores a result (acceptResults, the
// heartbeat store's own results, pruning) keeps it in step without knowing it
// exists. Its key leads with (check_id, location, started_at): one location's
// window is one contiguous range, and the table is its own covering index.
//
// agent_addresses holds the IPv6 addresses agents report with their claims
// (GET /v1/static-ipv6s.txt).

import type { DatabaseSync } from 'node:sqlite';

/** Whole milliseconds; a result without a numeric responseTime stores -1 (left out of response-time metrics). */
const RESPONSE_TIME = (row: string) => `CASE WHEN json_type(${row}.body, '$.responseTime') IN ('integer', 'real')
      THEN MIN(9007199254740991, MAX(0, CAST(ROUND(json_extract(${row}.body, '$.responseTime')) AS INTEGER))) ELSE -1 END`;
/** Bit 0: hasFailures; bit 1: isDegraded. */
const FLAGS = (row: string) => `(${row}.has_failures <> 0) | (CASE WHEN json_extract(${row}.body, '$.isDegraded') = 1 THEN 2 ELSE 0 END)`;
/** 1–1000; a result without a sensible count made one attempt. */
const ATTEMPTS = (row: string) => `CASE WHEN json_type(${row}.body, '$.attempts') = 'integer'
      THEN MIN(1000, MAX(1, json_extract(${row}.body, '$.attempts'))) ELSE 1 END`;

const METRIC_COLUMNS = 'check_id, location, started_at, seq, response_time, flags, attempts';
const metricValues = (row: string) =>
  `${row}.check_id, ${row}.location, ${row}.started_at, ${row}.seq, ${RESPONSE_TIME(row)}, ${FLAGS(row)}, ${ATTEMPTS(row)}`;

export const ANALYTICS_SQL = `
  CREATE TABLE result_metrics (
    check_id TEXT NOT NULL,
    location TEXT NOT NULL,
    started_at INTEGER NOT NULL,          -- ms, as results.started_at
    seq INTEGER NOT NULL,                 -- results.seq
    response_time INTEGER NOT NULL,       -- whole ms; -1: the result has none
    flags INTEGER NOT NULL,               -- 1 hasFailures, 2 isDegraded
    attempts INTEGER NOT NULL,
    PRIMARY KEY (check_id, location, started_at, seq)
  ) WITHOUT ROWID;
  CREATE TRIGGER result_metrics_insert AFTER INSERT ON results WHEN NEW.result_type = 'FINAL'
  BEGIN
    INSERT INTO result_metrics (${METRIC_COLUMNS}) VALUES (${metricValues('NEW')});
  END;
  CREATE TRIGGER result_metrics_delete AFTER DELETE ON results WHEN OLD.result_type = 'FINAL'
  BEGIN
    DELETE FROM result_metrics WHERE check_id = OLD.check_id AND location = OLD.location AND started_at = OLD.started_at AND seq = OLD.seq;
  END;
  CREATE TABLE agent_addresses (
    address TEXT PRIMARY KEY,             -- canonical IPv6 text
    location TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    last_seen INTEGER NOT NULL            -- ms
  );
  CREATE INDEX agent_addresses_seen ON agent_addresses (last_seen);
`;

/** Results per backfill statement: each reads and parses a bounded number of bodies. */
const BACKFILL_BATCH = 10_000;

/** Fills result_metrics from the FINAL results stored before step 7, by ranges of seq. */
export function backfillResultMetrics(db: DatabaseSync): void {
  const range = db.prepare('SELECT MIN(seq) AS low, MAX(seq) AS high FROM results').get();
  if (!range || typeof range.low !== 'number' || typeof range.high !== 'number') return;
  const insert = db.prepare(
    `INSERT INTO result_metrics (${METRIC_COLUMNS}) SELECT ${metricValues('r')} FROM results r
     WHERE r.result_type = 'FINAL' AND r.seq >= ? AND r.seq < ?`,
  );
  // The loop is bounded by the seq range: ceil((high - low + 1) / batch) statements.
  for (let low = range.low; low <= range.high; low += BACKFILL_BATCH) insert.run(low, low + BACKFILL_BATCH);
}
