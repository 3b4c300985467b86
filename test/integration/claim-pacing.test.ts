// A control plane that answers every claim at once, empty, whatever waitSeconds
// says (the real server behind a proxy that sends every claim with
// waitSeconds 0): the agent paces its claims, and leases and results still
// get through. And a claim answer lost on its way back: the retry gets it again.

import { describe, expect, it } from 'vitest';
import { useHarness } from '../support/harness.js';

const h = useHarness();

describe('claims against a control plane that never holds a claim open', () => {
  it('empty answers are paced, not repeated in a tight loop', async () => {
    const cp = await h.server({ answersClaimsAtOnce: true });
    h.agent(cp, { CLAIM_WAIT_SECONDS: '5' });
    await cp.waitFor(() => cp.claims.length > 0, 15_000, 'the first claim');
    const first = cp.requests.find((r) => r.route === '/v1/agent/claim')?.at as number;
    // Watch four seconds of the agent's life; unpaced, it made thousands of claims in that time.
    await cp.waitFor(() => Date.now() > first + 4_000, 10_000, 'four seconds of claims');
    const inWindow = cp.requests.filter((r) => r.route === '/v1/agent/claim' && r.at <= first + 4_000).length;
    // Paced: about one a second at first, then slower. Generous: a slow machine only makes fewer.
    expect(inWindow).toBeGreaterThanOrEqual(2);
    expect(inWindow).toBeLessThanOrEqual(12);
    expect(cp.violations).toEqual([]);
  });

  it('a running job keeps its lease and delivers its result while slots stay free', async () => {
    const cp = await h.server({ answersClaimsAtOnce: true, leaseMs: 4_000 });
    const id = await cp.addJob({ id: 'slow-check', name: 'slow', checkType: 'URL', request: { url: `${h.target.url}/slow/6000` } });
    h.agent(cp, { JOB_CONCURRENCY: '4', CLAIM_WAIT_SECONDS: '5' });
    await cp.waitFor(() => cp.resultsFor(id).length === 1, 40_000, 'the slow job result');
    const leases = cp.requests.filter((r) => r.route === '/v1/agent/leases');
    expect(leases.length).toBeGreaterThanOrEqual(1);
    expect(leases.every((r) => r.status === 200)).toBe(true);
    // The job was never lost and handed out again: its lease was extended in time.
    expect(cp.jobs.get(id)?.claims).toBe(1);
    // It ran to its end (slower than a URL check's default limit, so it may fail on time, but not aborted).
    expect(String(cp.resultsFor(id)[0]?.result.apiCheckResult?.requestError ?? '')).not.toMatch(/lease|Aborted/);
    expect(cp.violations).toEqual([]);
  });

  it('a job without an id handed out again and again does not count as work: claims stay paced', async () => {
    // Its lease runs out at once, so every claim that finds it ready gets it again.
    const cp = await h.server({ answersClaimsAtOnce: true, leaseMs: 1 });
    cp.claimJobText = () => '{"check":null}';
    await cp.addJob({ id: 'no-id', checkType: 'URL', request: { url: `${h.target.url}/ok` } });
    h.agent(cp, { CLAIM_WAIT_SECONDS: '5' });
    await cp.waitFor(() => cp.claims.length > 0, 15_000, 'the first claim');
    const first = cp.requests.find((r) => r.route === '/v1/agent/claim')?.at as number;
    await cp.waitFor(() => Date.now() > first + 6_000, 10_000, 'six seconds of claims');
    const inWindow = cp.requests.filter((r) => r.route === '/v1/agent/claim' && r.at <= first + 6_000).length;
    // Paced: 1 s, 2 s, 4 s apart. Counted as work, each copy reset the pacer: two claims a second.
    expect(inWindow).toBeLessThanOrEqual(5);
    expect(cp.claims.some((c) => c.given > 0)).toBe(true);
  });
});

describe('a claim answer lost on its way back', () => {
  it('the retry, under the same claimId, gets the same job at once instead of after its lease', async () => {
    // A lease far longer than the wait below: the result can only come from the answer given again.
    const cp = await h.server({ leaseMs: 300_000 });
    const id = await cp.addJob({ id: 'lost-answer', checkType: 'URL', request: { url: `${h.target.url}/ok` } });
    // Lost twice: an answer given again is not handed back to the queue when it is lost in turn.
    cp.inject({ route: 'claim', lostAnswer: true, count: 2 });
    h.agent(cp);
    await cp.waitFor(() => cp.resultsFor(id).length === 1, 45_000, 'the result of the job whose claim answer was lost');
    const [lost, lostAgain, retry] = cp.claims;
    expect(lost).toMatchObject({ given: 1, lost: true, claimId: expect.stringMatching(/^[0-9a-f-]{36}$/) });
    expect(lostAgain).toMatchObject({ given: 1, lost: true, claimId: lost?.claimId });
    expect(retry).toMatchObject({ given: 1, claimId: lost?.claimId });
    expect(retry?.lost).toBeUndefined();
    // Answered three times under one lease, never back in the queue.
    expect(cp.jobs.get(id)?.claims).toBe(3);
    expect(cp.resultsFor(id).at(-1)?.result.hasFailures).toBe(false);
    // The next claim is a new one.
    await cp.waitFor(() => cp.claims.length >= 4, 30_000, 'a claim after the retry');
    expect(cp.claims[3]?.claimId).not.toBe(lost?.claimId);
    expect(cp.violations).toEqual([]);
  });
});
