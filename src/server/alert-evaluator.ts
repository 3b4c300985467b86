// The alert evaluator: tails the results table by its seq, keeps each
// check's status per location (alert-status.ts) and queues notifications in
// the outbox. The cursor is committed in the same transaction as the
// statuses and the outbox rows (alerts-store.ts commitEvaluation), so a
// restart resumes where the last commit ended: no result is evaluated twice
// and none is skipped. Results arrive the same way in server and local mode,
// so both get the same alerts.

import type { CheckResultEntry } from '../core/result-entry.js';
import type { Logger } from '../observability/logger.js';
import type { Scrubber } from '../secrets/scrubber.js';
import type { AlertChannel, AlertStore, LocationStatus, NewNotification, TailedResult } from '../store/alerts.js';
import type { Store } from '../store/store.js';
import { type AlertEvent, errorMessage, resultLink, tlsOf, undeliveredReason } from './alert-payloads.js';
import { notice, overallStatus, resultStatus, step, type Transition } from './alert-status.js';
import { storeFailureLevel } from '../store/write-health.js';

export const EVALUATOR_CURSOR = 'alerts';

export interface AlertEvaluatorOptions {
  store: Store;
  alerts: AlertStore;
  logger: Logger;
  /** This server's API base URL (`http://host:port`), for the result links. */
  origin: string;
  /** The checks file's secrets: every payload is scrubbed with it before it is queued. */
  scrubber?: Scrubber;
  /** Maintenance windows: true means no notification for this check at this time (statuses are still kept). */
  suppressed?: (checkId: string, at: Date) => Promise<boolean>;
  pollMs?: number;
  batch?: number;
  /** Called after notifications were queued (the deliverer's wake). */
  onQueued?: () => void;
  now?: () => Date;
}

interface CheckInfo {
  name: string | null;
  checkType: string | null;
  alertAfter: number;
}

const key = (checkId: string, location: string) => `${checkId}\u0000${location}`;

export class AlertEvaluator {
  private seq: number | undefined;
  private running: Promise<void> | undefined;
  private stopped = false;
  private wakeUp: (() => void) | undefined;
  private readonly pollMs: number;
  private readonly batch: number;
  private readonly now: () => Date;

  constructor(private readonly options: AlertEvaluatorOptions) {
    this.pollMs = options.pollMs ?? 1_000;
    this.batch = options.batch ?? 500;
    this.now = options.now ?? (() => new Date());
  }

  start(): void {
    if (this.running) return;
    this.stopped = false;
    this.running = this.loop();
  }

  /** Stops after the batch in hand is committed. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.wakeUp?.();
    await this.running;
    this.running = undefined;
  }

  /** Look at the results now rather than at the next poll. */
  wake(): void {
    this.wakeUp?.();
  }

