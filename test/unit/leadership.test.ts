// The leader lease's renewal loop (src/server/leadership.ts) on a lease the
// test controls: elected when the lease is taken, deposed at once when
// another holder has it, deposed when renewals fail only once the lease
// could be running out (never before its work is stopped), and the lease
// given up on stop.

import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { Leadership } from '../../src/server/leadership.js';
import type { LeaderLease } from '../../src/store/leader-lease.js';
import { retryUntil } from '../support/daemon.js';

type Answer = 'held' | 'taken' | 'fail';

function lease(answer: () => Answer): LeaderLease & { released: string[]; asked: number } {
  const state = {
    released: [] as string[],
    asked: 0,
    async acquire() {
      state.asked++;
      const a = answer();
      if (a === 'fail') throw new Error('the database does not answer');
      return a === 'held';
    },
    async release(_name: string, holder: string) {
      state.released.push(holder);
    },
  };
  return state;
}

function leadership(l: LeaderLease, events: string[], now: () => number = Date.now, ttlMs = 300, logger = pino({ level: 'silent' })) {
  return new Leadership({
    lease: l,
    holder: 'me',
    ttlMs,
    logger,
    now,
    onElected: async () => {
      events.push('elected');
    },
    onDeposed: async () => {
      events.push('deposed');
    },
  });
}

describe('leadership', () => {
  it('warns when another replica takes the lease, but steps down at stop with an info line', async () => {
    let answer: Answer = 'held';
    const lines: { level: number; msg: string; reason?: string }[] = [];
    const logger = pino({ level: 'info' }, { write: (line: string) => lines.push(JSON.parse(line)) });
    const lead = leadership(lease(() => answer), [], Date.now, 300, logger);
    await lead.start();
    expect(await retryUntil(5_000, async () => lead.isLeader, 10)).toBe(true);
    answer = 'taken';
    expect(await retryUntil(5_000, async () => !lead.isLeader, 10)).toBe(true);
    answer = 'held';
    expect(await retryUntil(5_000, async () => lead.isLeader, 10)).toBe(true);
    await lead.stop();
    const deposed = lines.filter((l) => l.msg === 'no longer the leader: scheduling stops here');
    expect(deposed.map((l) => [l.level, l.reason])).toEqual([
      [40, 'another replica holds the lease'],
      [30, 'shutting down'],
    ]);
  });

  it('leads once the lease is taken, and stops at once when another holder has it', async () => {
    let answer: Answer = 'taken';
    const events: string[] = [];
    const l = lease(() => answer);
    const lead = leadership(l, events);
    await lead.start();
    expect(lead.isLeader).toBe(false);
    answer = 'held';
    expect(await retryUntil(5_000, async () => lead.isLeader, 10)).toBe(true);
    answer = 'taken';
    expect(await retryUntil(5_000, async () => !lead.isLeader, 10)).toBe(true);
    expect(events).toEqual(['elected', 'deposed']);
    await lead.stop();
    expect(l.released).toEqual([]);
  });

  it('keeps leading through failed renewals while the lease surely runs, then stops', async () => {
    let answer: Answer = 'held';
    let clock = 1_000_000;
    const events: string[] = [];
    const l = lease(() => answer);
    const lead = leadership(l, events, () => clock);
    await lead.start();
    expect(events).toEqual(['elected']);
    answer = 'fail';
    // A failed renewal a third of the lease after the last good one: still leading.
    clock += 100;
    const asked = l.asked;
    expect(await retryUntil(5_000, async () => l.asked > asked + 1, 10)).toBe(true);
    expect(lead.isLeader).toBe(true);
    // Two thirds of the lease after the last good renewal: it stops before the lease could run out.
    clock += 100;
    expect(await retryUntil(5_000, async () => !lead.isLeader, 10)).toBe(true);
    expect(events).toEqual(['elected', 'deposed']);
    await lead.stop();
  });

  it('gives the lease up on stop, after stopping its work', async () => {
    const events: string[] = [];
    const l = lease(() => 'held');
    const lead = leadership(l, events);
    await lead.start();
    await lead.stop();
    expect(events).toEqual(['elected', 'deposed']);
    expect(l.released).toEqual(['me']);
  });
});
