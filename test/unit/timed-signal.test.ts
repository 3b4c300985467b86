// timedSignal (src/core/timed-signal.ts): a parent signal plus a time limit,
// whose timer goes away when the work is done.

import { getEventListeners } from 'node:events';
import { describe, expect, it } from 'vitest';
import { timedSignal } from '../../src/core/timed-signal.js';

describe('timedSignal', () => {
  it('aborts with the parent\'s reason when the parent aborts', () => {
    const parent = new AbortController();
    const { signal, dispose } = timedSignal(parent.signal, 60_000);
    const reason = new Error('lease lost');
    parent.abort(reason);
    expect(signal.aborted).toBe(true);
    expect(signal.reason).toBe(reason);
    dispose();
  });

  it('is aborted at once, with the same reason, when the parent already is', () => {
    const parent = new AbortController();
    parent.abort(new Error('shut down'));
    const { signal } = timedSignal(parent.signal, 60_000);
    expect(signal.aborted).toBe(true);
    expect((signal.reason as Error).message).toBe('shut down');
  });

  it('aborts with a TimeoutError DOMException once its time is up, as AbortSignal.timeout does', async () => {
    const { signal } = timedSignal(new AbortController().signal, 5);
    await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
    expect(signal.reason).toBeInstanceOf(DOMException);
    expect((signal.reason as DOMException).name).toBe('TimeoutError');
  });

  it('leaves no listener on the parent once disposed, and never aborts after that: neither at its time nor with the parent', async () => {
    const parent = new AbortController();
    const bounded = Array.from({ length: 100 }, () => timedSignal(parent.signal, 20));
    expect(getEventListeners(parent.signal, 'abort')).toHaveLength(100);
    for (const b of bounded) b.dispose();
    expect(getEventListeners(parent.signal, 'abort')).toHaveLength(0);
    await new Promise((resolve) => setTimeout(resolve, 60));
    parent.abort(new Error('later'));
    expect(bounded.every((b) => !b.signal.aborted)).toBe(true);
  });
});
