// buildResult / errorResult / resultOutcome: the verdict rules of a check result entry.

import { describe, expect, it } from 'vitest';
import type { Outcome } from '../../src/core/outcome.js';
import { buildResult, errorResult, resultOutcome } from '../../src/results/result.js';
import type { RunIdentity, Thresholds } from '../../src/core/result-entry.js';

const identity: RunIdentity = { checkRunId: 42, sequenceId: 'seq-1', runLocation: 'office-berlin' };
const check = { id: 'check-1', name: 'Homepage', checkType: 'URL' };
const thresholds: Thresholds = { degradedResponseTime: 3000, maxResponseTime: 5000, shouldFail: false };

function outcome(responseTime: number, extra: Partial<Outcome> = {}): Outcome {
  const startedAt = new Date('2026-01-01T00:00:00.000Z');
  return {
    startedAt,
    stoppedAt: new Date(startedAt.getTime() + responseTime),
    responseTime,
    assertionsFailed: false,
    member: 'apiCheckResult',
    detail: { requestError: extra.error ?? null, marker: 'detail' },
    ...extra,
  };
}

describe('buildResult: response time thresholds', () => {
  const cases: Array<[number, { isDegraded: boolean; overMaxResponseTime: boolean; hasFailures: boolean }]> = [
    [0, { isDegraded: false, overMaxResponseTime: false, hasFailures: false }],
    [2999, { isDegraded: false, overMaxResponseTime: false, hasFailures: false }],
    [3000, { isDegraded: false, overMaxResponseTime: false, hasFailures: false }],
    [3001, { isDegraded: true, overMaxResponseTime: false, hasFailures: false }],
    [5000, { isDegraded: true, overMaxResponseTime: false, hasFailures: false }],
    [5001, { isDegraded: false, overMaxResponseTime: true, hasFailures: true }],
  ];
  for (const [ms, expected] of cases) {
    it(`${ms} ms against degraded 3000 / max 5000`, () => {
      const result = buildResult(outcome(ms), thresholds, identity, check);
      expect(result).toMatchObject({ ...expected, responseTime: ms, hasErrors: false });
    });
  }

  it('rounds the response time before comparing (5000.4 is not over 5000)', () => {
    const result = buildResult(outcome(5000.4), thresholds, identity, check);
    expect(result.responseTime).toBe(5000);
    expect(result.overMaxResponseTime).toBe(false);
    expect(buildResult(outcome(5000.6), thresholds, identity, check).overMaxResponseTime).toBe(true);
  });

  it('never reports a negative response time', () => {
    expect(buildResult(outcome(-3), thresholds, identity, check).responseTime).toBe(0);
  });
});

describe('buildResult: fields', () => {
  it('copies identity, check and outcome into the entry', () => {
    const result = buildResult(outcome(120), thresholds, identity, check, 'ATTEMPT', 2);
    expect(result).toMatchObject({
      resultType: 'ATTEMPT',
      attempts: 2,
      name: 'Homepage',
      checkId: 'check-1',
      checkType: 'URL',
      checkRunId: 42,
      sequenceId: 'seq-1',
      runLocation: 'office-berlin',
      startedAt: '2026-01-01T00:00:00.000Z',
      stoppedAt: '2026-01-01T00:00:00.120Z',
      apiCheckResult: { marker: 'detail' },
    });
    expect(Number.isNaN(Date.parse(result.created_at))).toBe(false);
  });

  it('defaults to a FINAL result of one attempt, with nulls for an unknown check', () => {
    const result = buildResult(outcome(1), thresholds, identity, null);
    expect(result).toMatchObject({ resultType: 'FINAL', attempts: 1, name: null, checkId: null, checkType: null });
  });

  it('gives every result a unique id', () => {
    const ids = new Set(Array.from({ length: 200 }, () => buildResult(outcome(1), thresholds, identity, check).id));
    expect(ids.size).toBe(200);
    for (const id of ids) expect(id).toMatch(/^[0-9a-f-]{36}$/);
  });
});

