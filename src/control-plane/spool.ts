// The on-disk result spool (DESIGN §2). Results are appended as JSON lines to
// numbered segment files; appends that arrive together share one write and
// one fdatasync (group commit), so durability costs one sync per burst, not
// per result. A segment holds at most one batch (500 results), so the sender
// reads, sends and deletes whole segments. After a crash every segment left
// on disk is re-sent; the control plane deduplicates by resultId. Segments
// written by this process also keep their lines in memory (up to a budget),
// so sending them needs neither a read nor a parse.

import { promises as fs } from 'node:fs';
import path from 'node:path';
import type { Logger } from '../observability/logger.js';
import { MAX_RESULTS_PER_BATCH, type ResultEnvelope } from './protocol.js';

/** A segment is one results call; keep its body small enough for any proxy in between. */
export const MAX_SEGMENT_BYTES = 8 * 1024 * 1024;

const SEGMENT = /^segment-(\d{12})\.jsonl$/;

/** Memory the spool may spend keeping segments' lines, besides the files. */
export const MEMORY_BUDGET_BYTES = 32 * 1024 * 1024;

/** One spooled result: its JSON line (the envelope, no newline) and the ids the sender needs. */
export interface SpoolItem {
  line: string;
  jobId: string;
  resultId: string;
}

interface Segment {
  seq: number;
  file: string;
  count: number;
  bytes: number;
  /** The lines, while they fit the memory budget; read from the file otherwise. */
  items?: SpoolItem[];
}

interface PendingAppend {
  item: SpoolItem;
  resolve: () => void;
  reject: (error: Error) => void;
}

export interface SpoolLimits {
  maxResults: number;
  maxBytes: number;
  /** Memory for keeping lines of segments (default MEMORY_BUDGET_BYTES); beyond it they are read back from disk. */
  memoryBudgetBytes?: number;
}

export interface Batch {
  seq: number;
  items: SpoolItem[];
}

export function spoolItem(envelope: ResultEnvelope): SpoolItem {
  return { line: JSON.stringify(envelope), jobId: envelope.jobId, resultId: envelope.resultId };
}

export class Spool {
  private readonly sealed: Segment[] = [];
  private open: (Segment & { handle: fs.FileHandle; openedAt: number }) | undefined;
  private nextSeq = 1;
  private pending: PendingAppend[] = [];
  private flushing: Promise<void> | undefined;
  private totalResults = 0;
  private totalBytes = 0;
  private memoryBytes = 0;
  private readonly waiters = new Set<() => void>();

  private constructor(
    readonly dir: string,
    readonly limits: SpoolLimits,
    private readonly logger: Logger,
    private readonly onChange: (results: number) => void,
    private readonly onWriteError: (error: unknown) => void,
  ) {}

  /** Opens (creating) the spool and takes over every segment a previous process left. */
  static async open(
    dir: string,
    limits: SpoolLimits,
    logger: Logger,
    onChange: (results: number) => void = () => undefined,
    /** A write or sync failed (for error events). */
    onWriteError: (error: unknown) => void = () => undefined,
  ): Promise<Spool> {
    await fs.mkdir(dir, { recursive: true });
    const spool = new Spool(dir, limits, logger, onChange, onWriteError);
    const names = (await fs.readdir(dir)).filter((n) => SEGMENT.test(n)).sort();
    for (const name of names) {
      const file = path.join(dir, name);
      const text = await fs.readFile(file, 'utf8');
      const count = text.split('\n').filter((l) => l.length > 0).length;
      const seq = Number(SEGMENT.exec(name)?.[1]);
      if (count === 0) {
        await fs.rm(file, { force: true });
        continue;
      }
      spool.sealed.push({ seq, file, count, bytes: Buffer.byteLength(text) });
      spool.totalResults += count;
      spool.totalBytes += Buffer.byteLength(text);
      spool.nextSeq = Math.max(spool.nextSeq, seq + 1);
    }
    if (spool.totalResults > 0) {
      logger.info({ results: spool.totalResults, segments: spool.sealed.length }, 'spool holds results from an earlier run; re-sending them');
    }
    onChange(spool.totalResults);
    return spool;
  }

  get results(): number {
    return this.totalResults;
  }

  get bytes(): number {
    return this.totalBytes;
  }

  /**
   * True while claiming must pause (DESIGN §2: backpressure rather than dropping results);
   * `incoming` counts results already on their way (claimed jobs not yet spooled).
   */
  isFull(incoming = 0): boolean {
    return this.totalResults + incoming >= this.limits.maxResults || this.totalBytes >= this.limits.maxBytes;
  }

  /** Resolves when the spool is below 90 % of both bounds. */
  async waitUntilDrained(signal?: AbortSignal): Promise<void> {
    const below = () =>
      this.totalResults < this.limits.maxResults * 0.9 && this.totalBytes < this.limits.maxBytes * 0.9;
    while (!below() && !signal?.aborted) await this.changed(signal);
  }

  /** Resolves once the result is on disk (written and synced). */
  append(envelope: ResultEnvelope): Promise<void> {
    return this.appendItem(spoolItem(envelope));
  }

  private appendItem(item: SpoolItem): Promise<void> {
    return new Promise((resolve, reject) => {
      this.pending.push({ item, resolve, reject });
      if (!this.flushing) this.flushing = this.flushLoop();
    });
  }

