// Delivers spooled results to the control plane in batches of up to 500.
// A result leaves the spool only when the control plane accepted it, or
// rejected it for good (4xx); 5xx rejections and failed calls are retried.
// A batch refused as a whole for its content (413 too large, 400/422
// invalid) is split in halves until the result at fault is alone; that one
// is quarantined and the rest flows.

import type { Logger } from '../observability/logger.js';
import { superviseLoop } from '../health/supervise.js';
import { type Heartbeat, NO_HEARTBEAT } from '../health/watchdog.js';
import { Backoff, sleep } from '../core/backoff.js';
import { type ControlPlaneClient, ControlPlaneError, resultsTransferAllowanceMs, withRetry } from './client.js';
import type { ResultEnvelope } from '../core/protocol.js';
import type { Spool, SpoolItem } from './spool.js';

/** How long a partly filled batch may wait for company before it is sent. */
export const RESULT_LINGER_MS = 500;

/**
 * When no job runs, no company is coming: a partly filled batch goes at once, but
 * no sooner than this after the previous request started, so that jobs finishing
 * one by one cannot turn into one request each (the service limits requests per key).
 */
export const IDLE_SEND_GAP_MS = 100;

/** Answers to a whole request that blame its content: a smaller request may pass. */
const SPLIT_ON_STATUS = new Set([400, 413, 422]);

/** How recent an accepted results request must be to trust that a lone refused result is at fault. */
const EVIDENCE_MS = 60_000;

/** The least wait before a batch that was refused as a whole, with nothing accepted, is sent again. */
export const REFUSED_WHOLE_FLOOR_MS = 5_000;

interface Bisection {
  /** Some request of this batch got a 2xx answer. */
  answered: boolean;
  /** Results refused alone, with the answer. */
  refused: Array<{ item: SpoolItem; error: ControlPlaneError }>;
}

function blamesContent(error: unknown): error is ControlPlaneError {
  return error instanceof ControlPlaneError && error.kind === 'fatal' && SPLIT_ON_STATUS.has(error.statusCode ?? 0);
}

export class ControlPlaneSink {
  private stopped = new AbortController();
  private loop: Promise<void> | undefined;
  delivered = 0;
  private lastAnsweredAt = 0;

  constructor(
    private readonly spool: Spool,
    private readonly client: ControlPlaneClient,
    private readonly logger: Logger,
    private readonly authRetryMs: number,
    private readonly onFailure: (error: ControlPlaneError) => void,
    /** A batch was refused for good (for error events). */
    private readonly onBatchError: (error: unknown) => void = () => undefined,
    /** The loop's heartbeat for the watchdog, and the longest one send may take (limiter wait, timeout). */
    private readonly watch: { heartbeat: Heartbeat; sendBoundMs: number } = { heartbeat: NO_HEARTBEAT, sendBoundMs: 0 },
    /** True while no job runs or waits to run: results spooled now will have no company soon. */
    private readonly producerIdle: () => boolean = () => false,
  ) {}

  private lastSendAt = Number.NEGATIVE_INFINITY;
  /** Set while flush() runs: its deadline, and whether a failure was said. */
  private flushing: { deadlineMs: number; said: boolean } | undefined;
  private refusedFloorMs = REFUSED_WHOLE_FLOOR_MS;

  /** How long the open batch may linger now: `lingerMs`, or less once nothing more is coming (IDLE_SEND_GAP_MS). */
  private lingerNow(lingerMs: number): number {
    if (lingerMs <= 0 || !this.producerIdle()) return lingerMs;
    return Math.min(lingerMs, Math.max(0, this.lastSendAt + IDLE_SEND_GAP_MS - Date.now()));
  }

  /** Sleeps until the open batch is due, waking early when the spool changes: the producer may have gone idle. */
  private async waitUntilDue(dueMs: number, signal: AbortSignal): Promise<void> {
    const wake = new AbortController();
    const stop = () => wake.abort();
    signal.addEventListener('abort', stop, { once: true });
    try {
      await Promise.race([sleep(dueMs, wake.signal), this.spool.changed(wake.signal)]);
    } finally {
      wake.abort();
      signal.removeEventListener('abort', stop);
    }
  }

  /**
   * Spools the result (fsync) before anything else; resolves once it is durable.
   * `resultLine`, when given, is JSON.stringify(envelope.result), already made: it goes into the spool line as is.
   */
  async deliver(envelope: ResultEnvelope, resultLine?: string): Promise<void> {
    await this.spool.append(envelope, resultLine);
  }

  /**
   * `lingerMs`: how long a partly filled batch may wait for company; `refusedFloorMs`: the least wait
   * after a batch refused whole (tests set their own of both).
   */
  start(lingerMs = RESULT_LINGER_MS, refusedFloorMs = REFUSED_WHOLE_FLOOR_MS): void {
    const signal = this.stopped.signal;
    this.refusedFloorMs = refusedFloorMs;
    this.loop ??= superviseLoop('sink-loop', () => this.run(signal, lingerMs), { logger: this.logger, signal, heartbeat: this.watch.heartbeat });
  }

