// The schema of the server's SQLite database, as an ordered list of steps.
// A step is never edited once released: a change is a new step at the end.
// open() applies the missing ones, each in its own transaction together with
// its schema_version row, so a kill in the middle leaves the database at the
// previous version, and a second server opening the same file at the same
// time waits (BEGIN IMMEDIATE) and then finds the step applied.
//
// Times the store compares or orders by are INTEGER milliseconds since the
// epoch (`*_at` columns of jobs, results, artifacts and events); the times it
// only hands back are the ISO strings it was given.

import type { DatabaseSync } from 'node:sqlite';
import { ANALYTICS_SQL, backfillResultMetrics } from './analytics-schema.js';

export interface Migration {
  version: number;
  description: string;
  sql: string;
  /** Runs after `sql`, in the same transaction: fills new tables from existing rows (in bounded batches). */
  backfill?: (db: DatabaseSync) => void;
}

export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    description: 'locations, keys, checks, sessions, jobs, results, artifacts, events',
    sql: `
      CREATE TABLE locations (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL
      );
      -- No foreign key to locations: syncLocations replaces them, deleting the
      -- keys of a location that is gone (since step 12; keyByHash joins).
      CREATE TABLE keys (
        id TEXT PRIMARY KEY,
        location_id TEXT NOT NULL,
        hash TEXT NOT NULL UNIQUE,
        masked_key TEXT NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
      );
      CREATE TABLE checks (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        check_type TEXT NOT NULL,
        frequency_seconds INTEGER NOT NULL,
        locations TEXT NOT NULL,              -- JSON string[]
        definition TEXT NOT NULL,             -- JSON
        environment_variables TEXT NOT NULL,  -- JSON
        runtime_id TEXT,
        cap_ms INTEGER NOT NULL,
        removed_at TEXT
      );
      CREATE TABLE sessions (
        id TEXT PRIMARY KEY,
        check_id TEXT NOT NULL,
        check_type TEXT NOT NULL,
        name TEXT NOT NULL,
        status TEXT NOT NULL,
        run_locations TEXT NOT NULL,          -- JSON string[]
        trigger_source TEXT NOT NULL,
        started_at TEXT NOT NULL,
        stopped_at TEXT,
        stopped_ms INTEGER,
        duration_ms INTEGER
      );
      CREATE INDEX sessions_by_check ON sessions (check_id, status);
      CREATE INDEX sessions_finished ON sessions (stopped_ms) WHERE stopped_ms IS NOT NULL;
      CREATE TABLE jobs (
        id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
        check_id TEXT NOT NULL,
        location TEXT NOT NULL,
        check_type TEXT NOT NULL,
        runtime_id TEXT,
        status TEXT NOT NULL,
        agent_id TEXT,
        lease_expires_at INTEGER,
        deadline_at INTEGER NOT NULL,
        created_at INTEGER NOT NULL,
        check_run_id INTEGER NOT NULL UNIQUE,
        final_result_id TEXT,
        payload TEXT NOT NULL                 -- JSON {check, environmentVariables}
      );
      CREATE INDEX jobs_claim ON jobs (location, status, created_at, check_run_id);
      CREATE INDEX jobs_by_session ON jobs (session_id);
      CREATE INDEX jobs_by_check ON jobs (check_id, location, status);
      CREATE INDEX jobs_leased ON jobs (lease_expires_at) WHERE status = 'LEASED';
      CREATE INDEX jobs_open_deadline ON jobs (deadline_at) WHERE status IN ('QUEUED', 'LEASED');
      -- One counter per name; check_run_id must keep increasing after old jobs are pruned.
      CREATE TABLE counters (
        name TEXT PRIMARY KEY,
        value INTEGER NOT NULL
      );
      -- seq orders the list and is the cursor; AUTOINCREMENT so a pruned seq is never reused.
      CREATE TABLE results (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        id TEXT NOT NULL UNIQUE,
        check_id TEXT NOT NULL,
        job_id TEXT NOT NULL,
        session_id TEXT NOT NULL,
        location TEXT NOT NULL,
        result_type TEXT NOT NULL,
        has_failures INTEGER NOT NULL,
        started_at INTEGER NOT NULL,
        check_type TEXT NOT NULL,
        received_at INTEGER NOT NULL,
        body TEXT NOT NULL                    -- JSON CheckResultEntry
      );
      CREATE INDEX results_list ON results (check_id, seq DESC);
      CREATE INDEX results_list_by_type ON results (check_id, result_type, seq DESC);
      CREATE INDEX results_by_session ON results (session_id, seq);
      CREATE INDEX results_received ON results (received_at);
      CREATE TABLE artifacts (
        id TEXT PRIMARY KEY,
        job_id TEXT NOT NULL,
        location TEXT NOT NULL,
        name TEXT NOT NULL,
        content_type TEXT NOT NULL,
        size INTEGER NOT NULL,
        stored_at TEXT,
        created_at TEXT NOT NULL,
        created_ms INTEGER NOT NULL
      );
      CREATE INDEX artifacts_by_job ON artifacts (job_id);
      CREATE INDEX artifacts_created ON artifacts (created_ms);
      CREATE TABLE events (
        seq INTEGER PRIMARY KEY,
        location TEXT NOT NULL,
        agent_id TEXT NOT NULL,
        received_at INTEGER NOT NULL,
        level TEXT NOT NULL,
        name TEXT NOT NULL,
        body TEXT NOT NULL                    -- JSON AgentEvent
      );
      CREATE INDEX events_received ON events (received_at);
    `,
  },
  {
    version: 2,
    description: 'when a job was last handed to an agent, to tell a late result of an earlier holder',
    sql: `
      ALTER TABLE jobs ADD COLUMN leased_at INTEGER;  -- ms; set at each claim
    `,
  },
  {
    version: 3,
    description: 'alert channels, check status per location, the alerts cursor, the notification outbox and its attempts',
    sql: `
      -- A channel of the checks file keeps the file's id (source 'file'); one made through the API gets the next id.
      CREATE TABLE alert_channels (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        source TEXT NOT NULL,                 -- 'file' | 'api'
        type TEXT NOT NULL,
        record TEXT NOT NULL,                 -- JSON: config, send flags, subscriptions
        created_at TEXT NOT NULL,
        updated_at TEXT
      );
      -- The confirmed status of a check in a location, and the one waiting to hold for alertAfter results.
      CREATE TABLE check_status (
        check_id TEXT NOT NULL,
        location TEXT NOT NULL,
        status TEXT NOT NULL,
        since INTEGER NOT NULL,
        candidate TEXT,
        streak INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        PRIMARY KEY (check_id, location)
      );
      -- The evaluator's position in results (results.seq), written with the outbox rows it led to.
      CREATE TABLE alert_cursor (
        name TEXT PRIMARY KEY,
        seq INTEGER NOT NULL
      );
      -- One certificate notice per channel, check, certificate and UTC day.
      CREATE TABLE ssl_notices (
        channel_id INTEGER NOT NULL,
        check_id TEXT NOT NULL,
        certificate TEXT NOT NULL,
        day TEXT NOT NULL,
        PRIMARY KEY (channel_id, check_id, certificate, day)
      );
      CREATE TABLE notifications (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        channel_id INTEGER NOT NULL,
        kind TEXT NOT NULL,
        check_id TEXT NOT NULL,
        location TEXT,
        result_id TEXT,
        body TEXT NOT NULL,                   -- JSON payload, scrubbed; headers and signature are made at delivery
        state TEXT NOT NULL,                  -- PENDING | DELIVERED | CANCELLED
        attempts INTEGER NOT NULL DEFAULT 0,
        next_at INTEGER NOT NULL,
        created_at INTEGER NOT NULL,
        delivered_at INTEGER,
        last_error TEXT
      );
      CREATE INDEX notifications_due ON notifications (next_at) WHERE state = 'PENDING';
      CREATE INDEX notifications_by_channel ON notifications (channel_id, id DESC);
      CREATE INDEX notifications_created ON notifications (created_at);
      CREATE TABLE notification_attempts (
        notification_id INTEGER NOT NULL REFERENCES notifications (id) ON DELETE CASCADE,
        at INTEGER NOT NULL,
        status INTEGER,                       -- HTTP status; null when no answer came
        error TEXT,
        duration_ms INTEGER NOT NULL
      );
      CREATE INDEX notification_attempts_by_notification ON notification_attempts (notification_id, at);
    `,
  },
  {
    version: 4,
    description: 'maintenance windows (from the checks file) and error groups (per check, by cleaned message)',
    sql: `
      CREATE TABLE maintenance_windows (
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL,
        definition TEXT NOT NULL,             -- JSON MaintenanceWindowDefinition, as the file has it
        created_at TEXT NOT NULL,
        updated_at TEXT
      );
      CREATE TABLE error_groups (
        id TEXT PRIMARY KEY,
        check_id TEXT NOT NULL,
        error_hash TEXT NOT NULL,
        raw_message TEXT,
        cleaned_message TEXT NOT NULL,
        first_seen INTEGER NOT NULL,          -- ms
        last_seen INTEGER NOT NULL,           -- ms
        archive_state TEXT NOT NULL,          -- OPEN, UNTIL_NEXT_EVENT, FOREVER
        UNIQUE (check_id, error_hash)
      );
      CREATE INDEX error_groups_by_check ON error_groups (check_id, last_seen DESC);
      CREATE INDEX error_groups_last_seen ON error_groups (last_seen);
    `,
  },
  {
    version: 5,
    description: 'heartbeat checks (token digests, deadlines) and their pings',
    sql: `
      -- One row per HEARTBEAT check of the checks file; the token only as its SHA-256.
      CREATE TABLE heartbeat_checks (
        check_id TEXT PRIMARY KEY,
        token_hash TEXT NOT NULL UNIQUE,
        period_ms INTEGER NOT NULL,
        grace_ms INTEGER NOT NULL,
        created_ms INTEGER NOT NULL,         -- first synced: stats count expected periods from here
        since_ms INTEGER NOT NULL,           -- the current period began: last ping, server start, or a missed deadline
        last_ping_ms INTEGER,
        status TEXT NOT NULL                 -- UNKNOWN, PASSING, FAILING
      );
      CREATE TABLE heartbeat_events (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        id TEXT NOT NULL UNIQUE,
        check_id TEXT NOT NULL,
        state TEXT NOT NULL,
        at_ms INTEGER NOT NULL,
        source TEXT NOT NULL,
        user_agent TEXT NOT NULL
      );
      CREATE INDEX heartbeat_events_by_check ON heartbeat_events (check_id, at_ms);
      CREATE INDEX heartbeat_events_at ON heartbeat_events (at_ms);
    `,
  },
  {
    version: 6,
    description: 'status dashboards (checks file and API), their access keys, incidents and incident updates',
    sql: `
      -- source 'file': the checks file's (synced); 'api': PUT /v1/dashboards/{dashboardId}. The numeric id stays
      -- when a dashboard changes (incidents name their dashboard by it).
      CREATE TABLE dashboards (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        dashboard_id TEXT NOT NULL UNIQUE,
        custom_url TEXT,                      -- looked up by /dashboards/{customUrl}; unique among dashboards, kept by the store
        source TEXT NOT NULL,
        definition TEXT NOT NULL,             -- JSON DashboardDefinition
        created_at TEXT NOT NULL,
        updated_at TEXT
      );
      CREATE INDEX dashboards_by_url ON dashboards (custom_url);
      -- A private dashboard's keys, as their SHA-256 only.
      CREATE TABLE dashboard_keys (
        dashboard INTEGER NOT NULL REFERENCES dashboards (id) ON DELETE CASCADE,
        id TEXT NOT NULL,
        hash TEXT NOT NULL,
        masked_key TEXT NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT,
        PRIMARY KEY (dashboard, id)
      );
      CREATE TABLE incidents (
        id TEXT PRIMARY KEY,
        dashboard INTEGER NOT NULL REFERENCES dashboards (id) ON DELETE CASCADE,
        name TEXT NOT NULL,
        impact TEXT NOT NULL,
        started_at TEXT,
        stopped_at TEXT,
        created_at TEXT NOT NULL,
        updated_at TEXT
      );
      CREATE INDEX incidents_by_dashboard ON incidents (dashboard);
      CREATE TABLE incident_updates (
        incident_id TEXT NOT NULL REFERENCES incidents (id) ON DELETE CASCADE,
        id TEXT NOT NULL,
        status TEXT NOT NULL,
        description TEXT NOT NULL,
        created_at TEXT NOT NULL,
        created_ms INTEGER NOT NULL,          -- orders the updates, newest first
        updated_at TEXT,
        PRIMARY KEY (incident_id, id)
      );
      -- A check's FINAL results in a time window (dashboards' charts and percentiles); has_failures makes it
      -- covering for their uptime counts.
      CREATE INDEX results_by_check_time ON results (check_id, result_type, started_at, has_failures);
    `,
  },
  {
    version: 7,
    description: 'analytics: narrow per-result columns of FINAL results (filled by triggers), IPv6 addresses agents report',
    sql: ANALYTICS_SQL,
    backfill: backfillResultMetrics,
  },
  {
    version: 8,
    description: 'jobs: the claim that leased each job, so that a retried claim gets a lost answer again',
    sql: `
      ALTER TABLE jobs ADD COLUMN claim_id TEXT;
      CREATE INDEX jobs_by_claim ON jobs (agent_id, claim_id) WHERE status = 'LEASED';
    `,
  },
  {
    version: 9,
    description: "results: a location's newest results of a type are one index lookup (badges, dashboards' status, listResults by location)",
    // Without it a location with no result (a new one) made the newest-FINAL lookup walk every result of the
    // check through results_list_by_type (src/server/latest-finals.ts, docs/server.md "Badges").
    sql: `
      CREATE INDEX results_by_location ON results (check_id, location, result_type, seq DESC);
    `,
  },
  {
    version: 10,
    description: 'alerts: the status channels were last told of, which a maintenance window holds back',
    sql: `
      ALTER TABLE check_status ADD COLUMN announced TEXT;
    `,
  },
  {
    version: 11,
    description: 'results: every filter of the results list is read from an index that holds it (results_by_kind; results_by_check_time gains location and check type)',
    // Without them a filter that matches few of a check's results (another check type, hasFailures=true on a check
    // that never fails, a time window far back) made GET /v2/check-results read every result of the check
    // (src/store/result-list.ts, docs/server.md "The API").
    sql: `
      CREATE INDEX results_by_kind ON results (check_id, location, check_type, result_type, has_failures, seq DESC, started_at);
      DROP INDEX results_by_check_time;
      CREATE INDEX results_by_check_time ON results (check_id, result_type, started_at, has_failures, location, check_type);
    `,
  },
  {
    version: 12,
    description: 'keys: the keys of locations removed from the checks file are deleted (a location added back starts without keys)',
    // Before, syncLocations kept a removed location's keys and keyByHash joined them back in when the location came back;
    // now syncLocations deletes them (docs/server.md, "Agent keys"). This clears those kept by an earlier release.
    sql: `
      DELETE FROM keys WHERE location_id NOT IN (SELECT id FROM locations);
    `,
  },
  {
    version: 13,
    description: 'jobs keep the ATTEMPTs a run may send and count their claims; events listed per location (each keeps its newest)',
    // A job queued or claimed before this step is read as the protocol's maximum a run, claimed once
    // (src/store/attempt-bound.ts): no UPDATE of every job.
    sql: `
      ALTER TABLE jobs ADD COLUMN attempts_per_run INTEGER;
      ALTER TABLE jobs ADD COLUMN leases INTEGER NOT NULL DEFAULT 0;
      CREATE INDEX events_by_location ON events (location, seq);
    `,
  },
];

