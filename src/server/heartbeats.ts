// Heartbeat checks on the server: what the checks file's HEARTBEAT checks
// become in the store, the watcher that fails a check whose ping is overdue,
// and the success ratios of the events route. docs/server.md ("Heartbeat
// monitors") states the rules.

import type { HeartbeatCheck } from '../checks/heartbeat-check.js';
import { type Heartbeat, NO_HEARTBEAT } from '../health/watchdog.js';
import type { CheckMetrics } from '../observability/check-metrics.js';
import type { Logger } from '../observability/logger.js';
import type { CheckResultEntry } from '../core/result-entry.js';
import type { HeartbeatStore, HeartbeatSync } from '../store/heartbeats.js';
import type { StoredCheck } from '../store/store.js';
import { keyHash } from './http/credentials.js';
import { storeFailureLevel } from '../store/write-health.js';

/** How often the watcher looks for overdue checks: a check fails at most this late after period + grace. */
export const DEFAULT_WATCH_EVERY_MS = 1_000;
/** A round that takes longer than this (on top of its interval) shows the watcher as stuck. */
const WATCH_BUDGET_MS = 30_000;

/** The store's check rows: never scheduled (scheduler.ts skips HEARTBEAT), no location, no variables kept. */
export function storedHeartbeatChecks(heartbeats: readonly HeartbeatCheck[]): StoredCheck[] {
  return heartbeats.map((h) => ({
    id: h.id,
    name: h.name,
    checkType: 'HEARTBEAT',
    frequencySeconds: h.periodSeconds,
    locations: [],
    definition: h.definition,
    environmentVariables: [],
    runtimeId: null,
    capMs: 0,
  }));
}

/** What the heartbeat store keeps of each check: the token only as its SHA-256. */
export function heartbeatSyncs(heartbeats: readonly HeartbeatCheck[]): HeartbeatSync[] {
  return heartbeats.map((h) => ({ checkId: h.id, tokenHash: keyHash(h.token), periodMs: h.periodSeconds * 1000, graceMs: h.graceSeconds * 1000 }));
}

/** Hears of each FINAL result a heartbeat check gets: a ping's passing one, a missed deadline's failing one. */
export type HeartbeatResultListener = (checkId: string, result: CheckResultEntry) => void;

/**
 * The per-check series (`/metrics`) of the file's heartbeat checks, as an agent's results give a URL check's:
 * Prometheus sees a missed ping as `probe_success 0`. Kept as long as a ping may take (period plus grace,
 * times the stale factor of every series).
 */
export class HeartbeatSeries {
  private byId = new Map<string, HeartbeatCheck>();

  constructor(private readonly checks: CheckMetrics) {}

  /** The file's heartbeat checks now (at start and at each reload). */
  use(heartbeats: readonly HeartbeatCheck[]): void {
    this.byId = new Map(heartbeats.map((h) => [h.id, h]));
  }

  readonly record: HeartbeatResultListener = (checkId, result) => {
    const heartbeat = this.byId.get(checkId);
    // A check removed from the file while its ping was being stored keeps no series.
    if (!heartbeat) return;
    this.checks.record({ ...result, checkId, name: heartbeat.name, checkType: 'HEARTBEAT' }, { frequencySeconds: heartbeat.periodSeconds + heartbeat.graceSeconds });
  };
}

export interface SuccessRatio {
  previousPeriod: number;
  currentPeriod: number;
}

export interface WindowStats {
  successRatio: SuccessRatio;
  totalEntitiesCurrentPeriod: number;
}

/**
 * The share of expected periods of [fromMs, toMs) that had a ping: the
 * window is cut into period-long slots ending at `toMs` (the newest slot is
 * [toMs - period, toMs)); a slot is expected when it lies wholly inside the
 * window and ends after `trackedSinceMs`; it is met when a ping falls in it.
 * With nothing expected the ratio is 1 (no expected ping was missed).
 * `pings`: times in ms, any order; those outside the window are ignored.
 */
export function successRatio(pings: readonly number[], fromMs: number, toMs: number, periodMs: number, trackedSinceMs: number): number {
  const whole = Math.floor((toMs - fromMs) / periodMs);
  const tracked = Math.max(0, Math.ceil((toMs - trackedSinceMs) / periodMs));
  const expected = Math.min(whole, tracked);
  if (expected === 0) return 1;
  const met = new Set<number>();
  for (const at of pings) {
    if (at >= toMs || at < fromMs) continue;
    const slot = Math.ceil((toMs - at) / periodMs) - 1;
    if (slot < expected) met.add(slot);
  }
  return met.size / expected;
}

/** Stats of one window length: the current window ends at `nowMs`, the previous one ends where it begins. */
export function windowStats(pings: readonly number[], nowMs: number, windowMs: number, periodMs: number, trackedSinceMs: number): WindowStats {
  const currentFrom = nowMs - windowMs;
  return {
    successRatio: {
      previousPeriod: successRatio(pings, currentFrom - windowMs, currentFrom, periodMs, trackedSinceMs),
      currentPeriod: successRatio(pings, currentFrom, nowMs, periodMs, trackedSinceMs),
    },
    totalEntitiesCurrentPeriod: pings.filter((at) => at >= currentFrom && at < nowMs).length,
  };
}

export interface HeartbeatWatcherOptions {
  store: HeartbeatStore;
  logger: Logger;
  everyMs?: number;
  /** Beats every round: a store that stops answering shows as a stuck watcher. */
  heartbeat?: Heartbeat;
  now?: () => number;
  onResult?: HeartbeatResultListener;
}

/** One loop: every `everyMs`, each check past period + grace since its last ping gets a failing FINAL result. */
export class HeartbeatWatcher {
  private timer: NodeJS.Timeout | undefined;
  private round: Promise<void> | undefined;
  private stopped = false;
  private readonly everyMs: number;
  private readonly heartbeat: Heartbeat;
  private readonly now: () => number;
  /** Deadlines missed since start, for tests and metrics. */
  missed = 0;

  constructor(private readonly options: HeartbeatWatcherOptions) {
    this.everyMs = options.everyMs ?? DEFAULT_WATCH_EVERY_MS;
    this.heartbeat = options.heartbeat ?? NO_HEARTBEAT;
    this.now = options.now ?? Date.now;
  }

  start(): void {
    this.arm(0);
  }

  /** Clears the timer; resolves once a round in flight has finished. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    this.heartbeat.idle();
    await this.round;
  }

  private arm(delayMs: number): void {
    if (this.stopped) return;
    this.heartbeat.beat(delayMs + WATCH_BUDGET_MS);
    this.timer = setTimeout(() => {
      this.round = this.watch()
        .catch((error: unknown) => this.options.logger[storeFailureLevel(error)]({ err: error }, 'checking heartbeat deadlines failed'))
        .finally(() => {
          this.round = undefined;
          this.arm(this.everyMs);
        });
    }, delayMs);
  }

  private async watch(): Promise<void> {
    const failed = await this.options.store.expire(new Date(this.now()));
    for (const { checkId, result } of failed) {
      this.missed++;
      this.options.logger.warn({ checkId, resultId: result.id }, 'heartbeat check missed its deadline: FAILING');
      this.options.onResult?.(checkId, result);
    }
  }
}
