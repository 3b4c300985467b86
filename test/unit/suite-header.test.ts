// The header of a PLAYWRIGHT suite's report (src/checks/scripted/executors.ts suiteHeader):
// PASSED, DEGRADED when every test passed but the run took longer than
// degradedResponseTime, FAILED otherwise, judged as the result is.

import { describe, expect, it } from 'vitest';
import { suiteHeader } from '../../src/checks/scripted/executors.js';
import type { ScriptRun } from '../../src/checks/scripted/runner.js';

function run(ok: boolean, durationMs: number, withReport = true): ScriptRun {
  const at = new Date();
  const tests = { expected: 2, unexpected: ok ? 0 : 1, flaky: 0, skipped: 1 };
  return { ok, assertion: !ok, steps: [], requests: [], durationMs, startedAt: at, stoppedAt: at, ...(withReport ? { tests } : {}) };
}
const limits = { degradedResponseTime: 10_000, maxResponseTime: 60_000 };

describe('suite header', () => {
  it('is PASSED when every test passed within degradedResponseTime', () => {
    expect(suiteHeader(run(true, 9_999.6), limits)).toEqual({ status: 'PASSED', line: 'Suite PASSED: 2 passed, 0 failed, 0 flaky, 1 skipped in 10,000 ms' });
  });

  it('is DEGRADED when every test passed but the run took longer than degradedResponseTime', () => {
    expect(suiteHeader(run(true, 10_001), limits)).toEqual({
      status: 'DEGRADED',
      line: 'Suite DEGRADED: 2 passed, 0 failed, 0 flaky, 1 skipped in 10,001 ms, over degradedResponseTime 10,000 ms',
    });
  });

  it('is FAILED when a test failed (however fast), the suite did not run, or the run passed maxResponseTime', () => {
    expect(suiteHeader(run(false, 100), limits)).toEqual({ status: 'FAILED', line: 'Suite FAILED: 2 passed, 1 failed, 0 flaky, 1 skipped in 100 ms' });
    expect(suiteHeader(run(false, 20_000, false), limits)).toEqual({ status: 'FAILED', line: 'Suite FAILED: no test report in 20,000 ms' });
    expect(suiteHeader(run(true, 60_001), limits)).toEqual({
      status: 'FAILED',
      line: 'Suite FAILED: 2 passed, 0 failed, 0 flaky, 1 skipped in 60,001 ms, over maxResponseTime 60,000 ms',
    });
  });
});
