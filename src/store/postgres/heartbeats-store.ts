// HeartbeatStore on PostgreSQL (the model is ../heartbeats.ts; the SQLite
// side is ../sqlite/heartbeats-store.ts). A ping may come to any replica; it
// locks its check's row, so two pings of one check take turns. expire() is
// the leader's (src/server/leadership.ts), and it locks the rows it moves
// on, so even two callers never store one missed deadline twice.

import { randomUUID } from 'node:crypto';
import type { CheckResultEntry } from '../../core/result-entry.js';
import {
  HEARTBEAT_LOCATION,
  type HeartbeatEvent,
  type HeartbeatState,
  type HeartbeatStore,
  type HeartbeatSync,
  type HeartbeatSyncMoment,
  type PingOutcome,
} from '../heartbeats.js';
import { num, type PgDatabase, type Sql, } from './db.js';
import { RESULTS_LOCK_KEY, SYNC_LOCK_KEY } from './locks.js';
import { nextCounter } from './pg-store.js';
import { heartbeatEventOf, heartbeatStateOf } from '../feature-rows.js';

export class PgHeartbeatStore implements HeartbeatStore {
  constructor(private readonly db: PgDatabase) {}

  async sync(checks: readonly HeartbeatSync[], now: Date, when: HeartbeatSyncMoment = 'start'): Promise<void> {
    const at = now.getTime();
    await this.db.tx(async (sql) => {
      await sql.run('SELECT pg_advisory_xact_lock($1)', [SYNC_LOCK_KEY]);
      await sql.run('DELETE FROM heartbeat_checks WHERE NOT (check_id = ANY($1::text[]))', [checks.map((c) => c.checkId)]);
      // Two checks may swap tokens between files: clear the kept ones' digests first, so the UNIQUE index never sees a pair.
      await sql.run("UPDATE heartbeat_checks SET token_hash = '-' || check_id");
      for (const c of checks) {
        await sql.run(
          `INSERT INTO heartbeat_checks (check_id, token_hash, period_ms, grace_ms, created_ms, since_ms, last_ping_ms, status)
           VALUES ($1, $2, $3, $4, $5, $5, NULL, 'UNKNOWN')
           ON CONFLICT (check_id) DO UPDATE SET token_hash = excluded.token_hash, period_ms = excluded.period_ms,
             grace_ms = excluded.grace_ms,
             since_ms = CASE WHEN $6::text = 'start' OR heartbeat_checks.period_ms <> excluded.period_ms OR heartbeat_checks.grace_ms <> excluded.grace_ms
               THEN excluded.since_ms ELSE heartbeat_checks.since_ms END`,
          [c.checkId, c.tokenHash, c.periodMs, c.graceMs, at, when],
        );
      }
    });
  }

  async ping(tokenHash: string, ping: { source: string; userAgent: string }, now: Date): Promise<PingOutcome | undefined> {
    const at = now.getTime();
    return this.db.tx(async (sql) => {
      await sql.run('SELECT pg_advisory_xact_lock($1)', [RESULTS_LOCK_KEY]);
      const row = await sql.row(
        'SELECT h.* FROM heartbeat_checks h JOIN checks c ON c.id = h.check_id WHERE h.token_hash = $1 AND c.removed_at IS NULL FOR UPDATE OF h',
        [tokenHash],
      );
      if (!row) return undefined;
      const state = heartbeatStateOf(row);
      const event: HeartbeatEvent = { id: randomUUID(), state: 'RECEIVED', timestamp: now.toISOString(), source: ping.source, userAgent: ping.userAgent };
      await insertEvent(sql, state.checkId, event, at);
      await sql.run("UPDATE heartbeat_checks SET since_ms = $1, last_ping_ms = $1, status = 'PASSING' WHERE check_id = $2", [at, state.checkId]);
      const result = await insertResult(sql, state.checkId, now, {
        hasFailures: false,
        heartbeat: { eventId: event.id, lastPingAt: event.timestamp, expectedBy: new Date(at + state.periodMs + state.graceMs).toISOString() },
      });
      return { checkId: state.checkId, event, result, previous: state.status };
    });
  }

  async expire(now: Date): Promise<Array<{ checkId: string; result: CheckResultEntry }>> {
    const at = now.getTime();
    return this.db.tx(async (sql) => {
      await sql.run('SELECT pg_advisory_xact_lock($1)', [RESULTS_LOCK_KEY]);
      const due = (
        await sql.rows(
          `SELECT h.* FROM heartbeat_checks h JOIN checks c ON c.id = h.check_id
           WHERE h.since_ms + h.period_ms + h.grace_ms <= $1 AND c.removed_at IS NULL ORDER BY h.check_id FOR UPDATE OF h`,
          [at],
        )
      ).map(heartbeatStateOf);
      const out: Array<{ checkId: string; result: CheckResultEntry }> = [];
      for (const state of due) {
        const expectedBy = state.sinceMs + state.periodMs + state.graceMs;
        const lastPingAt = state.lastPingMs === null ? null : new Date(state.lastPingMs).toISOString();
        await sql.run("UPDATE heartbeat_checks SET since_ms = $1, status = 'FAILING' WHERE check_id = $2", [at - state.graceMs, state.checkId]);
        const result = await insertResult(sql, state.checkId, now, {
          hasFailures: true,
          heartbeat: {
            eventId: null,
            lastPingAt,
            expectedBy: new Date(expectedBy).toISOString(),
            error: `No ping received within the period (${state.periodMs / 1000} s) and grace (${state.graceMs / 1000} s): expected by ${new Date(expectedBy).toISOString()}, last ping ${lastPingAt ?? 'never'}`,
          },
        });
        out.push({ checkId: state.checkId, result });
      }
      return out;
    });
  }