describe('buildResult: failures, errors and shouldFail', () => {
  it('a failed assertion fails the run without an error', () => {
    const result = buildResult(outcome(10, { assertionsFailed: true }), thresholds, identity, check);
    expect(result).toMatchObject({ hasFailures: true, hasErrors: false });
    expect(resultOutcome(result)).toBe('failed');
  });

  it('a request error fails the run and is an error', () => {
    const result = buildResult(outcome(10, { error: 'connection refused' }), thresholds, identity, check);
    expect(result).toMatchObject({ hasFailures: true, hasErrors: true });
    expect(resultOutcome(result)).toBe('error');
  });

  it('shouldFail inverts a pass into a failure', () => {
    const result = buildResult(outcome(10), { ...thresholds, shouldFail: true }, identity, check);
    expect(result).toMatchObject({ hasFailures: true, hasErrors: false });
    expect(resultOutcome(result)).toBe('failed');
  });

  it('shouldFail inverts a failed assertion into a pass', () => {
    const result = buildResult(outcome(10, { assertionsFailed: true }), { ...thresholds, shouldFail: true }, identity, check);
    expect(result).toMatchObject({ hasFailures: false, hasErrors: false });
    expect(resultOutcome(result)).toBe('passed');
  });

  it('shouldFail inverts a request error into a pass that is not an error, keeping the evidence', () => {
    const result = buildResult(outcome(10, { error: 'connection refused' }), { ...thresholds, shouldFail: true }, identity, check);
    expect(result).toMatchObject({ hasFailures: false, hasErrors: false });
    expect(result.apiCheckResult?.requestError).toBe('connection refused');
    expect(resultOutcome(result)).toBe('passed');
  });

  it('shouldFail inverts over-max into a pass', () => {
    const result = buildResult(outcome(6000), { ...thresholds, shouldFail: true }, identity, check);
    expect(result).toMatchObject({ hasFailures: false, overMaxResponseTime: true });
  });
});

describe('resultOutcome', () => {
  it('is passed, degraded, failed or error in that order of precedence', () => {
    expect(resultOutcome(buildResult(outcome(10), thresholds, identity, check))).toBe('passed');
    expect(resultOutcome(buildResult(outcome(4000), thresholds, identity, check))).toBe('degraded');
    expect(resultOutcome(buildResult(outcome(4000, { assertionsFailed: true }), thresholds, identity, check))).toBe('failed');
    expect(resultOutcome(buildResult(outcome(6000), thresholds, identity, check))).toBe('failed');
    expect(resultOutcome(buildResult(outcome(4000, { error: 'reset' }), thresholds, identity, check))).toBe('error');
  });
});

describe('errorResult', () => {
  it('is an error result carrying the message, never inverted and never over max', () => {
    const startedAt = new Date(Date.now() - 50);
    const result = errorResult('Invalid job: check is required', identity, check, 'tcpCheckResult', startedAt);
    expect(result).toMatchObject({
      hasErrors: true,
      hasFailures: true,
      isDegraded: false,
      overMaxResponseTime: false,
      checkId: 'check-1',
      resultType: 'FINAL',
      tcpCheckResult: { requestError: 'Invalid job: check is required', jobLog: ['Invalid job: check is required'] },
    });
    expect(result.apiCheckResult).toBeUndefined();
    expect(result.responseTime).toBeGreaterThanOrEqual(0);
    expect(result.startedAt).toBe(startedAt.toISOString());
    expect(resultOutcome(result)).toBe('error');
  });

  it('defaults to apiCheckResult and accepts an unknown check', () => {
    const result = errorResult('boom', identity, null);
    expect(result.apiCheckResult?.requestError).toBe('boom');
    expect(result.checkId).toBeNull();
    expect(errorResult('boom', identity, null).id).not.toBe(result.id);
  });
});
