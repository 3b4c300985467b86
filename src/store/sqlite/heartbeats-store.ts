// HeartbeatStore on the server's SQLite database (migrations.ts, version 5).
// A ping or a missed deadline stores its FINAL result in the same results
// table agents' results go to, with a finished session of its own, in the
// transaction that changes the check's status: nothing reads a status that
// its result does not show.

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
import { num, str as text } from '../rows.js';
import type { SqliteAccess } from './sqlite-store.js';
import { heartbeatEventOf, heartbeatStateOf } from '../feature-rows.js';


export class SqliteHeartbeatStore implements HeartbeatStore {
  constructor(private readonly db: SqliteAccess) {}

  async sync(checks: readonly HeartbeatSync[], now: Date, when: HeartbeatSyncMoment = 'start'): Promise<void> {
    const at = now.getTime();
    this.db.tx(() => {
      const keep = new Set(checks.map((c) => c.checkId));
      for (const row of this.db.all('SELECT check_id FROM heartbeat_checks')) {
        if (!keep.has(text(row, 'check_id'))) this.db.run('DELETE FROM heartbeat_checks WHERE check_id = ?', text(row, 'check_id'));
      }
      // Two checks may swap tokens between files: clear the kept ones' digests first, so the UNIQUE index never sees a pair.
      this.db.run("UPDATE heartbeat_checks SET token_hash = '-' || check_id");
      for (const c of checks) {
        this.db.run(
          `INSERT INTO heartbeat_checks (check_id, token_hash, period_ms, grace_ms, created_ms, since_ms, last_ping_ms, status)
           VALUES (?, ?, ?, ?, ?, ?, NULL, 'UNKNOWN')
           ON CONFLICT (check_id) DO UPDATE SET token_hash = excluded.token_hash, period_ms = excluded.period_ms,
             grace_ms = excluded.grace_ms,
             since_ms = CASE WHEN ? = 'start' OR heartbeat_checks.period_ms <> excluded.period_ms OR heartbeat_checks.grace_ms <> excluded.grace_ms
               THEN excluded.since_ms ELSE heartbeat_checks.since_ms END`,
          c.checkId,
          c.tokenHash,
          c.periodMs,
          c.graceMs,
          at,
          at,
          when,
        );
      }
    });
  }

  async ping(tokenHash: string, ping: { source: string; userAgent: string }, now: Date): Promise<PingOutcome | undefined> {
    const at = now.getTime();
    return this.db.tx(() => {
      // A check deleted through the API takes no pings until the checks file brings it back.
      const row = this.db.get('SELECT h.* FROM heartbeat_checks h JOIN checks c ON c.id = h.check_id WHERE h.token_hash = ? AND c.removed_at IS NULL', tokenHash);
      if (!row) return undefined;
      const state = heartbeatStateOf(row);
      const event: HeartbeatEvent = { id: randomUUID(), state: 'RECEIVED', timestamp: now.toISOString(), source: ping.source, userAgent: ping.userAgent };
      this.insertEvent(state.checkId, event, at);
      this.db.run("UPDATE heartbeat_checks SET since_ms = ?, last_ping_ms = ?, status = 'PASSING' WHERE check_id = ?", at, at, state.checkId);
      const result = this.insertResult(state.checkId, now, {
        hasFailures: false,
        heartbeat: { eventId: event.id, lastPingAt: event.timestamp, expectedBy: new Date(at + state.periodMs + state.graceMs).toISOString() },
      });
      return { checkId: state.checkId, event, result, previous: state.status };
    });
  }

  async expire(now: Date): Promise<Array<{ checkId: string; result: CheckResultEntry }>> {
    const at = now.getTime();
    return this.db.tx(() => {
      const due = this.db
        .all(
          `SELECT h.* FROM heartbeat_checks h JOIN checks c ON c.id = h.check_id
           WHERE h.since_ms + h.period_ms + h.grace_ms <= ? AND c.removed_at IS NULL ORDER BY h.check_id`,
          at,
        )
        .map(heartbeatStateOf);
      return due.map((state) => {
        const expectedBy = state.sinceMs + state.periodMs + state.graceMs;
        const lastPingAt = state.lastPingMs === null ? null : new Date(state.lastPingMs).toISOString();
        // The next deadline is one period from now, however late this round came.
        this.db.run("UPDATE heartbeat_checks SET since_ms = ?, status = 'FAILING' WHERE check_id = ?", at - state.graceMs, state.checkId);
        const result = this.insertResult(state.checkId, now, {
          hasFailures: true,
          heartbeat: {
            eventId: null,
            lastPingAt,
            expectedBy: new Date(expectedBy).toISOString(),
            error: `No ping received within the period (${state.periodMs / 1000} s) and grace (${state.graceMs / 1000} s): expected by ${new Date(expectedBy).toISOString()}, last ping ${lastPingAt ?? 'never'}`,
          },
        });
        return { checkId: state.checkId, result };
      });
    });
  }

