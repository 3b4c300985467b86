// Keeps the leases of running jobs alive with one `leases` call for all that
// are due, and aborts a job whose lease the control plane says is lost.

import { type Heartbeat, NO_HEARTBEAT } from '../health/watchdog.js';
import type { Logger } from '../observability/logger.js';
import { sleep } from '../core/backoff.js';
import { type ControlPlaneClient, ControlPlaneError } from './client.js';

interface Lease {
  expiresAt: number;
  /** When the lease was granted or last extended; its span decides when to extend. */
  grantedAt: number;
  /** Set when the control plane did not answer for this job; retried no sooner. */
  notBefore?: number;
}

/** Extend when less than this share of a lease's span is left. */
const EXTEND_AT_REMAINING = 0.5;
const MIN_TICK_MS = 250;
const MAX_TICK_MS = 15_000;

export class LeaseKeeper {
  private readonly leases = new Map<string, Lease>();
  /** When the sleeping loop wakes by itself (-Infinity while it runs), and how to wake it sooner. */
  private sleepingUntil = Number.NEGATIVE_INFINITY;
  private wakeUp: (() => void) | undefined;
  private warnedPast = false;

  constructor(
    private readonly client: ControlPlaneClient,
    private readonly logger: Logger,
    private readonly onLost: (jobId: string) => void,
    /** The loop's heartbeat for the watchdog, and the longest one `leases` call may take (limiter wait, timeout). */
    private readonly watch: { heartbeat: Heartbeat; callBoundMs: number } = { heartbeat: NO_HEARTBEAT, callBoundMs: 0 },
  ) {}

  track(jobId: string, leaseExpiresAt: string): void {
    // Only a string is parsed: Date.parse would stringify anything else, and a deeply nested array throws doing so.
    const expiresAt = typeof leaseExpiresAt === 'string' ? Date.parse(leaseExpiresAt) - this.client.clockSkewMs : Number.NaN;
    const now = Date.now();
    // A missing or past expiry still gets extended at once rather than silently lost.
    const lease = { expiresAt: Number.isNaN(expiresAt) ? now : expiresAt, grantedAt: now };
    this.leases.set(jobId, lease);
    // The loop is woken only when this lease falls due before its own wake-up: each wake scans every lease.
    if (this.dueAt(lease) < this.sleepingUntil) this.wakeUp?.();
  }

  release(jobId: string): void {
    this.leases.delete(jobId);
  }

  get size(): number {
    return this.leases.size;
  }

  private dueAt(lease: Lease): number {
    const span = Math.max(0, lease.expiresAt - lease.grantedAt);
    return lease.expiresAt - span * EXTEND_AT_REMAINING;
  }

  async run(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      const now = Date.now();
      let next = now + MAX_TICK_MS;
      const due: string[] = [];
      for (const [jobId, lease] of this.leases) {
        const at = Math.max(this.dueAt(lease), lease.notBefore ?? 0);
        // Batch leases that would fall due within the next tick into this call.
        if (at <= now + MIN_TICK_MS) due.push(jobId);
        else next = Math.min(next, at);
      }
      if (due.length > 0) {
        // A failed call is followed by a 1 s pause.
        this.watch.heartbeat.beat(this.watch.callBoundMs + 1_000);
        await this.extend(due, signal);
        continue;
      }
      const at = Math.max(next, now + MIN_TICK_MS);
      this.watch.heartbeat.beat(at - now);
      await this.sleepUntil(at, signal);
    }
  }

  private async extend(jobIds: string[], signal: AbortSignal): Promise<void> {
    try {
      const answer = await this.client.extendLeases({ jobIds }, signal);
      const now = Date.now();
      let pastAlready = 0;
      for (const { jobId, leaseExpiresAt } of answer.extended) {
        // The control plane's time, on this host's clock (client.clockSkewMs).
        const expiresAt = Date.parse(leaseExpiresAt) - this.client.clockSkewMs;
        if (!this.leases.has(jobId) || Number.isNaN(expiresAt)) continue;
        // Extended to a time already past here: extending again at once would be a hot loop of calls.
        if (expiresAt <= now + MIN_TICK_MS) {
          pastAlready++;
          this.leases.set(jobId, { expiresAt, grantedAt: now, notBefore: now + 1_000 });
        } else this.leases.set(jobId, { expiresAt, grantedAt: now });
      }
      if (pastAlready > 0 && !this.warnedPast) {
        this.warnedPast = true;
        this.logger.warn({ jobs: pastAlready }, "the control plane extends leases to times already past by this host's clock (no Date header to correct by?); extending them once a second");
      }
      for (const jobId of answer.lost) {
        if (!this.leases.has(jobId)) continue;
        this.leases.delete(jobId);
        this.logger.warn({ jobId }, 'lease lost: the control plane gave this job to another agent; aborting it');
        this.onLost(jobId);
      }
      // An id in neither list was not understood; try it again on the next tick, not in a hot loop.
      const answered = new Set([...answer.extended.map((e) => e.jobId), ...answer.lost]);
      for (const jobId of jobIds) {
        const lease = this.leases.get(jobId);
        if (lease && !answered.has(jobId)) lease.notBefore = now + 1_000;
      }
    } catch (error) {
      if (signal.aborted) return;
      const message = error instanceof ControlPlaneError ? error.message : String(error);
      this.logger.warn({ jobs: jobIds.length }, `could not extend leases: ${message}`);
      await sleep(1_000, signal);
    }
  }

  private sleepUntil(at: number, signal: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.sleepingUntil = Number.NEGATIVE_INFINITY;
        this.wakeUp = undefined;
        signal.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, Math.max(0, at - Date.now()));
      this.sleepingUntil = at;
      this.wakeUp = done;
      signal.addEventListener('abort', done, { once: true });
    });
  }
}
