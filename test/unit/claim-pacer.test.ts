// ClaimPacer: the pause after claims that come back empty and early.

import { describe, expect, it } from 'vitest';
import { ClaimPacer, EMPTY_CLAIM_CAP_MS, EMPTY_CLAIM_FLOOR_MS } from '../../src/control-plane/claim-pacing.js';

describe('ClaimPacer', () => {
  it('pauses at least the floor after an early empty answer, less the time the claim took', () => {
    const pacer = new ClaimPacer();
    expect(pacer.next(0, 0, 25_000)).toBe(EMPTY_CLAIM_FLOOR_MS);
    const again = new ClaimPacer();
    expect(again.next(0, 300, 25_000)).toBe(EMPTY_CLAIM_FLOOR_MS - 300);
  });

  it('doubles while answers stay empty and early, up to the wait asked for', () => {
    const pacer = new ClaimPacer();
    const pauses = Array.from({ length: 8 }, () => pacer.next(0, 0, 5_000));
    expect(pauses).toEqual([1_000, 2_000, 4_000, 5_000, 5_000, 5_000, 5_000, 5_000]);
  });

  it('is capped when the wait asked for is long, and stays at the floor when it is 0', () => {
    const long = new ClaimPacer();
    const pauses = Array.from({ length: 10 }, () => long.next(0, 0, 60_000));
    expect(Math.max(...pauses)).toBe(EMPTY_CLAIM_CAP_MS);
    const polling = new ClaimPacer();
    expect(Array.from({ length: 4 }, () => polling.next(0, 0, 0))).toEqual([1_000, 1_000, 1_000, 1_000]);
  });

  it('starts over after an answer with jobs, and needs no pause then', () => {
    const pacer = new ClaimPacer();
    pacer.next(0, 0, 25_000);
    pacer.next(0, 0, 25_000);
    expect(pacer.next(2, 10, 25_000)).toBe(0);
    expect(pacer.next(0, 0, 25_000)).toBe(EMPTY_CLAIM_FLOOR_MS);
  });

  it('needs no pause when the service held the claim open as long as asked', () => {
    const pacer = new ClaimPacer();
    pacer.next(0, 0, 25_000);
    expect(pacer.next(0, 25_000, 25_000)).toBe(0);
    expect(pacer.next(0, 0, 25_000)).toBe(EMPTY_CLAIM_FLOOR_MS);
  });
});
