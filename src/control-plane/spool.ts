// The on-disk result spool. Results are appended as JSON lines to
// numbered segment files; appends that arrive together share one write and
// one fdatasync (group commit), so durability costs one sync per burst, not
// per result. A segment holds at most one batch (500 results), so the sender
// reads, sends and deletes whole segments. After a crash every segment left
// on disk is re-sent; the control plane deduplicates by resultId. Segments
// written by this process also keep their lines in memory (up to a budget),
// so sending them needs neither a read nor a parse.
//
// When the disk fails (read-only, full, out of descriptors) no result is
// dropped: what could not be written is held in memory, the spool reports
// itself not writable (the agent stops claiming and is not ready, which bounds
// what is held), held results are still handed to the sender, and writing is
// retried with backoff until the disk takes them again. Content the spool
// cannot use (a segment that is not a regular file or is too big, a line that
// is not a result, a result the control plane refuses on its own) is moved to
// the quarantine folder beside the segments, never re-sent forever.

import { createReadStream, promises as fs } from 'node:fs';
import { makeDirectories } from '../core/make-directories.js';
import path from 'node:path';
import type { Logger } from '../observability/logger.js';
import { MAX_RESULTS_PER_BATCH, type ResultEnvelope } from '../core/protocol.js';

/** A segment is one results call; keep its body small enough for any proxy in between. */
export const MAX_SEGMENT_BYTES = 8 * 1024 * 1024;

/**
 * A segment file found at start above this size is quarantined, not read: the
 * spool never writes one (8 MiB plus one line), and reading it would need the
 * whole file in memory.
 */
export const MAX_SEGMENT_FILE_BYTES = 64 * 1024 * 1024;

const SEGMENT = /^segment-(\d{12})\.jsonl$/;

/** Memory the spool may spend keeping segments' lines, besides the files. */
export const MEMORY_BUDGET_BYTES = 32 * 1024 * 1024;

/** The sequence number of a batch of held results (not on disk); segments start at 1. */
export const MEMORY_BATCH_SEQ = 0;

/** First and longest wait between attempts to write held results again. */
const RETRY_FIRST_MS = 250;
const RETRY_MAX_MS = 30_000;

/** One spooled result: its JSON line (the envelope, no newline) and the ids the sender needs. */
export interface SpoolItem {
  line: string;
  jobId: string;
  resultId: string;
  /** The line's UTF-8 bytes with its newline, once known (lineBytes). */
  bytes?: number;
}

/** The few file operations the spool needs of a segment: a seam for tests of short writes. */
export interface SegmentFile {
  write(buffer: Buffer, offset: number, length: number): Promise<{ bytesWritten: number }>;
  datasync(): Promise<void>;
  truncate(length: number): Promise<void>;
  close(): Promise<void>;
}

export type OpenSegmentFile = (file: string) => Promise<SegmentFile>;

const openForAppend: OpenSegmentFile = (file) => fs.open(file, 'a');

interface Segment {
  seq: number;
  file: string;
  count: number;
  bytes: number;
  /** The lines, while they fit the memory budget; read from the file otherwise. */
  items?: SpoolItem[];
  /** Its unusable lines are already in the quarantine folder (read again, they are just left out). */
  badLinesQuarantined?: boolean;
}

interface PendingAppend {
  item: SpoolItem;
  resolve: () => void;
}

export interface SpoolLimits {
  maxResults: number;
  maxBytes: number;
  /** Memory for keeping lines of segments (default MEMORY_BUDGET_BYTES); beyond it they are read back from disk. */
  memoryBudgetBytes?: number;
}

export interface SpoolHooks {
  /** Opens a segment file for appending (default: fs.open with 'a'). */
  openFile?: OpenSegmentFile;
  /** Results (or whole files) were quarantined. */
  onQuarantine?: (count: number) => void;
  /** The spool became writable (true) or stopped being so (false). */
  onWritable?: (writable: boolean) => void;
}

