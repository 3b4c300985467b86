// One process-wide budget of bytes for what running jobs hold in memory of
// response bodies and their results, shared by every job, so that many
// concurrent large bodies cannot exhaust the heap. A job takes from it chunk
// by chunk as it keeps a body, and gives everything back once its result has
// been handed on (spooled, or written out). What a job cannot get it does not
// keep: the body is still read and counted to its end (the download is never
// paused for memory, so timings stay true), and the result says it was cut.

import { readFileSync } from 'node:fs';
import os from 'node:os';
import v8 from 'node:v8';

export const MIB = 1024 * 1024;

/** The share of the smallest memory bound the budget gets; the rest covers copies (text, JSON) and everything else. */
export const BUDGET_SHARE = 0.25;

/** Never less than this, however small the bounds (a budget of 0 would keep no body at all). */
export const MIN_BUDGET_BYTES = MIB;

const CGROUP_LIMIT_FILES = ['/sys/fs/cgroup/memory.max', '/sys/fs/cgroup/memory/memory.limit_in_bytes'];

/** What a worker thread needs to share a budget: the shared counters and the capacity (structured-cloneable). */
export interface SharedBudget {
  capacityBytes: number;
  counters: SharedArrayBuffer;
  /** Which per-holder counter this side adds to (0 is the main thread's). */
  holder: number;
}

/** A compare-and-swap that keeps failing this often gives up (grants nothing) rather than spin. */
const MAX_CAS_TRIES = 1000;

/**
 * The counters live in a SharedArrayBuffer so that check workers
 * (src/jobs/workers/) take from the same process-wide budget through
 * Atomics: index 0 is the total in use, index 1 + h what holder h holds, so
 * that a crashed worker's bytes can be given back (reclaim).
 */
export class MemoryBudget {
  private readonly counters: BigInt64Array;
  private readonly slot: number;

  constructor(
    readonly capacityBytes: number,
    shared?: { counters: SharedArrayBuffer; holder: number },
    holders = 1,
  ) {
    this.counters = new BigInt64Array(shared?.counters ?? new SharedArrayBuffer(8 * (1 + holders)));
    this.slot = 1 + (shared?.holder ?? 0);
    if (this.slot >= this.counters.length) throw new RangeError(`memory budget holder ${this.slot - 1} out of range`);
  }

  /** A budget with room for `holders` holders (the main thread and each check worker). */
  static forHolders(capacityBytes: number, holders: number): MemoryBudget {
    return new MemoryBudget(capacityBytes, undefined, Math.max(1, holders));
  }

  /** The same budget, seen by holder `holder` (a worker thread): pass the result in workerData. */
  share(holder: number): SharedBudget {
    return { capacityBytes: this.capacityBytes, counters: this.counters.buffer as SharedArrayBuffer, holder };
  }

  static attach(shared: SharedBudget): MemoryBudget {
    return new MemoryBudget(shared.capacityBytes, shared);
  }

  get inUseBytes(): number {
    return Number(Atomics.load(this.counters, 0));
  }

  /** A holder for one job's bytes. */
  lease(): MemoryLease {
    return new MemoryLease(this);
  }

  /** Grants as much of `bytes` as is free (possibly 0); returns what was granted. */
  take(bytes: number): number {
    for (let tries = 0; tries < MAX_CAS_TRIES; tries++) {
      const used = Atomics.load(this.counters, 0);
      const granted = Math.max(0, Math.min(bytes, this.capacityBytes - Number(used)));
      if (granted === 0) return 0;
      if (Atomics.compareExchange(this.counters, 0, used, used + BigInt(granted)) === used) {
        Atomics.add(this.counters, this.slot, BigInt(granted));
        return granted;
      }
    }
    return 0;
  }

  give(bytes: number): void {
    if (bytes <= 0) return;
    Atomics.sub(this.counters, this.slot, BigInt(bytes));
    Atomics.sub(this.counters, 0, BigInt(bytes));
  }

