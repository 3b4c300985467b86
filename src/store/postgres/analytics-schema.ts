// Migration step 7 on PostgreSQL (migrations.ts): the same result_metrics
// and agent_addresses as SQLite's step (../sqlite/analytics-schema.ts), with
// the same values per result. Statement-level triggers with transition
// tables fill and empty result_metrics, so every path that stores or prunes
// results (PgStore.acceptResults, the heartbeat store's results, pruning,
// `outpost migrate` copying `results`) keeps it in step with one set-based
// statement per write rather than one per row. The step's last statement
// backfills the results stored before it.
//
// The key INCLUDEs the read columns: a window is an index-only scan (as
// SQLite's WITHOUT ROWID table is its own covering index), about 40% less
// scan time on a million rows than fetching each from the table, for an
// index about as large as the table.
//
// Bodies are TEXT; they are read as `json` (not `jsonb`). It refuses the
// escapes `\u0000` and a lone surrogate's (`\ud800`), which JSON.parse takes,
// so a stored body never holds them: src/core/nul.ts (storableJson).

/** Whole milliseconds; a result without a numeric responseTime stores -1. */
const RESPONSE_TIME = `CASE WHEN json_typeof(b -> 'responseTime') = 'number'
      THEN LEAST(9007199254740991, GREATEST(0, round((b ->> 'responseTime')::numeric)))::bigint ELSE -1 END`;
/** Bit 0: hasFailures; bit 1: isDegraded (true, or the number 1, as SQLite's json_extract(...) = 1). */
const FLAGS = `(CASE WHEN r.has_failures <> 0 THEN 1 ELSE 0 END)
      | (CASE json_typeof(b -> 'isDegraded')
           WHEN 'boolean' THEN CASE WHEN b ->> 'isDegraded' = 'true' THEN 2 ELSE 0 END
           WHEN 'number' THEN CASE WHEN (b ->> 'isDegraded')::numeric = 1 THEN 2 ELSE 0 END
           ELSE 0 END)`;
/** 1–1000 for an integer count; otherwise one attempt. */
const ATTEMPTS = `CASE WHEN json_typeof(b -> 'attempts') = 'number' AND (b ->> 'attempts') ~ '^-?[0-9]+$'
      THEN LEAST(1000, GREATEST(1, (b ->> 'attempts')::numeric))::int ELSE 1 END`;

/** Inserts the metrics of the FINAL results of `source` (a table or transition table aliased r). */
const fill = (source: string) => `INSERT INTO result_metrics (check_id, location, started_at, seq, response_time, flags, attempts)
      SELECT r.check_id, r.location, r.started_at, r.seq, ${RESPONSE_TIME}, ${FLAGS}, ${ATTEMPTS}
      FROM ${source} r CROSS JOIN LATERAL (SELECT r.body::json AS b) j
      WHERE r.result_type = 'FINAL'`;

export const PG_ANALYTICS_SQL = `
  CREATE TABLE result_metrics (
    check_id TEXT NOT NULL,
    location TEXT NOT NULL,
    started_at BIGINT NOT NULL,
    seq BIGINT NOT NULL,
    response_time BIGINT NOT NULL,
    flags SMALLINT NOT NULL,
    attempts SMALLINT NOT NULL,
    PRIMARY KEY (check_id, location, started_at, seq) INCLUDE (response_time, flags, attempts)
  );
  CREATE FUNCTION result_metrics_insert() RETURNS trigger LANGUAGE plpgsql AS $$
  BEGIN
    ${fill('new_results')};
    RETURN NULL;
  END $$;
  CREATE FUNCTION result_metrics_delete() RETURNS trigger LANGUAGE plpgsql AS $$
  BEGIN
    DELETE FROM result_metrics m USING old_results o
    WHERE o.result_type = 'FINAL' AND m.check_id = o.check_id AND m.location = o.location AND m.started_at = o.started_at AND m.seq = o.seq;
    RETURN NULL;
  END $$;
  CREATE TRIGGER result_metrics_insert AFTER INSERT ON results REFERENCING NEW TABLE AS new_results
    FOR EACH STATEMENT EXECUTE FUNCTION result_metrics_insert();
  CREATE TRIGGER result_metrics_delete AFTER DELETE ON results REFERENCING OLD TABLE AS old_results
    FOR EACH STATEMENT EXECUTE FUNCTION result_metrics_delete();
  ${fill('results')};
  CREATE TABLE agent_addresses (
    address TEXT PRIMARY KEY,
    location TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    last_seen BIGINT NOT NULL
  );
  CREATE INDEX agent_addresses_seen ON agent_addresses (last_seen);
`;
