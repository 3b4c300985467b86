// Delivers spooled results to the control plane in batches of up to 500.
// A result leaves the spool only when the control plane accepted it, or
// rejected it for good (4xx); 5xx rejections and failed calls are retried.

import type { Logger } from '../observability/logger.js';
import { superviseLoop } from '../health/supervise.js';
import { type Heartbeat, NO_HEARTBEAT } from '../health/watchdog.js';
import { Backoff, sleep } from './backoff.js';
import { type ControlPlaneClient, type ControlPlaneError, withRetry } from './client.js';
import type { ResultEnvelope } from './protocol.js';
import type { Spool, SpoolItem } from './spool.js';

/** How long a partly filled batch may wait for company before it is sent. */
export const RESULT_LINGER_MS = 500;

export class ControlPlaneSink {
  private stopped = new AbortController();
  private loop: Promise<void> | undefined;
  delivered = 0;

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
  ) {}

  /** Spools the result (fsync) before anything else; resolves once it is durable. */
  async deliver(envelope: ResultEnvelope): Promise<void> {
    await this.spool.append(envelope);
  }

  start(): void {
    const signal = this.stopped.signal;
    this.loop ??= superviseLoop('sink-loop', () => this.run(signal, RESULT_LINGER_MS), { logger: this.logger, signal, heartbeat: this.watch.heartbeat });
  }

  /** Stops the background loop, then sends what the spool holds until it is empty or `deadline` passes. */
  async flush(deadlineMs: number): Promise<boolean> {
    this.stopped.abort();
    await this.loop;
    const signal = AbortSignal.timeout(Math.max(1, deadlineMs - Date.now()));
    await this.run(signal, 0, true);
    // Stopped on purpose: not stuck.
    this.watch.heartbeat.idle();
    return this.spool.results === 0;
  }

  private async run(signal: AbortSignal, lingerMs: number, untilEmpty = false): Promise<void> {
    const backoff = new Backoff();
    const { heartbeat, sendBoundMs } = this.watch;
    while (!signal.aborted) {
      heartbeat.beat(lingerMs);
      const batch = await this.spool.nextBatch(lingerMs);
      if (!batch) {
        if (untilEmpty) return;
        const due = this.spool.dueIn(lingerMs);
        // Nothing to send is waiting on purpose; results held without an attempt are not.
        if (due === undefined) heartbeat.idle();
        else heartbeat.beat(due);
        await (due === undefined ? this.spool.changed(signal) : sleep(due, signal));
        continue;
      }
      if (batch.items.length === 0) {
        await this.spool.complete(batch.seq);
        continue;
      }
      try {
        heartbeat.beat(sendBoundMs);
        const retry = await this.send(batch.items, signal, backoff);
        await this.spool.complete(batch.seq, retry);
        if (retry.length > 0) {
          const wait = backoff.next();
          heartbeat.beat(wait);
          await sleep(wait, signal);
        }
      } catch (error) {
        if (signal.aborted) return;
        // A non-retryable answer (400 for the whole batch, say) must not wedge delivery:
        // the results stay on disk, and the agent keeps trying slowly.
        this.logger.error({ err: error, results: batch.items.length }, 'results batch refused; keeping it in the spool');
        this.onBatchError(error);
        const wait = Math.max(backoff.next(), 5_000);
        heartbeat.beat(wait);
        await sleep(wait, signal);
      }
    }
  }

  /** Sends one batch; returns the results that must be sent again. */
  private async send(items: SpoolItem[], signal: AbortSignal, backoff: Backoff): Promise<SpoolItem[]> {
    const lines = items.map((item) => item.line);
    const answer = await withRetry(() => this.client.sendResultLines(lines, signal), {
      signal,
      logger: this.logger,
      authRetryMs: this.authRetryMs,
      backoff,
      onFailure: this.onFailure,
      onWait: (ms) => this.watch.heartbeat.beat(ms + this.watch.sendBoundMs),
    });
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
          { jobId: item.jobId, resultId: item.resultId, status: rejection.statusCode, reason: rejection.message },
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

