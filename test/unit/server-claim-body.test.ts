// The server's reading of a claim (src/server/agent-api.ts): an agent may ask
// for as many jobs as its JOB_CONCURRENCY and wait as long as its
// CLAIM_WAIT_SECONDS (docs/protocol.md, src/config.ts); the server caps what
// it gives and how long it holds, and refuses only what no agent sends.

import { describe, expect, it } from 'vitest';
import { MAX_CLAIM, MAX_WAIT_SECONDS, parseClaimBody } from '../../src/server/agent-api.js';
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
