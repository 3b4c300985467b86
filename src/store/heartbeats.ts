// Heartbeat checks as the store keeps them: each check's token (as its
// SHA-256 only), period and grace, the deadline it is watched against, and
// the pings received (heartbeat events). A ping and a missed deadline each
// store a FINAL result of the check (PASSING and FAILING), so that status,
// alerts and the results API treat a heartbeat like any other check.
// docs/server.md ("Heartbeat monitors") describes the model.

import type { CheckResultEntry } from '../core/result-entry.js';

/** The run location of every heartbeat result: pings come to the server, not to a private location. */
export const HEARTBEAT_LOCATION = 'heartbeat';

/** Where a check's results are filed: its locations, or HEARTBEAT_LOCATION for a heartbeat check (whose pings come to the server). */
export function resultLocations(check: { checkType: string; locations: readonly string[] }): readonly string[] {
  return check.checkType === 'HEARTBEAT' ? [HEARTBEAT_LOCATION] : check.locations;
}

/** What a ping event records; `state` is RECEIVED for every ping this release stores. */
export interface HeartbeatEvent {
  id: string;
  state: string;
  timestamp: string;
  /** How the ping came: the HTTP method and the client address, e.g. `GET 127.0.0.1`. */
  source: string;
  userAgent: string;
}

export interface HeartbeatSync {
  checkId: string;
  /** SHA-256 (hex) of the interpolated token. */
  tokenHash: string;
  periodMs: number;
  graceMs: number;
}

/** Why the checks are synced: the process starts, or the checks file was reloaded (HeartbeatStore.sync). */
export type HeartbeatSyncMoment = 'start' | 'reload';

export type HeartbeatStatus = 'UNKNOWN' | 'PASSING' | 'FAILING';

export interface HeartbeatState extends HeartbeatSync {
  status: HeartbeatStatus;
  /** When the check was first synced: expected periods are counted from here (or from an earlier event). */
  createdMs: number;
  /** The current period began here: the next deadline is sinceMs + periodMs + graceMs. */
  sinceMs: number;
  lastPingMs: number | null;
}

export interface PingOutcome {
  checkId: string;
  event: HeartbeatEvent;
  /** The passing FINAL result the ping stored. */
  result: CheckResultEntry;
  /** The status before the ping. */
  previous: HeartbeatStatus;
}

export interface HeartbeatStore {
  /**
   * Makes these the heartbeat checks (others are forgotten; their events stay
   * until pruned). At `start`, every check's current period starts at `now`:
   * pings sent while the server was down were not the job's fault. At
   * `reload`, only a new check, or one whose period or grace changed, starts
   * a period at `now`; the others keep their deadline, which is a fact about
   * pings, not about the file (else every reload would postpone every deadline).
   */
  sync(checks: readonly HeartbeatSync[], now: Date, when?: HeartbeatSyncMoment): Promise<void>;
  /** A ping of the check whose token digest is `tokenHash`: an event and a passing FINAL result; undefined for an unknown digest. */
  ping(tokenHash: string, ping: { source: string; userAgent: string }, now: Date): Promise<PingOutcome | undefined>;
  /** Every check past its deadline gets a failing FINAL result and becomes FAILING; the next deadline is one period later. */
  expire(now: Date): Promise<Array<{ checkId: string; result: CheckResultEntry }>>;
  /** An event at an explicit time, changing no status (imports, tests). */
  addEvent(checkId: string, event: HeartbeatEvent): Promise<void>;
  state(checkId: string): Promise<HeartbeatState | undefined>;
  event(checkId: string, id: string): Promise<HeartbeatEvent | undefined>;
  /** Times (ms) of the check's pings in [fromMs, toMs), oldest first. */
  pingTimes(checkId: string, fromMs: number, toMs: number): Promise<number[]>;
  /** The earliest event of the check (ms), if any. */
  firstEventMs(checkId: string): Promise<number | undefined>;
  /** Deletes at most `batch` events older than `before`; returns how many went. */
  prune(before: Date, batch: number): Promise<number>;
}
