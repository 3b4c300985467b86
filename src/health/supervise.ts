// Runs a long-lived loop and keeps it running: a loop whose promise rejects is
// logged, reported to the watchdog (readiness turns 503, /health names it),
// and started again after a backoff, until the signal aborts.

import { Backoff, sleep } from '../core/backoff.js';
import type { Logger } from '../observability/logger.js';
import type { Heartbeat } from './watchdog.js';

/** The first restart comes after about a second; repeated crashes back off to a minute. */
const RESTART_BASE_MS = 1_000;
const RESTART_CAP_MS = 60_000;

export async function superviseLoop(
  name: string,
  run: () => Promise<void>,
  options: { logger: Logger; signal: AbortSignal; heartbeat: Heartbeat; backoff?: Backoff },
): Promise<void> {
  const backoff = options.backoff ?? new Backoff(RESTART_BASE_MS, RESTART_CAP_MS);
  while (!options.signal.aborted) {
    try {
      await run();
      return;
    } catch (error) {
      options.heartbeat.crashed(error);
      if (options.signal.aborted) return;
      const restartInMs = backoff.next();
      options.logger.error({ err: error, loop: name, restartInMs }, `${name} crashed; restarting it`);
      await sleep(restartInMs, options.signal);
    }
  }
}