  /**
   * The oldest batch to send: a sealed segment, or the open one if it has
   * lingered at least `lingerMs` (sealing it). Undefined when nothing is due.
   */
  async nextBatch(lingerMs: number): Promise<Batch | undefined> {
    if (this.sealed.length === 0 && this.open && this.open.count > 0 && Date.now() - this.open.openedAt >= lingerMs) {
      while (this.flushing) await this.flushing;
      await this.seal();
    }
    const segment = this.sealed[0];
    if (!segment) return undefined;
    if (segment.items) return { seq: segment.seq, items: segment.items };
    const text = await fs.readFile(segment.file, 'utf8');
    const items: SpoolItem[] = [];
    for (const line of text.split('\n')) {
      if (line.length === 0) continue;
      try {
        const { jobId, resultId } = JSON.parse(line) as ResultEnvelope;
        items.push({ line, jobId, resultId });
      } catch {
        // A torn final line can only come from a crash mid-write, before the
        // sync that would have acknowledged it: that result was never reported done.
        this.logger.warn({ file: segment.file }, 'skipping an unreadable line in the spool');
      }
    }
    return { seq: segment.seq, items };
  }

  /** Milliseconds until the open segment becomes due, or undefined if nothing waits. */
  dueIn(lingerMs: number): number | undefined {
    if (this.sealed.length > 0) return 0;
    if (!this.open || this.open.count === 0) return undefined;
    return Math.max(0, this.open.openedAt + lingerMs - Date.now());
  }

  /** The batch was handled; `retry` are its results that must be sent again. */
  async complete(seq: number, retry: SpoolItem[] = []): Promise<void> {
    const index = this.sealed.findIndex((s) => s.seq === seq);
    if (index === -1) return;
    if (retry.length > 0) await Promise.all(retry.map((item) => this.appendItem(item)));
    const [segment] = this.sealed.splice(index, 1);
    if (!segment) return;
    await fs.rm(segment.file, { force: true });
    this.totalResults -= segment.count;
    this.totalBytes -= segment.bytes;
    if (segment.items) this.memoryBytes -= segment.bytes;
    this.notify();
  }

  /** Waits for appends in progress, then closes the open segment (it stays on disk). */
  async close(): Promise<void> {
    while (this.flushing) await this.flushing;
    if (this.open) {
      await this.open.handle.close();
      this.open = undefined;
    }
  }

  /** Resolves on the next change of the spool's contents. */
  changed(signal?: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        this.waiters.delete(done);
        signal?.removeEventListener('abort', done);
        resolve();
      };
      this.waiters.add(done);
      signal?.addEventListener('abort', done, { once: true });
    });
  }

  private notify(): void {
    this.onChange(this.totalResults);
    for (const waiter of [...this.waiters]) waiter();
  }

  private async flushLoop(): Promise<void> {
    try {
      while (this.pending.length > 0) {
        if (!this.open) await this.openSegment();
        const open = this.open as NonNullable<typeof this.open>;
        const room = MAX_RESULTS_PER_BATCH - open.count;
        let takeCount = 0;
        let takeBytes = open.bytes;
        // By count and by size, but always at least one line, however large.
        while (takeCount < room && takeCount < this.pending.length) {
          const size = Buffer.byteLength((this.pending[takeCount] as PendingAppend).item.line) + 1;
          if (takeCount > 0 && takeBytes + size > MAX_SEGMENT_BYTES) break;
          takeBytes += size;
          takeCount++;
        }
        // Stopping short of what is pending means the segment is full.
        const full = takeCount < this.pending.length;
        const take = this.pending.splice(0, takeCount);
        const data = `${take.map((p) => p.item.line).join('\n')}\n`;
        try {
          await open.handle.write(data);
          await open.handle.datasync();
        } catch (error) {
          for (const p of take) p.reject(error as Error);
          this.logger.error({ err: error, dir: this.dir }, 'could not write results to the spool');
          this.onWriteError(error);
          continue;
        }
        const bytes = Buffer.byteLength(data);
        open.count += take.length;
        open.bytes += bytes;
        if (open.items && this.memoryBytes + bytes <= (this.limits.memoryBudgetBytes ?? MEMORY_BUDGET_BYTES)) {
          for (const p of take) open.items.push(p.item);
          this.memoryBytes += bytes;
        } else if (open.items) {
          // Over budget: this segment is read back from its file when its turn comes.
          this.memoryBytes -= open.bytes - bytes;
          open.items = undefined;
        }
        this.totalResults += take.length;
        this.totalBytes += bytes;
        for (const p of take) p.resolve();
        if (full || open.count >= MAX_RESULTS_PER_BATCH || open.bytes >= MAX_SEGMENT_BYTES) await this.seal();
        this.notify();
      }
    } finally {
      this.flushing = undefined;
    }
  }

  private async openSegment(): Promise<void> {
    const seq = this.nextSeq++;
    const file = path.join(this.dir, `segment-${String(seq).padStart(12, '0')}.jsonl`);
    const handle = await fs.open(file, 'a');
    // Sync the directory so the new file's name survives a power loss too.
    const dirHandle = await fs.open(this.dir, 'r');
    await dirHandle.sync().finally(() => dirHandle.close());
    this.open = { seq, file, count: 0, bytes: 0, handle, openedAt: Date.now(), items: [] };
  }

  /** Must run with no flush in progress (or from within the flush loop itself). */
  private async seal(): Promise<void> {
    const open = this.open;
    if (!open) return;
    // Detach synchronously, so an append that starts now opens a new segment.
    this.open = undefined;
    this.sealed.push({ seq: open.seq, file: open.file, count: open.count, bytes: open.bytes, ...(open.items ? { items: open.items } : {}) });
    await open.handle.close();
  }
}

