
import type {
  AlertChannel,
  AlertStore,
  AttemptOutcome,
  DeliveryAttempt,
  LocationStatus,
  NewAlertChannel,
  NewNotification,
  Notification,
  NotificationWithAttempts,
  TailedResult,
} from '../alerts.js';
import { num, numOrNull, type PgDatabase, type Sql, str, strOrNull } from './db.js';
import { SYNC_LOCK_KEY } from './locks.js';
import { channelOf, channelRecord, notificationOf, readEntry, statusOf } from '../feature-rows.js';

/** How long a claimed notification is a deliverer's: longer than a request's timeout (alert-delivery.ts) and the recording after it. */
export const CLAIM_MS = 60_000;

const iso = (ms: number | null): string | null => (ms === null ? null : new Date(ms).toISOString());

/** Only the oldest pending notification of a channel is due: a channel's order is kept. */
const HEAD = "NOT EXISTS (SELECT 1 FROM notifications e WHERE e.channel_id = n.channel_id AND e.state = 'PENDING' AND e.id < n.id)";

export class PgAlertStore implements AlertStore {
  constructor(private readonly db: PgDatabase) {}

  async syncFileChannels(channels: ReadonlyArray<NewAlertChannel & { id: number }>, now: Date): Promise<void> {
    const at = now.toISOString();
    await this.db.tx(async (sql) => {
      await sql.run('SELECT pg_advisory_xact_lock($1)', [SYNC_LOCK_KEY]);
      const keep = new Set(channels.map((c) => c.id));
      for (const row of await sql.rows("SELECT id FROM alert_channels WHERE source = 'file'")) {
        const id = num(row, 'id');
        if (!keep.has(id)) await this.removeChannel(sql, id, now);
      }
      for (const channel of channels) {
        // The API channel's queued notifications were for its receiver and its subscriptions, not the file channel's.
        await sql.run(
          `UPDATE notifications SET state = 'CANCELLED', last_error = $1
           WHERE channel_id = $2 AND state = 'PENDING' AND EXISTS (SELECT 1 FROM alert_channels WHERE id = $2 AND source = 'api')`,
          [`the channel was replaced by the checks file's channel ${channel.id} at ${at}`, channel.id],
        );
        await sql.run(
          `INSERT INTO alert_channels (id, source, type, record, created_at, updated_at) VALUES ($1, 'file', $2, $3, $4, NULL)
           ON CONFLICT (id) DO UPDATE SET source = 'file', type = excluded.type, record = excluded.record, updated_at = $4
           WHERE alert_channels.record <> excluded.record OR alert_channels.type <> excluded.type OR alert_channels.source <> 'file'`,
          [channel.id, channel.type, channelRecord(channel), at],
        );
      }
      // An API channel takes an id past every file channel's.
      await sql.run(
        "SELECT setval('alert_channels_id_seq', m) FROM (SELECT MAX(id) AS m FROM alert_channels) x WHERE m > (SELECT last_value FROM alert_channels_id_seq)",
      );
    });
  }

  async createChannel(channel: NewAlertChannel, now: Date): Promise<AlertChannel> {
    const row = await this.db.row(
      `INSERT INTO alert_channels (id, source, type, record, created_at, updated_at)
       VALUES (GREATEST(nextval('alert_channels_id_seq'), (SELECT COALESCE(MAX(id), 0) + 1 FROM alert_channels)), 'api', $1, $2, $3, NULL) RETURNING *`,
      [channel.type, channelRecord(channel), now.toISOString()],
    );
    if (!row) throw new Error('the channel just inserted is missing');
    return channelOf(row);
  }

  private async removeChannel(sql: Sql, id: number, now: Date): Promise<boolean> {
    const removed = (await sql.run('DELETE FROM alert_channels WHERE id = $1', [id])) > 0;
    await sql.run("UPDATE notifications SET state = 'CANCELLED', last_error = $1 WHERE channel_id = $2 AND state = 'PENDING'", [
      `the channel was deleted at ${now.toISOString()}`,
      id,
    ]);
    return removed;
  }

  async deleteChannel(id: number, now: Date): Promise<boolean> {
    return this.db.tx((sql) => this.removeChannel(sql, id, now));
  }

  async channel(id: number): Promise<AlertChannel | undefined> {
    const row = await this.db.row('SELECT * FROM alert_channels WHERE id = $1', [id]);
    return row ? channelOf(row) : undefined;
  }

  async channels(): Promise<AlertChannel[]> {
    return (await this.db.rows('SELECT * FROM alert_channels ORDER BY id')).map(channelOf);
  }

  async cursor(name: string): Promise<number> {
    return this.db.tx(async (sql) => {
      await sql.run('INSERT INTO alert_cursor (name, seq) SELECT $1, COALESCE(MAX(seq), 0) FROM results ON CONFLICT (name) DO NOTHING', [name]);
      const row = await sql.row('SELECT seq FROM alert_cursor WHERE name = $1', [name]);
      return row ? num(row, 'seq') : 0;
    });
  }

  async resultsAfter(after: number, limit: number): Promise<TailedResult[]> {
    const rows = await this.db.rows('SELECT seq, id, check_id, location, result_type, received_at, body FROM results WHERE seq > $1 ORDER BY seq LIMIT $2', [after, limit]);
    return rows.map((row) => ({
      seq: num(row, 'seq'),
      id: str(row, 'id'),
      checkId: str(row, 'check_id'),
      location: str(row, 'location'),
      resultType: str(row, 'result_type'),
      receivedAt: num(row, 'received_at'),
      entry: readEntry(str(row, 'body')),
    }));
  }

