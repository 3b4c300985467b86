// Server and local modes while their database cannot write (a full disk, a
// read-only file system or server): one warning when it starts and one line
// when it ends, a probe write every few seconds meanwhile (nothing else may
// write: a load balancer sends no requests to a replica that is not ready),
// and `outpost_database_writable` for Prometheus. Readiness asks `writable`.

import { Gauge, type Registry } from 'prom-client';
import type { Logger } from '../observability/logger.js';
import type { WriteHealth, WriteProblem } from '../store/write-health.js';

/** How often a failing database is asked, with a probe write, whether it writes again. */
export const WRITE_PROBE_EVERY_MS = 5_000;

export interface DatabaseWritesOptions {
  writes: WriteHealth;
  probeWrite(): Promise<boolean>;
  logger: Logger;
  registry: Registry;
  /** Where the database is, for the log lines (never a password). */
  where: string;
  probeEveryMs?: number;
}

export class DatabaseWrites {
  private readonly gauge: Gauge;
  private timer: NodeJS.Timeout | undefined;
  private probing = false;

  constructor(private readonly options: DatabaseWritesOptions) {
    this.gauge = new Gauge({
      name: 'outpost_database_writable',
      help: '1 while the database takes writes; 0 while it cannot (disk full, read-only): not ready, results wait with the agents',
      registers: [options.registry],
    });
    this.gauge.set(1);
    options.writes.onChange((problem) => this.changed(problem));
    if (!options.writes.writable) this.changed(options.writes.current);
  }

  get writable(): boolean {
    return this.options.writes.writable;
  }

  /** For /health: null while writes work. */
  status(): { reason: string; detail: string; since: string } | null {
    const problem = this.options.writes.current;
    return problem ? { reason: problem.reason, detail: problem.detail, since: problem.since.toISOString() } : null;
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  private changed(problem: WriteProblem | undefined): void {
    const { logger, where } = this.options;
    this.gauge.set(problem ? 0 : 1);
    if (!problem) {
      this.stop();
      logger.info({ database: where }, 'the database takes writes again: ready');
      return;
    }
    logger.warn(
      { database: where, reason: problem.reason, error: problem.detail },
      `the database cannot write (${problem.reason}): not ready, no checks scheduled and no results stored until it can; agents keep their results meanwhile`,
    );
    if (this.timer) return;
    this.timer = setInterval(() => this.probe(), this.options.probeEveryMs ?? WRITE_PROBE_EVERY_MS);
    this.timer.unref();
  }

  private probe(): void {
    if (this.probing) return;
    this.probing = true;
    this.options.probeWrite().finally(() => {
      this.probing = false;
    });
  }
}
