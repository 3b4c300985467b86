// What every mode shares: readiness state, the health server, and signals
// (first SIGTERM/SIGINT drains, a second exits at once; SIGHUP reloads the checks file where a mode can, and is logged and ignored elsewhere).

import { HEALTH_MAX_CONNECTIONS_PER_ADDRESS, type HealthSource, type ReloadOutcome, startHealthServer } from './server.js';
import type { StartupSignals } from './startup-signals.js';
import { Watchdog } from './watchdog.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import { VERSION } from '../core/version.js';
import { refusalReporter } from '../core/connection-cap.js';

export interface LoadFigures {
  inFlight(): number;
  queued(): number;
  spooled(): number;
  /** Results and files set aside in the spool's quarantine folder. */
  quarantined(): number;
  /** Results the control plane refuses that could not be quarantined either, and were dropped. */
  spoolDropped(): number;
  /** False while the spool cannot write to disk. */
  spoolWritable(): boolean;
}

export class Lifecycle {
  readonly startedAt = Date.now();
  started = false;
  shuttingDown = false;
  /** Extra readiness condition of a mode (agent: the control plane accepted our key). */
  modeReady: () => boolean = () => true;
  /** The mode's loops beat here; any stuck one (or a stalled event loop) makes readiness 503. */
  readonly watchdog = new Watchdog();
  /** More for /health from the mode (never a secret: /health answers without a key). */
  extraStatus: () => Record<string, unknown> = () => ({});
  /** The mode's reload of its checks file (local and server modes): SIGHUP and POST /-/reload call it. */
  reload: ((trigger: 'SIGHUP' | 'POST /-/reload') => Promise<ReloadOutcome>) | undefined;
  private healthClose: (() => Promise<void>) | undefined;
  healthPort: number | undefined;
  /** The network policy's rules as /health shows them (src/net/network-policy.ts describePolicy); null: none. */
  networkPolicy: { blocked: string[]; allowed: string[] } | null = null;

  constructor(
    readonly mode: string,
    private readonly metrics: Metrics,
    private readonly load: LoadFigures,
    private readonly logger: Logger,
    /** What handled signals while the mode started; onSignals takes over from it. */
    private readonly startup?: StartupSignals,
  ) {}

  isReady(): boolean {
    return this.started && !this.shuttingDown && this.modeReady() && this.watchdog.healthy();
  }

  async startHealth(port: number, host?: string): Promise<void> {
    this.watchdog.start();
    const handle = await startHealthServer(port, this.healthSource(), host);
    this.healthClose = handle.close;
    this.healthPort = handle.port;
    this.logger.info({ port: handle.port, host: host ?? 'every interface' }, 'health server listening');
  }

  private healthSource(): HealthSource {
    return {
      registry: this.metrics.registry,
      extraMetrics: () => this.metrics.checks.render(),
      reload: () => {
        if (!this.reload) return undefined;
        if (this.shuttingDown) return Promise.resolve({ ok: false, status: 503, problems: ['shutting down'] });
        return this.reload('POST /-/reload');
      },
      isReady: () => this.isReady(),
      onRefusedConnection: refusalReporter((address, refused) =>
        this.logger.warn(
          { address, refused, limit: HEALTH_MAX_CONNECTIONS_PER_ADDRESS },
          'health port: connections refused, this address already holds the most one address may (a flood, or a port that belongs behind a network policy)',
        ),
      ),
      status: () => {
        const watch = this.watchdog.report();
        return {
          version: VERSION,
          mode: this.mode,
          ready: this.isReady(),
          shuttingDown: this.shuttingDown,
          inFlight: this.load.inFlight(),
          queued: this.load.queued(),
          spooled: this.load.spooled(),
          quarantined: this.load.quarantined(),
          spoolDropped: this.load.spoolDropped(),
          spoolWritable: this.load.spoolWritable(),
          uptime: Math.round((Date.now() - this.startedAt) / 1000),
          stuck: watch.stuck,
          components: watch.components,
          networkPolicy: this.networkPolicy,
          ...this.extraStatus(),
        };
      },
    };
  }

  async closeHealth(): Promise<void> {
    this.watchdog.stop();
    await this.healthClose?.();
  }

  /**
   * The usual shutdown of a long-running mode: the first signal runs `drain`
   * (its promise settling means stopped, exit 0; a throw, exit 1), a second
   * exits at once with 130 (SIGINT) or 143 (SIGTERM), after logging
   * `lastWords`. Resolves with the exit code.
   */
  shutdownOnSignals(drain: (signal: NodeJS.Signals) => Promise<void>, lastWords: () => Record<string, unknown>, flushLogs: () => void): Promise<number> {
    return new Promise<number>((resolve) => {
      this.onSignals(
        (signal) => {
          drain(signal).then(
            () => resolve(0),
            (error: unknown) => {
              this.logger.error({ err: error }, 'shutdown failed');
              resolve(1);
            },
          );
        },
        (signal) => {
          this.logger.warn({ signal, ...lastWords() }, 'second signal: exiting at once');
          flushLogs();
          process.exit(signal === 'SIGINT' ? 130 : 143);
        },
      );
    });
  }

  /**
   * Calls `drain` on the first SIGTERM/SIGINT; a second signal calls `hardExit`.
   * Readiness flips to 503 before anything else happens. SIGHUP reloads where
   * the mode set `reload`, and is otherwise logged and ignored.
   */
  onSignals(drain: (signal: NodeJS.Signals) => void, hardExit: (signal: NodeJS.Signals) => void): void {
    const handler = (signal: NodeJS.Signals) => {
      if (this.shuttingDown) return hardExit(signal);
      this.shuttingDown = true;
      drain(signal);
    };
    process.on('SIGTERM', handler);
    process.on('SIGINT', handler);
    // Without a handler Node.js exits on SIGHUP (129) with no drain.
    process.on('SIGHUP', () => {
      if (this.shuttingDown) return;
      if (this.reload) return void this.reload('SIGHUP');
      this.logger.info({ signal: 'SIGHUP' }, `SIGHUP ignored: ${this.mode} mode has nothing to reload (its settings are read at start; restart to change them)`);
    });
    // A stop asked for while the mode started is acted on now; on the next turn, so that the caller has finished wiring.
    const early = this.startup?.handOver();
    if (early) setImmediate(() => handler(early));
  }
}
