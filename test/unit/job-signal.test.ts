// JobSignal (src/server/job-signal.ts): the per-location wake-up of claim long polls.

import { describe, expect, it } from 'vitest';
import { JobSignal } from '../../src/server/job-signal.js';

describe('JobSignal', () => {
  it('wakes the waiters of the notified location only', async () => {
    const signal = new JobSignal();
    const a = signal.wait('a', signal.generation('a'), 10_000);
    const b = signal.wait('b', signal.generation('b'), 50);
    expect(signal.waiting('a')).toBe(1);
    signal.notify('a');
    expect(await a).toBe(true);
    expect(await b).toBe(false);
    expect(signal.waiting('a')).toBe(0);
    expect(signal.waiting('b')).toBe(0);
  });

  it('does not lose a notify that came between reading the generation and waiting', async () => {
    const signal = new JobSignal();
    const since = signal.generation('a');
    signal.notify('a');
    const started = Date.now();
    expect(await signal.wait('a', since, 10_000)).toBe(true);
    expect(Date.now() - started).toBeLessThan(1_000);
  });

  it('ends the wait on abort and after the time, and leaves no waiter behind', async () => {
    const signal = new JobSignal();
    const caller = new AbortController();
    const waiting = signal.wait('a', signal.generation('a'), 10_000, caller.signal);
    caller.abort();
    expect(await waiting).toBe(false);
    expect(await signal.wait('a', signal.generation('a'), 20)).toBe(false);
    expect(await signal.wait('a', signal.generation('a'), 0)).toBe(false);
    expect(await signal.wait('a', signal.generation('a'), 1_000, caller.signal)).toBe(false);
    expect(signal.waiting('a')).toBe(0);
  });
});