  async statuses(checkId?: string): Promise<LocationStatus[]> {
    const rows =
      checkId === undefined
        ? await this.db.rows('SELECT * FROM check_status ORDER BY check_id, location')
        : await this.db.rows('SELECT * FROM check_status WHERE check_id = $1 ORDER BY location', [checkId]);
    return rows.map(statusOf);
  }

  async commitEvaluation(name: string, seq: number, statuses: readonly LocationStatus[], notifications: readonly NewNotification[], now: Date): Promise<number> {
    const at = now.getTime();
    return this.db.tx(async (sql) => {
      for (const s of statuses) {
        await sql.run(
          `INSERT INTO check_status (check_id, location, status, since, candidate, streak, updated_at, announced) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
           ON CONFLICT (check_id, location) DO UPDATE SET status = excluded.status, since = excluded.since, candidate = excluded.candidate,
             streak = excluded.streak, updated_at = excluded.updated_at, announced = excluded.announced`,
          [s.checkId, s.location, s.status, s.since, s.candidate, s.streak, s.updatedAt, s.announced],
        );
      }
      let queued = 0;
      for (const n of notifications) {
        if (n.sslNotice) {
          const fresh = await sql.run('INSERT INTO ssl_notices (channel_id, check_id, certificate, day) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING', [
            n.channelId,
            n.checkId,
            n.sslNotice.certificate,
            n.sslNotice.day,
          ]);
          if (fresh === 0) continue;
        }
        await sql.run(
          "INSERT INTO notifications (channel_id, kind, check_id, location, result_id, body, state, attempts, next_at, created_at) VALUES ($1, $2, $3, $4, $5, $6, 'PENDING', 0, $7, $7)",
          [n.channelId, n.kind, n.checkId, n.location, n.resultId, JSON.stringify(n.body), at],
        );
        queued++;
      }
      await sql.run('INSERT INTO alert_cursor (name, seq) VALUES ($1, $2) ON CONFLICT (name) DO UPDATE SET seq = excluded.seq', [name, seq]);
      return queued;
    });
  }

  /** Due notifications, claimed for CLAIM_MS: another replica's deliverer skips them meanwhile. */
  async dueNotifications(now: Date, limit: number, busy: readonly number[] = []): Promise<Notification[]> {
    return this.db.tx(async (sql) => {
      const rows = await sql.rows(
        `SELECT * FROM notifications n WHERE state = 'PENDING' AND next_at <= $1 AND ${HEAD} AND NOT (channel_id = ANY($3::bigint[]))
         ORDER BY next_at, id LIMIT $2 FOR UPDATE SKIP LOCKED`,
        [now.getTime(), limit, busy],
      );
      if (rows.length === 0) return [];
      await sql.run('UPDATE notifications SET next_at = $1 WHERE id = ANY($2::bigint[])', [now.getTime() + CLAIM_MS, rows.map((row) => num(row, 'id'))]);
      return rows.map((row) => notificationOf(row));
    });
  }

  async nextDue(): Promise<Date | undefined> {
    const row = await this.db.row(`SELECT MIN(next_at) AS next_at FROM notifications n WHERE state = 'PENDING' AND ${HEAD}`);
    const at = row ? numOrNull(row, 'next_at') : null;
    return at === null ? undefined : new Date(at);
  }

  async recordAttempt(id: number, attempt: DeliveryAttempt | null, outcome: AttemptOutcome): Promise<void> {
    const at = attempt ? Date.parse(attempt.at) : Date.now();
    await this.db.tx(async (sql) => {
      if (attempt) {
        await sql.run('INSERT INTO notification_attempts (notification_id, at, status, error, duration_ms) VALUES ($1, $2, $3, $4, $5)', [
          id,
          at,
          attempt.status,
          attempt.error,
          attempt.durationMs,
        ]);
      }
      if (outcome.kind === 'delivered') {
        await sql.run("UPDATE notifications SET state = 'DELIVERED', attempts = attempts + 1, delivered_at = $1, last_error = NULL WHERE id = $2", [at, id]);
      } else if (outcome.kind === 'retry') {
        await sql.run('UPDATE notifications SET attempts = attempts + 1, next_at = $1, last_error = $2 WHERE id = $3', [outcome.nextAt.getTime(), attempt?.error ?? null, id]);
      } else {
        await sql.run("UPDATE notifications SET state = 'CANCELLED', last_error = $1 WHERE id = $2", [outcome.reason, id]);
      }
    });
  }

  async notifications(channelId: number, limit: number): Promise<NotificationWithAttempts[]> {
    const rows = await this.db.rows('SELECT * FROM notifications WHERE channel_id = $1 ORDER BY id DESC LIMIT $2', [channelId, limit]);
    const out: NotificationWithAttempts[] = [];
    for (const row of rows) {
      const n = notificationOf(row);
      const attempts = await this.db.rows('SELECT at, status, error, duration_ms FROM notification_attempts WHERE notification_id = $1 ORDER BY at, id', [n.id]);
      out.push({
        ...n,
        attemptLog: attempts.map((a) => ({ at: iso(num(a, 'at')) as string, status: numOrNull(a, 'status'), error: strOrNull(a, 'error'), durationMs: num(a, 'duration_ms') })),
      });
    }
    return out;
  }

  async prune(before: Date, batch: number): Promise<number> {
    return this.db.tx(async (sql) => {
      const deleted = await sql.run(
        "DELETE FROM notifications WHERE id IN (SELECT id FROM notifications WHERE state != 'PENDING' AND created_at < $1 ORDER BY id LIMIT $2)",
        [before.getTime(), batch],
      );
      await sql.run('DELETE FROM ssl_notices WHERE day < $1', [before.toISOString().slice(0, 10)]);
      return deleted;
    });
  }
}
