// The server's database, as the rest of the server sees it: a narrow,
// asynchronous interface, so that a PostgreSQL implementation can follow the
// SQLite one (sqlite/sqlite-store.ts) without touching a caller. Every method
// that changes state is one transaction: it resolves only after the commit,
// so whatever a route answered as accepted survives a kill -9 of the server.
// docs/server.md describes the model; the session rules are session-status.ts.

import type { CheckType } from '../core/check-type.js';
import type { AgentEvent, EnvironmentVariable, Job, ResultEnvelope } from '../core/protocol.js';
import type { CheckResultEntry } from '../core/result-entry.js';

/** A private location: a network that agents with one of its keys serve. */
export interface LocationRecord {
  id: string;
  name: string;
}

/** A check as the server schedules it (from the checks file). */
export interface StoredCheck {
  id: string;
  name: string;
  checkType: CheckType;
  frequencySeconds: number;
  /** Location ids it runs in, each once per run. */
  locations: string[];
  /** The definition as the checks file has it; handed to agents as the job's `check`. */
  definition: unknown;
  /** The file's variables merged with the check's own (check over global); handed to agents with each job. */
  environmentVariables: EnvironmentVariable[];
  /** Scripted checks: the runtime the job needs an agent to have; null for every other type. */
  runtimeId: string | null;
  /** How long one run may take at most (the check type's hard cap), for TIMED_OUT. */
  capMs: number;
}

/** The key record of the service's API; the raw key is shown once, when it is made, and never stored. */
export interface KeyRecord {
  id: string;
  locationId: string;
  maskedKey: string;
  created_at: string;
  updated_at: string;
}

export const SESSION_STATUSES = [
  'STARTED',
  'PROGRESS',
  'PROGRESS_FAILED',
  'PROGRESS_DEGRADED',
  'PASSED',
  'FAILED',
  'DEGRADED',
  'TIMED_OUT',
  'CANCELLED',
] as const;
export type SessionStatus = (typeof SESSION_STATUSES)[number];

/** One run of a check across its locations (the service's check session). */
export interface SessionRecord {
  id: string;
  checkId: string;
  checkType: CheckType;
  name: string;
  status: SessionStatus;
  runLocations: string[];
  triggerSource: 'SCHEDULER';
  startedAt: string;
  stoppedAt: string | null;
  durationMs: number | null;
}

export type JobStatus = 'QUEUED' | 'LEASED' | 'DONE' | 'TIMED_OUT' | 'CANCELLED';

/** One location's part of a session: the job an agent of that location claims. */
export interface NewJob {
  id: string;
  location: string;
  /** After this, a job without a FINAL result is TIMED_OUT (created + the check's cap + the lease window). */
  deadlineAt: string;
  /** ATTEMPT results one run of the job can send (src/checks/retry.ts attemptsPerRun); absent: the protocol's MAX_RETRIES. */
  attemptsPerRun?: number;
}

export interface ClaimQuery {
  location: string;
  agentId: string;
  /** The check types the agent runs; jobs of other types are left for another agent. */
  checkTypes: readonly string[];
  /** The runtimes the agent has; a scripted job whose runtime it lacks is left for another agent. */
  runtimes: readonly string[];
  max: number;
  leaseMs: number;
  now: Date;
  /** The agent's name for this claim, the same on each retry of it: recorded on the jobs it leases (claimedAgain). */
  claimId?: string;
}

/** A retried claim: the jobs its claimId leased to the agent in the location. */
export type ClaimAgainQuery = Pick<ClaimQuery, 'location' | 'agentId' | 'leaseMs' | 'now'> & { claimId: string };

export interface LeaseUpdate {
  extended: Array<{ jobId: string; leaseExpiresAt: string }>;
  /** Jobs this agent no longer holds: unknown, of another location, leased to another agent, done, timed out or cancelled. */
  lost: string[];
}

