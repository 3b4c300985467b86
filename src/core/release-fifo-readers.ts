// Lets a reader blocked opening a FIFO go on. Node.js (24) reads
// NODE_EXTRA_CA_CERTS on a thread it starts when TLS is first loaded, and
// opening a FIFO for reading blocks until some process opens it for writing;
// process exit joins that thread, so a process refusing such a setting
// (exit 78) printed its line and then never ended. Opening the write end and
// closing it at once ends the reader's open, and its read sees end of file.

import { closeSync, constants, openSync } from 'node:fs';

const PAUSE_MS = 10;

/**
 * Opens `file` (a FIFO) for writing without blocking and closes it, trying again while it has no reader
 * yet (ENXIO: the reading thread may not have reached its open) for at most `withinMs`. True if it did.
 */
export function releaseFifoReaders(file: string, withinMs = 2_000): boolean {
  const deadline = Date.now() + withinMs;
  for (;;) {
    try {
      closeSync(openSync(file, constants.O_WRONLY | constants.O_NONBLOCK));
      return true;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENXIO' || Date.now() >= deadline) return false;
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, PAUSE_MS);
    }
  }
}
