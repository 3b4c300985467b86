// Lease keeping (src/control-plane/leases.ts) against the real server (test/support/control-plane.ts)
// over real HTTP, with short leases: extended before they expire, a lost
// lease reported once, a released job no longer extended, a failed call
// retried, and the loop ending when its signal aborts.

import { randomUUID } from 'node:crypto';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { ControlPlaneClient } from '../../src/control-plane/client.js';
import { LeaseKeeper } from '../../src/control-plane/leases.js';
import { createMetrics } from '../../src/observability/metrics.js';
import { waitFor } from '../support/fake-jobs.js';
import { ControlPlane } from '../support/control-plane.js';

const logger = pino({ level: 'silent' });
const cleanup: Array<() => Promise<void>> = [];

afterEach(async () => {
  for (const step of cleanup.splice(0).reverse()) await step();
});

/** Leases of `jobs` jobs, claimed by a fresh agent, kept by a running LeaseKeeper. */
async function setUp(jobs: number, leaseMs = 1_000) {
  const cp = await ControlPlane.start({ leaseMs });
  cleanup.push(() => cp.close());
  const agentId = randomUUID();
  const client = new ControlPlaneClient({ apiUrl: cp.url, apiKey: cp.apiKey, agentId, version: '0.0.0-test', timeoutMs: 10_000, proxy: {} }, createMetrics());
  cleanup.push(() => client.close());
  for (let i = 0; i < jobs; i++) await cp.addJob({ id: `c${i}`, name: 'c', checkType: 'URL', request: {} });
  const answer = await client.claim({ max: jobs, waitSeconds: 0, agent: { id: agentId, version: '0.0.0-test', checkTypes: ['URL'], runtimes: [] } });
  expect(answer.jobs).toHaveLength(jobs);
  const lost: string[] = [];
  const leases = new LeaseKeeper(client, logger, (jobId) => lost.push(jobId));
  for (const job of answer.jobs) leases.track(job.id, job.leaseExpiresAt);
  const stop = new AbortController();
  const loop = leases.run(stop.signal);
  cleanup.push(async () => {
    stop.abort();
    await loop;
  });
  return { cp, leases, lost, ids: answer.jobs.map((j) => j.id), stop, loop };
}

const state = (cp: ControlPlane, id: string) => cp.jobs.get(id);

describe('LeaseKeeper', () => {
  it('extends every tracked lease before it expires, for as long as the job runs', async () => {
    const { cp, leases, lost, ids } = await setUp(2);
    const first = ids.map((id) => state(cp, id)?.leaseExpiresAt ?? 0);
    // Three lease spans: without extensions the server would have expired both (it sweeps every 50 ms).
    await new Promise((r) => setTimeout(r, 3_000));
    ids.forEach((id, i) => {
      expect(state(cp, id)?.state, id).toBe('leased');
      expect(state(cp, id)?.leaseExpiresAt, id).toBeGreaterThan(first[i] ?? 0);
    });
    expect(lost).toEqual([]);
    expect(leases.size).toBe(2);
  }, 15_000);

  it('reports a lost lease once, and stops tracking it', async () => {
    const { cp, leases, lost, ids } = await setUp(2);
    const [gone, kept] = ids as [string, string];
    await cp.revokeLease(gone);
    await waitFor(() => lost.length > 0, 'the lost lease');
    expect(lost).toEqual([gone]);
    expect(leases.size).toBe(1);
    // The other job's lease is still kept, and the lost one is not reported again.
    await new Promise((r) => setTimeout(r, 1_500));
    expect(lost).toEqual([gone]);
    expect(state(cp, kept)?.state).toBe('leased');
  }, 15_000);

  it('no longer extends a released job: its lease runs out at the service', async () => {
    const { cp, leases, lost, ids } = await setUp(1);
    const [id] = ids as [string];
    leases.release(id);
    expect(leases.size).toBe(0);
    await waitFor(() => state(cp, id)?.state === 'ready', 'the lease to run out', 5_000);
    expect(lost).toEqual([]);
  }, 15_000);

  it('keeps a lease through a failed call, and extends it on a later one', async () => {
    const { cp, lost, ids } = await setUp(1, 3_000);
    const [id] = ids as [string];
    const first = state(cp, id)?.leaseExpiresAt ?? 0;
    cp.inject({ route: 'leases', status: 503, count: 1 });
    await waitFor(() => (state(cp, id)?.leaseExpiresAt ?? 0) > first, 'an extension after the refused call', 10_000);
    expect(cp.requests.some((r) => r.route.includes('leases') && r.status === 503)).toBe(true);
    expect(state(cp, id)?.state).toBe('leased');
    expect(lost).toEqual([]);
  }, 15_000);

  it('wakes its sleeping loop for a lease tracked later that falls due sooner', async () => {
    // A 3 s lease falls due for extension at 1.5 s.
    const { cp, leases, lost, ids } = await setUp(1, 3_000);
    const [id] = ids as [string];
    const first = state(cp, id)?.leaseExpiresAt ?? 0;
    leases.release(id);
    leases.track('far-off', new Date(Date.now() + 60_000).toISOString());
    // Past 1.5 s the loop has nothing due before the far-off lease: it sleeps for about 30 s.
    await new Promise((r) => setTimeout(r, 1_800));
    expect(state(cp, id)?.leaseExpiresAt).toBe(first);
    // Tracked again, the job's lease is overdue for extension and expires at 3 s: only a wake-up keeps it.
    leases.track(id, new Date(first).toISOString());
    await waitFor(() => (state(cp, id)?.leaseExpiresAt ?? 0) > first, 'the short lease extended', 5_000);
    expect(state(cp, id)?.state).toBe('leased');
    expect(lost).toEqual([]);
  }, 15_000);

  it('ends its loop when the signal aborts', async () => {
    const { stop, loop } = await setUp(1, 60_000);
    stop.abort();
    await expect(loop).resolves.toBeUndefined();
  });
});
