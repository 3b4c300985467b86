// What the test daemons (nginx, named, blackbox_exporter) share: starting on
// a free port with a retry when it was taken meanwhile, and stopping with
// escalating signals.

import type { ChildProcess } from 'node:child_process';
import { freePort } from './nginx.js';

/**
 * How long a test daemon may take to become ready. Generous on purpose: CI shares two cores with
 * other work (load average 6 has been seen), and a daemon that is merely slow must not fail a run.
 */
export const READY_DEADLINE_MS = 60_000;

/**
 * Calls `attempt` until it returns true or `deadlineMs` has passed, pausing `pauseMs` between tries;
 * resolves with whether it succeeded. A throw ends the wait at once (e.g. the daemon exited).
 */
export async function retryUntil(deadlineMs: number, attempt: () => Promise<boolean>, pauseMs = 100): Promise<boolean> {
  const end = Date.now() + deadlineMs;
  for (;;) {
    if (await attempt()) return true;
    if (Date.now() >= end) return false;
    await new Promise((r) => setTimeout(r, pauseMs));
  }
}

/**
 * Calls `start` with a free port; when it fails with a message matching
 * `portTaken` (the port went to someone else between probe and bind), tries
 * again with another, three times in all.
 */
export async function onFreePort<T>(start: (port: number) => Promise<T>, portTaken: RegExp, what: string): Promise<T> {
  let lastError: Error | undefined;
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      return await start(await freePort());
    } catch (error) {
      lastError = error as Error;
      if (!portTaken.test(lastError.message)) throw lastError;
    }
  }
  throw lastError ?? new Error(`${what} did not start`);
}

/**
 * Sends each signal in turn (through `send`, which may address a process
 * group), waiting up to its time for `exited`; stops early once it has, or
 * when `send` throws (the process is gone).
 */
export async function stopEscalating(
  steps: ReadonlyArray<readonly [NodeJS.Signals, number]>,
  send: (signal: NodeJS.Signals) => void,
  exited: Promise<void>,
): Promise<void> {
  for (const [signal, waitMs] of steps) {
    try {
      send(signal);
    } catch {
      return;
    }
    const done = await Promise.race([exited.then(() => true), new Promise<false>((r) => setTimeout(() => r(false), waitMs).unref())]);
    if (done) return;
  }
}

/** A daemon's end, as a promise and as a one-line description (undefined while it runs). */
export interface DaemonExit {
  exited: Promise<void>;
  description: () => string | undefined;
}

/**
 * Watches a daemon's process for its end: `describeExit` words an exit (code, signal), a failed
 * start is "<name> could not be started: …"; `onEnd` runs either way (e.g. to forget the process).
 */
export function watchExit(
  child: ChildProcess,
  name: string,
  describeExit: (code: number | null, signal: NodeJS.Signals | null) => string,
  onEnd: () => void = () => undefined,
): DaemonExit {
  let description: string | undefined;
  const exited = new Promise<void>((resolve) => {
    child.once('exit', (code, signal) => {
      description = describeExit(code, signal);
      onEnd();
      resolve();
    });
    child.once('error', (error) => {
      description = `${name} could not be started: ${error.message}`;
      onEnd();
      resolve();
    });
  });
  return { exited, description: () => description };
}

/** The process exists (also when it is another user's, which signal 0 may not reach). */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
