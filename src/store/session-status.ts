// How a check session's status follows its locations' results (the service's
// statuses): STARTED until a first result, then PROGRESS, PROGRESS_FAILED or
// PROGRESS_DEGRADED while some location has no FINAL yet, and PASSED, FAILED
// or DEGRADED once every location has one. TIMED_OUT and CANCELLED are set by
// the server (a deadline passed, the check was deleted) and never left.

import type { CheckResultEntry } from '../core/result-entry.js';
import type { SessionStatus } from './store.js';

/** A FINAL result's verdict (src/results/result.ts resultOutcome). */
export type FinalOutcome = 'passed' | 'degraded' | 'failed' | 'error';

/**
 * The verdict of a FINAL result. The same rule as resultOutcome in
 * src/results/result.ts, repeated here because results and store are peers
 * in the layers (test/lint/dependency-rule.ts) and neither may import the
 * other; test/unit/sqlite-store.test.ts checks that the two agree.
 */
export function finalOutcome(entry: Pick<CheckResultEntry, 'hasErrors' | 'hasFailures' | 'isDegraded'>): FinalOutcome {
  if (entry.hasErrors) return 'error';
  if (entry.hasFailures) return 'failed';
  return entry.isDegraded ? 'degraded' : 'passed';
}

/**
 * The results table's `has_failures` column: whether the result is down. A result with errors is (finalOutcome
 * says `error`), so badges and check status, which follow finalOutcome, and availability and uptime, which
 * count this column, agree. Results stored before it was so keep the column they were written with.
 */
export function downFlag(entry: Pick<CheckResultEntry, 'hasErrors' | 'hasFailures'>): 0 | 1 {
  return entry.hasFailures === true || entry.hasErrors === true ? 1 : 0;
}

export const FINISHED_STATUSES: ReadonlySet<SessionStatus> = new Set(['PASSED', 'FAILED', 'DEGRADED', 'TIMED_OUT', 'CANCELLED']);

/**
 * The status of a session from the FINAL verdict of each location that has
 * one (`finals`, by location) and whether any result (ATTEMPT included) has
 * arrived.
 */
export function sessionStatus(runLocations: readonly string[], finals: ReadonlyMap<string, FinalOutcome>, anyResult: boolean): SessionStatus {
  const verdicts = runLocations.map((location) => finals.get(location));
  const failed = verdicts.some((v) => v === 'failed' || v === 'error');
  const degraded = verdicts.some((v) => v === 'degraded');
  if (verdicts.every((v) => v !== undefined)) return failed ? 'FAILED' : degraded ? 'DEGRADED' : 'PASSED';
  if (!anyResult) return 'STARTED';
  return failed ? 'PROGRESS_FAILED' : degraded ? 'PROGRESS_DEGRADED' : 'PROGRESS';
}
