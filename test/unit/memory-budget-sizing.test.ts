// The agent-wide memory budget for response bodies and results: what a lease
// may take, what it gives back, and how the default is sized from the
// container's, the machine's and V8's memory bounds.

import { describe, expect, it } from 'vitest';
import { bodyBudgetSize, cgroupMemoryLimit, defaultBudgetSize, MemoryBudget, MIB } from '../../src/core/memory-budget.js';

describe('MemoryBudget and its leases', () => {
  it('grants what is free, partly when little is, and nothing when none is', () => {
    const budget = new MemoryBudget(100);
    const a = budget.lease();
    const b = budget.lease();
    expect(a.take(60)).toBe(60);
    expect(b.take(60)).toBe(40);
    expect(b.take(1)).toBe(0);
    expect([a.bytes, b.bytes, budget.inUseBytes]).toEqual([60, 40, 100]);
    expect(a.othersBytes()).toBe(40);
    a.give(10);
    expect(b.take(25)).toBe(10);
    expect(budget.inUseBytes).toBe(100);
  });

  it('gives everything back on release, and grants nothing after it (an abandoned reader may still ask)', () => {
    const budget = new MemoryBudget(100);
    const lease = budget.lease();
    lease.take(70);
    lease.release();
    lease.release();
    expect([lease.bytes, budget.inUseBytes]).toEqual([0, 0]);
    expect(lease.take(10)).toBe(0);
    expect(budget.inUseBytes).toBe(0);
  });

  it('never gives back more than a lease holds', () => {
    const budget = new MemoryBudget(100);
    const a = budget.lease();
    const b = budget.lease();
    a.take(30);
    b.take(30);
    a.give(1000);
    a.give(-5);
    expect([a.bytes, b.bytes, budget.inUseBytes]).toEqual([0, 30, 30]);
  });
});

describe('the container memory limit', () => {
  const files = (contents: Record<string, string>) => (file: string) => {
    const text = contents[file];
    if (text === undefined) throw Object.assign(new Error(`ENOENT: ${file}`), { code: 'ENOENT' });
    return text;
  };

  it('reads cgroup v2 memory.max, where "max" means no limit', () => {
    expect(cgroupMemoryLimit(files({ '/sys/fs/cgroup/memory.max': '536870912\n' }))).toBe(536870912);
    expect(cgroupMemoryLimit(files({ '/sys/fs/cgroup/memory.max': 'max\n' }))).toBeUndefined();
  });

  it('reads cgroup v1 memory.limit_in_bytes, where a number near 2^63 means no limit', () => {
    expect(cgroupMemoryLimit(files({ '/sys/fs/cgroup/memory/memory.limit_in_bytes': '1073741824\n' }))).toBe(1073741824);
    expect(cgroupMemoryLimit(files({ '/sys/fs/cgroup/memory/memory.limit_in_bytes': '9223372036854771712\n' }))).toBeUndefined();
  });

  it('is undefined with no cgroup files, or unreadable ones', () => {
    expect(cgroupMemoryLimit(files({}))).toBeUndefined();
    expect(cgroupMemoryLimit(files({ '/sys/fs/cgroup/memory.max': 'garbage' }))).toBeUndefined();
  });
});

describe('the default budget', () => {
  const GIB = 1024 * MIB;

  it('is a quarter of the V8 heap limit when that is the smallest bound', () => {
    expect(defaultBudgetSize({ totalBytes: 16 * GIB, heapLimitBytes: 256 * MIB })).toEqual({
      bytes: 64 * MIB,
      basis: '25 % of the V8 heap limit (256 MB)',
    });
  });

  it('is a quarter of the container limit when that is smaller than the heap limit', () => {
    expect(defaultBudgetSize({ cgroupBytes: 512 * MIB, totalBytes: 16 * GIB, heapLimitBytes: 4 * GIB })).toEqual({
      bytes: 128 * MIB,
      basis: '25 % of the container memory limit (512 MB)',
    });
  });

  it("falls back to the machine's memory when the container limit is above it or absent", () => {
    expect(defaultBudgetSize({ cgroupBytes: 64 * GIB, totalBytes: 2 * GIB, heapLimitBytes: 4 * GIB }).basis).toBe("25 % of the machine's memory (2048 MB)");
    expect(defaultBudgetSize({ totalBytes: 2 * GIB, heapLimitBytes: 4 * GIB }).bytes).toBe(512 * MIB);
  });

  it('is never below 1 MiB', () => {
    expect(defaultBudgetSize({ totalBytes: 2 * MIB, heapLimitBytes: 2 * MIB }).bytes).toBe(MIB);
  });

  it('gives way to BODY_MEMORY_BUDGET_MB, and reads no bounds then', () => {
    const bounds = () => {
      throw new Error('not read');
    };
    expect(bodyBudgetSize(32 * MIB, bounds)).toEqual({ bytes: 32 * MIB, basis: 'BODY_MEMORY_BUDGET_MB' });
    expect(bodyBudgetSize(undefined, () => ({ totalBytes: 8 * GIB, heapLimitBytes: 400 * MIB })).bytes).toBe(100 * MIB);
  });
});
