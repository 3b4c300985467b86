// A cap on the connections one remote address holds at once on a listening
// server. maxConnections alone is shared by everyone: one client opening
// connections faster than the head deadline closes them (200 a second against
// a 10 s deadline) held all of them, and every other client was refused.

import type { Server, Socket } from 'node:net';

/** Destroys, at accept, a connection from an address that already holds `max`; the rest are served as before. */
export function capConnectionsPerAddress(server: Server, max: number): void {
  const held = new Map<string, number>();
  server.on('connection', (socket: Socket) => {
    // A socket already closed by the time it is accepted has no address: it holds nothing.
    const address = socket.remoteAddress;
    if (address === undefined) return;
    const count = held.get(address) ?? 0;
    if (count >= max) {
      socket.destroy();
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