export interface Batch {
  seq: number;
  items: SpoolItem[];
}

/**
 * The envelope's spool line. With `resultLine` (JSON.stringify(envelope.result), made once
 * when the result was scrubbed) the line is put together around it, not serialized again:
 * the same text JSON.stringify(envelope) gives.
 */
export function spoolItem(envelope: ResultEnvelope, resultLine?: string): SpoolItem {
  const { jobId, resultId } = envelope;
  if (resultLine === undefined) return { line: JSON.stringify(envelope), jobId, resultId };
  const head = `{"jobId":${JSON.stringify(jobId)},"resultId":${JSON.stringify(resultId)},"result":`;
  // Counted from its parts: measuring the joined line would first copy it flat, once more per result.
  return { line: `${head}${resultLine}}`, jobId, resultId, bytes: Buffer.byteLength(head) + Buffer.byteLength(resultLine) + 2 };
}

function lineBytes(item: SpoolItem): number {
  item.bytes ??= Buffer.byteLength(item.line) + 1;
  return item.bytes;
}

/** Writes all of `data`, however many calls the kernel needs (a write may take fewer bytes than asked). */
async function writeAll(handle: SegmentFile, data: Buffer): Promise<void> {
  let offset = 0;
  while (offset < data.length) {
    const { bytesWritten } = await handle.write(data, offset, data.length - offset);
    if (bytesWritten <= 0) throw Object.assign(new Error('the disk took no bytes of a spool write'), { code: 'EIO' });
    offset += bytesWritten;
  }
}

/** Non-empty lines of a file, counted while streaming it (never held whole). */
async function countLines(file: string): Promise<number> {
  let count = 0;
  let inLine = false;
  for await (const chunk of createReadStream(file) as AsyncIterable<Buffer>) {
    let from = 0;
    for (let nl = chunk.indexOf(10, from); nl !== -1; nl = chunk.indexOf(10, from)) {
      if (inLine || nl > from) count++;
      inLine = false;
      from = nl + 1;
    }
    if (from < chunk.length) inLine = true;
  }
  return inLine ? count + 1 : count;
}

/** The ids of a spool line, or why it is not a result envelope. */
function parseLine(line: string): SpoolItem | string {
  let envelope: unknown;
  try {
    envelope = JSON.parse(line);
  } catch {
    return 'not JSON (a line torn by a crash mid-write)';
  }
  const { jobId, resultId } = (envelope ?? {}) as Partial<ResultEnvelope>;
  if (typeof jobId !== 'string' || jobId.length === 0 || typeof resultId !== 'string' || resultId.length === 0) {
    return 'not a result envelope (no jobId or resultId)';
  }
  return { line, jobId, resultId };
}

export class Spool {
  private readonly sealed: Segment[] = [];
  private open: (Segment & { handle: SegmentFile; openedAt: number }) | undefined;
  private nextSeq = 1;
  private pending: PendingAppend[] = [];
  private flushing: Promise<void> | undefined;
  /** The sink wants the open segment sealed; the write loop does it between two writes. */
  private sealWanted = false;
  private totalResults = 0;
  private totalBytes = 0;
  private memoryBytes = 0;
  private readonly waiters = new Set<() => void>();
  /** Results not on disk because writing failed, oldest first; sent from memory meanwhile. */
  private held: SpoolItem[] = [];
  /** The held results handed out as the current memory batch. */
  private lent: SpoolItem[] | undefined;
  private retryTimer: NodeJS.Timeout | undefined;
  private retryMs = RETRY_FIRST_MS;
  private writeError: unknown;
  private quarantinedCount = 0;
  private droppedCount = 0;
  private readonly openFile: OpenSegmentFile;

  private constructor(
    readonly dir: string,
    readonly limits: SpoolLimits,
    private readonly logger: Logger,
    private readonly onChange: (results: number) => void,
    private readonly onWriteError: (error: unknown) => void,
    private readonly hooks: SpoolHooks,
  ) {
    this.openFile = hooks.openFile ?? openForAppend;
  }