/**
 * The ceiling of ATTEMPT results kept per job, whatever its claims: below it, a job keeps what its runs can
 * send (attempt-bound.ts). A further ATTEMPT is rejected with 409 (the agent drops it from its spool,
 * docs/protocol.md "Rejections"); the FINAL is always taken. It also bounds what GET /v1/check-sessions/{id}
 * answers (session()).
 */
export const MAX_ATTEMPTS_PER_JOB = 50;

/**
 * Agent events kept per location. An honest agent sends at most 30 a minute (src/control-plane/events.ts
 * MAX_PER_MINUTE) and only when something goes wrong; retention would keep a flood's 30 days of them.
 */
export const MAX_EVENTS_PER_LOCATION = 10_000;

export interface ResultsOutcome {
  accepted: string[];
  rejected: Array<{ resultId: string; statusCode: number; message: string }>;
  /** The results stored by this call (not those stored before: a re-send), with the check of their job. */
  stored?: Array<{ resultId: string; checkId: string }>;
}

export interface ResultQuery {
  checkId: string;
  /** 1–100. */
  limit: number;
  /** The opaque cursor a previous page returned as `nextId`. */
  nextId?: string;
  /** Results started at or after this time. */
  from?: Date;
  /** Results started before this time. */
  to?: Date;
  location?: string;
  checkType?: string;
  /** true: only results with failures. */
  hasFailures?: boolean;
  resultType: 'FINAL' | 'ATTEMPT' | 'ALL';
}

export interface ResultPage {
  entries: CheckResultEntry[];
  /** null when this was the last page. */
  nextId: string | null;
}

export interface ArtifactRecord {
  id: string;
  jobId: string;
  location: string;
  name: string;
  contentType: string;
  /** Announced size; the upload must be exactly this long. */
  size: number;
  /** Set once the whole file is on disk. */
  storedAt: string | null;
  created_at: string;
}

/** Thrown by a store method for a reference to a record that does not exist (a route answers 404). */
export class NotFoundError extends Error {
  constructor(
    readonly kind: string,
    readonly id: string,
  ) {
    super(`${kind} ${id} does not exist`);
    this.name = 'NotFoundError';
  }
}

/** Thrown by a store method for a query parameter it cannot use, such as a cursor it did not make (a route answers 400 naming `parameter`). */
export class InvalidQueryError extends Error {
  constructor(
    readonly parameter: string,
    message: string,
  ) {
    super(message);
    this.name = 'InvalidQueryError';
  }
}

export interface Store {
  /**
   * Replaces the locations with the checks file's. A location that is gone
   * loses its keys for good: added back, it starts with none (docs/server.md,
   * "Agent keys"), so a key revoked by removing its location stays revoked.
   */
  syncLocations(locations: readonly LocationRecord[]): Promise<void>;
  location(id: string): Promise<LocationRecord | undefined>;
  locations(): Promise<LocationRecord[]>;

  /**
   * Makes the file's checks the scheduled ones: each is added or updated and
   * scheduled again (also one deleted through the API); a check in the store
   * but not in the file is removed as by deleteCheck. Results stay.
   */
  syncChecks(checks: readonly StoredCheck[], now: Date): Promise<void>;
  /** Scheduled checks (not removed). */
  activeChecks(): Promise<StoredCheck[]>;
  /** A check, removed or not. */
  check(id: string): Promise<(StoredCheck & { removedAt: string | null }) | undefined>;
  /** Stops scheduling it and cancels its running sessions (their open jobs too); false if unknown or removed already. */
  deleteCheck(id: string, now: Date): Promise<boolean>;

  createKey(key: KeyRecord & { hash: string }): Promise<KeyRecord>;
  /** The key whose SHA-256 is `hash`, if its location still exists. */
  keyByHash(hash: string): Promise<KeyRecord | undefined>;
  /** The keys of a location, oldest first (ties by id). */
  keys(locationId: string): Promise<KeyRecord[]>;
  /** Revokes a key of the location at once (keyByHash no longer finds it); false when the location has no such key. */
  deleteKey(locationId: string, keyId: string): Promise<boolean>;