  /**
   * Stops the background loop, then sends what the spool holds until it is empty or `deadline` passes. While
   * sending fails, it keeps trying to the deadline (the results stay in the spool either way), saying so once.
   */
  async flush(deadlineMs: number): Promise<boolean> {
    this.stopped.abort();
    await this.loop;
    this.flushing = { deadlineMs, said: false };
    const signal = AbortSignal.timeout(Math.max(1, deadlineMs - Date.now()));
    try {
      await this.run(signal, 0, true);
    } finally {
      this.flushing = undefined;
    }
    // Stopped on purpose: not stuck.
    this.watch.heartbeat.idle();
    return this.spool.results === 0;
  }

  /** A send that failed: during the flush, the first one is said, so that a shutdown that waits says why. */
  private failedWhileFlushing(error: unknown): void {
    if (!this.flushing || this.flushing.said) return;
    this.flushing.said = true;
    const seconds = Math.max(0, Math.ceil((this.flushing.deadlineMs - Date.now()) / 1000));
    const reason = error instanceof Error ? error.message : String(error);
    this.logger.warn(
      { spooled: this.spool.results, retryForSeconds: seconds, reason },
      `shutting down: results cannot be delivered (${reason}); trying again for up to ${seconds} s more (to the end of SHUTDOWN_GRACE_SECONDS, at least 10 s after the drain); a second SIGINT or SIGTERM exits at once, and undelivered results stay in the spool for the next start either way`,
    );
  }

  private async run(signal: AbortSignal, lingerMs: number, untilEmpty = false): Promise<void> {
    const backoff = new Backoff();
    const { heartbeat, sendBoundMs } = this.watch;
    while (!signal.aborted) {
      heartbeat.beat(lingerMs);
      let batch: Awaited<ReturnType<Spool['nextBatch']>>;
      try {
        batch = await this.spool.nextBatch(this.lingerNow(lingerMs));
      } catch (error) {
        // A segment that cannot be read now (EMFILE, EIO) is tried again; delivery must not stop for good.
        this.logger.error({ err: error, dir: this.spool.dir }, 'could not read results from the spool; trying again');
        const wait = Math.max(backoff.next(), 1_000);
        // Waiting on purpose: the promise must cover the whole sleep, however long the backoff grew.
        heartbeat.beat(wait);
        await sleep(wait, signal);
        continue;
      }
      if (!batch) {
        if (untilEmpty) return;
        const due = this.spool.dueIn(this.lingerNow(lingerMs));
        // Nothing to send is waiting on purpose; results held without an attempt are not.
        if (due === undefined) heartbeat.idle();
        else heartbeat.beat(due);
        await (due === undefined ? this.spool.changed(signal) : this.waitUntilDue(due, signal));
        continue;
      }
      if (batch.items.length === 0) {
        await this.spool.complete(batch.seq);
        continue;
      }
      try {
        heartbeat.beat(sendBoundMs);
        this.lastSendAt = Date.now();
        const { retry, refusedWhole } = await this.sendBatch(batch.items, signal, backoff);
        heartbeat.beat(sendBoundMs);
        await this.spool.complete(batch.seq, retry);
        if (retry.length > 0) {
          // A control plane that refuses whole batches and accepts nothing is not asked again at once.
          const wait = refusedWhole ? Math.max(backoff.next(), this.refusedFloorMs) : backoff.next();
          heartbeat.beat(wait);
          await sleep(wait, signal);
        }
      } catch (error) {
        if (signal.aborted) return;
        // A non-retryable answer (400 for the whole batch, say) must not wedge delivery:
        // the results stay on disk, and the agent keeps trying slowly.
        this.logger.error({ err: error, results: batch.items.length }, 'results batch refused; keeping it in the spool');
        this.onBatchError(error);
        this.failedWhileFlushing(error);
        const wait = Math.max(backoff.next(), this.refusedFloorMs);
        heartbeat.beat(wait);
        await sleep(wait, signal);
      }
    }
  }

