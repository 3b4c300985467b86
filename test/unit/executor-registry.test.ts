import { describe, expect, it } from 'vitest';
import type { Executor } from '../../src/checks/executor.js';
import { ExecutorRegistry } from '../../src/checks/executor-registry.js';
import { tcpExecutor } from '../../src/checks/tcp/tcp.js';
import { uptimeOnly } from '../../src/checks/registry.js';
import { icmpExecutor } from '../../src/checks/icmp/icmp.js';

describe('ExecutorRegistry', () => {
  const reasons = new Map([['ICMP' as const, 'no ping here']]);
  const registry = new ExecutorRegistry([tcpExecutor as Executor], reasons);

  it('runs the types of its executors and says why it lacks another', () => {
    expect(registry.get('TCP')).toBe(tcpExecutor);
    expect(registry.get('ICMP')).toBeUndefined();
    expect(registry.types()).toEqual(['TCP']);
    expect(registry.whyUnsupported('ICMP')).toBe('no ping here');
    expect(registry.whyUnsupported('DNS')).toBeUndefined();
    expect(registry.whyUnsupported('TCP')).toBeUndefined();
  });

  it('with() adds an executor to a copy; its type is then supported', () => {
    const more = registry.with(icmpExecutor as Executor);
    expect(more.types()).toEqual(['TCP', 'ICMP']);
    expect(more.whyUnsupported('ICMP')).toBeUndefined();
    expect(registry.types()).toEqual(['TCP']);
  });

  it('uptimeOnly() keeps the uptime types and explains the scripted ones', () => {
    const uptime = uptimeOnly(registry.with(icmpExecutor as Executor));
    expect(uptime.types()).toEqual(['TCP', 'ICMP']);
    expect(uptime.whyUnsupported('MULTI_STEP')).toMatch(/--uptime-only/);
    expect(uptime.whyUnsupported('HEARTBEAT')).toMatch(/heartbeats are received by the service/);
  });
});
