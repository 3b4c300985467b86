// One replica at a time does the work that must not be done twice: it holds
// the leader lease (src/store/leader-lease.ts) and renews it every third of
// its time to live. A replica that cannot renew in time, or finds the lease
// taken, stops that work before its lease could run out: two replicas never
// both believe they lead. When the leader dies, its lease runs out and the
// next replica to try takes it: a takeover comes within ttl + ttl/3
// (docs/postgres.md). On SQLite the lease is always this server's.

import type { Logger } from '../observability/logger.js';
import type { LeaderLease } from '../store/leader-lease.js';

export const LEASE_NAME = 'scheduler';
/** The reason given when the leader steps down because its process stops. */
const STEPPING_DOWN = 'shutting down';

export interface LeadershipOptions {
  lease: LeaderLease;
  /** This replica's name in the lease row. */
  holder: string;
  ttlMs: number;
  logger: Logger;
  /** Starts the leader's work; awaited before the next renewal. */
  onElected: () => Promise<void>;
  /** Stops it; awaited likewise. */
  onDeposed: () => Promise<void>;
  now?: () => number;
}

export class Leadership {
  private leader = false;
  /** When the last successful renewal was asked for (the lease runs from about then). */
  private renewedAt = 0;
  private timer: NodeJS.Timeout | undefined;
  private tick: Promise<void> = Promise.resolve();
  private stopped = false;
  private readonly now: () => number;
  /** Terms this replica has led, for tests and /health. */
  terms = 0;

  constructor(private readonly options: LeadershipOptions) {
    this.now = options.now ?? Date.now;
  }

  get isLeader(): boolean {
    return this.leader;
  }

  private get renewEveryMs(): number {
    return Math.max(100, Math.floor(this.options.ttlMs / 3));
  }

  /** Tries once (awaited: a sole server leads before it says it started), then keeps trying. */
  async start(): Promise<void> {
    await this.attempt();
    this.arm();
  }

  /** Stops the leader's work and gives the lease up, so another replica takes over at once. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.tick;
    if (this.leader) {
      await this.depose(STEPPING_DOWN);
      await this.options.lease.release(LEASE_NAME, this.options.holder).catch((error: unknown) => {
        this.options.logger.warn({ err: error }, 'giving the leader lease up failed; it runs out by itself');
      });
    }
  }

  private arm(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.tick = this.attempt().finally(() => this.arm());
    }, this.renewEveryMs);
  }

  private async attempt(): Promise<void> {
    const asked = this.now();
    let held: boolean;
    try {
      // Bounded: an answer later than a renewal period is no answer (the lease may be running out meanwhile).
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error('the database did not answer within a renewal period')), this.renewEveryMs);
      });
      try {
        held = await Promise.race([this.options.lease.acquire(LEASE_NAME, this.options.holder, this.options.ttlMs), late]);
      } finally {
        clearTimeout(timer);
      }
    } catch (error) {
      this.options.logger.warn({ err: error, leader: this.leader }, 'renewing the leader lease failed');
      // Stop leading while the lease surely still runs: two thirds of its time after the last renewal.
      if (this.leader && this.now() - this.renewedAt >= (this.options.ttlMs * 2) / 3) await this.depose('the lease could not be renewed in time');
      return;
    }
    if (this.stopped && !this.leader) return;
    if (held) {
      this.renewedAt = asked;
      if (!this.leader) await this.elect();
    } else if (this.leader) {
      await this.depose('another replica holds the lease');
    }
  }

  private async elect(): Promise<void> {
    this.leader = true;
    this.terms++;
    this.options.logger.info({ holder: this.options.holder, ttlMs: this.options.ttlMs }, 'leader: this replica schedules');
    try {
      await this.options.onElected();
    } catch (error) {
      this.options.logger.error({ err: error }, "starting the leader's work failed; giving the lease up");
      await this.depose('its work did not start');
      await this.options.lease.release(LEASE_NAME, this.options.holder).catch(() => undefined);
    }
  }

  private async depose(reason: string): Promise<void> {
    if (!this.leader) return;
    this.leader = false;
    // Stepping down to stop is the normal end of every server's run, not a warning.
    const log = reason === STEPPING_DOWN ? this.options.logger.info.bind(this.options.logger) : this.options.logger.warn.bind(this.options.logger);
    log({ holder: this.options.holder, reason }, 'no longer the leader: scheduling stops here');
    await this.options.onDeposed().catch((error: unknown) => this.options.logger.error({ err: error }, "stopping the leader's work failed"));
  }
}