  /** Opens (creating) the spool and takes over every segment a previous process left. */
  static async open(
    dir: string,
    limits: SpoolLimits,
    logger: Logger,
    onChange: (results: number) => void = () => undefined,
    /** A write or sync failed (for error events). */
    onWriteError: (error: unknown) => void = () => undefined,
    hooks: SpoolHooks = {},
  ): Promise<Spool> {
    await makeDirectories(dir);
    const spool = new Spool(dir, limits, logger, onChange, onWriteError, hooks);
    const names = (await fs.readdir(dir)).filter((n) => SEGMENT.test(n)).sort();
    for (const name of names) {
      const file = path.join(dir, name);
      const seq = Number(SEGMENT.exec(name)?.[1]);
      spool.nextSeq = Math.max(spool.nextSeq, seq + 1);
      const stat = await fs.lstat(file);
      if (!stat.isFile()) {
        await spool.quarantineFile(file, 'not a regular file');
        continue;
      }
      if (stat.size > MAX_SEGMENT_FILE_BYTES) {
        await spool.quarantineFile(file, `larger than ${MAX_SEGMENT_FILE_BYTES} bytes (the spool writes at most ${MAX_SEGMENT_BYTES} and one line)`);
        continue;
      }
      const count = await countLines(file);
      if (count === 0) {
        await fs.rm(file, { force: true });
        continue;
      }
      spool.sealed.push({ seq, file, count, bytes: stat.size });
      spool.totalResults += count;
      spool.totalBytes += stat.size;
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

  /** False while results cannot be written to disk (they are held in memory, and claiming must stop). */
  get writable(): boolean {
    return this.writeError === undefined;
  }

  /** Results (and whole files) this process moved to the quarantine folder. */
  get quarantined(): number {
    return this.quarantinedCount;
  }

  /** Results held in memory because the disk refused them. */
  get heldInMemory(): number {
    return this.held.length;
  }

  get quarantineDir(): string {
    return path.join(this.dir, 'quarantine');
  }

  /**
   * True while claiming must pause (backpressure rather than dropping results);
   * `incoming` counts results already on their way (claimed jobs not yet spooled).
   */
  isFull(incoming = 0): boolean {
    return this.totalResults + incoming >= this.limits.maxResults || this.totalBytes >= this.limits.maxBytes;
  }

  /** Resolves when the spool is below 90 % of both bounds. */
  async waitUntilDrained(signal?: AbortSignal): Promise<void> {
    const below = () => this.totalResults < this.limits.maxResults * 0.9 && this.totalBytes < this.limits.maxBytes * 0.9;
    while (!below() && !signal?.aborted) await this.changed(signal);
  }

  /**
   * Resolves once the result is on disk (written and synced), or, when the
   * disk refuses it, once it is held in memory (the spool is then not writable).
   * Never rejects.
   */
  append(envelope: ResultEnvelope, resultLine?: string): Promise<void> {
    return this.appendItem(spoolItem(envelope, resultLine));
  }

  private appendItem(item: SpoolItem): Promise<void> {
    if (!this.writable) {
      this.hold([item]);
      this.notify();
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      this.pending.push({ item, resolve });
      if (!this.flushing) this.flushing = this.flushLoop();
    });
  }

  /**
   * The oldest batch to send: a sealed segment, held results (sent from memory
   * while the disk refuses them), or the open segment if it has lingered at
   * least `lingerMs` (sealing it). Undefined when nothing is due.
   */
  async nextBatch(lingerMs: number): Promise<Batch | undefined> {
    if (this.sealed.length === 0 && this.open && this.open.count > 0 && Date.now() - this.open.openedAt >= lingerMs) {
      await this.sealBetweenWrites();
    }
    const segment = this.sealed[0];
    if (!segment) {
      if (this.held.length === 0) return undefined;
      // Wait for a write of held results in progress, so the batch and the write never share a result.
      while (this.flushing) await this.flushing;
      if (this.held.length === 0) return undefined;
      // Cut by size too: a batch is one request body, and joining past the string limit would throw.
      this.lent = this.held.slice(0, this.batchSize(this.held));
      return { seq: MEMORY_BATCH_SEQ, items: this.lent };
    }
    if (segment.items) return { seq: segment.seq, items: segment.items };
    let text: string;
    try {
      text = await fs.readFile(segment.file, 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
      // Removed by someone else: retrying would block every later segment for good.
      this.forget(segment);
      this.logger.error({ file: segment.file, results: segment.count }, 'spool segment file has vanished; its results are lost');
      return this.nextBatch(lingerMs);
    }
    const items: SpoolItem[] = [];
    const bad: Array<{ line: string; reason: string }> = [];
    for (const line of text.split('\n')) {
      if (line.length === 0) continue;
      const parsed = parseLine(line);
      if (typeof parsed === 'string') bad.push({ line, reason: parsed });
      else items.push(parsed);
    }
    if (bad.length > 0 && !segment.badLinesQuarantined) {
      // Out of the segment for good: such a line would otherwise be re-sent (and refused) forever.
      await this.quarantineLines(
        bad.map((b) => b.line),
        `segment-${String(segment.seq).padStart(12, '0')}`,
      );
      for (const b of bad) {
        this.logger.error({ file: segment.file, reason: b.reason, quarantine: this.quarantineDir }, 'spool line is not a result: quarantined');
      }
      // The segment now sends only its good lines; its count follows, so the totals stay true.
      segment.count -= bad.length;
      segment.badLinesQuarantined = true;
      this.totalResults -= bad.length;
      this.notify();
    }
    return { seq: segment.seq, items };
  }

  /** Milliseconds until the open segment becomes due, or undefined if nothing waits. */
  dueIn(lingerMs: number): number | undefined {
    if (this.sealed.length > 0 || this.held.length > 0) return 0;
    if (!this.open || this.open.count === 0) return undefined;
    return Math.max(0, this.open.openedAt + lingerMs - Date.now());
  }

  /** The batch was handled; `retry` are its results that must be sent again. */
  async complete(seq: number, retry: SpoolItem[] = []): Promise<void> {
    if (seq === MEMORY_BATCH_SEQ) {
      const lent = new Set(this.lent ?? []);
      this.lent = undefined;
      const before = this.held.length;
      this.held = this.held.filter((item) => {
        if (!lent.has(item)) return true;
        this.totalBytes -= lineBytes(item);
        return false;
      });
      this.totalResults -= before - this.held.length;
      if (retry.length > 0) await Promise.all(retry.map((item) => this.appendItem(item)));
      this.notify();
      return;
    }
    const index = this.sealed.findIndex((s) => s.seq === seq);
    if (index === -1) return;
    const current = this.sealed[index] as Segment;
    if (retry.length > 0 && retry.length === current.count && new Set(retry.map((i) => i.resultId)).size === current.count) {
      // Every result of it is to be sent again: it goes behind the others as it is, not rewritten.
      this.sealed.splice(index, 1);
      this.sealed.push(current);
      this.notify();
      return;
    }
    if (retry.length > 0) await Promise.all(retry.map((item) => this.appendItem(item)));
    const [segment] = this.sealed.splice(index, 1);
    if (!segment) return;
    try {
      await fs.rm(segment.file, { force: true });
    } catch (error) {
      // Every line of it is handled; should it survive, the next start re-sends it and the control plane deduplicates.
      this.logger.warn({ err: error, file: segment.file }, 'could not remove a delivered spool segment');
    }
    this.forget(segment);
  }

  /** Takes a segment that left the sealed list (or is about to) out of the totals. */
  private forget(segment: Segment): void {
    const index = this.sealed.indexOf(segment);
    if (index !== -1) this.sealed.splice(index, 1);
    this.totalResults -= segment.count;
    this.totalBytes -= segment.bytes;
    if (segment.items) this.memoryBytes -= segment.bytes;
    this.notify();
  }

  /**
   * A result the control plane refuses on its own that could not be written
   * to the quarantine folder (a read-only disk): it is dropped, with one error
   * line carrying its ids and the line itself, and counted. Kept, it would be
   * refused again and again and hold up every result behind it.
   */
  dropUnquarantinable(item: SpoolItem, reason: string, error: unknown): void {
    this.droppedCount++;
    this.logger.error(
      { err: error, jobId: item.jobId, resultId: item.resultId, reason, quarantine: this.quarantineDir, line: item.line.slice(0, 4096) },
      'control plane refuses this result and it could not be quarantined: dropped',
    );
  }

  /** Results refused by the control plane that could not be quarantined and were dropped. */
  get dropped(): number {
    return this.droppedCount;
  }

  /**
   * Moves results the control plane refuses on their own into the quarantine
   * folder (kept, never re-sent), one log line each. Throws if they cannot be
   * written there: they then stay where they are.
   */
  async quarantine(items: SpoolItem[], reason: string): Promise<void> {
    if (items.length === 0) return;
    await this.quarantineLines(
      items.map((i) => i.line),
      'refused',
    );
    for (const item of items) {
      this.logger.error(
        { jobId: item.jobId, resultId: item.resultId, reason, quarantine: this.quarantineDir },
        'control plane refuses this result: quarantined',
      );
    }
  }

  /**
   * Waits for appends in progress, tries once more to write held results,
   * then closes the open segment (it stays on disk).
   */
  async close(): Promise<void> {
    clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    while (this.flushing) await this.flushing;
    if (this.held.length > 0) {
      this.lent = undefined;
      this.flushing = this.writeHeld();
      await this.flushing;
      if (this.held.length > 0) {
        this.logger.error(
          { results: this.held.length, dir: this.dir, err: this.writeError },
          'the spool cannot be written: these results were neither delivered nor saved, and are lost',
        );
      }
    }
    clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    if (this.open) {
      await this.open.handle.close().catch(() => undefined);
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

  private hold(items: SpoolItem[]): void {
    for (const item of items) {
      this.held.push(item);
      this.totalResults++;
      this.totalBytes += lineBytes(item);
    }
  }

  /**
   * Seals the open segment between two writes. Waiting for the write loop to
   * end instead would wait as long as appends keep coming: under a steady load
   * the sink would send nothing until the segment filled up.
   */
  private async sealBetweenWrites(): Promise<void> {
    this.sealWanted = true;
    while (this.sealWanted && this.flushing) {
      const woken = new AbortController();
      await Promise.race([this.changed(woken.signal), this.flushing]);
      woken.abort();
    }
    if (!this.sealWanted) return;
    this.sealWanted = false;
    if (this.open && this.open.count > 0) await this.seal();
  }

  private async flushLoop(): Promise<void> {
    try {
      while (this.pending.length > 0) {
        if (this.sealWanted) {
          this.sealWanted = false;
          if (this.open && this.open.count > 0) await this.seal();
          this.notify();
        }
        const take = this.pending.splice(0, this.groupSize(this.pending.map((p) => p.item)));
        try {
          await this.writeItems(
            take.map((p) => p.item),
            this.pending.length > 0,
          );
        } catch (error) {
          // Nothing is dropped: this group and every append behind it wait in memory.
          const rest = this.pending.splice(0);
          this.hold([...take, ...rest].map((p) => p.item));
          this.becomeUnwritable(error);
          for (const p of [...take, ...rest]) p.resolve();
          this.notify();
          return;
        }
        for (const p of take) p.resolve();
        this.notify();
      }
    } finally {
      this.flushing = undefined;
    }
  }

  /** How many of `items` make one batch: at most 500 and MAX_SEGMENT_BYTES, at least one. */
  private batchSize(items: SpoolItem[]): number {
    return fittingCount(items, MAX_RESULTS_PER_BATCH, 0);
  }

  /** How many of `items` go into the open segment's next write: by count and size, at least one. */
  private groupSize(items: SpoolItem[]): number {
    return fittingCount(items, MAX_RESULTS_PER_BATCH - (this.open?.count ?? 0), this.open?.bytes ?? 0);
  }

  /**
   * Appends `items` to the open segment (opening one if needed) and syncs. On
   * failure the segment is cut back to its last good length and closed, so a
   * torn line never precedes good ones, and the error is thrown.
   */
  private async writeItems(items: SpoolItem[], moreWaiting: boolean): Promise<void> {
    if (!this.open) await this.openSegment();
    const open = this.open as NonNullable<typeof this.open>;
    const data = Buffer.from(`${items.map((i) => i.line).join('\n')}\n`);
    try {
      await writeAll(open.handle, data);
      await open.handle.datasync();
    } catch (error) {
      await this.abandonOpen(open);
      throw error;
    }
    const bytes = data.length;
    open.count += items.length;
    open.bytes += bytes;
    if (open.items && this.memoryBytes + bytes <= (this.limits.memoryBudgetBytes ?? MEMORY_BUDGET_BYTES)) {
      open.items.push(...items);
      this.memoryBytes += bytes;
    } else if (open.items) {
      // Over budget: this segment is read back from its file when its turn comes.
      this.memoryBytes -= open.bytes - bytes;
      open.items = undefined;
    }
    this.totalResults += items.length;
    this.totalBytes += bytes;
    // More waiting than this write took means the segment is full.
    if (moreWaiting || open.count >= MAX_RESULTS_PER_BATCH || open.bytes >= MAX_SEGMENT_BYTES) await this.seal();
  }

  /** After a failed write: truncate to the good part, close, and keep the segment if it has results. */
  private async abandonOpen(open: NonNullable<typeof this.open>): Promise<void> {
    this.open = undefined;
    try {
      await open.handle.truncate(open.bytes);
    } catch (error) {
      this.logger.warn({ err: error, file: open.file }, 'could not cut a spool segment back after a failed write; its last line may be torn');
    }
    await open.handle.close().catch(() => undefined);
    if (open.count > 0) {
      this.sealed.push({ seq: open.seq, file: open.file, count: open.count, bytes: open.bytes, ...(open.items ? { items: open.items } : {}) });
    } else {
      await fs.rm(open.file, { force: true }).catch(() => undefined);
    }
  }

  private becomeUnwritable(error: unknown): void {
    const first = this.writable;
    this.writeError = error;
    this.onWriteError(error);
    if (first) {
      this.logger.error(
        { err: error, dir: this.dir, held: this.held.length },
        'could not write results to the spool: keeping them in memory, not ready and not claiming until the disk takes them again',
      );
      this.hooks.onWritable?.(false);
    }
    this.scheduleRetry();
  }

  private scheduleRetry(): void {
    clearTimeout(this.retryTimer);
    const wait = this.retryMs;
    this.retryMs = Math.min(RETRY_MAX_MS, this.retryMs * 2);
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      if (this.flushing) {
        this.scheduleRetry();
        return;
      }
      this.flushing = this.writeHeld();
    }, wait);
    this.retryTimer.unref();
  }

  /** Writes held results (those not out in a memory batch) to disk; on success the spool is writable again. */
  private async writeHeld(): Promise<void> {
    // Ends after an await, never synchronously: the caller sets `flushing` to this promise first.
    await Promise.resolve();
    try {
      for (;;) {
        const lent = new Set(this.lent ?? []);
        const waiting = this.held.filter((item) => !lent.has(item));
        if (waiting.length === 0) {
          // Nothing to write (all lent out): opening the next segment tells whether the disk is back.
          if (!this.writable && !this.open) {
            try {
              await this.openSegment();
            } catch (error) {
              this.writeError = error;
              this.scheduleRetry();
              return;
            }
          }
          break;
        }
        const group = waiting.slice(0, this.groupSize(waiting));
        try {
          await this.writeItems(group, group.length < waiting.length);
        } catch (error) {
          this.writeError = error;
          this.logger.warn({ err: error, held: this.held.length, retryInMs: this.retryMs }, 'the spool still cannot be written');
          this.scheduleRetry();
          return;
        }
        // writeItems counted them as on disk; they stop counting as held.
        const written = new Set(group);
        this.held = this.held.filter((item) => !written.has(item));
        for (const item of group) {
          this.totalResults--;
          this.totalBytes -= lineBytes(item);
        }
        this.notify();
      }
      if (!this.writable) {
        this.writeError = undefined;
        this.retryMs = RETRY_FIRST_MS;
        this.logger.info({ dir: this.dir, heldInMemory: this.held.length }, 'the spool can be written again: claiming resumes');
        this.hooks.onWritable?.(true);
        this.notify();
      }
    } finally {
      this.flushing = undefined;
    }
  }

  private async openSegment(): Promise<void> {
    const seq = this.nextSeq++;
    const file = path.join(this.dir, `segment-${String(seq).padStart(12, '0')}.jsonl`);
    const handle = await this.openFile(file);
    try {
      // Sync the directory so the new file's name survives a power loss too.
      const dirHandle = await fs.open(this.dir, 'r');
      await dirHandle.sync().finally(() => dirHandle.close());
    } catch (error) {
      await handle.close().catch(() => undefined);
      await fs.rm(file, { force: true }).catch(() => undefined);
      throw error;
    }
    this.open = { seq, file, count: 0, bytes: 0, handle, openedAt: Date.now(), items: [] };
  }

  /** Must run with no flush in progress (or from within the flush loop itself). */
  private async seal(): Promise<void> {
    const open = this.open;
    if (!open) return;
    // Detach synchronously, so an append that starts now opens a new segment.
    this.open = undefined;
    this.sealed.push({ seq: open.seq, file: open.file, count: open.count, bytes: open.bytes, ...(open.items ? { items: open.items } : {}) });
    await open.handle.close().catch((error: unknown) => this.logger.warn({ err: error, file: open.file }, 'could not close a spool segment'));
  }

  /** Appends `lines` to a new file in the quarantine folder, synced. */
  private async quarantineLines(lines: string[], label: string): Promise<void> {
    await makeDirectories(this.quarantineDir);
    const file = path.join(this.quarantineDir, `${label}-${Date.now()}-${process.pid}.jsonl`);
    const handle = await fs.open(file, 'a');
    try {
      await writeAll(handle, Buffer.from(`${lines.join('\n')}\n`));
      await handle.datasync();
    } finally {
      await handle.close().catch(() => undefined);
    }
    this.quarantinedCount += lines.length;
    this.hooks.onQuarantine?.(lines.length);
  }

  /** Moves a whole segment file aside into the quarantine folder. */
  private async quarantineFile(file: string, reason: string): Promise<void> {
    await makeDirectories(this.quarantineDir);
    const target = path.join(this.quarantineDir, `${path.basename(file)}.${Date.now()}`);
    await fs.rename(file, target);
    this.quarantinedCount++;
    this.hooks.onQuarantine?.(1);
    this.logger.error({ file, reason, movedTo: target }, 'spool segment cannot be used: quarantined');
  }
}

/** How many of `items`, from the first, fit `room` more lines and MAX_SEGMENT_BYTES after `usedBytes`: at least one, however large. */
function fittingCount(items: SpoolItem[], room: number, usedBytes: number): number {
  let count = 0;
  let bytes = usedBytes;
  while (count < room && count < items.length) {
    const size = lineBytes(items[count] as SpoolItem);
    if (count > 0 && bytes + size > MAX_SEGMENT_BYTES) break;
    bytes += size;
    count++;
  }
  return Math.max(1, count);
}
