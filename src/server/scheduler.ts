// The server's scheduler: each active check gets a check session on its
// frequency, at a stable offset in its period (core/schedule.ts), with one
// job per location for that location's agents to claim. A location whose
// previous job of the check is still open is left out of the run (a run never
// overlaps itself; the slot is missed, never queued up, and logged by streak:
// server/missed-slots.ts). Beside it
// two housekeeping loops: the sweeper (expired leases back to the queue, jobs
// past their deadline TIMED_OUT) and retention (old results, sessions and
// artifact files deleted in small batches).

import { randomUUID } from 'node:crypto';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { nextSlot, offsetMs } from '../core/schedule.js';
import { attemptsPerRun } from '../checks/retry.js';
import { type Heartbeat, NO_HEARTBEAT } from '../health/watchdog.js';
import type { Logger } from '../observability/logger.js';
import type { NewJob, SessionRecord, Store, StoredCheck } from '../store/store.js';
import { LEASE_MS } from './agent-api.js';
import { MissedSlots } from './missed-slots.js';
import { storeFailureLevel } from '../store/write-health.js';

/** First runs are spread over this window after start, in offset order (as src/local/scheduler.ts does). */
export const STARTUP_SPREAD_MS = 2_000;
/** How long an agent holds a job before it must extend the lease (docs/protocol.md). */
export const DEFAULT_SWEEP_EVERY_MS = 5_000;
export const DEFAULT_RETENTION_EVERY_MS = 10 * 60_000;
export const DEFAULT_PRUNE_BATCH = 1_000;
/** Batches one retention round deletes at most; what is left waits for the next round. */
export const MAX_PRUNE_BATCHES_PER_ROUND = 100;
/** A sweep that takes longer than this (on top of its interval) shows the sweeper as stuck. */
const SWEEP_BUDGET_MS = 30_000;
const DAY_MS = 86_400_000;
/** setTimeout's longest delay; a longer one would fire at once, so a far slot is reached in steps. */
const MAX_TIMER_MS = 2_147_483_647;

export interface SessionSchedulerOptions {
  store: Store;
  logger: Logger;
  /** STATE_DIR: artifact files live in STATE_DIR/artifacts/<id>. */
  stateDir: string;
  /** RESULTS_RETENTION_DAYS: results, finished sessions and artifacts older than this are deleted. */
  retentionDays: number;
  /**
   * The feature stores' own pruning (alerts' outbox, error groups, heartbeat
   * events), by name: each deletes at most `batch` rows older than `before`
   * per call and says how many it deleted.
   */
  pruners?: Readonly<Record<string, (before: Date, batch: number) => Promise<number>>>;
  /** A job was queued for the location: wake its waiting claims (job-signal.ts JobSignal.notify). */
  onQueued?: (location: string) => void;
  leaseMs?: number;
  sweepEveryMs?: number;
  retentionEveryMs?: number;
  pruneBatch?: number;
  startupSpreadMs?: number;
  /** Beats with every sweep: a store that stops answering shows as a stuck sweeper. */
  heartbeat?: Heartbeat;
  /**
   * Several servers share the store, and this one has just become the one
   * that schedules (src/server/leadership.ts): each check's first run is its
   * latest slot, which the previous leader may have made already (the store
   * then makes nothing), and the next slot follows it, so a takeover neither
   * doubles a slot nor skips one (docs/postgres.md).
   */
  sharedStore?: boolean;
  now?: () => number;
}

interface Slot {
  check: StoredCheck;
  timer: NodeJS.Timeout | undefined;
}

/** The latest slot of a check's schedule at or before `now`. */
function latestSlot(now: number, period: number, offset: number): number {
  return nextSlot(now, period, offset) - period;
}

