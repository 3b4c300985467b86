// How the features' rows read as records. SQLite and PostgreSQL keep the same
// columns for alerts, heartbeats and error groups (their migrations), so both
// stores read them here.

import type { AlertChannel, CheckStatus, LocationStatus, NewAlertChannel } from './alerts.js';
import type { ErrorGroupPatch, ErrorGroupRecord } from './error-groups.js';
import type { HeartbeatEvent, HeartbeatState, HeartbeatStatus } from './heartbeats.js';
import { num, type Row, str, strOrNull } from './rows.js';

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
