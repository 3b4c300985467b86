// The on-disk result spool: group-committed appends, 500-result segments,
// linger, completion, crash recovery and backpressure limits.

import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, promises as fs, readdirSync, readFileSync, rmSync, statSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import pino from 'pino';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import type { ResultEnvelope } from '../../src/core/protocol.js';
import { type Batch, MAX_SEGMENT_BYTES, MEMORY_BATCH_SEQ, type OpenSegmentFile, Spool, type SpoolLimits, spoolItem } from '../../src/control-plane/spool.js';
import { errorResult } from '../../src/results/result.js';

const logger = pino({ level: 'silent' });
const LIMITS: SpoolLimits = { maxResults: 100_000, maxBytes: 1024 ** 3 };
const spools: Spool[] = [];

afterEach(async () => {
  vi.useRealTimers();
  for (const spool of spools.splice(0)) await spool.close();
});

function dir(): string {
  return mkdtempSync(path.join(tmpdir(), 'outpost-spool-'));
}

async function open(at: string, limits: SpoolLimits = LIMITS, onChange?: (n: number) => void, log = logger): Promise<Spool> {
  const spool = await Spool.open(at, limits, log, onChange);
  spools.push(spool);
  return spool;
}

let counter = 0;
function envelope(): ResultEnvelope {
  counter++;
  const result = errorResult(`result ${counter}`, { checkRunId: counter, sequenceId: null, runLocation: 'test' }, { id: `c${counter}` });
  return { jobId: `job-${counter}`, resultId: result.id, result };
}

/** The envelopes of a batch, as the control plane would read them. */
function envelopesOf(batch: Batch | undefined): ResultEnvelope[] {
  return (batch?.items ?? []).map((item) => JSON.parse(item.line) as ResultEnvelope);
}

/** Every line in the spool's quarantine folder. */
function quarantinedLines(at: string): string[] {
  const q = path.join(at, 'quarantine');
  if (!existsSync(q)) return [];
  return readdirSync(q)
    .sort()
    .flatMap((n) => readFileSync(path.join(q, n), 'utf8').split('\n'))
    .filter((l) => l.length > 0);
}

/** A logger whose lines (JSON text) are kept for assertions. */
function capture(): { lines: string[]; log: pino.Logger } {
  const lines: string[] = [];
  const log = pino(
    { level: 'info' },
    new Writable({
      write(chunk, _enc, done) {
        lines.push(String(chunk));
        done();
      },
    }),
  );
  return { lines, log };
}

function segments(at: string): string[] {
  return readdirSync(at)
    .filter((n) => n.endsWith('.jsonl'))
    .sort();
}

describe('spoolItem', () => {
  it('puts the line together around the result\'s own line, and counts its bytes (with the newline) as the file will hold them', () => {
    const result = { id: 'r-€', name: 'ünïcode 🔑 check', note: 'quote " and \\ backslash' };
    const envelope = { jobId: 'job-é', resultId: 'r-€', result } as unknown as ResultEnvelope;
    const item = spoolItem(envelope, JSON.stringify(result));
    expect(item.line).toBe(JSON.stringify(envelope));
    expect(item.bytes).toBe(Buffer.byteLength(`${item.line}\n`));
    expect(spoolItem(envelope).line).toBe(item.line);
  });
});