export class SessionScheduler {
  private readonly store: Store;
  private readonly logger: Logger;
  private readonly now: () => number;
  private readonly leaseMs: number;
  private readonly sweepEveryMs: number;
  private readonly retentionEveryMs: number;
  private readonly pruneBatch: number;
  private readonly spreadMs: number;
  private readonly heartbeat: Heartbeat;
  private readonly slots = new Map<string, Slot>();
  /** Checks whose session is being made right now: a slot that comes meanwhile is missed, not doubled. */
  private readonly creating = new Set<string>();
  /** Every store call in flight, for stop(). */
  private readonly inFlight = new Set<Promise<unknown>>();
  private sweepTimer: NodeJS.Timeout | undefined;
  private retentionTimer: NodeJS.Timeout | undefined;
  private reloading: Promise<void> = Promise.resolve();
  private started = false;
  private stopped = false;
  /** Slots missed because a location's previous job was still open. */
  missed = 0;
  /** The streaks of missed slots going on, each logged when it starts and when it ends. */
  readonly missedSlots: MissedSlots;
  sessionsCreated = 0;

  constructor(private readonly options: SessionSchedulerOptions) {
    this.store = options.store;
    this.logger = options.logger;
    this.now = options.now ?? Date.now;
    this.leaseMs = options.leaseMs ?? LEASE_MS;
    this.sweepEveryMs = options.sweepEveryMs ?? DEFAULT_SWEEP_EVERY_MS;
    this.retentionEveryMs = options.retentionEveryMs ?? DEFAULT_RETENTION_EVERY_MS;
    this.pruneBatch = options.pruneBatch ?? DEFAULT_PRUNE_BATCH;
    this.spreadMs = options.startupSpreadMs ?? STARTUP_SPREAD_MS;
    this.heartbeat = options.heartbeat ?? NO_HEARTBEAT;
    this.missedSlots = new MissedSlots(options.logger);
  }

  /** Reads the active checks and arms them (a store that cannot answer rejects); starts the sweeper and retention loops. */
  async start(): Promise<void> {
    if (this.started) throw new Error('the scheduler was started already');
    this.started = true;
    const first = this.track(this.reload());
    this.reloading = first.catch(() => undefined);
    await first;
    this.armSweep(0);
    // Zero or less keeps results for ever.
    if (this.options.retentionDays > 0) this.armRetention(0);
    else this.logger.info({ retentionDays: this.options.retentionDays }, 'results are kept for ever');
  }

  /**
   * Reads the active checks again (after a DELETE, a new checks file): a check
   * that is gone stops, a new one starts within the startup spread, one whose
   * frequency changed moves to its new slots; the others keep their timers.
   * Never rejects (a route calls it and moves on): a failed reload is logged
   * and the checks stay as they were.
   */
  reschedule(): Promise<void> {
    // One reload after another, in the order asked.
    this.reloading = this.reloading
      .then(() => this.track(this.reload()))
      .catch((error: unknown) => this.logger[storeFailureLevel(error)]({ err: error }, 'reading the checks to schedule failed'));
    return this.reloading;
  }

