// The per-location write budget (src/server/write-budget.ts) and the bounded
// log of agent events (src/server/event-log.ts), on a clock the test moves.

import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { AgentEventLog } from '../../src/server/event-log.js';
import { OVER_BUDGET_WARNING_MS, WriteBudget } from '../../src/server/write-budget.js';

describe('WriteBudget', () => {
  it("lets a location in while its bucket holds a byte, charges the whole body, and says when the debt is paid back", () => {
    let now = 0;
    const budget = new WriteBudget(60_000, () => now);
    expect(budget.admit('a')).toEqual({ allowed: true });
    // One body larger than the whole budget is still taken: an honest agent's batch is never refused for good.
    budget.charge('a', 90_000);
    // 30,000 bytes of debt at 1,000 bytes a second: 31 s until the bucket holds a byte again.
    expect(budget.admit('a')).toEqual({ allowed: false, retryAfterSeconds: 31, warn: true });
    // Another location has its own bucket.
    expect(budget.admit('b')).toEqual({ allowed: true });
    now = 29_500;
    expect(budget.admit('a')).toMatchObject({ allowed: false, retryAfterSeconds: 1, warn: false });
    now = 30_001;
    expect(budget.admit('a')).toEqual({ allowed: true });
    // Refilled to a minute's worth and no more.
    now = 10 * 60_000;
    budget.charge('a', 60_000);
    expect(budget.admit('a').allowed).toBe(false);
  });

  it('asks for a warning at most once an hour per location', () => {
    let now = 0;
    const budget = new WriteBudget(600, () => now);
    const refuse = () => {
      budget.charge('a', 10_000);
      const decision = budget.admit('a');
      expect(decision.allowed).toBe(false);
      return decision.allowed ? undefined : decision.warn;
    };
    expect(refuse()).toBe(true);
    for (let i = 0; i < 100; i++) {
      now += 1_000;
      expect(refuse()).toBe(false);
    }
    now = OVER_BUDGET_WARNING_MS;
    expect(refuse()).toBe(true);
  });
});

describe('AgentEventLog', () => {
  it('logs a location’s first events of a minute, says once that the rest are not, and counts them after the minute', () => {
    let now = 0;
    const lines: Array<{ msg: string; location?: string; unlogged?: number }> = [];
    const logger = pino({ level: 'debug' }, { write: (line: string) => lines.push(JSON.parse(line) as { msg: string }) });
    const log = new AgentEventLog(logger, () => now, 3);
    const event = { level: 'error' as const, name: 'E', message: 'm', agentVersion: '1' };
    log.log('a', 'agent-1', [event, event]);
    log.log('a', 'agent-1', [event, event, event]);
    log.log('b', 'agent-2', [event]);
    expect(lines.filter((l) => l.msg === 'agent event').map((l) => l.location)).toEqual(['a', 'a', 'a', 'b']);
    expect(lines.filter((l) => l.msg.startsWith('agent events over the most logged'))).toHaveLength(1);
    now = 60_000;
    log.log('a', 'agent-1', [event]);
    expect(lines.filter((l) => l.msg === 'agent events stored but not logged: over the most logged a minute per location')).toMatchObject([{ location: 'a', unlogged: 2 }]);
    expect(lines.filter((l) => l.msg === 'agent event')).toHaveLength(5);
  });
});