  /**
   * A session and one QUEUED job per location, in one transaction. With
   * `slotMs` (the slot of the check's schedule it is for), a store shared by
   * several servers makes each (check, location, slot) once: locations made
   * already are left out, and false says none was left (nothing was made).
   */
  createSession(session: SessionRecord, jobs: readonly NewJob[], check: StoredCheck, slotMs?: number): Promise<boolean>;
  /** The session with its results in the order stored: every FINAL and at most MAX_ATTEMPTS_PER_JOB ATTEMPTs of each job, the first ones. */
  session(id: string): Promise<(SessionRecord & { results: CheckResultEntry[] }) | undefined>;
  /** Whether the check has a job in this location that is QUEUED or LEASED (a run never overlaps itself). */
  hasOpenJob(checkId: string, location: string): Promise<boolean>;

  /** Leases up to `max` QUEUED jobs of the location, oldest first, to the agent; returns them as the protocol's Job. */
  claimJobs(query: ClaimQuery): Promise<Job[]>;
  /**
   * The jobs a claim with this claimId leased that the agent still holds in the location (a retry of a
   * claim whose answer was lost), with a new lease; leased_at stays the first claim's. Empty if none.
   */
  claimedAgain(query: ClaimAgainQuery): Promise<Job[]>;
  /** Returns leased jobs to the queue at once (a claim answer that could not be delivered). */
  releaseJobs(agentId: string, jobIds: readonly string[]): Promise<void>;
  extendLeases(agentId: string, location: string, jobIds: readonly string[], leaseMs: number, now: Date): Promise<LeaseUpdate>;
  /** Jobs whose lease ran out go back to the queue; returns how many. */
  requeueExpiredLeases(now: Date): Promise<number>;
  /** Open jobs past their deadline become TIMED_OUT, and so do their sessions once nothing else is open; returns the sessions touched. */
  timeOutJobs(now: Date): Promise<string[]>;

  /**
   * Stores results, idempotent by resultId: a result already stored is
   * accepted again; the first FINAL wins, whichever agent sends it (the
   * lease holder or not: docs/protocol.md), unless its run began before the
   * job was handed to the agent holding it now (a late result of an earlier
   * holder); that, a FINAL for a job that has a different FINAL, or a result
   * for a job timed out or cancelled is rejected with 409; an unknown job or one of another location with 404. A
   * FINAL closes its job and moves its session on (session-status.ts).
   */
  acceptResults(agentId: string, location: string, results: readonly ResultEnvelope[], now: Date): Promise<ResultsOutcome>;
  /** Newest first; the cursor stays valid while new results arrive. */
  listResults(query: ResultQuery): Promise<ResultPage>;
  result(checkId: string, resultId: string): Promise<CheckResultEntry | undefined>;

  /** Throws NotFoundError when the job is unknown or not of `artifact.location`. */
  createArtifact(artifact: Omit<ArtifactRecord, 'storedAt'>): Promise<void>;
  artifact(id: string): Promise<ArtifactRecord | undefined>;
  markArtifactStored(id: string, now: Date): Promise<void>;

  /** Keeps the newest MAX_EVENTS_PER_LOCATION of the location's events: older ones go as new ones come. */
  addEvents(location: string, agentId: string, events: readonly AgentEvent[], now: Date): Promise<void>;

  /**
   * Deletes results, finished sessions, their jobs and artifact records older
   * than `before`, at most `batch` results per call (short transactions, so
   * writers never wait long); says how many results went and which artifacts'
   * files the caller should now remove.
   */
  pruneBefore(before: Date, batch: number): Promise<{ results: number; artifactIds: string[] }>;
  /** `PRAGMA integrity_check` or its kind: ['ok'] when sound. */
  integrityCheck(): Promise<string[]>;
  close(): Promise<void>;
}
