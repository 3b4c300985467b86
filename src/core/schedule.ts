// Where in its period a check runs: a stable offset from a hash of its id,
// so that checks spread out rather than all firing at once, and the same
// check keeps its slot across restarts.

import { createHash } from 'node:crypto';

/** Stable offset of a check inside its period, from a hash of its id. */
export function offsetMs(id: string, periodMs: number): number {
  const hash = createHash('sha256').update(id).digest();
  return hash.readUInt32BE(0) % periodMs;
}

/** The first epoch-aligned slot (k·period + offset) strictly after `after`. */
export function nextSlot(after: number, periodMs: number, offset: number): number {
  const k = Math.floor((after - offset) / periodMs) + 1;
  return k * periodMs + offset;
}
