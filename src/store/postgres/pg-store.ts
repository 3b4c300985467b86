// The Store on PostgreSQL, for several server replicas on one database
// (docs/postgres.md). Each method is one transaction that commits before its
// promise resolves, as on SQLite (../sqlite/sqlite-store.ts), and the rules
// of ../store.ts are the same; what differs is that other replicas write at
// the same time:
//   - claims take jobs with FOR UPDATE SKIP LOCKED: two replicas never hand
//     the same job out, and neither waits for the other's rows;
//   - a result is stored once by its id (the UNIQUE id, ON CONFLICT DO
//     NOTHING), and a job's FINAL is decided under the job's row lock;
//   - result inserts commit in seq order (locks.ts RESULTS_LOCK_KEY);
//   - a session is made once per (check, location, slot time)
//     (schedule_slots), whichever replica's scheduler asks.

import { storableJson } from '../../core/nul.js';
import type { AgentEvent, Job, ResultEnvelope } from '../../core/protocol.js';
import type { CheckResultEntry } from '../../core/result-entry.js';
import { downFlag, FINISHED_STATUSES, type FinalOutcome, finalOutcome, sessionStatus } from '../session-status.js';
import { listResultPage } from '../result-list.js';
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
import { claimedJob } from '../claimed-job.js';
import { json, num, numOrNull, PgDatabase, type PgOptions, type Row, type Sql, str, strOrNull } from './db.js';
import { PgErrorGroupStore } from './error-groups-store.js';
import { JOBS_CHANNEL } from './job-notifications.js';
import { RESULTS_LOCK_KEY, SYNC_LOCK_KEY } from './locks.js';
import { migratePg } from './migrations.js';
import { keyRecordOf } from '../rows.js';
import { attemptBound, tooManyAttempts } from '../attempt-bound.js';
import { PgResultReader } from './results-reader.js';

/** As on SQLite: a run counts as begun before a lease only by more than this (agent and server clocks differ). */
const CLOCK_SKEW_ALLOWANCE_MS = 10_000;
const FINISHED_SQL = [...FINISHED_STATUSES].map((s) => `'${s}'`).join(', ');

function msOf(iso: string, fallback: number): number {
  const ms = Date.parse(iso);
  return Number.isFinite(ms) ? ms : fallback;
}

/** RETURNING rows come in no particular order: the answer lists jobs oldest first, as they were queued. */
function inClaimOrder(rows: Row[]): Row[] {
  return rows.sort((a, b) => num(a, 'created_at') - num(b, 'created_at') || num(a, 'check_run_id') - num(b, 'check_run_id'));
}

export class PgStore implements Store {
  readonly errorGroups: PgErrorGroupStore;

  /** The results list's reads (results-reader.ts). */
  private readonly resultReader: PgResultReader;

  private constructor(
    readonly db: PgDatabase,
    /** host:port/database as user, never the password: for logs and /health. */
    readonly where: string,
  ) {
    this.errorGroups = new PgErrorGroupStore(db);
    this.resultReader = new PgResultReader(db);
  }