  private async loop(): Promise<void> {
    const { logger, alerts } = this.options;
    for (const channel of await alerts.channels().catch(() => [])) {
      const reason = undeliveredReason(channel.type);
      if (reason) logger.warn({ channelId: channel.id, type: channel.type }, `alert channel ${channel.id}: ${reason}`);
    }
    while (!this.stopped) {
      let evaluated = 0;
      try {
        evaluated = await this.tick();
      } catch (error) {
        logger[storeFailureLevel(error)]({ err: error }, 'alert evaluation failed; retrying at the next poll');
      }
      if (evaluated >= this.batch || this.stopped) continue;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, this.pollMs);
        function done() {
          clearTimeout(timer);
          resolve();
        }
        this.wakeUp = done;
      });
      this.wakeUp = undefined;
    }
  }

  /** Evaluates one batch of results; answers how many rows it read. */
  async tick(): Promise<number> {
    const { alerts, store } = this.options;
    this.seq ??= await alerts.cursor(EVALUATOR_CURSOR);
    const rows = await alerts.resultsAfter(this.seq, this.batch);
    if (rows.length === 0) return 0;
    const channels = (await alerts.channels()).filter((c) => undeliveredReason(c.type) === undefined);
    const checks = new Map<string, CheckInfo>();
    const states = new Map<string, LocationStatus>();
    const loaded = new Set<string>();
    const changed = new Set<string>();
    const notifications: NewNotification[] = [];
    const info = async (checkId: string): Promise<CheckInfo> => {
      let found = checks.get(checkId);
      if (!found) {
        const check = await store.check(checkId);
        const alertAfter = (check?.definition as { alertAfter?: unknown } | undefined)?.alertAfter;
        found = {
          name: check?.name ?? null,
          checkType: check?.checkType ?? null,
          alertAfter: typeof alertAfter === 'number' && Number.isInteger(alertAfter) && alertAfter > 0 ? alertAfter : 1,
        };
        checks.set(checkId, found);
      }
      if (!loaded.has(checkId)) {
        loaded.add(checkId);
        for (const s of await alerts.statuses(checkId)) states.set(key(s.checkId, s.location), s);
      }
      return found;
    };
    for (const row of rows) {
      const entry = row.entry;
      if (row.resultType !== 'FINAL' || !entry) continue;
      const check = await info(row.checkId);
      const at = Number.isNaN(Date.parse(entry.stoppedAt)) ? row.receivedAt : Date.parse(entry.stoppedAt);
      const k = key(row.checkId, row.location);
      const { next, transition } = step(states.get(k), { checkId: row.checkId, location: row.location }, resultStatus(entry), check.alertAfter, at);
      states.set(k, next);
      changed.add(k);
      const subscribed = channels.filter((c) => c.autoSubscribe || c.subscriptions.includes(row.checkId));
      const tls = tlsOf(entry);
      const wantsCertificate = tls ? subscribed.filter((c) => c.sslExpiry && tls.daysToExpiry <= c.sslExpiryThreshold) : [];
      // Told from what the channels last heard, not from the last status: a change a window held back is told at the first result after it.
      const untold: Transition | undefined = next.status === next.announced ? undefined : { from: next.announced, to: next.status };
      const told = untold
        ? subscribed.flatMap((channel) => {
            const event = notice(channel, untold);
            return event ? [{ channel, event }] : [];
          })
        : [];
      if (wantsCertificate.length === 0 && told.length === 0) {
        next.announced = next.status;
        continue;
      }
      if (this.options.suppressed && (await this.options.suppressed(row.checkId, new Date(at)))) {
        // Once per change, not once per result while the window lasts.
        if (transition || wantsCertificate.length > 0) {
          this.options.logger.info({ checkId: row.checkId, location: row.location, resultId: row.id }, 'alert suppressed: a maintenance window is in effect');
        }
        continue;
      }
      next.announced = next.status;
      const read = { ...row, entry };
      const overall = overallStatus([...states.values()].filter((s) => s.checkId === row.checkId));
      if (untold) {
        const status = { previous: untold.from, current: untold.to };
        const events = new Map<AlertEvent['event'], AlertEvent>();
        for (const { channel, event } of told) {
          const payload = events.get(event) ?? this.event(read, check, overall, { event, status });
          events.set(event, payload);
          notifications.push(this.notification(channel, row, payload));
        }
      }
      if (tls) {
        const event = this.event(read, check, overall, { event: 'SSL_EXPIRY', status: null, certificate: tls });
        const certificate = `${tls.subject ?? ''}|${tls.issuer ?? ''}|${tls.validTo ?? ''}`;
        const day = new Date(at).toISOString().slice(0, 10);
        for (const channel of wantsCertificate) notifications.push({ ...this.notification(channel, row, event), sslNotice: { certificate, day } });
      }
    }
    const last = (rows[rows.length - 1] as TailedResult).seq;
    const statuses = [...changed].map((k) => states.get(k) as LocationStatus);
    const queued = await alerts.commitEvaluation(EVALUATOR_CURSOR, last, statuses, notifications, this.now());
    this.seq = last;
    if (queued > 0) {
      this.options.logger.info({ queued, throughSeq: last }, 'alert notifications queued');
      this.options.onQueued?.();
    }
    return rows.length;
  }

  private event(
    row: TailedResult & { entry: CheckResultEntry },
    check: CheckInfo,
    overall: AlertEvent['overallStatus'],
    what: Pick<AlertEvent, 'event' | 'status'> & { certificate?: AlertEvent['certificate'] },
  ): AlertEvent {
    const entry = row.entry;
    const event: AlertEvent = {
      event: what.event,
      check: { id: row.checkId, name: check.name ?? entry.name, checkType: check.checkType ?? entry.checkType },
      location: row.location,
      status: what.status,
      overallStatus: overall,
      result: {
        id: row.id,
        url: resultLink(this.options.origin, row.checkId, row.id),
        startedAt: entry.startedAt,
        stoppedAt: entry.stoppedAt,
        responseTime: entry.responseTime,
        errorMessage: errorMessage(entry),
      },
      certificate: what.certificate ?? null,
      occurredAt: Number.isNaN(Date.parse(entry.stoppedAt)) ? new Date(row.receivedAt).toISOString() : entry.stoppedAt,
    };
    const scrubber = this.options.scrubber;
    return scrubber && scrubber.patternCount > 0 ? scrubber.scrubValue(event) : event;
  }

  private notification(channel: AlertChannel, row: TailedResult, event: AlertEvent): NewNotification {
    return { channelId: channel.id, kind: event.event, checkId: row.checkId, location: row.location, resultId: row.id, body: event };
  }
}