  /**
   * Sends a batch; one refused as a whole for its content is split in halves
   * until the results at fault are alone, and those are quarantined. A 400,
   * 413 or 422 may also mean a control plane (or a proxy before it) that
   * refuses everything: its lone
   * results are quarantined only when some other request got through (in this
   * batch, or within a minute for a batch of one); otherwise they are sent
   * again later. Returns the results that must be sent again, and whether
   * the batch was refused as a whole with nothing of it accepted.
   */
  private async sendBatch(items: SpoolItem[], signal: AbortSignal, backoff: Backoff): Promise<{ retry: SpoolItem[]; refusedWhole: boolean }> {
    const bisection: Bisection = { answered: false, refused: [] };
    const retry = await this.sendSplitting(items, signal, backoff, bisection);
    if (bisection.refused.length === 0) return { retry, refusedWhole: false };
    const evidence = bisection.answered || (items.length === 1 && Date.now() - this.lastAnsweredAt < EVIDENCE_MS);
    const deferred: Bisection['refused'] = [];
    for (const refusal of bisection.refused) {
      // A 413 too: a proxy in front of the control plane with a small body limit refuses every result so.
      if (!evidence) {
        deferred.push(refusal);
        continue;
      }
      // Once more alone, so that a control plane that recovered mid-batch does not cost a result.
      const confirmed = await this.refusedAlone(refusal.item, signal, backoff, retry);
      if (!confirmed) continue;
      this.watch.heartbeat.beat(this.watch.sendBoundMs);
      try {
        await this.spool.quarantine([refusal.item], confirmed.message);
      } catch (error) {
        // Sending it again can only be refused again, and would hold up every result behind it.
        this.spool.dropUnquarantinable(refusal.item, confirmed.message, error);
        this.onBatchError(error);
      }
      this.onBatchError(confirmed);
    }
    if (deferred.length > 0) {
      const [first] = deferred;
      this.logger.error(
        { err: first?.error, results: deferred.length },
        'control plane refuses results requests as a whole and accepted none of this batch; keeping them in the spool',
      );
      this.onBatchError(first?.error);
    }
    return { retry: [...retry, ...deferred.map((r) => r.item)], refusedWhole: deferred.length > 0 && !bisection.answered };
  }

  /** Sends one result alone; returns the refusal if it is refused for its content again (anything to re-send goes to `retry`). */
  private async refusedAlone(item: SpoolItem, signal: AbortSignal, backoff: Backoff, retry: SpoolItem[]): Promise<ControlPlaneError | undefined> {
    try {
      retry.push(...(await this.send([item], signal, backoff)));
      return undefined;
    } catch (error) {
      if (blamesContent(error) && !signal.aborted) return error;
      retry.push(item);
      return undefined;
    }
  }

  private async sendSplitting(items: SpoolItem[], signal: AbortSignal, backoff: Backoff, bisection: Bisection): Promise<SpoolItem[]> {
    // Two results refused alone and nothing accepted: splitting further would only cost requests.
    if (items.length > 1 && bisection.refused.length >= 2 && !bisection.answered) return items;
    try {
      const retry = await this.send(items, signal, backoff);
      bisection.answered = true;
      this.lastAnsweredAt = Date.now();
      return retry;
    } catch (error) {
      if (!blamesContent(error) || signal.aborted) throw error;
      if (items.length === 1) {
        bisection.refused.push({ item: items[0] as SpoolItem, error });
        return [];
      }
      const half = Math.ceil(items.length / 2);
      this.logger.warn({ results: items.length, status: error.statusCode }, 'control plane refused a results batch as a whole; splitting it to find the result at fault');
      const first = await this.sendSplitting(items.slice(0, half), signal, backoff, bisection);
      const second = await this.sendSplitting(items.slice(half), signal, backoff, bisection);
      return [...first, ...second];
    }
  }

  /** Sends one batch; returns the results that must be sent again. */
  private async send(items: SpoolItem[], signal: AbortSignal, backoff: Backoff): Promise<SpoolItem[]> {
    const lines = items.map((item) => item.line);
    // A large batch on a slow link is given its time to cross (the client's own timeout grows alike).
    const allowanceMs = resultsTransferAllowanceMs(lines);
    const boundMs = this.watch.sendBoundMs + allowanceMs;
    const answer = await withRetry(
      () => {
        // Each request of a split batch promises its own bound: refusals (400, 413) never pass through onWait.
        this.watch.heartbeat.beat(boundMs);
        return this.client.sendResultLines(lines, signal, allowanceMs);
      },
      {
        signal,
        logger: this.logger,
        authRetryMs: this.authRetryMs,
        backoff,
        onFailure: (error) => {
          this.onFailure(error);
          this.failedWhileFlushing(error);
        },
        onWait: (ms) => this.watch.heartbeat.beat(ms + boundMs),
      },
    );
    const accepted = new Set(answer.accepted);
    const retry: SpoolItem[] = [];
    const rejections = new Map(answer.rejected.map((r) => [r.resultId, r]));
    for (const item of items) {
      if (accepted.has(item.resultId)) {
        this.delivered++;
        continue;
      }
      const rejection = rejections.get(item.resultId);
      if (rejection && rejection.statusCode >= 400 && rejection.statusCode < 500 && rejection.statusCode !== 429) {
        this.logger.warn(
          { jobId: item.jobId, resultId: item.resultId, status: rejection.statusCode, reason: String(rejection.message).slice(0, 500) },
          'control plane rejected a result for good; dropping it from the spool',
        );
        continue;
      }
      retry.push(item);
    }
    if (retry.length > 0) this.logger.warn({ results: retry.length }, 'control plane did not accept every result; re-sending the rest');
    return retry;
  }
}

