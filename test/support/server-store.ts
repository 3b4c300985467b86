// The server's store for tests: a real SQLite file in a temporary directory
// (or, with OUTPOST_TEST_DATABASE=postgres, a PostgreSQL database of that
// directory's: postgres.ts), checks and results made through the store's own
// flows (createSession, claimJobs, acceptResults), never raw SQL.

import { randomUUID } from 'node:crypto';
import type { Job, ResultEnvelope } from '../../src/core/protocol.js';
import type { CheckResultEntry, ResultType } from '../../src/core/result-entry.js';
import type { SessionRecord, Store, StoredCheck } from '../../src/store/store.js';
import { openStateStores } from './postgres.js';

export async function openTestStore(dir: string): Promise<Store> {
  return (await openStateStores(dir)).store;
}

export function storedCheck(overrides: Partial<StoredCheck> & Pick<StoredCheck, 'id' | 'locations'>): StoredCheck {
  const checkType = overrides.checkType ?? 'API';
  return {
    name: `check ${overrides.id}`,
    checkType,
    frequencySeconds: 60,
    definition: { id: overrides.id, name: `check ${overrides.id}`, checkType, request: { method: 'GET', url: 'http://127.0.0.1:9/' } },
    environmentVariables: [],
    runtimeId: null,
    capMs: 30_000,
    ...overrides,
  };
}

export interface ResultSpec {
  resultType?: ResultType;
  hasFailures?: boolean;
  startedAt?: Date;
  id?: string;
  isDegraded?: boolean;
  responseTime?: number;
  /** 1 unless given. */
  attempts?: number;
}

/** A passing FINAL result for a claimed job, as an agent reports it when the job names no check id; `extra` overrides. */
export function jobResultEntry(job: Pick<Job, 'sequenceId' | 'runLocation' | 'checkRunId'>, extra: Partial<CheckResultEntry> = {}): CheckResultEntry {
  const now = new Date().toISOString();
  return {
    resultType: 'FINAL',
    id: randomUUID(),
    name: 'check',
    checkId: null,
    checkType: 'URL',
    hasFailures: false,
    hasErrors: false,
    isDegraded: false,
    overMaxResponseTime: false,
    runLocation: job.runLocation ?? null,
    startedAt: now,
    stoppedAt: now,
    created_at: now,
    responseTime: 12,
    checkRunId: job.checkRunId ?? null,
    attempts: 1,
    sequenceId: job.sequenceId ?? null,
    ...extra,
  };
}

/** A result entry for a claimed job, as an agent reports it. */
export function envelopeFor(job: Job, check: StoredCheck, spec: ResultSpec = {}): ResultEnvelope {
  const id = spec.id ?? randomUUID();
  const startedAt = spec.startedAt ?? new Date();
  const failed = spec.hasFailures ?? false;
  const result: CheckResultEntry = {
    resultType: spec.resultType ?? 'FINAL',
    id,
    name: check.name,
    checkId: check.id,
    checkType: check.checkType,
    hasFailures: failed,
    hasErrors: false,
    isDegraded: spec.isDegraded ?? false,
    overMaxResponseTime: false,
    runLocation: job.runLocation ?? null,
    startedAt: startedAt.toISOString(),
    stoppedAt: new Date(startedAt.getTime() + 10).toISOString(),
    created_at: new Date(startedAt.getTime() + 10).toISOString(),
    responseTime: spec.responseTime ?? 10,
    checkRunId: job.checkRunId ?? null,
    attempts: spec.attempts ?? 1,
    sequenceId: job.sequenceId ?? null,
    apiCheckResult: { response: { status: failed ? 500 : 200 } },
  };
  return { jobId: job.id, resultId: id, result };
}

export function newSession(check: StoredCheck, locations: readonly string[], now: Date): SessionRecord {
  return {
    id: randomUUID(),
    checkId: check.id,
    checkType: check.checkType,
    name: check.name,
    status: 'STARTED',
    runLocations: [...locations],
    triggerSource: 'SCHEDULER',
    startedAt: now.toISOString(),
    stoppedAt: null,
    durationMs: null,
  };
}

/** Queues `count` sessions of the check in every one of `locations`; returns their ids, oldest first. */
export async function queueSessions(store: Store, check: StoredCheck, locations: readonly string[], count: number, now = new Date()): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    const session = newSession(check, locations, now);
    const deadlineAt = new Date(now.getTime() + 3_600_000).toISOString();
    await store.createSession(
      session,
      locations.map((location) => ({ id: randomUUID(), location, deadlineAt })),
      check,
    );
    ids.push(session.id);
  }
  return ids;
}

/** Claims every queued job of the location (for the check types given) as one agent. */
export async function claimAll(store: Store, location: string, checkTypes: readonly string[], now = new Date(), agentId = `agent-${location}`): Promise<Job[]> {
  const jobs: Job[] = [];
  for (;;) {
    const batch = await store.claimJobs({ location, agentId, checkTypes, runtimes: [], max: 100, leaseMs: 60_000, now });
    jobs.push(...batch);
    if (batch.length < 100) return jobs;
  }
}

/**
 * Runs sessions of a check through the real flows: queue, claim in each
 * location, report the results `spec` gives for each job (a FINAL by default).
 * Returns the accepted result ids, in the order reported.
 */
export async function runSessions(
  store: Store,
  check: StoredCheck,
  locations: readonly string[],
  count: number,
  spec: (job: Job, index: number) => ResultSpec[] = () => [{}],
  now = new Date(),
): Promise<string[]> {
  const sessions = new Set(await queueSessions(store, check, locations, count, now));
  const accepted: string[] = [];
  let index = 0;
  for (const location of locations) {
    const claimed = await claimAll(store, location, [check.checkType], now);
    // Jobs of other checks queued in the location meanwhile are not this run's: back to the queue.
    const others = claimed.filter((job) => !sessions.has(job.sequenceId ?? ''));
    if (others.length > 0) await store.releaseJobs(`agent-${location}`, others.map((job) => job.id));
    const jobs = claimed.filter((job) => sessions.has(job.sequenceId ?? ''));
    const envelopes = jobs.flatMap((job) => spec(job, index++).map((s) => envelopeFor(job, check, s)));
    for (let i = 0; i < envelopes.length; i += 500) {
      const outcome = await store.acceptResults(`agent-${location}`, location, envelopes.slice(i, i + 500), now);
      if (outcome.rejected.length > 0) throw new Error(`results rejected: ${JSON.stringify(outcome.rejected.slice(0, 3))}`);
      accepted.push(...outcome.accepted);
    }
  }
  return accepted;
}
