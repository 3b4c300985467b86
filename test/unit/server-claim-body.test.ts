// The server's reading of a claim (src/server/agent-api.ts): an agent may ask
// for as many jobs as its JOB_CONCURRENCY and wait as long as its
// CLAIM_WAIT_SECONDS (docs/protocol.md, src/config.ts); the server caps what
// it gives and how long it holds, and refuses only what no agent sends.

import { describe, expect, it } from 'vitest';
import { envelopeProblem, MAX_CLAIM, MAX_WAIT_SECONDS, parseClaimBody } from '../../src/server/agent-api.js';
import { ApiError } from '../../src/server/http/api-error.js';

const agent = { id: 'a1', version: '1.0.0', checkTypes: ['API'], runtimes: [] };

function refusal(body: unknown): { statusCode: number; field: unknown } {
  try {
    parseClaimBody(body);
  } catch (error) {
    if (error instanceof ApiError) return { statusCode: error.statusCode, field: (error.body.attributes as { field?: unknown }).field };
    throw error;
  }
  throw new Error('the claim was taken');
}

describe('claim bodies', () => {
  it('takes max up to 1000 (JOB_CONCURRENCY) and gives at most MAX_CLAIM', () => {
    expect(parseClaimBody({ max: 300, waitSeconds: 1, agent }).max).toBe(MAX_CLAIM);
    expect(parseClaimBody({ max: 1000, waitSeconds: 1, agent }).max).toBe(MAX_CLAIM);
    expect(parseClaimBody({ max: 7, waitSeconds: 1, agent }).max).toBe(7);
  });

  it('takes waitSeconds up to 60 (CLAIM_WAIT_SECONDS) and holds at most MAX_WAIT_SECONDS', () => {
    expect(parseClaimBody({ max: 1, waitSeconds: 60, agent }).waitSeconds).toBe(MAX_WAIT_SECONDS);
    expect(parseClaimBody({ max: 1, waitSeconds: 0, agent }).waitSeconds).toBe(0);
    expect(parseClaimBody({ max: 1, waitSeconds: 12, agent }).waitSeconds).toBe(12);
  });

  it('refuses what no agent sends, naming the field', () => {
    expect(refusal({ max: 0, waitSeconds: 1, agent })).toEqual({ statusCode: 400, field: 'max' });
    expect(refusal({ max: 1001, waitSeconds: 1, agent })).toEqual({ statusCode: 400, field: 'max' });
    expect(refusal({ max: 1.5, waitSeconds: 1, agent })).toEqual({ statusCode: 400, field: 'max' });
    expect(refusal({ max: 1, waitSeconds: 61, agent })).toEqual({ statusCode: 400, field: 'waitSeconds' });
    expect(refusal({ max: 1, waitSeconds: -1, agent })).toEqual({ statusCode: 400, field: 'waitSeconds' });
  });

  it('takes an optional claimId of 1 to 100 printable characters, and refuses another, naming it', () => {
    expect(parseClaimBody({ max: 1, waitSeconds: 1, agent }).claimId).toBeUndefined();
    const claimId = '5f0c8a9e-3d1b-4c2a-9e7f-0a1b2c3d4e5f';
    expect(parseClaimBody({ max: 1, waitSeconds: 1, agent, claimId }).claimId).toBe(claimId);
    expect(parseClaimBody({ max: 1, waitSeconds: 1, agent, claimId: 'x'.repeat(100) }).claimId).toHaveLength(100);
    for (const bad of ['', 'x'.repeat(101), 'a b', 'é', 42, null]) {
      expect(refusal({ max: 1, waitSeconds: 1, agent, claimId: bad })).toEqual({ statusCode: 400, field: 'claimId' });
    }
  });
});

describe('result envelopes', () => {
  const good = { jobId: 'j1', resultId: 'r1', result: { id: 'r1', resultType: 'FINAL', startedAt: '2026-11-24T01:18:11.123Z', hasFailures: false, hasErrors: false } };
  const withResult = (result: Record<string, unknown>) => ({ ...good, result: { ...good.result, ...result } });

  it('takes only an RFC 3339 startedAt, naming the field', () => {
    expect(envelopeProblem(good)).toBeUndefined();
    expect(envelopeProblem(withResult({ startedAt: '2026-11-24T02:18:11+01:00' }))).toBeUndefined();
    for (const startedAt of ['2026', '2026-11-24', 'Nov 24 2026', '2026-02-30T01:00:00Z', '2026-11-24T24:00:00Z', '2026-11-24T01:18:11']) {
      expect(envelopeProblem(withResult({ startedAt })), startedAt).toMatch(/^result\.startedAt must be an RFC 3339 date-time/);
    }
  });

  it('refuses U+0000 in jobId and resultId, and verdict flags that are not booleans, naming the field', () => {
    expect(envelopeProblem({ ...good, jobId: 'j\u00001' })).toBe('jobId must not contain U+0000');
    expect(envelopeProblem({ ...good, resultId: 'r\u00001', result: { ...good.result, id: 'r\u00001' } })).toBe('resultId must not contain U+0000');
    expect(envelopeProblem(withResult({ hasErrors: 'yes' }))).toBe('result.hasErrors must be a boolean');
  });

  it('refuses U+0000 in the strings of a claim, naming the field', () => {
    expect(refusal({ max: 1, waitSeconds: 0, agent: { ...agent, checkTypes: ['API\u0000'] } })).toEqual({ statusCode: 400, field: 'agent.checkTypes[0]' });
  });
});