  async addEvent(checkId: string, event: HeartbeatEvent): Promise<void> {
    const at = Date.parse(event.timestamp);
    if (!Number.isFinite(at)) throw new Error(`event ${event.id} has no valid timestamp`);
    this.db.tx(() => this.insertEvent(checkId, event, at));
  }

  async state(checkId: string): Promise<HeartbeatState | undefined> {
    const row = this.db.get('SELECT * FROM heartbeat_checks WHERE check_id = ?', checkId);
    return row && heartbeatStateOf(row);
  }

  async event(checkId: string, id: string): Promise<HeartbeatEvent | undefined> {
    const row = this.db.get('SELECT * FROM heartbeat_events WHERE check_id = ? AND id = ?', checkId, id);
    return row && heartbeatEventOf(row);
  }

  async pingTimes(checkId: string, fromMs: number, toMs: number): Promise<number[]> {
    return this.db
      .all("SELECT at_ms FROM heartbeat_events WHERE check_id = ? AND state = 'RECEIVED' AND at_ms >= ? AND at_ms < ? ORDER BY at_ms", checkId, fromMs, toMs)
      .map((row) => num(row, 'at_ms'));
  }

  async firstEventMs(checkId: string): Promise<number | undefined> {
    const row = this.db.get('SELECT MIN(at_ms) AS first FROM heartbeat_events WHERE check_id = ?', checkId);
    return row && row.first !== null ? num(row, 'first') : undefined;
  }

  async prune(before: Date, batch: number): Promise<number> {
    return this.db.tx(() =>
      this.db.run('DELETE FROM heartbeat_events WHERE seq IN (SELECT seq FROM heartbeat_events WHERE at_ms < ? ORDER BY at_ms LIMIT ?)', before.getTime(), batch),
    );
  }

  private insertEvent(checkId: string, event: HeartbeatEvent, at: number): void {
    this.db.run(
      'INSERT INTO heartbeat_events (id, check_id, state, at_ms, source, user_agent) VALUES (?, ?, ?, ?, ?, ?)',
      event.id,
      checkId,
      event.state,
      at,
      event.source,
      event.userAgent,
    );
  }

  /** Inside a transaction: a finished session with one FINAL result in HEARTBEAT_LOCATION, as a run of the check would leave. */
  private insertResult(checkId: string, now: Date, outcome: { hasFailures: boolean; heartbeat: Record<string, unknown> }): CheckResultEntry {
    const at = now.getTime();
    const iso = now.toISOString();
    const name = this.db.get('SELECT name FROM checks WHERE id = ?', checkId)?.name;
    const counter = this.db.get(
      "INSERT INTO counters (name, value) VALUES ('check_run_id', 1) ON CONFLICT (name) DO UPDATE SET value = value + 1 RETURNING value",
    );
    if (!counter) throw new Error('counter check_run_id returned no row');
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
      checkRunId: num(counter, 'value'),
      attempts: 1,
      sequenceId: sessionId,
      heartbeatCheckResult: outcome.heartbeat,
    };
    this.db.run(
      `INSERT INTO sessions (id, check_id, check_type, name, status, run_locations, trigger_source, started_at, stopped_at, stopped_ms, duration_ms)
       VALUES (?, ?, 'HEARTBEAT', ?, ?, ?, 'SCHEDULER', ?, ?, ?, 0)`,
      sessionId,
      checkId,
      result.name,
      outcome.hasFailures ? 'FAILED' : 'PASSED',
      JSON.stringify([HEARTBEAT_LOCATION]),
      iso,
      iso,
      at,
    );
    this.db.run(
      `INSERT INTO results (id, check_id, job_id, session_id, location, result_type, has_failures, started_at, check_type, received_at, body)
       VALUES (?, ?, ?, ?, ?, 'FINAL', ?, ?, 'HEARTBEAT', ?, ?)`,
      result.id,
      checkId,
      // No job: a heartbeat result is the server's own; the session stands in for it.
      sessionId,
      sessionId,
      HEARTBEAT_LOCATION,
      outcome.hasFailures ? 1 : 0,
      at,
      at,
      JSON.stringify(result),
    );
    return result;
  }
}
