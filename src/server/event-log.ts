// The log line each agent event gets, bounded: an agent may send events as
// fast as its write budget lets it, and every one was a warning line. A
// location's first MAX_LOGGED_PER_MINUTE events of a minute are logged as
// before; one line says when the rest of the minute's are not, and their
// count is logged with the location's next event after the minute. An
// honest agent sends at most 30 a minute (src/control-plane/events.ts
// MAX_PER_MINUTE).

import type { AgentEvent } from '../core/protocol.js';
import type { Logger } from '../observability/logger.js';

export const MAX_LOGGED_PER_MINUTE = 60;
const MINUTE_MS = 60_000;

interface Window {
  start: number;
  logged: number;
  unlogged: number;
}

export class AgentEventLog {
  /** Per location (few: the checks file names them). */
  private readonly windows = new Map<string, Window>();

  constructor(
    private readonly logger: Logger,
    private readonly now: () => number = Date.now,
    private readonly maxPerMinute = MAX_LOGGED_PER_MINUTE,
  ) {}

  log(location: string, agentId: string, events: readonly AgentEvent[]): void {
    const now = this.now();
    let window = this.windows.get(location);
    if (!window || now - window.start >= MINUTE_MS) {
      if (window && window.unlogged > 0) {
        this.logger.warn(
          { location, unlogged: window.unlogged, maxPerMinute: this.maxPerMinute },
          'agent events stored but not logged: over the most logged a minute per location',
        );
      }
      window = { start: now, logged: 0, unlogged: 0 };
      this.windows.set(location, window);
    }
    for (const event of events) {
      if (window.logged < this.maxPerMinute) {
        window.logged++;
        this.logger.warn({ location, agentId, event }, 'agent event');
      } else if (window.unlogged++ === 0) {
        this.logger.warn(
          { location, maxPerMinute: this.maxPerMinute },
          "agent events over the most logged a minute per location: the rest of this minute's are stored but not logged; their count follows",
        );
      }
    }
  }
}
