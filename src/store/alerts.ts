// The alerts' part of the store (docs/server.md, "Alerts"): alert channels,
// each check's status per location, the evaluator's cursor over the results
// table, and the notification outbox with its delivery attempts. The SQLite
// implementation is sqlite/alerts-store.ts, on the same database as store.ts.

import type { CheckResultEntry } from '../core/result-entry.js';

export const CHECK_STATUSES = ['PASSING', 'DEGRADED', 'FAILING'] as const;
export type CheckStatus = (typeof CHECK_STATUSES)[number];

/** An alert channel as the store keeps it (the service's record plus where it came from). */
export interface AlertChannel {
  id: number;
  /** 'file': from the checks file (replaced at each start); 'api': made with POST /v1/alert-channels. */
  source: 'file' | 'api';
  type: string;
  config: Record<string, unknown>;
  /** Check ids; with autoSubscribe, every check is subscribed regardless. */
  subscriptions: string[];
  autoSubscribe: boolean;
  sendRecovery: boolean;
  sendFailure: boolean;
  sendDegraded: boolean;
  sslExpiry: boolean;
  sslExpiryThreshold: number;
  created_at: string;
  updated_at: string | null;
}

export type NewAlertChannel = Omit<AlertChannel, 'id' | 'source' | 'created_at' | 'updated_at'>;

/** A check's status in one location, with the status that has to hold longer before it counts. */
export interface LocationStatus {
  checkId: string;
  location: string;
  status: CheckStatus;
  /** ms: when `status` became the confirmed status. */
  since: number;
  /** A different status seen `streak` FINAL results in a row, not yet confirmed. */
  candidate: CheckStatus | null;
  streak: number;
  updatedAt: number;
  /**
   * The status channels were last told of. It trails `status` while a
   * maintenance window holds the telling back; the check's next result
   * after the window tells the difference (alert-evaluator.ts).
   */
  announced: CheckStatus;
}

/** One row of the results table, as the evaluator reads it. */
export interface TailedResult {
  seq: number;
  id: string;
  checkId: string;
  location: string;
  resultType: string;
  receivedAt: number;
  /** null when the stored body cannot be read: the evaluator passes over it. */
  entry: CheckResultEntry | null;
}

export type NotificationKind = 'FAILURE' | 'DEGRADED' | 'RECOVERY' | 'SSL_EXPIRY';

export interface NewNotification {
  channelId: number;
  kind: NotificationKind;
  checkId: string;
  location: string | null;
  resultId: string | null;
  /** The payload, already scrubbed. */
  body: unknown;
  /** A certificate notice: queued only when this (channel, check, certificate, day) has none yet. */
  sslNotice?: { certificate: string; day: string };
}

export type NotificationState = 'PENDING' | 'DELIVERED' | 'CANCELLED';

export interface DeliveryAttempt {
  at: string;
  /** The HTTP status; null when no answer came (refused, timed out). */
  status: number | null;
  error: string | null;
  durationMs: number;
}

export interface Notification {
  id: number;
  channelId: number;
  kind: NotificationKind;
  checkId: string;
  location: string | null;
  resultId: string | null;
  body: unknown;
  state: NotificationState;
  attempts: number;
  nextAttemptAt: string | null;
  createdAt: string;
  deliveredAt: string | null;
  lastError: string | null;
}

export interface NotificationWithAttempts extends Notification {
  attemptLog: DeliveryAttempt[];
}

export type AttemptOutcome = { kind: 'delivered' } | { kind: 'retry'; nextAt: Date } | { kind: 'cancelled'; reason: string };

export interface AlertStore {
  /** Replaces the checks file's channels by `channels` (their ids kept); API channels stay unless a file id takes theirs. */
  syncFileChannels(channels: ReadonlyArray<NewAlertChannel & { id: number }>, now: Date): Promise<void>;
  createChannel(channel: NewAlertChannel, now: Date): Promise<AlertChannel>;
  /** false when there is no such channel. Its pending notifications are cancelled. */
  deleteChannel(id: number, now: Date): Promise<boolean>;
  channel(id: number): Promise<AlertChannel | undefined>;
  channels(): Promise<AlertChannel[]>;

  /** The cursor `name`; a new cursor starts at the newest result (history is not replayed). */
  cursor(name: string): Promise<number>;
  /** Results with seq > `after`, oldest first, every type (the cursor moves past ATTEMPTs too). */
  resultsAfter(after: number, limit: number): Promise<TailedResult[]>;
  statuses(checkId?: string): Promise<LocationStatus[]>;
  /**
   * In one transaction: the statuses, the notifications (a certificate
   * notice only when its day has none) and the cursor at `seq`. Answers how
   * many notifications were queued.
   */
  commitEvaluation(name: string, seq: number, statuses: readonly LocationStatus[], notifications: readonly NewNotification[], now: Date): Promise<number>;

  /**
   * Pending notifications due at `now`, oldest first: at most one per channel, its oldest pending (a channel's
   * order is kept), none of the channels in `busy` (their delivery is under way; on PostgreSQL every row answered
   * is claimed, so the caller asks only for what it will start).
   */
  dueNotifications(now: Date, limit: number, busy?: readonly number[]): Promise<Notification[]>;
  /** When the next notification dueNotifications would answer is due; undefined when none is pending. */
  nextDue(): Promise<Date | undefined>;
  /** `attempt` null: the notification was cancelled without a request (its channel is gone or not delivered). */
  recordAttempt(id: number, attempt: DeliveryAttempt | null, outcome: AttemptOutcome): Promise<void>;
  notifications(channelId: number, limit: number): Promise<NotificationWithAttempts[]>;
  /** Deletes delivered and cancelled notifications created before `before`, at most `batch`; answers how many. */
  prune(before: Date, batch: number): Promise<number>;
}
