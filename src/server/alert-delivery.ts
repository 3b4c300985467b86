// Delivers the outbox (alerts-store.ts): each pending notification is sent
// to its channel, and kept, retried with backoff (core/backoff.ts) and
// Retry-After, until an answer in 2xx. Every attempt is recorded. A request
// is bounded: a timeout, no redirects followed, and only the first bytes of
// the answer kept for the attempt log. A restart finds the pending rows and
// goes on. Each channel gets its notifications in order, one at a time;
// channels are served side by side, each on its own, so a slow or dead
// receiver holds up only its own channel.

import { Agent, fetch as undiciFetch } from 'undici';
import { Backoff, parseRetryAfter } from '../core/backoff.js';
import { type NetworkPolicy, NetworkPolicyError, policedConnector } from '../net/network-policy.js';
import type { Logger } from '../observability/logger.js';
import type { AlertStore, AttemptOutcome, DeliveryAttempt, Notification } from '../store/alerts.js';
import { type AlertEvent, channelRequest, type OutgoingRequest, undeliveredReason } from './alert-payloads.js';
import { storeFailureLevel } from '../store/write-health.js';

export interface AlertDelivererOptions {
  alerts: AlertStore;
  logger: Logger;
  /** One request's limit. */
  timeoutMs?: number;
  /** Backoff between attempts of one notification: full jitter from baseMs, doubling up to capMs. */
  baseMs?: number;
  capMs?: number;
  /** Longest sleep when nothing is due (a notification queued meanwhile wakes the loop). */
  pollMs?: number;
  /** Bytes of an answer kept in the attempt log. */
  maxResponseBytes?: number;
  now?: () => Date;
  random?: () => number;
  /** BLOCKED_NETWORKS / ALLOWED_NETWORKS: a webhook to a refused address is not sent (docs/network-policy.md). */
  networkPolicy?: NetworkPolicy;
}

const BATCH = 20;