  /** Gives back everything holder `holder` still held (its worker stopped); returns the bytes. */
  reclaim(holder: number): number {
    const held = Atomics.exchange(this.counters, 1 + holder, 0n);
    if (held > 0n) Atomics.sub(this.counters, 0, held);
    return Number(held);
  }
}

/** One attempt's part of the budget. Once released it grants nothing more (an abandoned executor may still read). */
export class MemoryLease {
  private held = 0;
  private closed = false;

  constructor(readonly budget: MemoryBudget) {}

  get bytes(): number {
    return this.held;
  }

  /** Takes as much of `bytes` as the budget has free; returns what was granted. */
  take(bytes: number): number {
    if (this.closed) return 0;
    const granted = this.budget.take(bytes);
    this.held += granted;
    return granted;
  }

  /** Gives back `bytes` of what this lease holds (at most all of it). */
  give(bytes: number): void {
    const returned = Math.min(Math.max(0, bytes), this.held);
    this.held -= returned;
    this.budget.give(returned);
  }

  /** Gives back everything and grants nothing more; safe to call more than once. */
  release(): void {
    this.closed = true;
    this.give(this.held);
  }

  /** Bytes of the budget in use by other jobs. */
  othersBytes(): number {
    return Math.max(0, this.budget.inUseBytes - this.held);
  }
}

/** The bounds on this process's memory that the default budget is sized from. */
export interface MemoryBounds {
  /** The container's memory limit (cgroup v2 memory.max, or v1 memory.limit_in_bytes); undefined when unlimited. */
  cgroupBytes?: number;
  /** The machine's memory (os.totalmem()). */
  totalBytes: number;
  /** V8's heap limit (heap_size_limit: --max-old-space-size and the like). */
  heapLimitBytes: number;
}

/** The container's memory limit, or undefined if there is none (or none can be read). */
export function cgroupMemoryLimit(read: (file: string) => string = (file) => readFileSync(file, 'utf8')): number | undefined {
  for (const file of CGROUP_LIMIT_FILES) {
    let text: string;
    try {
      text = read(file).trim();
    } catch {
      continue;
    }
    if (text === 'max') return undefined;
    // cgroup v1 says "unlimited" with a number near 2^63.
    if (/^\d+$/.test(text) && Number(text) < 2 ** 60) return Number(text);
    return undefined;
  }
  return undefined;
}

export function memoryBounds(): MemoryBounds {
  const cgroupBytes = cgroupMemoryLimit();
  return {
    ...(cgroupBytes !== undefined ? { cgroupBytes } : {}),
    totalBytes: os.totalmem(),
    heapLimitBytes: v8.getHeapStatistics().heap_size_limit,
  };
}

export interface BudgetSize {
  bytes: number;
  /** Where the size came from, for the start-up log line. */
  basis: string;
}

const mb = (bytes: number) => Math.round(bytes / MIB);

/** BUDGET_SHARE of the smallest of the container limit (or the machine's memory) and the heap limit. */
export function defaultBudgetSize(bounds: MemoryBounds): BudgetSize {
  const machine =
    bounds.cgroupBytes !== undefined && bounds.cgroupBytes < bounds.totalBytes
      ? { bytes: bounds.cgroupBytes, what: 'the container memory limit' }
      : { bytes: bounds.totalBytes, what: "the machine's memory" };
  const smallest = bounds.heapLimitBytes < machine.bytes ? { bytes: bounds.heapLimitBytes, what: 'the V8 heap limit' } : machine;
  const bytes = Math.max(MIN_BUDGET_BYTES, Math.floor(smallest.bytes * BUDGET_SHARE));
  return { bytes, basis: `${BUDGET_SHARE * 100} % of ${smallest.what} (${mb(smallest.bytes)} MB)` };
}

/** The budget BODY_MEMORY_BUDGET_MB sets, or the default one. */
export function bodyBudgetSize(configuredBytes: number | undefined, bounds: () => MemoryBounds = memoryBounds): BudgetSize {
  if (configuredBytes !== undefined) return { bytes: configuredBytes, basis: 'BODY_MEMORY_BUDGET_MB' };
  return defaultBudgetSize(bounds());
}
