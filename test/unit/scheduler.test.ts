// Local mode's scheduler: stable per-check offsets, epoch-aligned slots, and
// never overlapping a check with itself. Fake timers and an injected clock.

import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { type Schedulable, Scheduler, STARTUP_SPREAD_MS } from '../../src/local/scheduler.js';
import { nextSlot, offsetMs } from '../../src/core/schedule.js';

const logger = pino({ level: 'silent' });
const EPOCH = 1_700_000_000_000;

describe('offsetMs', () => {
  it('is stable for an id and lies in [0, period)', () => {
    for (const period of [1000, 10_000, 60_000, 86_400_000, 7]) {
      for (let i = 0; i < 200; i++) {
        const id = `check-${i}`;
        const offset = offsetMs(id, period);
        expect(Number.isInteger(offset)).toBe(true);
        expect(offset).toBeGreaterThanOrEqual(0);
        expect(offset).toBeLessThan(period);
        expect(offsetMs(id, period)).toBe(offset);
      }
    }
  });

  it('spreads different ids over the period', () => {
    const offsets = new Set(Array.from({ length: 100 }, (_, i) => offsetMs(`check-${i}`, 60_000)));
    expect(offsets.size).toBeGreaterThan(90);
    const buckets = new Set([...offsets].map((o) => Math.floor(o / 6000)));
    expect(buckets.size).toBe(10);
  });
});

describe('nextSlot', () => {
  it('is the first slot k·period + offset strictly after the given time', () => {
    expect(nextSlot(0, 1000, 250)).toBe(250);
    expect(nextSlot(249, 1000, 250)).toBe(250);
    expect(nextSlot(250, 1000, 250)).toBe(1250);
    expect(nextSlot(251, 1000, 250)).toBe(1250);
    expect(nextSlot(1249, 1000, 250)).toBe(1250);
    // EPOCH is 20 s past a minute boundary.
    expect(nextSlot(EPOCH + 1, 60_000, 0)).toBe(EPOCH + 40_000);
  });

  it('always lands on an aligned slot within one period', () => {
    for (let i = 0; i < 500; i++) {
      const after = EPOCH + i * 7919;
      const period = 10_000;
      const offset = (i * 131) % period;
      const slot = nextSlot(after, period, offset);
      expect(slot).toBeGreaterThan(after);
      expect(slot - after).toBeLessThanOrEqual(period);
      expect((((slot - offset) % period) + period) % period).toBe(0);
    }
  });
});

interface Item extends Schedulable {
  label: string;
}

