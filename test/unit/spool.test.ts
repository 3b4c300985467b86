// The on-disk result spool: group-committed appends, 500-result segments,
// linger, completion, crash recovery and backpressure limits.

import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import pino from 'pino';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { ResultEnvelope } from '../../src/control-plane/protocol.js';
import { type Batch, Spool, type SpoolLimits, spoolItem } from '../../src/control-plane/spool.js';
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

function segments(at: string): string[] {
  return readdirSync(at)
    .filter((n) => n.endsWith('.jsonl'))
    .sort();
}

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

  it('skips a torn last line (a crash mid-write) and warns', async () => {
    const at = dir();
    const [a, b] = [envelope(), envelope()];
    const torn = JSON.stringify(envelope()).slice(0, 40);
    writeFileSync(path.join(at, 'segment-000000000007.jsonl'), `${JSON.stringify(a)}\n${JSON.stringify(b)}\n${torn}`);
    const lines: string[] = [];
    const capture = pino(
      { level: 'warn' },
      new Writable({
        write(chunk, _enc, done) {
          lines.push(String(chunk));
          done();
        },
      }),
    );
    const spool = await open(at, LIMITS, undefined, capture);
    const batch = await spool.nextBatch(0);
    expect(batch?.seq).toBe(7);
    expect(envelopesOf(batch)).toEqual([a, b]);
    expect(lines.some((l) => l.includes('skipping an unreadable line in the spool'))).toBe(true);
    await spool.complete(7);
    expect(segments(at)).toEqual([]);
    // New segments continue after the highest number found.
    await spool.append(envelope());
    expect(segments(at)).toEqual(['segment-000000000008.jsonl']);
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
