// The service's check result entry, and how an executor's outcome
// becomes one.

import { randomUUID } from 'node:crypto';
import type { Outcome, ResultMemberName } from '../core/outcome.js';
import type { CheckIdentity, CheckResultEntry, ResultType, RunIdentity, Thresholds } from '../core/result-entry.js';

/**
 * Verdict rules (docs/checks/README.md "How a result is judged"):
 * a run *failed* when it has a request error, a failed assertion, or ran over
 * maxResponseTime. `shouldFail` inverts that verdict; an inverted request error
 * is then not reported as an error either, though the error text stays in the
 * result as evidence.
 */
export function buildResult(
  outcome: Outcome,
  thresholds: Thresholds,
  identity: RunIdentity,
  check: CheckIdentity | null,
  resultType: ResultType = 'FINAL',
  attempts = 1,
): CheckResultEntry {
  const responseTime = Math.max(0, Math.round(outcome.responseTime));
  const overMax = responseTime > thresholds.maxResponseTime;
  const degraded = !overMax && (responseTime > thresholds.degradedResponseTime || outcome.degraded === true);
  const hasError = outcome.error !== undefined;
  const failed = hasError || outcome.assertionsFailed || overMax;
  const entry: CheckResultEntry = {
    resultType,
    id: randomUUID(),
    name: check?.name ?? null,
    checkId: check?.id ?? null,
    checkType: check?.checkType ?? null,
    hasFailures: thresholds.shouldFail ? !failed : failed,
    hasErrors: hasError && !thresholds.shouldFail,
    isDegraded: degraded,
    overMaxResponseTime: overMax,
    runLocation: identity.runLocation,
    startedAt: outcome.startedAt.toISOString(),
    stoppedAt: outcome.stoppedAt.toISOString(),
    created_at: new Date().toISOString(),
    responseTime,
    checkRunId: identity.checkRunId,
    attempts,
    sequenceId: identity.sequenceId,
  };
  entry[outcome.member] = outcome.detail;
  return entry;
}

/** A result for a job that never reached an executor (bad definition, unsupported type, shutdown). */
export function errorResult(
  message: string,
  identity: RunIdentity,
  check: CheckIdentity | null,
  member: ResultMemberName = 'apiCheckResult',
  startedAt = new Date(),
): CheckResultEntry {
  const now = new Date();
  return buildResult(
    {
      startedAt,
      stoppedAt: now,
      responseTime: now.getTime() - startedAt.getTime(),
      assertionsFailed: false,
      error: message,
      member,
      detail: { requestError: message, jobLog: [message] },
    },
    // An agent-side error is never inverted by shouldFail: it says nothing about the target.
    { degradedResponseTime: Number.MAX_SAFE_INTEGER, maxResponseTime: Number.MAX_SAFE_INTEGER, shouldFail: false },
    identity,
    check,
  );
}

/** Whether a delivered result counts as passed (for `once` mode and metrics). */
export function resultOutcome(entry: CheckResultEntry): 'passed' | 'degraded' | 'failed' | 'error' {
  if (entry.hasErrors) return 'error';
  if (entry.hasFailures) return 'failed';
  return entry.isDegraded ? 'degraded' : 'passed';
}