describe('Spool', () => {
  it('has the result on disk when append resolves, and hands it out after the linger', async () => {
    vi.useFakeTimers({ toFake: ['Date'], now: 1_000_000 });
    const at = dir();
    const spool = await open(at);
    const e = envelope();
    await spool.append(e);

    const [file] = segments(at);
    expect(file).toMatch(/^segment-\d{12}\.jsonl$/);
    expect(JSON.parse(readFileSync(path.join(at, file as string), 'utf8').trim())).toEqual(e);
    expect(spool.results).toBe(1);
    expect(spool.bytes).toBe(Buffer.byteLength(`${JSON.stringify(e)}\n`));

    expect(await spool.nextBatch(1000)).toBeUndefined();
    expect(spool.dueIn(1000)).toBe(1000);
    vi.setSystemTime(1_000_999);
    expect(await spool.nextBatch(1000)).toBeUndefined();
    expect(spool.dueIn(1000)).toBe(1);
    vi.setSystemTime(1_001_000);
    expect(spool.dueIn(1000)).toBe(0);
    const batch = await spool.nextBatch(1000);
    expect(envelopesOf(batch)).toEqual([e]);
    // Sealed now: it stays due until completed.
    expect(spool.dueIn(1000)).toBe(0);
    expect((await spool.nextBatch(1000))?.seq).toBe(batch?.seq);
  });

  it('has nothing due when empty', async () => {
    const spool = await open(dir());
    expect(await spool.nextBatch(0)).toBeUndefined();
    expect(spool.dueIn(0)).toBeUndefined();
    expect(spool.results).toBe(0);
  });

  it('seals a segment at 500 results: 1,200 appends are batches of 500, 500 and 200, in order', async () => {
    const at = dir();
    const spool = await open(at);
    const all = Array.from({ length: 1200 }, envelope);
    await Promise.all(all.map((e) => spool.append(e)));
    expect(spool.results).toBe(1200);
    expect(segments(at)).toHaveLength(3);

    const sizes: number[] = [];
    const seen: string[] = [];
    for (let batch = await spool.nextBatch(0); batch; batch = await spool.nextBatch(0)) {
      sizes.push(envelopesOf(batch).length);
      seen.push(...envelopesOf(batch).map((e) => e.resultId));
      await spool.complete(batch.seq);
    }
    expect(sizes).toEqual([500, 500, 200]);
    expect(seen).toEqual(all.map((e) => e.resultId));
    expect(spool.results).toBe(0);
    expect(spool.bytes).toBe(0);
    expect(segments(at)).toEqual([]);
  });

  it('hands out the open segment while appends keep coming: it is sealed between two writes, not when writing stops', async () => {
    // A disk whose sync takes a few milliseconds, as real ones do: appends arrive during every sync,
    // so the write loop never runs dry until the appends stop.
    const slowSync: OpenSegmentFile = async (file) => {
      const handle = await fs.open(file, 'a');
      return {
        write: (buffer, offset, length) => handle.write(buffer, offset, length),
        datasync: async () => {
          await new Promise((resolve) => setTimeout(resolve, 5));
          await handle.datasync();
        },
        truncate: (length) => handle.truncate(length),
        close: () => handle.close(),
      };
    };
    const spool = await Spool.open(dir(), LIMITS, logger, undefined, undefined, { openFile: slowSync });
    spools.push(spool);
    const appended: string[] = [];
    const writes: Array<Promise<void>> = [];
    let appending = true;
    const appender = (async () => {
      const deadline = Date.now() + 20_000;
      while (appending && Date.now() < deadline) {
        // One a millisecond: a few arrive during each sync, far fewer than fill a segment (500).
        const e = envelope();
        appended.push(e.resultId);
        writes.push(spool.append(e));
        await new Promise((resolve) => setTimeout(resolve, 1));
      }
      appending = false;
    })();
    await vi.waitFor(() => expect(spool.results).toBeGreaterThan(0), { timeout: 10_000 });
    const batch = await spool.nextBatch(0);
    const stillAppending = appending;
    appending = false;
    await appender;
    await Promise.all(writes);
    expect(stillAppending).toBe(true);
    expect(batch?.items.length ?? 0).toBeGreaterThan(0);
    // Nothing lost or repeated: every result comes out once, in order.
    const seen: string[] = [];
    for (let next = batch; next; next = await spool.nextBatch(0)) {
      seen.push(...envelopesOf(next).map((e) => e.resultId));
      await spool.complete(next.seq);
    }
    expect(seen).toEqual(appended);
  });

  it('complete deletes the segment file and updates the counts', async () => {
    const at = dir();
    const changes: number[] = [];
    const spool = await open(at, LIMITS, (n) => changes.push(n));
    await Promise.all([envelope(), envelope(), envelope()].map((e) => spool.append(e)));
    const batch = await spool.nextBatch(0);
    expect(envelopesOf(batch)).toHaveLength(3);
    const [file] = segments(at);
    await spool.complete(batch?.seq as number);
    expect(existsSync(path.join(at, file as string))).toBe(false);
    expect(spool.results).toBe(0);
    expect(spool.bytes).toBe(0);
    expect(changes.at(-1)).toBe(0);
    expect(Math.max(...changes)).toBe(3);
    // Completing an unknown or already completed batch changes nothing.
    await spool.complete(batch?.seq as number);
    await spool.complete(999_999);
    expect(spool.results).toBe(0);
  });

  it('complete with retry re-appends those results to be sent again', async () => {
    const at = dir();
    const spool = await open(at);
    const [a, b, c] = [envelope(), envelope(), envelope()];
    await Promise.all([a, b, c].map((e) => spool.append(e as ResultEnvelope)));
    const first = await spool.nextBatch(0);
    await spool.complete(first?.seq as number, [spoolItem(b as ResultEnvelope)]);
    expect(spool.results).toBe(1);
    expect(segments(at)).toHaveLength(1);
    const second = await spool.nextBatch(0);
    expect(second?.seq).toBeGreaterThan(first?.seq as number);
    expect(envelopesOf(second)).toEqual([b]);
    await spool.complete(second?.seq as number);
    expect(spool.results).toBe(0);
    expect(segments(at)).toEqual([]);
  });

  it('takes over the segments a crashed process left, and numbers new segments after them', async () => {
    const at = dir();
    const crashed = await open(at);
    const before = Array.from({ length: 3 }, envelope);
    await Promise.all(before.map((e) => crashed.append(e)));
    // No close(): the process "crashed". A new process opens the same directory.
    const changes: number[] = [];
    const recovered = await open(at, LIMITS, (n) => changes.push(n));
    expect(recovered.results).toBe(3);
    expect(changes).toEqual([3]);
    expect(recovered.dueIn(60_000)).toBe(0);
    const batch = await recovered.nextBatch(60_000);
    expect(envelopesOf(batch)).toEqual(before);

    const later = envelope();
    await recovered.append(later);
    const files = segments(at);
    expect(files).toHaveLength(2);
    await recovered.complete(batch?.seq as number);
    const next = await recovered.nextBatch(0);
    expect(next?.seq).toBeGreaterThan(batch?.seq as number);
    expect(envelopesOf(next)).toEqual([later]);
  });

  it('quarantines a torn last line (a crash mid-write) and logs it, sending the good lines', async () => {
    const at = dir();
    const [a, b] = [envelope(), envelope()];
    const torn = JSON.stringify(envelope()).slice(0, 40);
    writeFileSync(path.join(at, 'segment-000000000007.jsonl'), `${JSON.stringify(a)}\n${JSON.stringify(b)}\n${torn}`);
    const { lines, log } = capture();
    const spool = await open(at, LIMITS, undefined, log);
    expect(spool.results).toBe(3);
    const batch = await spool.nextBatch(0);
    expect(batch?.seq).toBe(7);
    expect(envelopesOf(batch)).toEqual([a, b]);
    expect(spool.results).toBe(2);
    expect(lines.some((l) => l.includes('spool line is not a result: quarantined'))).toBe(true);
    expect(quarantinedLines(at)).toEqual([torn]);
    expect(spool.quarantined).toBe(1);
    // Read again (a send that failed), the line is not quarantined twice.
    await spool.nextBatch(0);
    expect(quarantinedLines(at)).toEqual([torn]);
    await spool.complete(7);
    expect(segments(at)).toEqual([]);
    expect(spool.results).toBe(0);
    // New segments continue after the highest number found.
    await spool.append(envelope());
    expect(segments(at)).toEqual(['segment-000000000008.jsonl']);
  });

  it('quarantines lines that are not result envelopes ({} has no jobId or resultId) instead of sending them', async () => {
    const at = dir();
    const a = envelope();
    writeFileSync(path.join(at, 'segment-000000000002.jsonl'), `{}\n${JSON.stringify(a)}\n{"jobId":"j"}\n`);
    const spool = await open(at);
    const batch = await spool.nextBatch(0);
    expect(batch?.items.map((i) => i.resultId)).toEqual([a.resultId]);
    expect(quarantinedLines(at)).toEqual(['{}', '{"jobId":"j"}']);
    expect(spool.quarantined).toBe(2);
  });

  it('quarantines a segment that is a directory at start, with one log line, and goes on', async () => {
    const at = dir();
    mkdirSync(path.join(at, 'segment-000000000004.jsonl'));
    const e = envelope();
    writeFileSync(path.join(at, 'segment-000000000005.jsonl'), `${JSON.stringify(e)}\n`);
    const { lines, log } = capture();
    const spool = await open(at, LIMITS, undefined, log);
    expect(spool.results).toBe(1);
    expect(spool.quarantined).toBe(1);
    expect(lines.filter((l) => l.includes('spool segment cannot be used: quarantined'))).toHaveLength(1);
    expect(readdirSync(path.join(at, 'quarantine')).some((n) => n.startsWith('segment-000000000004.jsonl'))).toBe(true);
    expect(envelopesOf(await spool.nextBatch(0))).toEqual([e]);
    // Numbering continues after the quarantined one.
    await spool.append(envelope());
    expect(segments(at)).toContain('segment-000000000006.jsonl');
  });

  it('quarantines a huge segment at start without reading it into memory (600 MB, sparse)', async () => {
    const at = dir();
    const huge = path.join(at, 'segment-000000000001.jsonl');
    writeFileSync(huge, '');
    truncateSync(huge, 600 * 1024 * 1024);
    const before = process.memoryUsage().rss;
    const spool = await open(at);
    expect(process.memoryUsage().rss - before).toBeLessThan(100 * 1024 * 1024);
    expect(spool.results).toBe(0);
    expect(spool.quarantined).toBe(1);
    expect(existsSync(huge)).toBe(false);
    expect(statSync(path.join(at, 'quarantine', readdirSync(path.join(at, 'quarantine'))[0] as string)).size).toBe(600 * 1024 * 1024);
  });

  it('counts the lines of a segment left at start by streaming it', async () => {
    const at = dir();
    const all = Array.from({ length: 1000 }, envelope);
    writeFileSync(path.join(at, 'segment-000000000001.jsonl'), `${all.map((e) => JSON.stringify(e)).join('\n')}\n`);
    const spool = await open(at);
    expect(spool.results).toBe(1000);
  });

  it('writes every byte when the disk takes a write in pieces (short writes), and the line reads back whole', async () => {
    const at = dir();
    let writes = 0;
    const stingy: OpenSegmentFile = async (file) => {
      const handle = await fs.open(file, 'a');
      return {
        write: (buffer, offset, length) => {
          writes++;
          // The kernel may take fewer bytes than asked: here, half of every write.
          return handle.write(buffer, offset, Math.max(1, Math.floor(length / 2)));
        },
        datasync: () => handle.datasync(),
        truncate: (length) => handle.truncate(length),
        close: () => handle.close(),
      };
    };
    const spool = await Spool.open(at, LIMITS, logger, undefined, undefined, { openFile: stingy });
    spools.push(spool);
    const e = envelope();
    await spool.append(e);
    expect(writes).toBeGreaterThan(1);
    expect(spool.bytes).toBe(Buffer.byteLength(`${JSON.stringify(e)}\n`));
    await spool.close();
    const again = await open(at);
    expect(envelopesOf(await again.nextBatch(0))).toEqual([e]);
    expect(again.quarantined).toBe(0);
  });

  it('removes empty segments a crash left and ignores other files', async () => {
    const at = dir();
    writeFileSync(path.join(at, 'segment-000000000003.jsonl'), '');
    writeFileSync(path.join(at, 'notes.txt'), 'not a segment');
    const spool = await open(at);
    expect(spool.results).toBe(0);
    expect(existsSync(path.join(at, 'segment-000000000003.jsonl'))).toBe(false);
    expect(existsSync(path.join(at, 'notes.txt'))).toBe(true);
    expect(await spool.nextBatch(0)).toBeUndefined();
  });

  it('close keeps the open segment on disk for the next process', async () => {
    const at = dir();
    const spool = await open(at);
    const e = envelope();
    await spool.append(e);
    await spool.close();
    const again = await open(at);
    expect(envelopesOf(await again.nextBatch(0))).toEqual([e]);
  });

  it('is full at maxResults and drains below 90 %', async () => {
    const spool = await open(dir(), { maxResults: 10, maxBytes: 1024 ** 3 });
    await Promise.all(Array.from({ length: 5 }, () => spool.append(envelope())));
    const first = await spool.nextBatch(0); // seals the first five
    await Promise.all(Array.from({ length: 4 }, () => spool.append(envelope())));
    expect(spool.isFull()).toBe(false);
    await spool.append(envelope());
    expect(spool.results).toBe(10);
    expect(spool.isFull()).toBe(true);

    let drained = false;
    const waiting = spool.waitUntilDrained().then(() => {
      drained = true;
    });
    await new Promise((r) => setTimeout(r, 20));
    expect(drained).toBe(false);
    await spool.complete(first?.seq as number);
    await waiting;
    expect(drained).toBe(true);
    expect(spool.isFull()).toBe(false);
  });

  it('is full at maxBytes', async () => {
    const spool = await open(dir(), { maxResults: 1_000_000, maxBytes: 1024 });
    while (spool.bytes < 1024) {
      expect(spool.isFull()).toBe(false);
      await spool.append(envelope());
    }
    expect(spool.isFull()).toBe(true);
  });

  it('waitUntilDrained resolves at once below the bounds, and on abort', async () => {
    const spool = await open(dir(), { maxResults: 2, maxBytes: 1024 ** 3 });
    await spool.waitUntilDrained();
    await Promise.all([spool.append(envelope()), spool.append(envelope())]);
    expect(spool.isFull()).toBe(true);
    const controller = new AbortController();
    const waiting = spool.waitUntilDrained(controller.signal);
    controller.abort();
    await expect(waiting).resolves.toBeUndefined();
    expect(spool.results).toBe(2);
  });

  it('reads segments back from disk once the memory budget is spent, with the same lines', async () => {
    const at = dir();
    const spool = await open(at, { ...LIMITS, memoryBudgetBytes: 1 });
    const written = Array.from({ length: 5 }, envelope);
    await Promise.all(written.map((e) => spool.append(e)));
    const batch = await spool.nextBatch(0);
    expect(envelopesOf(batch)).toEqual(written);
    expect(batch?.items.map((i) => i.resultId)).toEqual(written.map((e) => e.resultId));
  });
});