  /** Clears every timer; resolves once every store call in flight has finished. */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const slot of this.slots.values()) clearTimeout(slot.timer);
    this.slots.clear();
    clearTimeout(this.sweepTimer);
    clearTimeout(this.retentionTimer);
    this.heartbeat.idle();
    while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight]);
    this.missedSlots.endAll();
  }

  /** Ids of the checks with a timer, for tests and metrics. */
  get scheduled(): string[] {
    return [...this.slots.keys()];
  }

  private track<T>(promise: Promise<T>): Promise<T> {
    this.inFlight.add(promise);
    const done = () => this.inFlight.delete(promise);
    promise.then(done, done);
    return promise;
  }

  private async reload(): Promise<void> {
    if (this.stopped) return;
    // Heartbeat checks are pinged, never run: no session, no job (src/server/heartbeats.ts watches them).
    const checks = (await this.store.activeChecks()).filter((check) => check.checkType !== 'HEARTBEAT');
    if (this.stopped) return;
    const now = this.now();
    const ids = new Set(checks.map((check) => check.id));
    for (const [id, slot] of this.slots) {
      if (ids.has(id)) continue;
      clearTimeout(slot.timer);
      this.slots.delete(id);
      this.missedSlots.endCheck(id, 'check gone');
      this.logger.info({ checkId: id }, 'check no longer scheduled');
    }
    for (const check of checks) {
      if (!Number.isInteger(check.frequencySeconds) || check.frequencySeconds < 1) {
        this.logger.error({ checkId: check.id, frequencySeconds: check.frequencySeconds }, 'not scheduling a check whose frequency is not a whole number of seconds of at least 1');
        const stale = this.slots.get(check.id);
        clearTimeout(stale?.timer);
        this.slots.delete(check.id);
        this.missedSlots.endCheck(check.id, 'check gone');
        continue;
      }
      const slot = this.slots.get(check.id);
      const period = check.frequencySeconds * 1000;
      if (!slot) {
        const created: Slot = { check, timer: undefined };
        this.slots.set(check.id, created);
        this.arm(created, now + Math.floor((offsetMs(check.id, period) / period) * this.spreadMs), latestSlot(now, period, offsetMs(check.id, period)));
        continue;
      }
      const moved = slot.check.frequencySeconds !== check.frequencySeconds;
      slot.check = check;
      if (moved) {
        clearTimeout(slot.timer);
        this.arm(slot, nextSlot(now, period, offsetMs(check.id, period)));
      }
    }
  }

  /** Runs the slot `slotMs` of the check at `at` (the startup run comes a little after its slot; every other run at it). */
  private arm(slot: Slot, at: number, slotMs = at): void {
    if (this.stopped) return;
    const delay = Math.max(0, at - this.now());
    slot.timer = delay > MAX_TIMER_MS ? setTimeout(() => this.arm(slot, at, slotMs), MAX_TIMER_MS) : setTimeout(() => this.fire(slot, at, slotMs), delay);
  }

  private fire(slot: Slot, at: number, slotMs: number): void {
    const { check } = slot;
    const period = check.frequencySeconds * 1000;
    const offset = offsetMs(check.id, period);
    if (this.options.sharedStore) {
      // The slot after this one; when that has passed already (a slow store), the latest one, once.
      this.arm(slot, nextSlot(Math.max(slotMs, this.now() - period), period, offset));
    } else {
      // At least half a period to the next slot, so the startup run and the first aligned slot never crowd together.
      this.arm(slot, nextSlot(Math.max(at, this.now()) + period / 2, period, offset));
    }
    if (this.creating.has(check.id)) {
      this.missed++;
      this.missedSlots.missed({ checkId: check.id }, slotMs, 'the previous session of this check is still being created');
      return;
    }
    this.missedSlots.ran({ checkId: check.id });
    this.creating.add(check.id);
    this.track(this.runOnce(check.id, slotMs))
      .catch((error: unknown) => this.logger[storeFailureLevel(error)]({ err: error, checkId: check.id }, 'creating a check session failed'))
      .finally(() => this.creating.delete(check.id));
  }

  /** One slot of a check: a session with a job for each location that has none open. */
  private async runOnce(checkId: string, slotMs: number): Promise<void> {
    // Read again: a check deleted or changed since its timer was armed is run as it is now, or not at all.
    const check = await this.store.check(checkId);
    if (!check || check.removedAt !== null || check.checkType === 'HEARTBEAT' || this.stopped) return;
    const locations: string[] = [];
    this.missedSlots.endCheck(check.id, 'location gone', check.locations);
    for (const location of check.locations) {
      if (await this.store.hasOpenJob(check.id, location)) {
        this.missed++;
        this.missedSlots.missed({ checkId: check.id, location }, slotMs, 'the previous run in this location is still open');
      } else {
        this.missedSlots.ran({ checkId: check.id, location });
        locations.push(location);
      }
    }
    if (locations.length === 0 || this.stopped) return;
    const now = this.now();
    const deadlineAt = new Date(now + check.capMs + 2 * this.leaseMs).toISOString();
    const session: SessionRecord = {
      id: randomUUID(),
      checkId: check.id,
      checkType: check.checkType,
      name: check.name,
      status: 'STARTED',
      // The locations that got a job: the session is complete once each has a FINAL.
      runLocations: locations,
      triggerSource: 'SCHEDULER',
      startedAt: new Date(now).toISOString(),
      stoppedAt: null,
      durationMs: null,
    };
    // What an agent's run of it may send as ATTEMPTs: the store refuses more (src/store/attempt-bound.ts).
    const attempts = attemptsPerRun(check.definition);
    const jobs: NewJob[] = locations.map((location) => ({ id: randomUUID(), location, deadlineAt, attemptsPerRun: attempts }));
    if ((await this.store.createSession(session, jobs, check, slotMs)) === false) {
      this.logger.debug({ checkId: check.id, slot: new Date(slotMs).toISOString() }, 'slot made already by another server');
      return;
    }
    this.sessionsCreated++;
    this.logger.debug({ checkId: check.id, sessionId: session.id, locations }, 'check session queued');
    for (const location of locations) this.options.onQueued?.(location);
  }

  private armSweep(delayMs: number): void {
    if (this.stopped) return;
    this.heartbeat.beat(delayMs + SWEEP_BUDGET_MS);
    this.sweepTimer = setTimeout(() => {
      this.track(this.sweep())
        .catch((error: unknown) => this.logger[storeFailureLevel(error)]({ err: error }, 'sweeping leases and deadlines failed'))
        .finally(() => this.armSweep(this.sweepEveryMs));
    }, delayMs);
  }

  private async sweep(): Promise<void> {
    const now = new Date(this.now());
    const requeued = await this.store.requeueExpiredLeases(now);
    if (requeued > 0) {
      this.logger.info({ jobs: requeued }, 'leases expired: jobs back in the queue');
      // The store says how many, not where: every location's claims look again.
      if (this.options.onQueued) for (const location of await this.store.locations()) this.options.onQueued(location.id);
    }
    const timedOut = await this.store.timeOutJobs(now);
    if (timedOut.length > 0) this.logger.warn({ sessions: timedOut }, 'jobs past their deadline: timed out');
  }

  private armRetention(delayMs: number): void {
    if (this.stopped) return;
    this.retentionTimer = setTimeout(() => {
      this.track(this.prune())
        .catch((error: unknown) => this.logger[storeFailureLevel(error)]({ err: error }, 'deleting old results failed'))
        .finally(() => this.armRetention(this.retentionEveryMs));
    }, delayMs);
  }

  /** Deletes what is older than the retention, batch by batch, until a batch comes back short (or the round's bound). */
  private async prune(): Promise<void> {
    const before = new Date(this.now() - this.options.retentionDays * DAY_MS);
    let results = 0;
    let files = 0;
    for (let round = 0; round < MAX_PRUNE_BATCHES_PER_ROUND && !this.stopped; round++) {
      const batch = await this.store.pruneBefore(before, this.pruneBatch);
      results += batch.results;
      for (const id of batch.artifactIds) files += await this.removeArtifact(id);
      if (batch.results < this.pruneBatch) break;
      // Let requests in between batches.
      await new Promise((resolve) => setImmediate(resolve));
    }
    if (results > 0 || files > 0) this.logger.info({ results, artifactFiles: files, before: before.toISOString() }, 'old results deleted');
    for (const [name, prune] of Object.entries(this.options.pruners ?? {})) {
      let rows = 0;
      for (let round = 0; round < MAX_PRUNE_BATCHES_PER_ROUND && !this.stopped; round++) {
        const deleted = await prune(before, this.pruneBatch);
        rows += deleted;
        if (deleted < this.pruneBatch) break;
        await new Promise((resolve) => setImmediate(resolve));
      }
      if (rows > 0) this.logger.info({ [name]: rows, before: before.toISOString() }, `old ${name} deleted`);
    }
  }

  /** Removes an artifact's file and any unfinished upload of it; 1 when a file went. */
  private async removeArtifact(id: string): Promise<number> {
    // Ids are the server's own; one that is not a plain file name is never turned into a path.
    if (id === '' || id !== path.basename(id) || id === '.' || id === '..') {
      this.logger.warn({ artifactId: id }, 'not removing an artifact whose id is not a file name');
      return 0;
    }
    const file = path.join(this.options.stateDir, 'artifacts', id);
    let removed = 0;
    for (const target of [file, `${file}.part`]) {
      try {
        await rm(target);
        removed++;
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'ENOENT') this.logger.warn({ err: error, artifactId: id }, 'removing an artifact file failed');
      }
    }
    return Math.min(removed, 1);
  }
}
