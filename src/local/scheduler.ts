// Local mode's source: fires each check on its frequency at a stable per-check
// offset (so checks spread out rather than all firing at once), and never
// overlaps a check with itself.

import { type Heartbeat, NO_HEARTBEAT } from '../health/watchdog.js';
import type { Logger } from '../observability/logger.js';
import { nextSlot, offsetMs } from '../core/schedule.js';

export interface Schedulable {
  id: string;
  frequencySeconds: number;
}

/** First runs are spread over this window after start, in offset order, so a person sees results at once. */
export const STARTUP_SPREAD_MS = 2_000;

export class Scheduler<T extends Schedulable> {
  private readonly timers = new Map<string, NodeJS.Timeout>();
  /** Some check fires at least this often (a next slot is at most one and a half periods away), so the scheduler shows life as often. */
  private readonly beatWithinMs: number;
  private readonly running = new Set<string>();
  private stopped = false;
  skipped = 0;

  constructor(
    private readonly items: T[],
    private readonly run: (item: T) => Promise<void>,
    private readonly logger: Logger,
    private readonly now: () => number = Date.now,
    private readonly heartbeat: Heartbeat = NO_HEARTBEAT,
  ) {
    const shortest = items.reduce((min, item) => Math.min(min, item.frequencySeconds * 1000), Number.POSITIVE_INFINITY);
    this.beatWithinMs = shortest * 1.5 + STARTUP_SPREAD_MS;
  }

  start(): void {
    const start = this.now();
    for (const item of this.items) {
      const period = item.frequencySeconds * 1000;
      const offset = offsetMs(item.id, period);
      const first = start + Math.floor((offset / period) * STARTUP_SPREAD_MS);
      this.arm(item, first);
    }
    this.beat();
  }

  stop(): void {
    this.stopped = true;
    for (const timer of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
    this.heartbeat.idle();
  }

  /** Promises the watchdog the next firing within the shortest period: timers that stop firing show as stuck. */
  private beat(): void {
    if (this.stopped || this.items.length === 0) return this.heartbeat.idle();
    this.heartbeat.beat(this.beatWithinMs);
  }

  get inFlight(): number {
    return this.running.size;
  }

  private arm(item: T, at: number): void {
    if (this.stopped) return;
    const timer = setTimeout(() => this.fire(item, at), Math.max(0, at - this.now()));
    this.timers.set(item.id, timer);
  }

  private fire(item: T, at: number): void {
    const period = item.frequencySeconds * 1000;
    const offset = offsetMs(item.id, period);
    // The next slot is at least half a period away, so the startup run and the first aligned slot never crowd together.
    this.arm(item, nextSlot(Math.max(at, this.now()) + period / 2, period, offset));
    this.beat();
    if (this.running.has(item.id)) {
      this.skipped++;
      this.logger.warn({ checkId: item.id }, 'previous run still in progress: skipping this run');
      return;
    }
    this.running.add(item.id);
    this.run(item)
      .catch((error: unknown) => this.logger.error({ err: error, checkId: item.id }, 'scheduled run failed'))
      .finally(() => this.running.delete(item.id));
  }
}
