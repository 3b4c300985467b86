// The Store on SQLite (node:sqlite). DatabaseSync is synchronous, so every
// method runs its whole transaction (BEGIN IMMEDIATE … COMMIT) without
// yielding: nothing else in this process interleaves with it, other
// processes wait up to busy_timeout, and the promise resolves after COMMIT.
// WAL with synchronous=FULL makes a COMMIT durable before it returns, which is
// what lets a route answer "accepted" (store.ts). The schema is migrations.ts.

import { closeSync, existsSync, openSync, statfsSync } from 'node:fs';
import path from 'node:path';
import type { DatabaseSync, SQLInputValue, StatementSync } from 'node:sqlite';
import { storableJson } from '../../core/nul.js';
import type { AgentEvent, Job, ResultEnvelope } from '../../core/protocol.js';
import type { CheckResultEntry } from '../../core/result-entry.js';
import { downFlag, FINISHED_STATUSES, type FinalOutcome, finalOutcome, sessionStatus } from '../session-status.js';
import {
  type ArtifactRecord,
  type ClaimAgainQuery,
  type ClaimQuery,
  type KeyRecord,
  type LeaseUpdate,
  type LocationRecord,
  MAX_ATTEMPTS_PER_JOB,
  MAX_EVENTS_PER_LOCATION,
  type NewJob,
  NotFoundError,
  type ResultPage,
  type ResultQuery,
  type ResultsOutcome,
  type SessionRecord,
  type SessionStatus,
  type Store,
  type StoredCheck,
} from '../store.js';
import { SqliteErrorGroupStore } from './error-groups-store.js';
import { migrate, NewerSchemaError } from './migrations.js';
import { listResultPage } from '../result-list.js';
import { SqliteResultReader } from './results-reader.js';
import { claimedJob } from '../claimed-job.js';
import { json, keyRecordOf, num, numOrNull, type Row, str, strOrNull } from '../rows.js';
import { attemptBound, tooManyAttempts } from '../attempt-bound.js';
import { WriteHealth } from '../write-health.js';

export type { Row } from '../rows.js';
// Where the tests have always found them.
export { decodeCursor, encodeCursor } from '../result-list.js';
export { listSql } from './results-reader.js';

/**
 * A result's startedAt is the agent's clock, a job's leased_at the server's:
 * a run counts as begun before a lease only by more than this, so that a
 * successor's re-sent spool is not refused for an agent clock a little behind.
 */
const CLOCK_SKEW_ALLOWANCE_MS = 10_000;

/**
 * The statements and transactions of one store's connection, for the
 * feature stores that keep their tables in the same database
 * (src/store/sqlite/*-store.ts): they share its cache of prepared
 * statements and its write transactions.
 */
export interface SqliteAccess {
  run(sql: string, ...params: SQLInputValue[]): number;
  get(sql: string, ...params: SQLInputValue[]): Row | undefined;
  all(sql: string, ...params: SQLInputValue[]): Row[];
  /** Runs `work` in one write transaction (nested calls join the outer one). */
  tx<T>(work: () => T): T;
}

const BUSY_TIMEOUT_MS = 5000;

function placeholders(n: number): string {
  return Array.from({ length: n }, () => '?').join(', ');
}
/** Milliseconds of an ISO time, or `fallback` when it does not parse. */
function msOf(iso: string, fallback: number): number {
  const ms = Date.parse(iso);
  return Number.isFinite(ms) ? ms : fallback;
}

/** The claim query for that many check types and runtimes; parameters: location, the types, the runtimes, the limit. Exported for the query-plan test. */
export function claimSql(checkTypes: number, runtimes: number): string {
  const runtimeFilter = runtimes === 0 ? 'runtime_id IS NULL' : `(runtime_id IS NULL OR runtime_id IN (${placeholders(runtimes)}))`;
  return `SELECT id, session_id, location, check_run_id, payload FROM jobs
    WHERE location = ? AND status = 'QUEUED' AND check_type IN (${placeholders(checkTypes)}) AND ${runtimeFilter}
    ORDER BY created_at, check_run_id LIMIT ?`;
}

/** Free space a disk that was full must have again before the database counts as writable. */
export const PROBE_FREE_BYTES = 1024 * 1024;

/**
 * Bytes free to this process on the database's file system: root may write
 * into the blocks reserved for it (ext4 keeps 5 %), others may not. Infinity
 * where it cannot be asked.
 */