/** The schema version this build knows: the last step's. */
export const SCHEMA_VERSION = MIGRATIONS.reduce((max, step) => Math.max(max, step.version), 0);

export class NewerSchemaError extends Error {
  constructor(
    readonly file: string,
    readonly found: number,
    readonly known: number,
  ) {
    super(
      `${file} has schema version ${found}, newer than this Outpost knows (${known}): it was written by a newer release; run that release, or restore a backup made before the upgrade`,
    );
    this.name = 'NewerSchemaError';
  }
}

function currentVersion(db: DatabaseSync): number {
  const row = db.prepare('SELECT MAX(version) AS version FROM schema_version').get();
  const version = row?.version;
  return typeof version === 'number' ? version : 0;
}

/** Applies the missing steps of `steps` (MIGRATIONS unless a test passes its own); returns the versions applied. */
export function migrate(db: DatabaseSync, file: string, steps: readonly Migration[] = MIGRATIONS, now: () => Date = () => new Date()): number[] {
  const known = steps.reduce((max, step) => Math.max(max, step.version), 0);
  db.exec('CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)');
  const found = currentVersion(db);
  if (found > known) throw new NewerSchemaError(file, found, known);
  const applied: number[] = [];
  for (const step of [...steps].sort((a, b) => a.version - b.version)) {
    if (step.version <= found) continue;
    db.exec('BEGIN IMMEDIATE');
    try {
      // Another process may have applied it while this one waited for the lock.
      if (currentVersion(db) >= step.version) {
        db.exec('COMMIT');
        continue;
      }
      db.exec(step.sql);
      step.backfill?.(db);
      db.prepare('INSERT INTO schema_version (version, applied_at) VALUES (?, ?)').run(step.version, now().toISOString());
      db.exec('COMMIT');
      applied.push(step.version);
    } catch (error) {
      if (db.isTransaction) db.exec('ROLLBACK');
      throw error;
    }
  }
  return applied;
}