/** Reads at most `limit` bytes of a body, then lets the rest go. */
async function boundedText(response: Response, limit: number): Promise<string> {
  const reader = response.body?.getReader();
  if (!reader) return '';
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    while (size < limit) {
      const { done, value } = await reader.read();
      if (done) break;
      chunks.push(value);
      size += value.length;
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
  return Buffer.concat(chunks).subarray(0, limit).toString('utf8');
}

/** Channels whose requests may be in flight at once; more wait for one of them to end. */
const MAX_CHANNELS_IN_FLIGHT = 20;

/** Retry-After is honoured up to this; a receiver asking for longer is retried after an hour. */
const RETRY_AFTER_CAP_MS = 3_600_000;

/** Answers sent but not yet written down (the database could not write), at most this many kept. */
const MAX_UNRECORDED = 1_000;

export class AlertDeliverer {
  private running: Promise<void> | undefined;
  private readonly stopping = new AbortController();
  private wakeUp: (() => void) | undefined;
  private woken = false;
  private readonly now: () => Date;
  /** The dispatcher under a network policy, made on first use. */
  private policed: Agent | null | undefined;
  /** One delivery per channel at a time: a slow receiver holds up only its own channel. */
  private readonly inFlight = new Map<number, Promise<void>>();
  /**
   * Attempts made but not recorded because the database failed: the next
   * turn of such a notification records this instead of sending again, so a
   * database that cannot write does not make a receiver hear the same
   * notification at every turn of the loop.
   */
  private readonly unrecorded = new Map<number, { attempt: DeliveryAttempt | null; outcome: AttemptOutcome }>();
  /** The store's failures to answer what is due, in a row: the loop waits longer after each. */
  private failures = 0;

  constructor(private readonly options: AlertDelivererOptions) {
    this.now = options.now ?? (() => new Date());
  }

  start(): void {
    this.running ??= this.loop();
  }

  /** Stops; a request in flight is cut and stays pending (sent again after the restart). */
  async stop(): Promise<void> {
    this.stopping.abort(new Error('the server is stopping'));
    this.wakeUp?.();
    await this.running;
    await Promise.all(this.inFlight.values());
    await this.policed?.close().catch(() => undefined);
  }

  wake(): void {
    this.woken = true;
    this.wakeUp?.();
  }

  private async loop(): Promise<void> {
    const { alerts, logger } = this.options;
    const pollMs = this.options.pollMs ?? 5_000;
    while (!this.stopping.signal.aborted) {
      this.woken = false;
      let started = 0;
      try {
        // The store answers each channel's oldest pending notification (a channel's order is kept); one whose channel is busy waits for it.
        const room = Math.min(BATCH, MAX_CHANNELS_IN_FLIGHT - this.inFlight.size);
        // Only as many as will start, none of a busy channel: on PostgreSQL each row answered is claimed for a minute.
        const due = room > 0 ? await alerts.dueNotifications(this.now(), room, [...this.inFlight.keys()]) : [];
        // A delivery that fails is not woken for: the idle wait (a due notification means pollMs) paces it.
        this.failures = 0;
        for (const notification of due) {
          if (this.inFlight.has(notification.channelId)) continue;
          this.startDelivery(notification);
          started++;
        }
      } catch (error) {
        this.failures++;
        logger[storeFailureLevel(error)]({ err: error }, 'alert delivery failed; retrying at the next poll');
      }
      if (started > 0) continue;
      if (this.woken || this.stopping.signal.aborted) continue;
      const wait = this.failures > 0 ? Math.min(pollMs, 500 * 2 ** Math.min(this.failures, 10)) : await this.idleWait(pollMs);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, wait);
        function done() {
          clearTimeout(timer);
          resolve();
        }
        this.wakeUp = done;
      });
      this.wakeUp = undefined;
    }
  }

  /** Until the next notification is due; one already due belongs to a busy channel, whose end wakes the loop. */
  private async idleWait(pollMs: number): Promise<number> {
    const next = await this.options.alerts.nextDue().catch(() => undefined);
    if (!next) return pollMs;
    const until = next.getTime() - this.now().getTime();
    return until <= 0 ? pollMs : Math.max(10, Math.min(pollMs, until));
  }

  private startDelivery(notification: Notification): void {
    const channelId = notification.channelId;
    const delivery = this.deliver(notification).then(
      () => {
        this.inFlight.delete(channelId);
        this.wake();
      },
      (error: unknown) => {
        // No wake: the notification is still due, so the loop's idle wait (pollMs) paces the next try.
        this.inFlight.delete(channelId);
        this.options.logger[storeFailureLevel(error)]({ err: error, notificationId: notification.id }, 'alert delivery failed; retrying at the next poll');
      },
    );
    this.inFlight.set(channelId, delivery);
  }

  /** One attempt at one notification. */
  async deliver(notification: Notification): Promise<void> {
    const { alerts, logger } = this.options;
    const unrecorded = this.unrecorded.get(notification.id);
    if (unrecorded) {
      await alerts.recordAttempt(notification.id, unrecorded.attempt, unrecorded.outcome);
      this.unrecorded.delete(notification.id);
      return;
    }
    const channel = await alerts.channel(notification.channelId);
    const started = this.now();
    const fields = { notificationId: notification.id, channelId: notification.channelId, kind: notification.kind, checkId: notification.checkId };
    if (!channel) {
      await alerts.recordAttempt(notification.id, null, { kind: 'cancelled', reason: 'the channel no longer exists' });
      return;
    }
    const request = channelRequest(channel, notification.body as AlertEvent, notification.id);
    if (!request) {
      const reason = undeliveredReason(channel.type) ?? 'not deliverable';
      logger.warn(fields, `alert notification not delivered: ${reason}`);
      await alerts.recordAttempt(notification.id, null, { kind: 'cancelled', reason });
      return;
    }
    const { status, error, retryAfterMs, refused } = await this.send(request);
    if (refused) {
      // The policy does not change while the server runs: retrying would only refuse again.
      logger.warn({ ...fields, reason: refused }, `alert notification not delivered: ${refused}`);
      await alerts.recordAttempt(
        notification.id,
        { at: started.toISOString(), status: null, error: refused, durationMs: Math.max(0, this.now().getTime() - started.getTime()) },
        { kind: 'cancelled', reason: refused },
      );
      return;
    }
    const attempt: DeliveryAttempt = { at: started.toISOString(), status, error, durationMs: Math.max(0, this.now().getTime() - started.getTime()) };
    if (this.stopping.signal.aborted && status === null) return;
    if (status !== null && status >= 200 && status < 300) {
      await this.record(notification.id, attempt, { kind: 'delivered' });
      logger.info({ ...fields, attempts: notification.attempts + 1 }, 'alert notification delivered');
      return;
    }
    const backoff = new Backoff(this.options.baseMs ?? 1_000, this.options.capMs ?? 300_000, this.options.random);
    let delay = 0;
    for (let i = 0; i <= Math.min(notification.attempts, 30); i++) delay = backoff.next();
    delay = Math.max(delay, retryAfterMs ?? 0);
    const nextAt = new Date(this.now().getTime() + delay);
    await this.record(notification.id, attempt, { kind: 'retry', nextAt });
    logger.warn({ ...fields, attempts: notification.attempts + 1, status, error, nextAttemptAt: nextAt.toISOString() }, 'alert notification not delivered; it will be retried');
  }

  /** Records an attempt whose request was sent; if the database cannot take it, the next turn records it instead of sending again. */
  private async record(id: number, attempt: DeliveryAttempt, outcome: AttemptOutcome): Promise<void> {
    try {
      await this.options.alerts.recordAttempt(id, attempt, outcome);
    } catch (error) {
      if (this.unrecorded.size >= MAX_UNRECORDED) this.unrecorded.delete(this.unrecorded.keys().next().value as number);
      this.unrecorded.set(id, { attempt, outcome });
      throw error;
    }
  }

  private async send(request: OutgoingRequest): Promise<{ status: number | null; error: string | null; retryAfterMs?: number; refused?: string }> {
    const limit = this.options.maxResponseBytes ?? 2_048;
    const timeoutMs = this.options.timeoutMs ?? 10_000;
    // Under a policy the connection is undici's with a connector that judges the resolved address; Node's own fetch cannot take it.
    this.policed ??= this.options.networkPolicy
      ? new Agent({ connect: policedConnector(this.options.networkPolicy, timeoutMs), connections: 16, keepAliveTimeout: 1_000 })
      : null;
    const policed = this.policed;
    const send = policed
      ? ((url: string, init: RequestInit) => undiciFetch(url, { ...init, dispatcher: policed } as Parameters<typeof undiciFetch>[1])) as unknown as typeof fetch
      : fetch;
    try {
      const response = await send(request.url, {
        method: 'POST',
        headers: request.headers,
        body: request.body,
        redirect: 'manual',
        signal: AbortSignal.any([AbortSignal.timeout(timeoutMs), this.stopping.signal]),
      });
      // A 2xx is the answer; its body is not waited for (a receiver trickling it would hold the channel until the timeout).
      if (response.status >= 200 && response.status < 300) {
        await response.body?.cancel().catch(() => undefined);
        return { status: response.status, error: null };
      }
      const text = await boundedText(response, limit).catch(() => '');
      const retryAfterMs = parseRetryAfter(response.headers.get('retry-after') ?? undefined, RETRY_AFTER_CAP_MS);
      return { status: response.status, error: `HTTP ${response.status}${text ? `: ${text.slice(0, 200)}` : ''}`, ...(retryAfterMs !== undefined ? { retryAfterMs } : {}) };
    } catch (error) {
      const cause = (error as { cause?: { code?: string; message?: string } }).cause;
      if (cause instanceof NetworkPolicyError) return { status: null, error: cause.message, refused: cause.message };
      const message = (error as Error).name === 'TimeoutError' ? 'timed out' : (cause?.code ?? cause?.message ?? (error as Error).message);
      return { status: null, error: String(message).slice(0, 200) };
    }
  }
}