function freeBytes(file: string): number {
  try {
    const stats = statfsSync(path.dirname(path.resolve(file)));
    const blocks = process.getuid?.() === 0 ? stats.bfree : stats.bavail;
    return blocks * stats.bsize;
  } catch {
    return Number.POSITIVE_INFINITY;
  }
}

export class SqliteStore implements Store {
  private readonly statements = new Map<string, StatementSync>();
  /** Whether writes work: every statement and transaction that fails for the storage reports here (readiness, /health, the API's 503). */
  readonly writes = new WriteHealth();

  private constructor(
    private readonly db: DatabaseSync,
    readonly file: string,
  ) {}

  /**
   * `PRAGMA integrity_check` of a database file, opened read-only (no
   * migration, no write; a running server may keep using it): ['ok'] when
   * sound, else what is wrong.
   */
  static async checkFile(file: string): Promise<string[]> {
    const sqlite = await import('node:sqlite');
    const db = new sqlite.DatabaseSync(file, { readOnly: true, timeout: BUSY_TIMEOUT_MS });
    try {
      return db
        .prepare('PRAGMA integrity_check')
        .all()
        .map((row) => String(Object.values(row)[0]));
    } finally {
      db.close();
    }
  }

  /** Opens (creating if need be) the database file and brings its schema up to date. */
  static async open(file: string): Promise<SqliteStore> {
    let sqlite: typeof import('node:sqlite');
    try {
      sqlite = await import('node:sqlite');
    } catch (error) {
      throw new Error(`the server needs node:sqlite (Node 22.13 or later; this is ${process.version})`, { cause: error });
    }
    let db: DatabaseSync;
    try {
      // A new database is readable by its owner only (SQLite gives its -wal and -shm files the same mode):
      // it holds the checks' variables, secret ones included.
      if (!existsSync(file)) closeSync(openSync(file, 'wx', 0o600));
      db = new sqlite.DatabaseSync(file, { timeout: BUSY_TIMEOUT_MS, enableForeignKeyConstraints: true });
    } catch (error) {
      throw new Error(`cannot open the database ${file}: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
    }
    try {
      db.exec(`PRAGMA busy_timeout = ${BUSY_TIMEOUT_MS}`);
      db.exec('PRAGMA journal_mode = WAL');
      db.exec('PRAGMA synchronous = FULL');
      db.exec('PRAGMA foreign_keys = ON');
      migrate(db, file);
    } catch (error) {
      db.close();
      if (error instanceof NewerSchemaError) throw error;
      throw new Error(`cannot open the database ${file}: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
    }
    return new SqliteStore(db, file);
  }

  private stmt(sql: string): StatementSync {
    let statement = this.statements.get(sql);
    if (!statement) {
      statement = this.db.prepare(sql);
      this.statements.set(sql, statement);
    }
    return statement;
  }
  // A statement that fails for the storage (a full disk) says so to `writes`, inside a transaction or not.
  private run(sql: string, ...params: SQLInputValue[]): number {
    try {
      return Number(this.stmt(sql).run(...params).changes);
    } catch (error) {
      this.writes.failed(error);
      throw error;
    }
  }
  private get(sql: string, ...params: SQLInputValue[]): Row | undefined {
    try {
      return this.stmt(sql).get(...params);
    } catch (error) {
      this.writes.failed(error);
      throw error;
    }
  }
  private all(sql: string, ...params: SQLInputValue[]): Row[] {
    try {
      return this.stmt(sql).all(...params);
    } catch (error) {
      this.writes.failed(error);
      throw error;
    }
  }

  /** This connection's statements and transactions, for a feature store on the same database. */
  readonly access: SqliteAccess = {
    run: (sql, ...params) => this.run(sql, ...params),
    get: (sql, ...params) => this.get(sql, ...params),
    all: (sql, ...params) => this.all(sql, ...params),
    tx: (work) => this.tx(work),
  };

  /** Error groups of failing results, kept by acceptResults. */
  readonly errorGroups = new SqliteErrorGroupStore(this.access);

  /** The results list's reads (results-reader.ts). */
  private readonly resultReader = new SqliteResultReader(this.access);

  /** Runs `work` in one write transaction; the caller's promise resolves after COMMIT. A nested call joins the outer one. */
  private tx<T>(work: () => T): T {
    if (this.db.isTransaction) return work();
    try {
      this.db.exec('BEGIN IMMEDIATE');
      const value = work();
      this.db.exec('COMMIT');
      return value;
    } catch (error) {
      // SQLite rolls back by itself on a full disk; what is left open is rolled back here.
      if (this.db.isTransaction) this.db.exec('ROLLBACK');
      this.writes.failed(error);
      throw error;
    }
  }

  /** One small write (a counter nobody reads), to learn whether writes work again while nothing else writes. */
  async probeWrite(): Promise<boolean> {
    try {
      this.tx(() => this.run("INSERT INTO counters (name, value) VALUES ('write_probe', 1) ON CONFLICT (name) DO UPDATE SET value = value + 1"));
      // The probe's page still fits in the write-ahead log's old room on a full disk while real writes need new room: without this, ready and not ready would alternate every probe.
      if (!this.writes.writable && freeBytes(this.file) < PROBE_FREE_BYTES) return false;
      this.writes.recovered();
      return true;
    } catch {
      return false;
    }
  }

  // Locations and keys

  async syncLocations(locations: readonly LocationRecord[]): Promise<void> {
    this.tx(() => {
      const keep = new Set(locations.map((l) => l.id));
      for (const row of this.all('SELECT id FROM locations')) {
        if (keep.has(str(row, 'id'))) continue;
        this.run('DELETE FROM locations WHERE id = ?', str(row, 'id'));
        // Its keys go with it: a location added back later must not bring back keys revoked by its removal.
        this.run('DELETE FROM keys WHERE location_id = ?', str(row, 'id'));
      }
      for (const l of locations) {
        this.run('INSERT INTO locations (id, name) VALUES (?, ?) ON CONFLICT (id) DO UPDATE SET name = excluded.name', l.id, l.name);
      }
    });
  }

  async location(id: string): Promise<LocationRecord | undefined> {
    const row = this.get('SELECT id, name FROM locations WHERE id = ?', id);
    return row && { id: str(row, 'id'), name: str(row, 'name') };
  }

  async locations(): Promise<LocationRecord[]> {
    return this.all('SELECT id, name FROM locations ORDER BY id').map((row) => ({ id: str(row, 'id'), name: str(row, 'name') }));
  }

  async createKey(key: KeyRecord & { hash: string }): Promise<KeyRecord> {
    this.tx(() => {
      this.run(
        'INSERT INTO keys (id, location_id, hash, masked_key, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)',
        key.id,
        key.locationId,
        key.hash,
        key.maskedKey,
        key.created_at,
        key.updated_at,
      );
    });
    return { id: key.id, locationId: key.locationId, maskedKey: key.maskedKey, created_at: key.created_at, updated_at: key.updated_at };
  }

  async keyByHash(hash: string): Promise<KeyRecord | undefined> {
    const row = this.get(
      'SELECT k.id, k.location_id, k.masked_key, k.created_at, k.updated_at FROM keys k JOIN locations l ON l.id = k.location_id WHERE k.hash = ?',
      hash,
    );
    return row && keyRecordOf(row);
  }

  async keys(locationId: string): Promise<KeyRecord[]> {
    return this.all('SELECT id, location_id, masked_key, created_at, updated_at FROM keys WHERE location_id = ? ORDER BY created_at, id', locationId).map(keyRecordOf);
  }

  async deleteKey(locationId: string, keyId: string): Promise<boolean> {
    return this.tx(() => this.run('DELETE FROM keys WHERE location_id = ? AND id = ?', locationId, keyId) > 0);
  }

  // Checks

  async syncChecks(checks: readonly StoredCheck[], now: Date): Promise<void> {
    this.tx(() => {
      const inFile = new Set(checks.map((c) => c.id));
      for (const row of this.all('SELECT id FROM checks WHERE removed_at IS NULL')) {
        const id = str(row, 'id');
        if (!inFile.has(id)) this.removeCheck(id, now);
      }
      for (const c of checks) {
        this.run(
          `INSERT INTO checks (id, name, check_type, frequency_seconds, locations, definition, environment_variables, runtime_id, cap_ms, removed_at)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, NULL)
           ON CONFLICT (id) DO UPDATE SET name = excluded.name, check_type = excluded.check_type,
             frequency_seconds = excluded.frequency_seconds, locations = excluded.locations, definition = excluded.definition,
             environment_variables = excluded.environment_variables, runtime_id = excluded.runtime_id, cap_ms = excluded.cap_ms,
             removed_at = NULL`,
          c.id,
          c.name,
          c.checkType,
          c.frequencySeconds,
          JSON.stringify(c.locations),
          JSON.stringify(c.definition ?? null),
          JSON.stringify(c.environmentVariables),
          c.runtimeId,
          c.capMs,
        );
      }
    });
  }

  private checkFromRow(row: Row): StoredCheck {
    return {
      id: str(row, 'id'),
      name: str(row, 'name'),
      checkType: str(row, 'check_type') as StoredCheck['checkType'],
      frequencySeconds: num(row, 'frequency_seconds'),
      locations: json<string[]>(row, 'locations'),
      definition: json<unknown>(row, 'definition'),
      environmentVariables: json<StoredCheck['environmentVariables']>(row, 'environment_variables'),
      runtimeId: strOrNull(row, 'runtime_id'),
      capMs: num(row, 'cap_ms'),
    };
  }

  async activeChecks(): Promise<StoredCheck[]> {
    return this.all('SELECT * FROM checks WHERE removed_at IS NULL ORDER BY id').map((row) => this.checkFromRow(row));
  }

  async check(id: string): Promise<(StoredCheck & { removedAt: string | null }) | undefined> {
    const row = this.get('SELECT * FROM checks WHERE id = ?', id);
    return row && { ...this.checkFromRow(row), removedAt: strOrNull(row, 'removed_at') };
  }

  async deleteCheck(id: string, now: Date): Promise<boolean> {
    return this.tx(() => {
      const row = this.get('SELECT removed_at FROM checks WHERE id = ?', id);
      if (!row || row.removed_at !== null) return false;
      this.removeCheck(id, now);
      return true;
    });
  }

  /** Inside a transaction: marks the check removed, cancels its open jobs and its unfinished sessions. */
  private removeCheck(id: string, now: Date): void {
    this.run('UPDATE checks SET removed_at = ? WHERE id = ?', now.toISOString(), id);
    this.run(
      "UPDATE jobs SET status = 'CANCELLED', agent_id = NULL, lease_expires_at = NULL WHERE check_id = ? AND status IN ('QUEUED', 'LEASED')",
      id,
    );
    const open = this.all(
      `SELECT id, started_at FROM sessions WHERE check_id = ? AND status NOT IN (${[...FINISHED_STATUSES].map((s) => `'${s}'`).join(', ')})`,
      id,
    );
    for (const session of open) this.finishSession(str(session, 'id'), str(session, 'started_at'), 'CANCELLED', now);
  }

  private finishSession(id: string, startedAt: string, status: SessionStatus, now: Date): void {
    const stoppedMs = now.getTime();
    const duration = Math.max(0, stoppedMs - msOf(startedAt, stoppedMs));
    this.run(
      'UPDATE sessions SET status = ?, stopped_at = ?, stopped_ms = ?, duration_ms = ? WHERE id = ?',
      status,
      now.toISOString(),
      stoppedMs,
      duration,
      id,
    );
  }

  // Sessions and jobs

  /** One server owns its SQLite file: every slot is its own, so `slotMs` is not needed to make it once. */
  async createSession(session: SessionRecord, jobs: readonly NewJob[], check: StoredCheck, _slotMs?: number): Promise<boolean> {
    this.tx(() => {
      this.run(
        `INSERT INTO sessions (id, check_id, check_type, name, status, run_locations, trigger_source, started_at, stopped_at, stopped_ms, duration_ms)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        session.id,
        session.checkId,
        session.checkType,
        session.name,
        session.status,
        JSON.stringify(session.runLocations),
        session.triggerSource,
        session.startedAt,
        session.stoppedAt,
        session.stoppedAt === null ? null : msOf(session.stoppedAt, Date.now()),
        session.durationMs,
      );
      const created = msOf(session.startedAt, Date.now());
      const payload = JSON.stringify({ check: check.definition ?? null, environmentVariables: check.environmentVariables });
      for (const job of jobs) {
        const runId = this.nextCounter('check_run_id');
        this.run(
          `INSERT INTO jobs (id, session_id, check_id, location, check_type, runtime_id, status, agent_id, lease_expires_at, deadline_at, created_at, check_run_id, final_result_id, payload, attempts_per_run)
           VALUES (?, ?, ?, ?, ?, ?, 'QUEUED', NULL, NULL, ?, ?, ?, NULL, ?, ?)`,
          job.id,
          session.id,
          session.checkId,
          job.location,
          check.checkType,
          check.runtimeId,
          msOf(job.deadlineAt, created),
          created,
          runId,
          payload,
          job.attemptsPerRun ?? null,
        );
      }
    });
    return true;
  }

  private nextCounter(name: string): number {
    const row = this.get('INSERT INTO counters (name, value) VALUES (?, 1) ON CONFLICT (name) DO UPDATE SET value = value + 1 RETURNING value', name);
    if (!row) throw new Error(`counter ${name} returned no row`);
    return num(row, 'value');
  }

  async session(id: string): Promise<(SessionRecord & { results: CheckResultEntry[] }) | undefined> {
    const row = this.get('SELECT * FROM sessions WHERE id = ?', id);
    if (!row) return undefined;
    // Bounded (MAX_ATTEMPTS_PER_JOB): before that cap, one job's 10,000 ATTEMPTs made a 203 MB answer.
    const results = this.all(
      `SELECT body FROM (SELECT body, seq, result_type, ROW_NUMBER() OVER (PARTITION BY job_id, result_type ORDER BY seq) AS n FROM results WHERE session_id = ?)
       WHERE result_type = 'FINAL' OR n <= ? ORDER BY seq`,
      id,
      MAX_ATTEMPTS_PER_JOB,
    ).map((r) => json<CheckResultEntry>(r, 'body'));
    return {
      id: str(row, 'id'),
      checkId: str(row, 'check_id'),
      checkType: str(row, 'check_type') as SessionRecord['checkType'],
      name: str(row, 'name'),
      status: str(row, 'status') as SessionStatus,
      runLocations: json<string[]>(row, 'run_locations'),
      triggerSource: 'SCHEDULER',
      startedAt: str(row, 'started_at'),
      stoppedAt: strOrNull(row, 'stopped_at'),
      durationMs: numOrNull(row, 'duration_ms'),
      results,
    };
  }

  async hasOpenJob(checkId: string, location: string): Promise<boolean> {
    return this.get("SELECT 1 AS x FROM jobs WHERE check_id = ? AND location = ? AND status IN ('QUEUED', 'LEASED') LIMIT 1", checkId, location) !== undefined;
  }

  async claimJobs(query: ClaimQuery): Promise<Job[]> {
    const max = Math.floor(query.max);
    if (max < 1 || query.checkTypes.length === 0) return [];
    const expires = query.now.getTime() + query.leaseMs;
    const leaseExpiresAt = new Date(expires).toISOString();
    return this.tx(() => {
      const rows = this.all(
        claimSql(query.checkTypes.length, query.runtimes.length),
        query.location,
        ...query.checkTypes,
        ...query.runtimes,
        max,
      );
      for (const row of rows) {
        this.run(
          // leases counts the runs the job may have had: each brings room for its ATTEMPTs (attempt-bound.ts).
          "UPDATE jobs SET status = 'LEASED', agent_id = ?, lease_expires_at = ?, leased_at = ?, claim_id = ?, leases = leases + 1 WHERE id = ?",
          query.agentId,
          expires,
          query.now.getTime(),
          query.claimId ?? null,
          str(row, 'id'),
        );
      }
      return rows.map((row) => claimedJob(row, leaseExpiresAt));
    });
  }

  async claimedAgain(query: ClaimAgainQuery): Promise<Job[]> {
    const expires = query.now.getTime() + query.leaseMs;
    const leaseExpiresAt = new Date(expires).toISOString();
    return this.tx(() => {
      // INDEXED BY: without statistics the planner would take jobs_claim and read every lease of the location.
      const rows = this.all(
        `SELECT id, session_id, location, check_run_id, payload FROM jobs INDEXED BY jobs_by_claim
         WHERE agent_id = ? AND claim_id = ? AND status = 'LEASED' AND location = ? ORDER BY created_at, check_run_id`,
        query.agentId,
        query.claimId,
        query.location,
      );
      for (const row of rows) this.run('UPDATE jobs SET lease_expires_at = ? WHERE id = ?', expires, str(row, 'id'));
      return rows.map((row) => claimedJob(row, leaseExpiresAt));
    });
  }

  async releaseJobs(agentId: string, jobIds: readonly string[]): Promise<void> {
    if (jobIds.length === 0) return;
    this.tx(() => {
      for (const id of jobIds) {
        this.run("UPDATE jobs SET status = 'QUEUED', agent_id = NULL, lease_expires_at = NULL WHERE id = ? AND status = 'LEASED' AND agent_id = ?", id, agentId);
      }
    });
  }

  async extendLeases(agentId: string, location: string, jobIds: readonly string[], leaseMs: number, now: Date): Promise<LeaseUpdate> {
    const update: LeaseUpdate = { extended: [], lost: [] };
    if (jobIds.length === 0) return update;
    const expires = now.getTime() + leaseMs;
    const leaseExpiresAt = new Date(expires).toISOString();
    this.tx(() => {
      for (const id of jobIds) {
        const changed = this.run(
          "UPDATE jobs SET lease_expires_at = ? WHERE id = ? AND location = ? AND status = 'LEASED' AND agent_id = ?",
          expires,
          id,
          location,
          agentId,
        );
        if (changed > 0) update.extended.push({ jobId: id, leaseExpiresAt });
        else update.lost.push(id);
      }
    });
    return update;
  }

  async requeueExpiredLeases(now: Date): Promise<number> {
    return this.tx(() =>
      this.run(
        "UPDATE jobs SET status = 'QUEUED', agent_id = NULL, lease_expires_at = NULL WHERE status = 'LEASED' AND lease_expires_at <= ?",
        now.getTime(),
      ),
    );
  }

  async timeOutJobs(now: Date): Promise<string[]> {
    return this.tx(() => {
      const rows = this.all(
        "UPDATE jobs SET status = 'TIMED_OUT', agent_id = NULL, lease_expires_at = NULL WHERE status IN ('QUEUED', 'LEASED') AND deadline_at <= ? RETURNING session_id",
        now.getTime(),
      );
      const sessions = [...new Set(rows.map((row) => str(row, 'session_id')))];
      for (const id of sessions) {
        const session = this.get('SELECT status, started_at FROM sessions WHERE id = ?', id);
        if (!session || FINISHED_STATUSES.has(str(session, 'status') as SessionStatus)) continue;
        if (!this.hasOpenJobs(id)) this.finishSession(id, str(session, 'started_at'), 'TIMED_OUT', now);
      }
      return sessions;
    });
  }

  // Results

  async acceptResults(agentId: string, location: string, results: readonly ResultEnvelope[], now: Date): Promise<ResultsOutcome> {
    const outcome: ResultsOutcome = { accepted: [], rejected: [], stored: [] };
    if (results.length === 0) return outcome;
    const receivedAt = now.getTime();
    this.tx(() => {
      const touched = new Set<string>();
      for (const envelope of results) {
        const { resultId, jobId, result } = envelope;
        const reject = (statusCode: number, message: string) => outcome.rejected.push({ resultId, statusCode, message });
        if (this.get('SELECT 1 AS x FROM results WHERE id = ?', resultId)) {
          outcome.accepted.push(resultId);
          continue;
        }
        const job = this.get('SELECT * FROM jobs WHERE id = ?', jobId);
        if (!job || str(job, 'location') !== location) {
          reject(404, `job ${jobId} does not exist`);
          continue;
        }
        const status = str(job, 'status');
        if (status === 'TIMED_OUT' || status === 'CANCELLED') {
          reject(409, `job ${jobId} is ${status === 'TIMED_OUT' ? 'timed out' : 'cancelled'}`);
          continue;
        }
        // First result wins, whichever agent sends it (docs/protocol.md): a crashed agent's spool comes back
        // from its successor, under a new x-agent-id, while the job is still leased to the crashed one. But a
        // run that began before the job was handed to another agent is a late result of an earlier holder:
        // the job is that agent's now, and its result is the one that counts.
        const leasedAt = job.leased_at;
        if (
          status === 'LEASED' &&
          str(job, 'agent_id') !== agentId &&
          typeof leasedAt === 'number' &&
          msOf(result.startedAt, receivedAt) < leasedAt - CLOCK_SKEW_ALLOWANCE_MS
        ) {
          reject(409, `job ${jobId} was handed to another agent after this result's run began`);
          continue;
        }
        if (result.resultType !== 'FINAL' && result.resultType !== 'ATTEMPT') {
          reject(400, 'resultType must be FINAL or ATTEMPT');
          continue;
        }
        const isFinal = result.resultType === 'FINAL';
        // An ATTEMPT for a DONE job is still taken: a spool may deliver it after the FINAL.
        if (isFinal && job.final_result_id !== null) {
          reject(409, `job ${jobId} has another FINAL result`);
          continue;
        }
        // Counted through the session's index: a session holds a few jobs' results.
        if (!isFinal) {
          const attempts = num(this.get("SELECT COUNT(*) AS n FROM results WHERE session_id = ? AND job_id = ? AND result_type = 'ATTEMPT'", str(job, 'session_id'), jobId) ?? { n: 0 }, 'n');
          const bound = attemptBound(numOrNull(job, 'attempts_per_run'), num(job, 'leases'));
          if (attempts >= bound.max) {
            reject(409, tooManyAttempts(jobId, attempts, bound));
            continue;
          }
        }
        const sessionId = str(job, 'session_id');
        // A failing result joins its check's error groups in this same transaction (error-groups-store.ts).
        const errorGroupIds = this.errorGroups.recordFailures(str(job, 'check_id'), result, now);
        this.run(
          `INSERT INTO results (id, check_id, job_id, session_id, location, result_type, has_failures, started_at, check_type, received_at, body)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
          resultId,
          str(job, 'check_id'),
          jobId,
          sessionId,
          location,
          isFinal ? 'FINAL' : 'ATTEMPT',
          downFlag(result),
          msOf(result.startedAt, receivedAt),
          str(job, 'check_type'),
          receivedAt,
          // The check, type and location are the job's: an agent's result body cannot file itself under another.
          // U+0000 and lone surrogates are kept as U+FFFD, as PostgreSQL can read them (src/core/nul.ts), the same on both stores.
          storableJson(JSON.stringify({ ...result, checkId: str(job, 'check_id'), checkType: str(job, 'check_type'), runLocation: location, errorGroupIds })),
        );
        if (isFinal) {
          this.run("UPDATE jobs SET status = 'DONE', final_result_id = ?, lease_expires_at = NULL WHERE id = ?", resultId, jobId);
        }
        touched.add(sessionId);
        outcome.accepted.push(resultId);
        outcome.stored?.push({ resultId, checkId: str(job, 'check_id') });
      }
      for (const id of touched) this.recomputeSession(id, now);
    });
    return outcome;
  }

  private hasOpenJobs(sessionId: string): boolean {
    return this.get("SELECT 1 AS x FROM jobs WHERE session_id = ? AND status IN ('QUEUED', 'LEASED') LIMIT 1", sessionId) !== undefined;
  }

  private recomputeSession(id: string, now: Date): void {
    const session = this.get('SELECT status, run_locations, started_at FROM sessions WHERE id = ?', id);
    if (!session) return;
    const current = str(session, 'status') as SessionStatus;
    if (FINISHED_STATUSES.has(current)) return;
    const finals = new Map<string, FinalOutcome>();
    for (const row of this.all("SELECT location, body FROM results WHERE session_id = ? AND result_type = 'FINAL' ORDER BY seq", id)) {
      finals.set(str(row, 'location'), finalOutcome(json<CheckResultEntry>(row, 'body')));
    }
    // Called after a result of this session was stored, so there is one.
    const anyResult = true;
    let next = sessionStatus(json<string[]>(session, 'run_locations'), finals, anyResult);
    // A location whose job timed out never sends its FINAL: once the others are done, the session timed out.
    if (!FINISHED_STATUSES.has(next) && !this.hasOpenJobs(id) && this.get("SELECT 1 AS x FROM jobs WHERE session_id = ? AND status = 'TIMED_OUT' LIMIT 1", id)) {
      next = 'TIMED_OUT';
    }
    if (next === current) return;
    if (FINISHED_STATUSES.has(next)) this.finishSession(id, str(session, 'started_at'), next, now);
    else this.run('UPDATE sessions SET status = ? WHERE id = ?', next, id);
  }

  async listResults(query: ResultQuery): Promise<ResultPage> {
    return listResultPage(this.resultReader, query);
  }

  async result(checkId: string, resultId: string): Promise<CheckResultEntry | undefined> {
    const row = this.get('SELECT body FROM results WHERE id = ? AND check_id = ?', resultId, checkId);
    return row && json<CheckResultEntry>(row, 'body');
  }

  // Artifacts and events

  async createArtifact(artifact: Omit<ArtifactRecord, 'storedAt'>): Promise<void> {
    this.tx(() => {
      // An agent names only its own location's jobs; any other is unknown to it.
      if (!this.get('SELECT 1 FROM jobs WHERE id = ? AND location = ?', artifact.jobId, artifact.location)) throw new NotFoundError('job', artifact.jobId);
      this.run(
        'INSERT INTO artifacts (id, job_id, location, name, content_type, size, stored_at, created_at, created_ms) VALUES (?, ?, ?, ?, ?, ?, NULL, ?, ?)',
        artifact.id,
        artifact.jobId,
        artifact.location,
        artifact.name,
        artifact.contentType,
        artifact.size,
        artifact.created_at,
        msOf(artifact.created_at, Date.now()),
      );
    });
  }

  async artifact(id: string): Promise<ArtifactRecord | undefined> {
    const row = this.get('SELECT * FROM artifacts WHERE id = ?', id);
    return (
      row && {
        id: str(row, 'id'),
        jobId: str(row, 'job_id'),
        location: str(row, 'location'),
        name: str(row, 'name'),
        contentType: str(row, 'content_type'),
        size: num(row, 'size'),
        storedAt: strOrNull(row, 'stored_at'),
        created_at: str(row, 'created_at'),
      }
    );
  }

  async markArtifactStored(id: string, now: Date): Promise<void> {
    this.tx(() => {
      if (this.run('UPDATE artifacts SET stored_at = ? WHERE id = ?', now.toISOString(), id) === 0) throw new NotFoundError('artifact', id);
    });
  }

  async addEvents(location: string, agentId: string, events: readonly AgentEvent[], now: Date): Promise<void> {
    if (events.length === 0) return;
    this.tx(() => {
      for (const event of events) {
        this.run(
          'INSERT INTO events (location, agent_id, received_at, level, name, body) VALUES (?, ?, ?, ?, ?, ?)',
          location,
          agentId,
          now.getTime(),
          String(event.level),
          String(event.name),
          JSON.stringify(event),
        );
      }
      // Through events_by_location: the newest MAX_EVENTS_PER_LOCATION are skipped, the rest go.
      this.run(
        'DELETE FROM events WHERE location = ? AND seq <= (SELECT seq FROM events WHERE location = ? ORDER BY seq DESC LIMIT 1 OFFSET ?)',
        location,
        location,
        MAX_EVENTS_PER_LOCATION,
      );
    });
  }

  // Upkeep

  /**
   * One short transaction that removes at most `batch` of each: results
   * received before `before`; sessions finished before it with no result left
   * (their jobs cascade, their jobs' artifacts go too); artifacts older than
   * it whose job is gone; events. A caller repeats it while `results` equals
   * `batch`; sessions without results that one round leaves go in the next.
   */
  async pruneBefore(before: Date, batch: number): Promise<{ results: number; artifactIds: string[] }> {
    const limit = Math.max(1, Math.floor(batch));
    const cutoff = before.getTime();
    return this.tx(() => {
      const results = this.run('DELETE FROM results WHERE seq IN (SELECT seq FROM results WHERE received_at < ? ORDER BY received_at LIMIT ?)', cutoff, limit);
      // A finished session goes once none of its results is left; its jobs go with it (ON DELETE CASCADE).
      const sessions = this.all(
        `SELECT s.id FROM sessions s WHERE s.stopped_ms IS NOT NULL AND s.stopped_ms < ?
           AND NOT EXISTS (SELECT 1 FROM results r WHERE r.session_id = s.id) LIMIT ?`,
        cutoff,
        limit,
      );
      const artifactIds: string[] = [];
      for (const session of sessions) {
        const id = str(session, 'id');
        for (const row of this.all('DELETE FROM artifacts WHERE job_id IN (SELECT id FROM jobs WHERE session_id = ?) RETURNING id', id)) {
          artifactIds.push(str(row, 'id'));
        }
        this.run('DELETE FROM sessions WHERE id = ?', id);
      }
      // Other artifacts live as long as their job's session; one whose job is gone (or never existed) goes by its age.
      const orphans = this.all(
        'DELETE FROM artifacts WHERE id IN (SELECT a.id FROM artifacts a WHERE a.created_ms < ? AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.id = a.job_id) LIMIT ?) RETURNING id',
        cutoff,
        limit,
      );
      for (const row of orphans) {
        artifactIds.push(str(row, 'id'));
      }
      this.run('DELETE FROM events WHERE seq IN (SELECT seq FROM events WHERE received_at < ? ORDER BY received_at LIMIT ?)', cutoff, limit);
      return { results, artifactIds };
    });
  }

  async integrityCheck(): Promise<string[]> {
    return this.all('PRAGMA integrity_check').map((row) => String(Object.values(row)[0]));
  }

  async close(): Promise<void> {
    if (!this.db.isOpen) return;
    this.statements.clear();
    try {
      // Keeps the planner's statistics fresh for the next start; cheap, and only on a clean close.
      this.db.exec('PRAGMA optimize');
    } catch {
      // It writes: on a full or read-only disk it fails, and the statistics wait for a later close. The database closes all the same.
    }
    this.db.close();
  }
}