  /** Connects, and brings the schema up to date (once, however many replicas start together). */
  static async open(options: PgOptions, where: string): Promise<PgStore> {
    const db = new PgDatabase(options);
    try {
      await migratePg(db.pool, where);
    } catch (error) {
      await db.close().catch(() => undefined);
      throw new Error(`cannot open the database ${where}: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
    }
    return new PgStore(db, where);
  }

  // Locations and keys

  async syncLocations(locations: readonly LocationRecord[]): Promise<void> {
    await this.db.tx(async (sql) => {
      await sql.run('SELECT pg_advisory_xact_lock($1)', [SYNC_LOCK_KEY]);
      await sql.run('DELETE FROM locations WHERE NOT (id = ANY($1::text[]))', [locations.map((l) => l.id)]);
      // A gone location's keys go with it: added back later, it must not bring back keys revoked by its removal.
      await sql.run('DELETE FROM keys WHERE NOT (location_id = ANY($1::text[]))', [locations.map((l) => l.id)]);
      for (const l of locations) {
        await sql.run('INSERT INTO locations (id, name) VALUES ($1, $2) ON CONFLICT (id) DO UPDATE SET name = excluded.name', [l.id, l.name]);
      }
    });
  }

  async location(id: string): Promise<LocationRecord | undefined> {
    const row = await this.db.row('SELECT id, name FROM locations WHERE id = $1', [id]);
    return row && { id: str(row, 'id'), name: str(row, 'name') };
  }

  async locations(): Promise<LocationRecord[]> {
    return (await this.db.rows('SELECT id, name FROM locations ORDER BY id')).map((row) => ({ id: str(row, 'id'), name: str(row, 'name') }));
  }

  async createKey(key: KeyRecord & { hash: string }): Promise<KeyRecord> {
    await this.db.run('INSERT INTO keys (id, location_id, hash, masked_key, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6)', [
      key.id,
      key.locationId,
      key.hash,
      key.maskedKey,
      key.created_at,
      key.updated_at,
    ]);
    return { id: key.id, locationId: key.locationId, maskedKey: key.maskedKey, created_at: key.created_at, updated_at: key.updated_at };
  }

  async keyByHash(hash: string): Promise<KeyRecord | undefined> {
    const row = await this.db.row(
      'SELECT k.id, k.location_id, k.masked_key, k.created_at, k.updated_at FROM keys k JOIN locations l ON l.id = k.location_id WHERE k.hash = $1',
      [hash],
    );
    return row && keyRecordOf(row);
  }

  async keys(locationId: string): Promise<KeyRecord[]> {
    return (await this.db.rows('SELECT id, location_id, masked_key, created_at, updated_at FROM keys WHERE location_id = $1 ORDER BY created_at, id', [locationId])).map(keyRecordOf);
  }

  async deleteKey(locationId: string, keyId: string): Promise<boolean> {
    return (await this.db.rows('DELETE FROM keys WHERE location_id = $1 AND id = $2 RETURNING id', [locationId, keyId])).length > 0;
  }

  // Checks

  async syncChecks(checks: readonly StoredCheck[], now: Date): Promise<void> {
    await this.db.tx(async (sql) => {
      await sql.run('SELECT pg_advisory_xact_lock($1)', [SYNC_LOCK_KEY]);
      const inFile = new Set(checks.map((c) => c.id));
      for (const row of await sql.rows('SELECT id FROM checks WHERE removed_at IS NULL')) {
        const id = str(row, 'id');
        if (!inFile.has(id)) await this.removeCheck(sql, id, now);
      }
      for (const c of checks) {
        await sql.run(
          `INSERT INTO checks (id, name, check_type, frequency_seconds, locations, definition, environment_variables, runtime_id, cap_ms, removed_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, NULL)
           ON CONFLICT (id) DO UPDATE SET name = excluded.name, check_type = excluded.check_type,
             frequency_seconds = excluded.frequency_seconds, locations = excluded.locations, definition = excluded.definition,
             environment_variables = excluded.environment_variables, runtime_id = excluded.runtime_id, cap_ms = excluded.cap_ms,
             removed_at = NULL`,
          [
            c.id,
            c.name,
            c.checkType,
            c.frequencySeconds,
            JSON.stringify(c.locations),
            JSON.stringify(c.definition ?? null),
            JSON.stringify(c.environmentVariables),
            c.runtimeId,
            c.capMs,
          ],
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
    return (await this.db.rows('SELECT * FROM checks WHERE removed_at IS NULL ORDER BY id')).map((row) => this.checkFromRow(row));
  }

  async check(id: string): Promise<(StoredCheck & { removedAt: string | null }) | undefined> {
    const row = await this.db.row('SELECT * FROM checks WHERE id = $1', [id]);
    return row && { ...this.checkFromRow(row), removedAt: strOrNull(row, 'removed_at') };
  }

  async deleteCheck(id: string, now: Date): Promise<boolean> {
    return this.db.tx(async (sql) => {
      const row = await sql.row('SELECT removed_at FROM checks WHERE id = $1 FOR UPDATE', [id]);
      if (!row || row.removed_at !== null) return false;
      await this.removeCheck(sql, id, now);
      return true;
    });
  }

  private async removeCheck(sql: Sql, id: string, now: Date): Promise<void> {
    await sql.run('UPDATE checks SET removed_at = $1 WHERE id = $2', [now.toISOString(), id]);
    await sql.run("UPDATE jobs SET status = 'CANCELLED', agent_id = NULL, lease_expires_at = NULL WHERE check_id = $1 AND status IN ('QUEUED', 'LEASED')", [id]);
    const open = await sql.rows(`SELECT id, started_at FROM sessions WHERE check_id = $1 AND status NOT IN (${FINISHED_SQL})`, [id]);
    for (const session of open) await this.finishSession(sql, str(session, 'id'), str(session, 'started_at'), 'CANCELLED', now);
  }

  private async finishSession(sql: Sql, id: string, startedAt: string, status: SessionStatus, now: Date): Promise<void> {
    const stoppedMs = now.getTime();
    const duration = Math.max(0, stoppedMs - msOf(startedAt, stoppedMs));
    await sql.run('UPDATE sessions SET status = $1, stopped_at = $2, stopped_ms = $3, duration_ms = $4 WHERE id = $5', [
      status,
      now.toISOString(),
      stoppedMs,
      duration,
      id,
    ]);
  }

  // Sessions and jobs

  async createSession(session: SessionRecord, jobs: readonly NewJob[], check: StoredCheck, slotMs?: number): Promise<boolean> {
    return this.db.tx(async (sql) => {
      let made = jobs;
      if (slotMs !== undefined) {
        // Another replica's scheduler may have made this slot already: its locations are left out (all of them, as a rule).
        const kept = new Set<string>();
        for (const job of jobs) {
          const fresh = await sql.run(
            'INSERT INTO schedule_slots (check_id, location, slot_ms, session_id) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING',
            [session.checkId, job.location, slotMs, session.id],
          );
          if (fresh > 0) kept.add(job.location);
        }
        made = jobs.filter((job) => kept.has(job.location));
        if (made.length === 0) return false;
      }
      const runLocations = made === jobs ? session.runLocations : session.runLocations.filter((l) => made.some((j) => j.location === l));
      await sql.run(
        `INSERT INTO sessions (id, check_id, check_type, name, status, run_locations, trigger_source, started_at, stopped_at, stopped_ms, duration_ms)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
        [
          session.id,
          session.checkId,
          session.checkType,
          session.name,
          session.status,
          JSON.stringify(runLocations),
          session.triggerSource,
          session.startedAt,
          session.stoppedAt,
          session.stoppedAt === null ? null : msOf(session.stoppedAt, Date.now()),
          session.durationMs,
        ],
      );
      const created = msOf(session.startedAt, Date.now());
      const payload = JSON.stringify({ check: check.definition ?? null, environmentVariables: check.environmentVariables });
      // Claims waiting on every replica look again once this commits (job-notifications.ts).
      for (const location of new Set(made.map((job) => job.location))) await sql.run('SELECT pg_notify($1, $2)', [JOBS_CHANNEL, location]);
      for (const job of made) {
        const runId = await nextCounter(sql, 'check_run_id');
        await sql.run(
          `INSERT INTO jobs (id, session_id, check_id, location, check_type, runtime_id, status, agent_id, lease_expires_at, deadline_at, created_at, check_run_id, final_result_id, payload, attempts_per_run)
           VALUES ($1, $2, $3, $4, $5, $6, 'QUEUED', NULL, NULL, $7, $8, $9, NULL, $10, $11)`,
          [job.id, session.id, session.checkId, job.location, check.checkType, check.runtimeId, msOf(job.deadlineAt, created), created, runId, payload, job.attemptsPerRun ?? null],
        );
      }
      return true;
    });
  }

  async session(id: string): Promise<(SessionRecord & { results: CheckResultEntry[] }) | undefined> {
    const row = await this.db.row('SELECT * FROM sessions WHERE id = $1', [id]);
    if (!row) return undefined;
    // Bounded as on SQLite (MAX_ATTEMPTS_PER_JOB).
    const rows = await this.db.rows(
      `SELECT body FROM (SELECT body, seq, result_type, ROW_NUMBER() OVER (PARTITION BY job_id, result_type ORDER BY seq) AS n FROM results WHERE session_id = $1) r
       WHERE result_type = 'FINAL' OR n <= $2 ORDER BY seq`,
      [id, MAX_ATTEMPTS_PER_JOB],
    );
    const results = rows.map((r) => json<CheckResultEntry>(r, 'body'));
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
    return (await this.db.row("SELECT 1 AS x FROM jobs WHERE check_id = $1 AND location = $2 AND status IN ('QUEUED', 'LEASED') LIMIT 1", [checkId, location])) !== undefined;
  }

  async claimJobs(query: ClaimQuery): Promise<Job[]> {
    const max = Math.floor(query.max);
    if (max < 1 || query.checkTypes.length === 0) return [];
    const expires = query.now.getTime() + query.leaseMs;
    const leaseExpiresAt = new Date(expires).toISOString();
    // SKIP LOCKED: a job another replica is handing out right now is left to it, not waited for.
    const rows = await this.db.rows(
      `WITH picked AS (
         SELECT id FROM jobs
         WHERE location = $1 AND status = 'QUEUED' AND check_type = ANY($2::text[]) AND (runtime_id IS NULL OR runtime_id = ANY($3::text[]))
         ORDER BY created_at, check_run_id LIMIT $4 FOR UPDATE SKIP LOCKED)
       UPDATE jobs j SET status = 'LEASED', agent_id = $5, lease_expires_at = $6, leased_at = $7, claim_id = $8, leases = j.leases + 1
       FROM picked WHERE j.id = picked.id
       RETURNING j.id, j.session_id, j.location, j.check_run_id, j.payload, j.created_at`,
      [query.location, [...query.checkTypes], [...query.runtimes], max, query.agentId, expires, query.now.getTime(), query.claimId ?? null],
    );
    return inClaimOrder(rows).map((row) => claimedJob(row, leaseExpiresAt));
  }

  async claimedAgain(query: ClaimAgainQuery): Promise<Job[]> {
    const expires = query.now.getTime() + query.leaseMs;
    const leaseExpiresAt = new Date(expires).toISOString();
    const rows = await this.db.rows(
      `UPDATE jobs SET lease_expires_at = $4
       WHERE agent_id = $1 AND claim_id = $2 AND status = 'LEASED' AND location = $3
       RETURNING id, session_id, location, check_run_id, payload, created_at`,
      [query.agentId, query.claimId, query.location, expires],
    );
    return inClaimOrder(rows).map((row) => claimedJob(row, leaseExpiresAt));
  }

  async releaseJobs(agentId: string, jobIds: readonly string[]): Promise<void> {
    if (jobIds.length === 0) return;
    await this.db.run("UPDATE jobs SET status = 'QUEUED', agent_id = NULL, lease_expires_at = NULL WHERE id = ANY($1::text[]) AND status = 'LEASED' AND agent_id = $2", [
      [...jobIds],
      agentId,
    ]);
  }

  async extendLeases(agentId: string, location: string, jobIds: readonly string[], leaseMs: number, now: Date): Promise<LeaseUpdate> {
    const update: LeaseUpdate = { extended: [], lost: [] };
    if (jobIds.length === 0) return update;
    const expires = now.getTime() + leaseMs;
    const leaseExpiresAt = new Date(expires).toISOString();
    const rows = await this.db.rows(
      "UPDATE jobs SET lease_expires_at = $1 WHERE id = ANY($2::text[]) AND location = $3 AND status = 'LEASED' AND agent_id = $4 RETURNING id",
      [expires, [...jobIds], location, agentId],
    );
    const kept = new Set(rows.map((row) => str(row, 'id')));
    for (const id of jobIds) {
      if (kept.has(id)) update.extended.push({ jobId: id, leaseExpiresAt });
      else update.lost.push(id);
    }
    return update;
  }

  async requeueExpiredLeases(now: Date): Promise<number> {
    return this.db.tx(async (sql) => {
      const rows = await sql.rows(
        "UPDATE jobs SET status = 'QUEUED', agent_id = NULL, lease_expires_at = NULL WHERE status = 'LEASED' AND lease_expires_at <= $1 RETURNING location",
        [now.getTime()],
      );
      for (const location of new Set(rows.map((row) => str(row, 'location')))) await sql.run('SELECT pg_notify($1, $2)', [JOBS_CHANNEL, location]);
      return rows.length;
    });
  }

  async timeOutJobs(now: Date): Promise<string[]> {
    return this.db.tx(async (sql) => {
      const rows = await sql.rows(
        "UPDATE jobs SET status = 'TIMED_OUT', agent_id = NULL, lease_expires_at = NULL WHERE status IN ('QUEUED', 'LEASED') AND deadline_at <= $1 RETURNING session_id",
        [now.getTime()],
      );
      const sessions = [...new Set(rows.map((row) => str(row, 'session_id')))].sort();
      for (const id of sessions) {
        const session = await sql.row('SELECT status, started_at FROM sessions WHERE id = $1 FOR UPDATE', [id]);
        if (!session || FINISHED_STATUSES.has(str(session, 'status') as SessionStatus)) continue;
        if (!(await hasOpenJobs(sql, id))) await this.finishSession(sql, id, str(session, 'started_at'), 'TIMED_OUT', now);
      }
      return sessions;
    });
  }

  // Results

  /**
   * As SqliteStore.acceptResults, set-wise: a batch costs a fixed number of
   * statements whatever its size (the existing ids, the jobs locked in id
   * order, one INSERT of every new result, one UPDATE of the jobs they
   * finish, the sessions recomputed together), because every statement is
   * a round trip to the database here, not a call into a library.
   */
  async acceptResults(agentId: string, location: string, results: readonly ResultEnvelope[], now: Date): Promise<ResultsOutcome> {
    if (results.length === 0) return { accepted: [], rejected: [] };
    const receivedAt = now.getTime();
    return this.db.tx(async (sql) => {
      // A retried transaction starts from nothing.
      const outcome: ResultsOutcome = { accepted: [], rejected: [], stored: [] };
      await sql.run('SELECT pg_advisory_xact_lock($1)', [RESULTS_LOCK_KEY]);
      const resultIds = [...new Set(results.map((r) => r.resultId))];
      const stored = new Set((await sql.rows('SELECT id FROM results WHERE id = ANY($1::text[])', [resultIds])).map((row) => str(row, 'id')));
      const jobIds = [...new Set(results.map((r) => r.jobId))].sort();
      // In id order, so two replicas locking overlapping batches never deadlock.
      const jobs = new Map((await sql.rows('SELECT * FROM jobs WHERE id = ANY($1::text[]) ORDER BY id FOR UPDATE', [jobIds])).map((row) => [str(row, 'id'), row]));
      // ATTEMPTs each job has already (attempt-bound.ts), counted on under the jobs' locks as the batch goes.
      const attempts = new Map(
        (
          await sql.rows(
            "SELECT r.job_id, count(*)::int AS n FROM results r JOIN jobs j ON j.id = r.job_id AND j.session_id = r.session_id WHERE j.id = ANY($1::text[]) AND r.result_type = 'ATTEMPT' GROUP BY r.job_id",
            [jobIds],
          )
        ).map((row) => [str(row, 'job_id'), num(row, 'n')]),
      );
      const rows: unknown[][] = [];
      const finals: Array<[string, string]> = [];
      const touched = new Set<string>();
      for (const envelope of results) {
        const { resultId, jobId, result } = envelope;
        const reject = (statusCode: number, message: string) => outcome.rejected.push({ resultId, statusCode, message });
        if (stored.has(resultId)) {
          outcome.accepted.push(resultId);
          continue;
        }
        const job = jobs.get(jobId);
        if (!job || str(job, 'location') !== location) {
          reject(404, `job ${jobId} does not exist`);
          continue;
        }
        const status = str(job, 'status');
        if (status === 'TIMED_OUT' || status === 'CANCELLED') {
          reject(409, `job ${jobId} is ${status === 'TIMED_OUT' ? 'timed out' : 'cancelled'}`);
          continue;
        }
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
        if (isFinal && job.final_result_id !== null) {
          reject(409, `job ${jobId} has another FINAL result`);
          continue;
        }
        if (!isFinal) {
          const kept = attempts.get(jobId) ?? 0;
          const bound = attemptBound(numOrNull(job, 'attempts_per_run'), num(job, 'leases'));
          if (kept >= bound.max) {
            reject(409, tooManyAttempts(jobId, kept, bound));
            continue;
          }
          attempts.set(jobId, kept + 1);
        }
        const sessionId = str(job, 'session_id');
        const errorGroupIds = await this.errorGroups.recordFailures(sql, str(job, 'check_id'), result, now);
        rows.push([
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
        ]);
        // Later envelopes of this batch see what this one did.
        stored.add(resultId);
        if (isFinal) {
          job.final_result_id = resultId;
          job.status = 'DONE';
          finals.push([jobId, resultId]);
        }
        touched.add(sessionId);
        outcome.accepted.push(resultId);
        outcome.stored?.push({ resultId, checkId: str(job, 'check_id') });
      }
      if (rows.length > 0) {
        const columns = ['id', 'check_id', 'job_id', 'session_id', 'location', 'result_type', 'has_failures', 'started_at', 'check_type', 'received_at', 'body'];
        const types = ['text', 'text', 'text', 'text', 'text', 'text', 'smallint', 'bigint', 'text', 'bigint', 'text'];
        // The UNIQUE id is the last word: a row some other transaction stored is skipped, never doubled.
        await sql.run(
          `INSERT INTO results (${columns.join(', ')})
           SELECT ${columns.join(', ')} FROM unnest(${types.map((type, k) => `$${k + 1}::${type}[]`).join(', ')}) WITH ORDINALITY AS r(${columns.join(', ')}, n)
           ORDER BY n
           ON CONFLICT (id) DO NOTHING`,
          columns.map((_, k) => rows.map((row) => row[k])),
        );
      }
      if (finals.length > 0) {
        await sql.run(
          `UPDATE jobs SET status = 'DONE', final_result_id = f.result_id, lease_expires_at = NULL
           FROM unnest($1::text[], $2::text[]) AS f(job_id, result_id) WHERE jobs.id = f.job_id`,
          [finals.map((f) => f[0]), finals.map((f) => f[1])],
        );
      }
      await this.recomputeSessions(sql, [...touched].sort(), now);
      return outcome;
    });
  }

  /** The status of each session from its FINALs and open jobs (session-status.ts), all in a few statements. */
  private async recomputeSessions(sql: Sql, ids: readonly string[], now: Date): Promise<void> {
    if (ids.length === 0) return;
    const sessions = await sql.rows(`SELECT id, status, run_locations, started_at FROM sessions WHERE id = ANY($1::text[]) AND status NOT IN (${FINISHED_SQL}) ORDER BY id FOR UPDATE`, [
      [...ids],
    ]);
    if (sessions.length === 0) return;
    const open = sessions.map((row) => str(row, 'id'));
    const finals = new Map<string, Map<string, FinalOutcome>>();
    // Only the verdict's three flags, read in the database: a FINAL's whole body never crosses the wire for this.
    for (const row of await sql.rows(
      `SELECT session_id, location, (body::json->>'hasErrors')::boolean AS e, (body::json->>'hasFailures')::boolean AS f, (body::json->>'isDegraded')::boolean AS d
       FROM results WHERE session_id = ANY($1::text[]) AND result_type = 'FINAL' ORDER BY seq`,
      [open],
    )) {
      const byLocation = finals.get(str(row, 'session_id')) ?? new Map<string, FinalOutcome>();
      byLocation.set(str(row, 'location'), finalOutcome({ hasErrors: row.e === true, hasFailures: row.f === true, isDegraded: row.d === true }));
      finals.set(str(row, 'session_id'), byLocation);
    }
    const jobStates = new Map<string, { open: boolean; timedOut: boolean }>();
    for (const row of await sql.rows(
      "SELECT session_id, bool_or(status IN ('QUEUED', 'LEASED')) AS open, bool_or(status = 'TIMED_OUT') AS timed_out FROM jobs WHERE session_id = ANY($1::text[]) GROUP BY session_id",
      [open],
    )) {
      jobStates.set(str(row, 'session_id'), { open: row.open === true, timedOut: row.timed_out === true });
    }
    const progress: Array<[string, string]> = [];
    const finished: Array<[string, string, number]> = [];
    const stoppedMs = now.getTime();
    for (const session of sessions) {
      const id = str(session, 'id');
      const current = str(session, 'status') as SessionStatus;
      let next = sessionStatus(json<string[]>(session, 'run_locations'), finals.get(id) ?? new Map(), true);
      const jobsOf = jobStates.get(id);
      // A location whose job timed out never sends its FINAL: once the others are done, the session timed out.
      if (!FINISHED_STATUSES.has(next) && jobsOf && !jobsOf.open && jobsOf.timedOut) next = 'TIMED_OUT';
      if (next === current) continue;
      if (FINISHED_STATUSES.has(next)) finished.push([id, next, Math.max(0, stoppedMs - msOf(str(session, 'started_at'), stoppedMs))]);
      else progress.push([id, next]);
    }
    if (progress.length > 0) {
      await sql.run('UPDATE sessions SET status = p.status FROM unnest($1::text[], $2::text[]) AS p(id, status) WHERE sessions.id = p.id', [
        progress.map((p) => p[0]),
        progress.map((p) => p[1]),
      ]);
    }
    if (finished.length > 0) {
      await sql.run(
        `UPDATE sessions SET status = f.status, stopped_at = $4, stopped_ms = $5, duration_ms = f.duration
         FROM unnest($1::text[], $2::text[], $3::bigint[]) AS f(id, status, duration) WHERE sessions.id = f.id`,
        [finished.map((f) => f[0]), finished.map((f) => f[1]), finished.map((f) => f[2]), now.toISOString(), stoppedMs],
      );
    }
  }

  async listResults(query: ResultQuery): Promise<ResultPage> {
    return listResultPage(this.resultReader, query);
  }

  async result(checkId: string, resultId: string): Promise<CheckResultEntry | undefined> {
    const row = await this.db.row('SELECT body FROM results WHERE id = $1 AND check_id = $2', [resultId, checkId]);
    return row && json<CheckResultEntry>(row, 'body');
  }

  // Artifacts and events

  async createArtifact(artifact: Omit<ArtifactRecord, 'storedAt'>): Promise<void> {
    await this.db.tx(async (sql) => {
      if (!(await sql.row('SELECT 1 AS x FROM jobs WHERE id = $1 AND location = $2', [artifact.jobId, artifact.location]))) throw new NotFoundError('job', artifact.jobId);
      await sql.run(
        'INSERT INTO artifacts (id, job_id, location, name, content_type, size, stored_at, created_at, created_ms) VALUES ($1, $2, $3, $4, $5, $6, NULL, $7, $8)',
        [artifact.id, artifact.jobId, artifact.location, artifact.name, artifact.contentType, artifact.size, artifact.created_at, msOf(artifact.created_at, Date.now())],
      );
    });
  }

  async artifact(id: string): Promise<ArtifactRecord | undefined> {
    const row = await this.db.row('SELECT * FROM artifacts WHERE id = $1', [id]);
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
    if ((await this.db.run('UPDATE artifacts SET stored_at = $1 WHERE id = $2', [now.toISOString(), id])) === 0) throw new NotFoundError('artifact', id);
  }

  async addEvents(location: string, agentId: string, events: readonly AgentEvent[], now: Date): Promise<void> {
    if (events.length === 0) return;
    await this.db.tx(async (sql) => {
      // One statement for the batch (up to MAX_EVENTS_PER_BATCH): a round trip each made a flood cost 100 of them a request.
      await sql.run(
        `INSERT INTO events (location, agent_id, received_at, level, name, body)
         SELECT $1, $2, $3, e.level, e.name, e.body FROM unnest($4::text[], $5::text[], $6::text[]) WITH ORDINALITY AS e(level, name, body, n) ORDER BY n`,
        [location, agentId, now.getTime(), events.map((e) => String(e.level)), events.map((e) => String(e.name)), events.map((e) => JSON.stringify(e))],
      );
      // Through events_by_location: the newest MAX_EVENTS_PER_LOCATION are skipped, the rest go.
      await sql.run('DELETE FROM events WHERE location = $1 AND seq <= (SELECT seq FROM events WHERE location = $1 ORDER BY seq DESC LIMIT 1 OFFSET $2)', [
        location,
        MAX_EVENTS_PER_LOCATION,
      ]);
    });
  }

  // Upkeep

  /** As SqliteStore.pruneBefore; the slots older than `before` go too. */
  async pruneBefore(before: Date, batch: number): Promise<{ results: number; artifactIds: string[] }> {
    const limit = Math.max(1, Math.floor(batch));
    const cutoff = before.getTime();
    return this.db.tx(async (sql) => {
      const results = await sql.run('DELETE FROM results WHERE seq IN (SELECT seq FROM results WHERE received_at < $1 ORDER BY received_at LIMIT $2)', [cutoff, limit]);
      const sessions = await sql.rows(
        `SELECT s.id FROM sessions s WHERE s.stopped_ms IS NOT NULL AND s.stopped_ms < $1
           AND NOT EXISTS (SELECT 1 FROM results r WHERE r.session_id = s.id) LIMIT $2`,
        [cutoff, limit],
      );
      const artifactIds: string[] = [];
      for (const session of sessions) {
        const id = str(session, 'id');
        for (const row of await sql.rows('DELETE FROM artifacts WHERE job_id IN (SELECT id FROM jobs WHERE session_id = $1) RETURNING id', [id])) {
          artifactIds.push(str(row, 'id'));
        }
        await sql.run('DELETE FROM sessions WHERE id = $1', [id]);
      }
      const orphans = await sql.rows(
        'DELETE FROM artifacts WHERE id IN (SELECT a.id FROM artifacts a WHERE a.created_ms < $1 AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.id = a.job_id) LIMIT $2) RETURNING id',
        [cutoff, limit],
      );
      for (const row of orphans) artifactIds.push(str(row, 'id'));
      await sql.run('DELETE FROM events WHERE seq IN (SELECT seq FROM events WHERE received_at < $1 ORDER BY received_at LIMIT $2)', [cutoff, limit]);
      await sql.run(
        'DELETE FROM schedule_slots WHERE (check_id, location, slot_ms) IN (SELECT check_id, location, slot_ms FROM schedule_slots WHERE slot_ms < $1 LIMIT $2)',
        [cutoff, limit],
      );
      return { results, artifactIds };
    });
  }

  /** PostgreSQL checks its own pages; this says whether the database answers and has this build's schema. */
  async integrityCheck(): Promise<string[]> {
    const row = await this.db.row('SELECT MAX(version)::int AS version FROM schema_version');
    return row && typeof row.version === 'number' ? ['ok'] : ['schema_version is empty'];
  }

  async close(): Promise<void> {
    await this.db.close();
  }
}

async function hasOpenJobs(sql: Sql, sessionId: string): Promise<boolean> {
  return (await sql.row("SELECT 1 AS x FROM jobs WHERE session_id = $1 AND status IN ('QUEUED', 'LEASED') LIMIT 1", [sessionId])) !== undefined;
}

/** On the caller's transaction: the counter's next value. */
export async function nextCounter(sql: Sql, name: string): Promise<number> {
  const row = await sql.row('INSERT INTO counters (name, value) VALUES ($1, 1) ON CONFLICT (name) DO UPDATE SET value = counters.value + 1 RETURNING value', [name]);
  if (!row) throw new Error(`counter ${name} returned no row`);
  return num(row, 'value');
}