describe('Scheduler', () => {
  beforeEach(() => {
    vi.useFakeTimers({ now: EPOCH });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  function deferred() {
    let resolve: () => void = () => undefined;
    const promise = new Promise<void>((r) => {
      resolve = r;
    });
    return { promise, resolve };
  }

  it('runs each check first within the startup spread, then on its aligned slots', async () => {
    const items: Item[] = [
      { id: 'alpha', frequencySeconds: 10, label: 'a' },
      { id: 'beta', frequencySeconds: 10, label: 'b' },
      { id: 'gamma', frequencySeconds: 30, label: 'c' },
    ];
    const runs: Array<{ id: string; at: number }> = [];
    const scheduler = new Scheduler(
      items,
      async (item) => {
        runs.push({ id: item.id, at: Date.now() });
      },
      logger,
      () => Date.now(),
    );
    scheduler.start();
    await vi.advanceTimersByTimeAsync(STARTUP_SPREAD_MS);
    expect(runs.map((r) => r.id).sort()).toEqual(['alpha', 'beta', 'gamma']);
    // First runs come in offset order, each at start + its share of the spread.
    for (const run of runs) {
      const item = items.find((i) => i.id === run.id) as Item;
      const period = item.frequencySeconds * 1000;
      expect(run.at).toBe(EPOCH + Math.floor((offsetMs(item.id, period) / period) * STARTUP_SPREAD_MS));
    }

    await vi.advanceTimersByTimeAsync(120_000);
    for (const item of items) {
      const period = item.frequencySeconds * 1000;
      const offset = offsetMs(item.id, period);
      const times = runs.filter((r) => r.id === item.id).map((r) => r.at);
      const later = times.slice(1);
      // Every later run is on the check's own slot, one period apart.
      for (const at of later) expect((at - offset) % period).toBe(0);
      for (let i = 1; i < later.length; i++) expect((later[i] as number) - (later[i - 1] as number)).toBe(period);
      // The first aligned run is at least half a period after the startup run.
      expect((later[0] as number) - (times[0] as number)).toBeGreaterThanOrEqual(period / 2);
      // About one run per period over the 122 s.
      expect(times.length).toBeGreaterThanOrEqual(Math.floor(120_000 / period));
      expect(times.length).toBeLessThanOrEqual(Math.floor(122_000 / period) + 1);
    }
    expect(scheduler.skipped).toBe(0);
    scheduler.stop();
  });

  it('never overlaps a check with itself: a run longer than the period skips the slots it covers', async () => {
    const gates: Array<ReturnType<typeof deferred>> = [];
    let concurrent = 0;
    let maxConcurrent = 0;
    const scheduler = new Scheduler(
      [{ id: 'slow', frequencySeconds: 1 }],
      async () => {
        concurrent++;
        maxConcurrent = Math.max(maxConcurrent, concurrent);
        const gate = deferred();
        gates.push(gate);
        await gate.promise;
        concurrent--;
      },
      logger,
      () => Date.now(),
    );
    scheduler.start();
    await vi.advanceTimersByTimeAsync(STARTUP_SPREAD_MS);
    expect(gates).toHaveLength(1);
    expect(scheduler.inFlight).toBe(1);

    await vi.advanceTimersByTimeAsync(5_000);
    expect(gates).toHaveLength(1);
    // Every slot after the first run up to now was skipped.
    const offset = offsetMs('slow', 1000);
    let expectedSkips = 0;
    for (let slot = nextSlot(EPOCH + Math.floor(offset * 2) + 500, 1000, offset); slot <= Date.now(); slot += 1000) expectedSkips++;
    expect(expectedSkips).toBeGreaterThanOrEqual(5);
    expect(scheduler.skipped).toBe(expectedSkips);
    expect(maxConcurrent).toBe(1);

    gates[0]?.resolve();
    await vi.advanceTimersByTimeAsync(0);
    expect(scheduler.inFlight).toBe(0);
    await vi.advanceTimersByTimeAsync(1_000);
    expect(gates).toHaveLength(2);
    expect(maxConcurrent).toBe(1);
    expect(scheduler.skipped).toBe(expectedSkips);
    gates[1]?.resolve();
    scheduler.stop();
  });

  it('a slow check does not hold back another check', async () => {
    const runs: string[] = [];
    const scheduler = new Scheduler(
      [
        { id: 'stuck', frequencySeconds: 1 },
        { id: 'quick', frequencySeconds: 1 },
      ],
      (item) => {
        runs.push(item.id);
        return item.id === 'stuck' ? new Promise<void>(() => undefined) : Promise.resolve();
      },
      logger,
      () => Date.now(),
    );
    scheduler.start();
    await vi.advanceTimersByTimeAsync(STARTUP_SPREAD_MS + 5_000);
    expect(runs.filter((r) => r === 'stuck')).toHaveLength(1);
    expect(runs.filter((r) => r === 'quick').length).toBeGreaterThanOrEqual(5);
    expect(scheduler.skipped).toBeGreaterThanOrEqual(4);
    scheduler.stop();
  });

  it('keeps running after a run rejects', async () => {
    let calls = 0;
    const scheduler = new Scheduler(
      [{ id: 'flaky', frequencySeconds: 1 }],
      async () => {
        calls++;
        throw new Error('boom');
      },
      logger,
      () => Date.now(),
    );
    scheduler.start();
    await vi.advanceTimersByTimeAsync(STARTUP_SPREAD_MS + 3_000);
    expect(calls).toBeGreaterThanOrEqual(3);
    expect(scheduler.inFlight).toBe(0);
    scheduler.stop();
  });

  it('stop cancels every future run', async () => {
    let calls = 0;
    const scheduler = new Scheduler(
      [{ id: 'x', frequencySeconds: 1 }],
      async () => {
        calls++;
      },
      logger,
      () => Date.now(),
    );
    scheduler.start();
    await vi.advanceTimersByTimeAsync(STARTUP_SPREAD_MS + 1_000);
    const before = calls;
    expect(before).toBeGreaterThanOrEqual(1);
    scheduler.stop();
    await vi.advanceTimersByTimeAsync(10_000);
    expect(calls).toBe(before);
    expect(vi.getTimerCount()).toBe(0);
  });
});
