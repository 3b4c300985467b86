// How the features' rows read as records. SQLite and PostgreSQL keep the same
// columns for alerts, heartbeats, error groups and incidents (their
// migrations), so both stores read them here.

import type { IncidentImpact, IncidentStatus } from '../core/dashboard.js';
import type { CheckResultEntry } from '../core/result-entry.js';
import type { AlertChannel, CheckStatus, LocationStatus, NewAlertChannel, Notification, NotificationKind, NotificationState } from './alerts.js';
import type { IncidentRecord } from './dashboards.js';
import type { ErrorGroupPatch, ErrorGroupRecord } from './error-groups.js';
import type { HeartbeatEvent, HeartbeatState, HeartbeatStatus } from './heartbeats.js';
import { num, numOrNull, type Row, str, strOrNull } from './rows.js';

const iso = (ms: number | null): string | null => (ms === null ? null : new Date(ms).toISOString());

export type ArchiveState = 'OPEN' | 'UNTIL_NEXT_EVENT' | 'FOREVER';

export function channelOf(row: Row): AlertChannel {
  const record = JSON.parse(str(row, 'record')) as NewAlertChannel;
  return {
    ...record,
    id: num(row, 'id'),
    source: str(row, 'source') === 'file' ? 'file' : 'api',
    type: str(row, 'type'),
    created_at: str(row, 'created_at'),
    updated_at: strOrNull(row, 'updated_at'),
  };
}

/** What an alert channel's `record` column holds: the id and type have their own columns. */
export function channelRecord(channel: NewAlertChannel): string {
  const { type: _type, id: _id, ...rest } = channel as NewAlertChannel & { id?: number };
  return JSON.stringify(rest);
}

export function statusOf(row: Row): LocationStatus {
  return {
    checkId: str(row, 'check_id'),
    location: str(row, 'location'),
    status: str(row, 'status') as CheckStatus,
    since: num(row, 'since'),
    candidate: strOrNull(row, 'candidate') as CheckStatus | null,
    streak: num(row, 'streak'),
    updatedAt: num(row, 'updated_at'),
    // Rows written before migration 10 had every status told.
    announced: (strOrNull(row, 'announced') ?? str(row, 'status')) as CheckStatus,
  };
}

export function heartbeatEventOf(row: Row): HeartbeatEvent {
  return {
    id: str(row, 'id'),
    state: str(row, 'state'),
    timestamp: new Date(num(row, 'at_ms')).toISOString(),
    source: str(row, 'source'),
    userAgent: str(row, 'user_agent'),
  };
}

export function heartbeatStateOf(row: Row): HeartbeatState {
  return {
    checkId: str(row, 'check_id'),
    tokenHash: str(row, 'token_hash'),
    periodMs: num(row, 'period_ms'),
    graceMs: num(row, 'grace_ms'),
    createdMs: num(row, 'created_ms'),
    sinceMs: num(row, 'since_ms'),
    lastPingMs: row.last_ping_ms === null ? null : num(row, 'last_ping_ms'),
    status: str(row, 'status') as HeartbeatStatus,
  };
}

export function errorGroupOf(row: Row): ErrorGroupRecord {
  const state = String(row.archive_state) as ArchiveState;
  return {
    id: String(row.id),
    checkId: String(row.check_id),
    errorHash: String(row.error_hash),
    rawErrorMessage: typeof row.raw_message === 'string' ? row.raw_message : null,
    cleanedErrorMessage: String(row.cleaned_message),
    firstSeen: new Date(Number(row.first_seen)).toISOString(),
    lastSeen: new Date(Number(row.last_seen)).toISOString(),
    archivedUntilNextEvent: state !== 'OPEN',
    archivedForEver: state === 'FOREVER',
  };
}

/** The state a PATCH leads to: a false flag first (unarchive), then a true one (archive; for ever wins). */
export function nextArchiveState(current: ArchiveState, patch: ErrorGroupPatch): ArchiveState {
  let state = current;
  if (patch.archiveForEver === false && state === 'FOREVER') state = 'OPEN';
  if (patch.archivedUntilNextEvent === false) state = 'OPEN';
  if (patch.archivedUntilNextEvent === true) state = 'UNTIL_NEXT_EVENT';
  if (patch.archiveForEver === true) state = 'FOREVER';
  return state;
}

/** A queued notification; `nextAt` when the query computed the due time itself. */
export function notificationOf(row: Row, nextAt = num(row, 'next_at')): Notification {
  const state = str(row, 'state') as NotificationState;
  return {
    id: num(row, 'id'),
    channelId: num(row, 'channel_id'),
    kind: str(row, 'kind') as NotificationKind,
    checkId: str(row, 'check_id'),
    location: strOrNull(row, 'location'),
    resultId: strOrNull(row, 'result_id'),
    body: JSON.parse(str(row, 'body')) as unknown,
    state,
    attempts: num(row, 'attempts'),
    nextAttemptAt: state === 'PENDING' ? iso(nextAt) : null,
    createdAt: iso(num(row, 'created_at')) as string,
    deliveredAt: iso(numOrNull(row, 'delivered_at')),
    lastError: strOrNull(row, 'last_error'),
  };
}

/** A notification's stored result, or null when its body is not one (an older row, or not an object). */
export function readEntry(body: string): CheckResultEntry | null {
  try {
    const entry = JSON.parse(body) as unknown;
    return entry !== null && typeof entry === 'object' ? (entry as CheckResultEntry) : null;
  } catch {
    return null;
  }
}

/** An incident with its updates' rows (newest first, as the query ordered them). */
export function incidentRecordOf(row: Row, updates: readonly Row[]): IncidentRecord {
  const id = str(row, 'id');
  return {
    id,
    name: str(row, 'name'),
    impact: str(row, 'impact') as IncidentImpact,
    dashboardId: num(row, 'dashboard'),
    startedAt: strOrNull(row, 'started_at'),
    stoppedAt: strOrNull(row, 'stopped_at'),
    created_at: str(row, 'created_at'),
    updated_at: strOrNull(row, 'updated_at'),
    incidentUpdates: updates.map((u) => ({
      id: str(u, 'id'),
      status: str(u, 'status') as IncidentStatus,
      description: str(u, 'description'),
      incidentId: id,
      created_at: str(u, 'created_at'),
      updated_at: strOrNull(u, 'updated_at'),
    })),
  };
}