// Real disk failures on a small tmpfs: mounting needs root, which the test machine (and its containers) give.
describe('Spool on a failing disk', () => {
  const mounts: string[] = [];

  function smallDisk(size = '1m'): string {
    if (process.getuid?.() !== 0) throw new Error('these tests mount a tmpfs and must run as root');
    const at = dir();
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size}`, 'tmpfs', at]);
    mounts.push(at);
    return at;
  }

  function remount(at: string, mode: 'ro' | 'rw'): void {
    execFileSync('mount', ['-o', `remount,${mode}`, at]);
  }

  afterAll(() => {
    for (const at of mounts.splice(0)) execFileSync('umount', ['-l', at]);
  });

  async function until(predicate: () => boolean, spool: Spool, what: string): Promise<void> {
    const deadline = Date.now() + 30_000;
    while (!predicate()) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await Promise.race([spool.changed(), new Promise((r) => setTimeout(r, 100))]);
    }
  }

  /** Settles within the deadline (a hang is the defect), resolving to what the promises settled to. */
  async function settled(promises: Promise<void>[]): Promise<PromiseSettledResult<void>[] | 'hung'> {
    const timer = new Promise<'hung'>((r) => setTimeout(() => r('hung'), 30_000).unref());
    return Promise.race([Promise.allSettled(promises), timer]);
  }

  it('read-only spool: every append settles, the spool is not writable, results are sent from memory, and writing resumes', async () => {
    const at = path.join(smallDisk(), 'spool');
    const spool = await open(at);
    const first = [envelope(), envelope()];
    await Promise.all(first.map((e) => spool.append(e)));
    expect(spool.writable).toBe(true);
    const onDisk = await spool.nextBatch(0); // seals (closes) the segment, so the mount can turn read-only
    remount(path.dirname(at), 'ro');

    const later = Array.from({ length: 20 }, envelope);
    const outcome = await settled(later.map((e) => spool.append(e)));
    expect(outcome).not.toBe('hung');
    expect((outcome as PromiseSettledResult<void>[]).every((o) => o.status === 'fulfilled')).toBe(true);
    expect(spool.writable).toBe(false);
    expect(spool.results).toBe(22);
    expect(spool.heldInMemory).toBe(20);

    // The disk segment first, then the held results, from memory.
    expect((await spool.nextBatch(0))?.seq).toBe(onDisk?.seq);
    await spool.complete(onDisk?.seq as number);
    const held = await spool.nextBatch(0);
    expect(held?.seq).toBe(MEMORY_BATCH_SEQ);
    expect(held?.items.map((i) => i.resultId)).toEqual(later.map((e) => e.resultId));
    // Half accepted; the other half comes back to be sent again.
    await spool.complete(MEMORY_BATCH_SEQ, held?.items.slice(10));
    expect(spool.results).toBe(10);

    remount(path.dirname(at), 'rw');
    await until(() => spool.writable, spool, 'the spool to be writable again');
    await until(() => spool.heldInMemory === 0, spool, 'held results to reach the disk');
    await spool.close();
    // The delivered segment could not be removed from the read-only disk: it is sent again (the control plane deduplicates).
    const again = await open(at);
    expect(again.results).toBe(12);
    const sent: string[] = [];
    for (let batch = await again.nextBatch(0); batch; batch = await again.nextBatch(0)) {
      sent.push(...envelopesOf(batch).map((e) => e.resultId));
      await again.complete(batch.seq);
    }
    expect(sent).toEqual([...first, ...later.slice(10)].map((e) => e.resultId));
  });

  it('full disk: no result is lost, a torn line never lands on disk, and held results are written once there is room', async () => {
    const mount = smallDisk('256k');
    const at = path.join(mount, 'spool');
    const spool = await open(at);
    // Leave less room than the next five results need (about 3 KB each, with a large field).
    const big = (): ResultEnvelope => {
      const e = envelope();
      return { ...e, result: { ...e.result, name: 'x'.repeat(3000) } };
    };
    const filler = path.join(mount, 'filler');
    const free = () => Number(execFileSync('df', ['--output=avail', '-B1', mount]).toString().split('\n')[1]);
    writeFileSync(filler, Buffer.alloc(Math.max(0, free() - 6000)));
    const five = Array.from({ length: 5 }, big);
    const outcome = await settled(five.map((e) => spool.append(e)));
    expect(outcome).not.toBe('hung');
    expect((outcome as PromiseSettledResult<void>[]).every((o) => o.status === 'fulfilled')).toBe(true);
    expect(spool.results).toBe(5);
    expect(spool.writable).toBe(false);
    // What is on disk now is whole lines only.
    for (const name of segments(at)) {
      const text = readFileSync(path.join(at, name), 'utf8');
      expect(text === '' || text.endsWith('\n')).toBe(true);
      for (const line of text.split('\n').filter((l) => l.length > 0)) expect(() => JSON.parse(line)).not.toThrow();
    }

    rmSync(filler);
    await until(() => spool.writable && spool.heldInMemory === 0, spool, 'the held results to be written');
    await spool.close();
    const again = await open(at);
    expect(again.results).toBe(5);
    const sent: string[] = [];
    for (let batch = await again.nextBatch(0); batch; batch = await again.nextBatch(0)) {
      sent.push(...envelopesOf(batch).map((e) => e.resultId));
      await again.complete(batch.seq);
    }
    expect(sent.sort()).toEqual(five.map((e) => e.resultId).sort());
    expect(again.quarantined).toBe(0);
  });

  it('drops a segment whose file has vanished, with the totals, and hands out the next one', async () => {
    const at = dir();
    const [first, second] = [[envelope(), envelope()], [envelope()]];
    writeFileSync(path.join(at, 'segment-000000000001.jsonl'), `${first.map((e) => JSON.stringify(e)).join('\n')}\n`);
    writeFileSync(path.join(at, 'segment-000000000002.jsonl'), `${second.map((e) => JSON.stringify(e)).join('\n')}\n`);
    const { lines, log } = capture();
    const spool = await open(at, LIMITS, undefined, log);
    expect(spool.results).toBe(3);
    rmSync(path.join(at, 'segment-000000000001.jsonl'));
    const batch = await spool.nextBatch(0);
    expect(envelopesOf(batch).map((e) => e.resultId)).toEqual(second.map((e) => e.resultId));
    expect(spool.results).toBe(1);
    expect(lines.filter((l) => l.includes('has vanished'))).toHaveLength(1);
    await spool.complete(batch?.seq ?? -1);
    expect(spool.results).toBe(0);
    expect(spool.bytes).toBe(0);
  });

  it('cuts a batch of results held in memory at 8 MiB, not only at 500 results', async () => {
    const readOnly: OpenSegmentFile = async () => {
      throw Object.assign(new Error('read-only file system'), { code: 'EROFS' });
    };
    const spool = await Spool.open(dir(), LIMITS, logger, undefined, undefined, { openFile: readOnly });
    spools.push(spool);
    const big = (n: number): ResultEnvelope => {
      const result = errorResult('x'.repeat(1024 * 1024), { checkRunId: n, sequenceId: null, runLocation: 'test' }, { id: `big${n}` });
      return { jobId: `job-big-${n}`, resultId: result.id, result };
    };
    const all = Array.from({ length: 20 }, (_, n) => big(n));
    await Promise.all(all.map((e) => spool.append(e)));
    expect(spool.writable).toBe(false);
    expect(spool.heldInMemory).toBe(20);
    const sent: string[] = [];
    for (let round = 0; round < 20 && spool.heldInMemory > 0; round++) {
      const batch = await spool.nextBatch(0);
      expect(batch?.seq).toBe(MEMORY_BATCH_SEQ);
      const items = batch?.items ?? [];
      expect(items.length).toBeGreaterThan(0);
      expect(items.reduce((sum, i) => sum + Buffer.byteLength(i.line) + 1, 0)).toBeLessThanOrEqual(MAX_SEGMENT_BYTES);
      sent.push(...items.map((i) => i.resultId));
      await spool.complete(MEMORY_BATCH_SEQ);
    }
    expect(sent).toEqual(all.map((e) => e.resultId));
  });
});
