
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
import type { SqliteAccess } from './sqlite-store.js';
import { num, numOrNull, str, strOrNull } from '../rows.js';
import { channelOf, channelRecord, notificationOf, readEntry, statusOf } from '../feature-rows.js';


const iso = (ms: number | null): string | null => (ms === null ? null : new Date(ms).toISOString());

/**
 * A channel's notifications go out in the order they were queued: only the
 * oldest pending one of a channel is due, so a recovery never overtakes the
 * failure it ends while that one waits for a retry.
 */
const HEAD = "NOT EXISTS (SELECT 1 FROM notifications e WHERE e.channel_id = n.channel_id AND e.state = 'PENDING' AND e.id < n.id)";

export class SqliteAlertStore implements AlertStore {
  constructor(private readonly db: SqliteAccess) {}

  async syncFileChannels(channels: ReadonlyArray<NewAlertChannel & { id: number }>, now: Date): Promise<void> {
    const at = now.toISOString();
    this.db.tx(() => {
      const keep = new Set(channels.map((c) => c.id));
      for (const row of this.db.all("SELECT id FROM alert_channels WHERE source = 'file'")) {
        const id = num(row, 'id');
        if (!keep.has(id)) this.removeChannel(id, now);
      }
      for (const channel of channels) {
        const existing = this.db.get('SELECT record, type, source FROM alert_channels WHERE id = ?', channel.id);
        const record = channelRecord(channel);
        if (!existing) {
          this.db.run("INSERT INTO alert_channels (id, source, type, record, created_at, updated_at) VALUES (?, 'file', ?, ?, ?, NULL)", channel.id, channel.type, record, at);
        } else if (str(existing, 'record') !== record || str(existing, 'type') !== channel.type || str(existing, 'source') !== 'file') {
          // The API channel's queued notifications were for its receiver and its subscriptions, not the file channel's.
          if (str(existing, 'source') === 'api') this.cancelPending(channel.id, `the channel was replaced by the checks file's channel ${channel.id} at ${at}`);
          this.db.run("UPDATE alert_channels SET source = 'file', type = ?, record = ?, updated_at = ? WHERE id = ?", channel.type, record, at, channel.id);
        }
      }
    });
  }

  async createChannel(channel: NewAlertChannel, now: Date): Promise<AlertChannel> {
    return this.db.tx(() => {
      const at = now.toISOString();
      this.db.run("INSERT INTO alert_channels (source, type, record, created_at, updated_at) VALUES ('api', ?, ?, ?, NULL)", channel.type, channelRecord(channel), at);
      const row = this.db.get('SELECT * FROM alert_channels WHERE rowid = last_insert_rowid()');
      if (!row) throw new Error('the channel just inserted is missing');
      return channelOf(row);
    });
  }

  private removeChannel(id: number, now: Date): boolean {
    const removed = this.db.run('DELETE FROM alert_channels WHERE id = ?', id) > 0;
    this.cancelPending(id, `the channel was deleted at ${now.toISOString()}`);
    return removed;
  }

  private cancelPending(channelId: number, reason: string): void {
    this.db.run("UPDATE notifications SET state = 'CANCELLED', last_error = ? WHERE channel_id = ? AND state = 'PENDING'", reason, channelId);
  }

  async deleteChannel(id: number, now: Date): Promise<boolean> {
    return this.db.tx(() => this.removeChannel(id, now));
  }

  async channel(id: number): Promise<AlertChannel | undefined> {
    const row = this.db.get('SELECT * FROM alert_channels WHERE id = ?', id);
    return row ? channelOf(row) : undefined;
  }

  async channels(): Promise<AlertChannel[]> {
    return this.db.all('SELECT * FROM alert_channels ORDER BY id').map(channelOf);
  }

  async cursor(name: string): Promise<number> {
    return this.db.tx(() => {
      const row = this.db.get('SELECT seq FROM alert_cursor WHERE name = ?', name);
      if (row) return num(row, 'seq');
      const newest = this.db.get('SELECT COALESCE(MAX(seq), 0) AS seq FROM results');
      const seq = newest ? num(newest, 'seq') : 0;
      this.db.run('INSERT INTO alert_cursor (name, seq) VALUES (?, ?)', name, seq);
      return seq;
    });
  }

