// A cap on the connections one remote address holds at once on a listening
// server. maxConnections alone is shared by everyone: one client opening
// connections faster than the head deadline closes them (200 a second against
// a 10 s deadline) held all of them, and every other client was refused.

import type { Server, Socket } from 'node:net';

/**
 * Destroys, at accept, a connection from an address that already holds `max`; the rest are served as before.
 * `onRefused` hears of each refusal (the server's operator must learn why a client sees resets).
 */
export function capConnectionsPerAddress(server: Server, max: number, onRefused?: (address: string) => void): void {
  const held = new Map<string, number>();
  server.on('connection', (socket: Socket) => {
    // A socket already closed by the time it is accepted has no address: it holds nothing.
    const address = socket.remoteAddress;
    if (address === undefined) return;
    const count = held.get(address) ?? 0;
    if (count >= max) {
      socket.destroy();
      onRefused?.(address);
      return;
    }
    held.set(address, count + 1);
    socket.once('close', () => {
      const left = (held.get(address) ?? 1) - 1;
      if (left > 0) held.set(address, left);
      else held.delete(address);
    });
  });
}

/** How often one address's refusals are reported at most. */
export const REFUSAL_REPORT_EVERY_MS = 10 * 60_000;
/** Addresses whose last report is remembered; past this, older ones are forgotten first. */
const REPORTED_ADDRESSES = 1_024;

/**
 * Reports an address's refused connections at most once per REFUSAL_REPORT_EVERY_MS, with how many were
 * refused since its last report: a flood is one line every ten minutes, not one a connection.
 */
export function refusalReporter(report: (address: string, refused: number) => void, now: () => number = Date.now): (address: string) => void {
  const seen = new Map<string, { reportedAt: number; refused: number }>();
  return (address) => {
    const at = now();
    const entry = seen.get(address);
    if (entry && at - entry.reportedAt < REFUSAL_REPORT_EVERY_MS) {
      entry.refused++;
      return;
    }
    // Map order is insertion order: re-inserting keeps the most recently reported last, the stalest first.
    seen.delete(address);
    if (seen.size >= REPORTED_ADDRESSES) seen.delete(seen.keys().next().value as string);
    seen.set(address, { reportedAt: at, refused: 0 });
    report(address, (entry?.refused ?? 0) + 1);
  };
}
