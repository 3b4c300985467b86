// Where log lines go when the log stream is not a terminal: a file descriptor
// (1 or 2) written asynchronously, in order. The stream may fail at any time
// — its reader gone (EPIPE), a full disk (ENOSPC), a descriptor closed
// (EBADF) — and that must never stop or wedge the process: the first error
// that is not "try again" ends logging to it for good (the process goes on,
// its lines are dropped and counted). pino's own destination (sonic-boom)
// does not do this: an error other than EPIPE is an 'error' event nobody
// catches (a crash), and its flushSync retries any write error for ever,
// which froze a process whose stderr was /dev/full at start, deaf to SIGTERM.

import { write, writeSync } from 'node:fs';

/** Lines waiting for a reader that does not read are bounded: beyond this, new lines are dropped (and counted). */
export const MAX_PENDING_BYTES = 4 * 1024 * 1024;
/** A full pipe (EAGAIN) is tried again after this. */
const RETRY_MS = 50;
/** A synchronous flush (before exit) waits at most this long for a full pipe to take the lines. */
const FLUSH_DEADLINE_MS = 1_000;
const FLUSH_PAUSE_MS = 10;

const isTryAgain = (error: NodeJS.ErrnoException): boolean => error.code === 'EAGAIN' || error.code === 'EBUSY';

function pauseSync(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

export class LogDestination {
  /** Bytes handed to an asynchronous write that has not answered yet. */
  private inFlight: Buffer | undefined;
  private queued: Buffer[] = [];
  private queuedBytes = 0;
  private retryTimer: NodeJS.Timeout | undefined;
  private failure: NodeJS.ErrnoException | undefined;
  /** Lines dropped since the last notice of it (the queue was full). */
  private droppedUnsaid = 0;
  /** Lines refused: the queue was full, or the stream had failed (lines queued when it failed are not counted). */
  dropped = 0;

  constructor(
    private readonly fd: number,
    /** Called once, with the error that ended logging to the stream. */
    private readonly onFailure: (error: NodeJS.ErrnoException) => void = () => undefined,
  ) {}

  /** The error that ended logging to the stream, if one did. */
  get failed(): NodeJS.ErrnoException | undefined {
    return this.failure;
  }

  /** Takes one serialized line (pino's destination interface); never throws. */
  write(line: string): boolean {
    if (this.failure) {
      this.dropped++;
      return true;
    }
    const bytes = Buffer.from(line);
    if (this.queuedBytes + bytes.length > MAX_PENDING_BYTES) {
      this.dropped++;
      this.droppedUnsaid++;
      return true;
    }
    this.queue(bytes);
    this.writeNext();
    return true;
  }

  /** An asynchronous write has not answered yet. */
  get writing(): boolean {
    return this.inFlight !== undefined;
  }

  /**
   * Writes what is queued now, synchronously (before process.exit). Bounded: a full pipe gets
   * FLUSH_DEADLINE_MS, and any other error ends logging to the stream at once. Known limit: a write
   * still waiting for a busy libuv thread pool (its lines not yet out) lands after these, so the last
   * lines before an exit can come out of order then; nothing is lost or written twice.
   */
  flushSync(): void {
    clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    // An asynchronous write in flight finishes on its own; what is queued follows it.
    let rest = this.take();
    const deadline = Date.now() + FLUSH_DEADLINE_MS;
    while (rest && rest.length > 0 && !this.failure) {
      try {
        rest = rest.subarray(writeSync(this.fd, rest));
      } catch (error) {
        const failure = error as NodeJS.ErrnoException;
        if (!isTryAgain(failure)) this.fail(failure);
        else if (Date.now() >= deadline) break;
        else pauseSync(FLUSH_PAUSE_MS);
      }
    }
  }

  private queue(bytes: Buffer): void {
    this.queued.push(bytes);
    this.queuedBytes += bytes.length;
  }

  /** Everything queued as one buffer (with a notice first, if lines were dropped), the queue emptied. */
  private take(): Buffer | undefined {
    if (this.droppedUnsaid > 0) {
      const notice = { level: 40, time: Date.now(), pid: process.pid, droppedLines: this.droppedUnsaid, msg: 'log lines dropped: the log stream was not read fast enough' };
      this.queued.unshift(Buffer.from(`${JSON.stringify(notice)}\n`));
      this.droppedUnsaid = 0;
    }
    if (this.queued.length === 0) return undefined;
    const all = this.queued.length === 1 ? (this.queued[0] as Buffer) : Buffer.concat(this.queued);
    this.queued = [];
    this.queuedBytes = 0;
    return all;
  }

  private writeNext(): void {
    if (this.inFlight || this.retryTimer || this.failure) return;
    const bytes = this.take();
    if (!bytes) return;
    this.inFlight = bytes;
    write(this.fd, bytes, 0, bytes.length, null, (error, written) => {
      this.inFlight = undefined;
      if (error && !isTryAgain(error)) return this.fail(error);
      const rest = bytes.subarray(error ? 0 : written);
      if (rest.length > 0) {
        // Unwritten bytes go first; they are not counted against the bound again.
        this.queued.unshift(rest);
        this.queuedBytes += rest.length;
      }
      if (error) {
        // Unref'd: a full pipe does not keep the process up; the exit's flushSync makes a last try.
        this.retryTimer = setTimeout(() => {
          this.retryTimer = undefined;
          this.writeNext();
        }, RETRY_MS).unref();
        return;
      }
      this.writeNext();
    });
  }

  private fail(error: NodeJS.ErrnoException): void {
    if (this.failure) return;
    this.failure = error;
    this.queued = [];
    this.queuedBytes = 0;
    this.onFailure(error);
  }
}
