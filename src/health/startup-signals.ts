// Signals that arrive while a mode starts, before its Lifecycle handles them (src/health/lifecycle.ts
// onSignals): without a handler Node.js ends the process at once (129 for SIGHUP, 130/143), skipping the
// documented handling (docs/configuration.md "Signals"). src/main.ts installs this before it loads anything else.

import type { Logger } from '../observability/logger.js';

export class StartupSignals {
  private stopSignal: NodeJS.Signals | undefined;
  private logger: Logger | undefined;
  private flushLogs: () => void = () => undefined;
  /** What happened before there was a logger to say so. */
  private readonly unsaid: Array<(logger: Logger) => void> = [];
  private readonly onStop = (signal: NodeJS.Signals) => {
    if (this.stopSignal) {
      // A second one exits at once, as it does once the mode runs.
      this.say((logger) => logger.warn({ signal }, 'second signal while starting: exiting at once'));
      this.flushLogs();
      process.exit(signal === 'SIGINT' ? 130 : 143);
    }
    this.stopSignal = signal;
    this.say((logger) => logger.info({ signal }, `${signal} while starting: stopping as soon as the start is done`));
  };
  private readonly onHangUp = () => {
    // Nothing can be reloaded yet: the checks file is read as part of the start.
    this.say((logger) => logger.info({ signal: 'SIGHUP' }, 'SIGHUP ignored: still starting'));
  };

  constructor() {
    process.on('SIGTERM', this.onStop);
    process.on('SIGINT', this.onStop);
    process.on('SIGHUP', this.onHangUp);
  }

  /** The logger, once the configuration has made one: what was not said yet is said now. */
  attach(logger: Logger, flushLogs: () => void): void {
    this.logger = logger;
    this.flushLogs = flushLogs;
    for (const line of this.unsaid.splice(0)) line(logger);
  }

  /**
   * Removes these handlers (call it once the mode's own are installed) and returns the SIGTERM or SIGINT
   * that arrived meanwhile, for the mode to act on as if it came now.
   */
  handOver(): NodeJS.Signals | undefined {
    process.off('SIGTERM', this.onStop);
    process.off('SIGINT', this.onStop);
    process.off('SIGHUP', this.onHangUp);
    return this.stopSignal;
  }

  private say(line: (logger: Logger) => void): void {
    if (this.logger) line(this.logger);
    else this.unsaid.push(line);
  }
}