  async addEvent(checkId: string, event: HeartbeatEvent): Promise<void> {
    const at = Date.parse(event.timestamp);
    if (!Number.isFinite(at)) throw new Error(`event ${event.id} has no valid timestamp`);
    await insertEvent(this.db, checkId, event, at);
  }

  async state(checkId: string): Promise<HeartbeatState | undefined> {
    const row = await this.db.row('SELECT * FROM heartbeat_checks WHERE check_id = $1', [checkId]);
    return row && heartbeatStateOf(row);
  }

  async event(checkId: string, id: string): Promise<HeartbeatEvent | undefined> {
    const row = await this.db.row('SELECT * FROM heartbeat_events WHERE check_id = $1 AND id = $2', [checkId, id]);
    return row && heartbeatEventOf(row);
  }

  async pingTimes(checkId: string, fromMs: number, toMs: number): Promise<number[]> {
    const rows = await this.db.rows("SELECT at_ms FROM heartbeat_events WHERE check_id = $1 AND state = 'RECEIVED' AND at_ms >= $2 AND at_ms < $3 ORDER BY at_ms", [
      checkId,
      fromMs,
      toMs,
    ]);
    return rows.map((row) => num(row, 'at_ms'));
  }

  async firstEventMs(checkId: string): Promise<number | undefined> {
    const row = await this.db.row('SELECT MIN(at_ms) AS first FROM heartbeat_events WHERE check_id = $1', [checkId]);
    return row && row.first !== null ? num(row, 'first') : undefined;
  }

  async prune(before: Date, batch: number): Promise<number> {
    return this.db.run('DELETE FROM heartbeat_events WHERE seq IN (SELECT seq FROM heartbeat_events WHERE at_ms < $1 ORDER BY at_ms LIMIT $2)', [before.getTime(), batch]);
  }
}

async function insertEvent(sql: Sql, checkId: string, event: HeartbeatEvent, at: number): Promise<void> {
  await sql.run('INSERT INTO heartbeat_events (id, check_id, state, at_ms, source, user_agent) VALUES ($1, $2, $3, $4, $5, $6)', [
    event.id,
    checkId,
    event.state,
    at,
    event.source,
    event.userAgent,
  ]);
}

/** On the caller's transaction: a finished session with one FINAL result in HEARTBEAT_LOCATION, as a run of the check would leave. */
async function insertResult(sql: Sql, checkId: string, now: Date, outcome: { hasFailures: boolean; heartbeat: Record<string, unknown> }): Promise<CheckResultEntry> {
  const at = now.getTime();
  const iso = now.toISOString();
  const name = (await sql.row('SELECT name FROM checks WHERE id = $1', [checkId]))?.name;
  const checkRunId = await nextCounter(sql, 'check_run_id');
  const sessionId = randomUUID();
  const result: CheckResultEntry & { heartbeatCheckResult: Record<string, unknown> } = {
    resultType: 'FINAL',
    id: randomUUID(),
    name: typeof name === 'string' ? name : checkId,
    checkId,
    checkType: 'HEARTBEAT',
    hasFailures: outcome.hasFailures,
    hasErrors: false,
    isDegraded: false,
    overMaxResponseTime: false,
    runLocation: HEARTBEAT_LOCATION,
    startedAt: iso,
    stoppedAt: iso,
    created_at: iso,
    responseTime: 0,
    checkRunId,
    attempts: 1,
    sequenceId: sessionId,
    heartbeatCheckResult: outcome.heartbeat,
  };
  await sql.run(
    `INSERT INTO sessions (id, check_id, check_type, name, status, run_locations, trigger_source, started_at, stopped_at, stopped_ms, duration_ms)
     VALUES ($1, $2, 'HEARTBEAT', $3, $4, $5, 'SCHEDULER', $6, $6, $7, 0)`,
    [sessionId, checkId, result.name, outcome.hasFailures ? 'FAILED' : 'PASSED', JSON.stringify([HEARTBEAT_LOCATION]), iso, at],
  );
  await sql.run(
    `INSERT INTO results (id, check_id, job_id, session_id, location, result_type, has_failures, started_at, check_type, received_at, body)
     VALUES ($1, $2, $3, $3, $4, 'FINAL', $5, $6, 'HEARTBEAT', $6, $7)`,
    [result.id, checkId, sessionId, HEARTBEAT_LOCATION, outcome.hasFailures ? 1 : 0, at, JSON.stringify(result)],
  );
  return result;
}