  async resultsAfter(after: number, limit: number): Promise<TailedResult[]> {
    return this.db
      .all('SELECT seq, id, check_id, location, result_type, received_at, body FROM results WHERE seq > ? ORDER BY seq LIMIT ?', after, limit)
      .map((row) => ({
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
        ? this.db.all('SELECT * FROM check_status ORDER BY check_id, location')
        : this.db.all('SELECT * FROM check_status WHERE check_id = ? ORDER BY location', checkId);
    return rows.map(statusOf);
  }

  async commitEvaluation(name: string, seq: number, statuses: readonly LocationStatus[], notifications: readonly NewNotification[], now: Date): Promise<number> {
    const at = now.getTime();
    return this.db.tx(() => {
      for (const s of statuses) {
        this.db.run(
          `INSERT INTO check_status (check_id, location, status, since, candidate, streak, updated_at, announced) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
           ON CONFLICT (check_id, location) DO UPDATE SET status = excluded.status, since = excluded.since, candidate = excluded.candidate,
             streak = excluded.streak, updated_at = excluded.updated_at, announced = excluded.announced`,
          s.checkId,
          s.location,
          s.status,
          s.since,
          s.candidate,
          s.streak,
          s.updatedAt,
          s.announced,
        );
      }
      let queued = 0;
      for (const n of notifications) {
        if (n.sslNotice) {
          const fresh = this.db.run(
            'INSERT OR IGNORE INTO ssl_notices (channel_id, check_id, certificate, day) VALUES (?, ?, ?, ?)',
            n.channelId,
            n.checkId,
            n.sslNotice.certificate,
            n.sslNotice.day,
          );
          if (fresh === 0) continue;
        }
        this.db.run(
          "INSERT INTO notifications (channel_id, kind, check_id, location, result_id, body, state, attempts, next_at, created_at) VALUES (?, ?, ?, ?, ?, ?, 'PENDING', 0, ?, ?)",
          n.channelId,
          n.kind,
          n.checkId,
          n.location,
          n.resultId,
          JSON.stringify(n.body),
          at,
          at,
        );
        queued++;
      }
      this.db.run('INSERT INTO alert_cursor (name, seq) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET seq = excluded.seq', name, seq);
      return queued;
    });
  }

  async dueNotifications(now: Date, limit: number, busy: readonly number[] = []): Promise<Notification[]> {
    // The busy channels as a JSON array: one statement (and one cached plan) whatever their number.
    return this.db
      .all(
        `SELECT * FROM notifications n WHERE state = 'PENDING' AND next_at <= ? AND ${HEAD} AND channel_id NOT IN (SELECT value FROM json_each(?)) ORDER BY next_at, id LIMIT ?`,
        now.getTime(),
        JSON.stringify(busy),
        limit,
      )
      .map(notificationOf);
  }

  async nextDue(): Promise<Date | undefined> {
    const row = this.db.get(`SELECT MIN(next_at) AS next_at FROM notifications n WHERE state = 'PENDING' AND ${HEAD}`);
    const at = row ? numOrNull(row, 'next_at') : null;
    return at === null ? undefined : new Date(at);
  }

  async recordAttempt(id: number, attempt: DeliveryAttempt | null, outcome: AttemptOutcome): Promise<void> {
    const at = attempt ? Date.parse(attempt.at) : Date.now();
    this.db.tx(() => {
      if (attempt) {
        this.db.run('INSERT INTO notification_attempts (notification_id, at, status, error, duration_ms) VALUES (?, ?, ?, ?, ?)', id, at, attempt.status, attempt.error, attempt.durationMs);
      }
      if (outcome.kind === 'delivered') {
        this.db.run("UPDATE notifications SET state = 'DELIVERED', attempts = attempts + 1, delivered_at = ?, last_error = NULL WHERE id = ?", at, id);
      } else if (outcome.kind === 'retry') {
        this.db.run('UPDATE notifications SET attempts = attempts + 1, next_at = ?, last_error = ? WHERE id = ?', outcome.nextAt.getTime(), attempt?.error ?? null, id);
      } else {
        this.db.run("UPDATE notifications SET state = 'CANCELLED', last_error = ? WHERE id = ?", outcome.reason, id);
      }
    });
  }

  async notifications(channelId: number, limit: number): Promise<NotificationWithAttempts[]> {
    return this.db.all('SELECT * FROM notifications WHERE channel_id = ? ORDER BY id DESC LIMIT ?', channelId, limit).map((row) => {
      const n = notificationOf(row);
      const attemptLog = this.db.all('SELECT at, status, error, duration_ms FROM notification_attempts WHERE notification_id = ? ORDER BY at, rowid', n.id).map((a) => ({
        at: iso(num(a, 'at')) as string,
        status: numOrNull(a, 'status'),
        error: strOrNull(a, 'error'),
        durationMs: num(a, 'duration_ms'),
      }));
      return { ...n, attemptLog };
    });
  }

  async prune(before: Date, batch: number): Promise<number> {
    return this.db.tx(() => {
      const cutoff = before.getTime();
      const deleted = this.db.run(
        "DELETE FROM notifications WHERE id IN (SELECT id FROM notifications WHERE state != 'PENDING' AND created_at < ? ORDER BY id LIMIT ?)",
        cutoff,
        batch,
      );
      this.db.run('DELETE FROM ssl_notices WHERE day < ?', before.toISOString().slice(0, 10));
      return deleted;
    });
  }
}
