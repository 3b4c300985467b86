// The terminal line of a local-mode result says why a check failed, for every result member.

import { describe, expect, it } from 'vitest';
import { readableLine } from '../../src/local/sink.js';
import type { CheckResultEntry } from '../../src/core/result-entry.js';

const entry = (extra: Record<string, unknown>) =>
  ({ name: 'shop', checkId: 'shop', responseTime: 1706, hasErrors: false, hasFailures: true, isDegraded: false, overMaxResponseTime: false, ...extra }) as unknown as CheckResultEntry;

describe('readableLine', () => {
  it('names the reason of a failed scripted check', () => {
    const line = readableLine(entry({ checkType: 'BROWSER', browserCheckResult: { requestError: 'BROWSER failed at step "cart", line 8: expected "" to be "Cart"' } }));
    expect(line).toContain('✘ FAILED');
    expect(line).toContain('shop [BROWSER] 1706 ms  BROWSER failed at step "cart", line 8: expected "" to be "Cart"');
    const multi = readableLine(entry({ checkType: 'MULTI_STEP', hasErrors: true, multiStepCheckResult: { requestError: 'MULTI_STEP was stopped: it ran past its time limit of 1500 ms' } }));
    expect(multi).toContain('✘ ERROR');
    expect(multi).toContain('[MULTI_STEP] 1706 ms  MULTI_STEP was stopped: it ran past its time limit of 1500 ms');
  });

  it('marks a failed attempt that is tried again as a retry, not as an error of its own', () => {
    const attempt = readableLine(entry({ checkType: 'URL', resultType: 'ATTEMPT', attempts: 1, hasErrors: true, apiCheckResult: { requestError: 'connection refused (ECONNREFUSED)' } }));
    expect(attempt).toContain('↻ RETRY');
    expect(attempt).not.toContain('ERROR');
    expect(attempt).toContain('[URL] 1706 ms  connection refused (ECONNREFUSED) (attempt 1, tried again)');
    const final = readableLine(entry({ checkType: 'URL', resultType: 'FINAL', attempts: 3, hasErrors: true, apiCheckResult: { requestError: 'connection refused (ECONNREFUSED)' } }));
    expect(final).toContain('✘ ERROR');
    expect(final).not.toContain('tried again');
  });

  it('shows the status of an HTTP check that answered', () => {
    const line = readableLine(entry({ checkType: 'URL', hasFailures: false, apiCheckResult: { requestError: null, response: { status: 200, statusText: 'OK' } } }));
    expect(line).toContain('✔ PASSED');
    expect(line).toContain('[URL] 1706 ms  200 OK');
  });
});
