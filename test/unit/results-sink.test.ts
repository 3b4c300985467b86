// The results sink against the real server (test/support/control-plane.ts) over real HTTP, with a real
// spool: a batch the control plane refuses as a whole for one result's sake
// must not stop the others.

import { randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { ControlPlaneClient } from '../../src/control-plane/client.js';
import type { ResultEnvelope } from '../../src/core/protocol.js';
import { ControlPlaneSink, IDLE_SEND_GAP_MS } from '../../src/control-plane/sink.js';
import { PROTOCOL_ROUTES } from '../../src/core/protocol.js';
import { Spool, spoolItem } from '../../src/control-plane/spool.js';
import type { Heartbeat } from '../../src/health/watchdog.js';
import { createMetrics } from '../../src/observability/metrics.js';
import { errorResult } from '../../src/results/result.js';
import { ControlPlane } from '../support/control-plane.js';

const logger = pino({ level: 'silent' });
const cleanup: Array<() => Promise<void>> = [];

afterEach(async () => {
  for (const step of cleanup.splice(0).reverse()) await step();
});

/** A heartbeat that keeps every promise made, in order. */
function recordingHeartbeat(): Heartbeat & { beats: number[] } {
  const beats: number[] = [];
  return { beats, beat: (ms) => beats.push(ms), idle: () => undefined, crashed: () => undefined };
}

/** Distinctive, so that the beats made for one request can be told from the others. */
const SEND_BOUND_MS = 12_345;

async function setUp(
  options: { heartbeat?: Heartbeat; prepare?: (dir: string) => void; producerIdle?: () => boolean } = {},
): Promise<{ cp: ControlPlane; spool: Spool; sink: ControlPlaneSink; dir: string; batchErrors: unknown[] }> {
  const cp = await ControlPlane.start();
  cleanup.push(() => cp.close());
  const dir = mkdtempSync(path.join(tmpdir(), 'outpost-sink-'));
  options.prepare?.(dir);
  const spool = await Spool.open(dir, { maxResults: 100_000, maxBytes: 1024 ** 3 }, logger);
  cleanup.push(() => spool.close());
  const client = new ControlPlaneClient(
    { apiUrl: cp.url, apiKey: cp.apiKey, agentId: randomUUID(), version: '0.0.0-test', timeoutMs: 10_000, proxy: {} },
    createMetrics(),
  );
  cleanup.push(() => client.close());
  const batchErrors: unknown[] = [];
  const watch = options.heartbeat ? { heartbeat: options.heartbeat, sendBoundMs: SEND_BOUND_MS } : undefined;
  const sink = new ControlPlaneSink(spool, client, logger, 1_000, () => undefined, (error) => batchErrors.push(error), watch, options.producerIdle);
  cleanup.push(() => sink.flush(Date.now()).then(() => undefined));
  return { cp, spool, sink, dir, batchErrors };
}

/** A result for a job the control plane knows, with `name` as big as asked. */
async function resultFor(cp: ControlPlane, nameBytes = 10): Promise<ResultEnvelope> {
  const jobId = await cp.addJob({ checkType: 'API' });
  const result = errorResult('x'.repeat(nameBytes), { checkRunId: 1, sequenceId: null, runLocation: 'test' }, { id: jobId });
  return { jobId, resultId: result.id, result };
}

function quarantined(dir: string): ResultEnvelope[] {
  const q = path.join(dir, 'quarantine');
  if (!existsSync(q)) return [];
  return readdirSync(q).flatMap((n) =>
    readFileSync(path.join(q, n), 'utf8')
      .split('\n')
      .filter((l) => l.length > 0)
      .map((l) => JSON.parse(l) as ResultEnvelope),
  );
}

describe('ControlPlaneSink', () => {
  it('sends a partly filled batch at once when no job runs, and waits out the linger while jobs run', async () => {
    let idle = false;
    const { cp, spool, sink } = await setUp({ producerIdle: () => idle });
    // A linger far longer than any wait below: whatever is sent early was sent because the producer went idle.
    sink.start(600_000);
    const busy = await resultFor(cp);
    await spool.append(busy);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(cp.countRequests('results')).toBe(0);

    idle = true;
    const last = await resultFor(cp);
    await spool.append(last);
    await cp.waitFor(() => cp.results.size === 2, 10_000, 'both results, sent without waiting out the linger');
    expect(cp.countRequests('results')).toBe(1);
  });

  it('spaces early sends at least IDLE_SEND_GAP_MS apart, so that jobs ending one by one are not one request each', async () => {
    const { cp, spool, sink } = await setUp({ producerIdle: () => true });
    sink.start(600_000);
    const [first, ...rest] = await Promise.all(Array.from({ length: 6 }, () => resultFor(cp)));
    const beforeFirst = Date.now();
    await spool.append(first as ResultEnvelope);
    await cp.waitFor(() => cp.results.size === 1, 10_000, 'the first result, sent at once');
    // Five more right after: they wait out the gap since the first request started, then go together.
    await Promise.all(rest.map((envelope) => spool.append(envelope)));
    await cp.waitFor(() => cp.results.size === 6, 10_000, 'every result');
    const requests = cp.requests.filter((r) => r.route === PROTOCOL_ROUTES.results);
    expect(requests).toHaveLength(2);
    // The second request started at least the gap after the first one did, which started after `beforeFirst`;
    // the server records a request once it has handled it, later still.
    expect((requests[1]?.at ?? 0) - beforeFirst).toBeGreaterThanOrEqual(IDLE_SEND_GAP_MS);
  });

  it('delivers the other 199 results when one is over the control plane body limit (413), and quarantines that one', async () => {
    const { cp, spool, sink, dir } = await setUp();
    cp.maxResultsBodyBytes = 1024 * 1024;
    const results = await Promise.all(Array.from({ length: 200 }, () => resultFor(cp)));
    const oversize = await resultFor(cp, 2 * 1024 * 1024);
    results.splice(100, 0, oversize);
    await Promise.all(results.map((e) => spool.append(e)));
    sink.start();
    await cp.waitFor(() => cp.results.size === 200 && spool.results === 0, 30_000, '200 results delivered');
    expect(cp.results.has(oversize.resultId)).toBe(false);
    expect(quarantined(dir).map((e) => e.resultId)).toEqual([oversize.resultId]);
    expect(spool.quarantined).toBe(1);
    expect(cp.violations).toEqual([]);
  });

  it('delivers the rest when a strict control plane refuses any request that carries one given result (400)', async () => {
    const { cp, spool, sink, dir } = await setUp();
    const results = await Promise.all(Array.from({ length: 50 }, () => resultFor(cp)));
    const poisoned = results[37] as ResultEnvelope;
    cp.refusedResultIds.add(poisoned.resultId);
    await Promise.all(results.map((e) => spool.append(e)));
    sink.start();
    await cp.waitFor(() => cp.results.size === 49 && spool.results === 0, 30_000, '49 results delivered');
    expect(quarantined(dir).map((e) => e.resultId)).toEqual([poisoned.resultId]);
    // Bisecting 50 results costs a handful of requests per level, not one per result.
    expect(cp.countRequests('results')).toBeLessThan(30);
  });

  it('keeps a batch refused whole for another reason (404) in the spool, quarantining nothing', async () => {
    const { cp, spool, sink, dir } = await setUp();
    await spool.append(await resultFor(cp));
    cp.inject({ route: 'results', status: 404, count: 1000 });
    sink.start();
    await cp.waitFor(() => cp.countRequests('results') >= 1, 30_000, 'a results request');
    expect(spool.results).toBe(1);
    expect(quarantined(dir)).toEqual([]);
  });

  // 413 too: a proxy's small body limit before the control plane answers every request so.
  it.each([400, 413])('quarantines nothing when the control plane refuses every results request with %i: the results stay in the spool', async (status) => {
    const { cp, spool, sink, dir } = await setUp();
    await Promise.all(Array.from({ length: 8 }, async () => spool.append(await resultFor(cp))));
    cp.inject({ route: 'results', status, count: 100_000 });
    // The floor between refused rounds is shortened here; the test after this one holds the real one.
    sink.start(undefined, 500);
    await cp.waitFor(() => cp.countRequests('results') >= 15, 30_000, 'a few rounds of results requests');
    expect(quarantined(dir)).toEqual([]);
    expect(spool.results).toBe(8);
    // The control plane recovers (perhaps mid-batch): a result it refused alone before is confirmed alone first, not lost.
    cp.clearFaults();
    await cp.waitFor(() => cp.results.size === 8 && spool.results === 0, 60_000, 'all 8 delivered once the control plane accepts');
  }, 90_000);

  it('promises a beat for every request while splitting a refused batch, not one for the whole split', async () => {
    const heartbeat = recordingHeartbeat();
    const { cp, spool, sink } = await setUp({ heartbeat });
    const results = await Promise.all(Array.from({ length: 50 }, () => resultFor(cp)));
    cp.refusedResultIds.add((results[37] as ResultEnvelope).resultId);
    await Promise.all(results.map((e) => spool.append(e)));
    sink.start();
    await cp.waitFor(() => cp.results.size === 49 && spool.results === 0, 30_000, '49 results delivered');
    // Refusals (400) never pass through the retry wait: only a beat per request keeps the promise through ~13 requests.
    // A request's beat is the bound plus its body's transfer allowance (a few ms here), the loop's the bound alone.
    const requestBeats = heartbeat.beats.filter((ms) => ms > SEND_BOUND_MS && ms < SEND_BOUND_MS + 10_000);
    expect(requestBeats.length).toBeGreaterThanOrEqual(cp.countRequests('results'));
  });

  it('promises a large batch the time its body takes on a slow link', async () => {
    const heartbeat = recordingHeartbeat();
    const { cp, spool, sink } = await setUp({ heartbeat });
    const results = await Promise.all(Array.from({ length: 4 }, () => resultFor(cp, 256 * 1024)));
    await Promise.all(results.map((e) => spool.append(e)));
    sink.start();
    await cp.waitFor(() => cp.results.size === 4 && spool.results === 0, 30_000, '4 large results delivered');
    // 1 MiB at 32 KiB/s: 32 s more than the bound, as the client's own timeout grows (src/core/transfer-allowance.ts).
    expect(Math.max(...heartbeat.beats)).toBeGreaterThanOrEqual(SEND_BOUND_MS + 32_000);
  });

  it('delivers the rest when a result refused for its size (413) cannot be quarantined: it is dropped, logged and reported', async () => {
    // The quarantine folder's name is taken by a file: writing there fails, as on a read-only disk.
    const { cp, spool, sink, batchErrors } = await setUp({ prepare: (dir) => writeFileSync(path.join(dir, 'quarantine'), 'not a folder') });
    cp.maxResultsBodyBytes = 256 * 1024;
    const results = await Promise.all(Array.from({ length: 20 }, () => resultFor(cp)));
    const oversize = await resultFor(cp, 512 * 1024);
    results.splice(10, 0, oversize);
    await Promise.all(results.map((e) => spool.append(e)));
    sink.start();
    await cp.waitFor(() => cp.results.size === 20 && spool.results === 0, 30_000, '20 results delivered and the spool empty');
    expect(cp.results.has(oversize.resultId)).toBe(false);
    expect(spool.dropped).toBe(1);
    expect(spool.quarantined).toBe(0);
    expect(batchErrors.some((e) => (e as NodeJS.ErrnoException).code === 'EEXIST' || (e as NodeJS.ErrnoException).code === 'ENOTDIR')).toBe(true);
  });

  it('promises a beat that covers its wait while a spool segment cannot be read', async () => {
    const heartbeat = recordingHeartbeat();
    let segment = '';
    const { cp, sink } = await setUp({
      heartbeat,
      prepare: (dir) => {
        // Left by an earlier run, so the spool reads it from its file when its turn comes.
        segment = path.join(dir, 'segment-000000000001.jsonl');
        writeFileSync(segment, `${spoolItem({ jobId: 'j', resultId: 'r', result: {} } as unknown as ResultEnvelope).line}\n`);
      },
    });
    // Now a folder: every read fails (EISDIR), and the loop waits at least a second between tries.
    rmSync(segment);
    mkdirSync(segment);
    sink.start();
    await cp.waitFor(() => heartbeat.beats.length >= 4, 30_000, 'a few failed reads');
    expect(cp.countRequests('results')).toBe(0);
    expect(Math.max(...heartbeat.beats)).toBeGreaterThanOrEqual(1_000);
  });

  it('waits at least 5 s between rounds when every results request is refused (400), and keeps the segment as it is', async () => {
    const heartbeat = recordingHeartbeat();
    const { cp, spool, sink, dir } = await setUp({ heartbeat });
    await Promise.all(Array.from({ length: 8 }, async () => spool.append(await resultFor(cp))));
    cp.inject({ route: 'results', status: 400, count: 100_000 });
    sink.start();
    await cp.waitFor(() => cp.countRequests('results') >= 1, 30_000, 'the first results request');
    const before = readdirSync(dir).filter((n) => n.startsWith('segment-'));
    // A round splits the 8 down to two results refused alone: 5 requests. The 8th is well into the second round.
    await cp.waitFor(() => cp.countRequests('results') >= 8, 60_000, 'a second round of results requests');
    expect(heartbeat.beats.some((ms) => ms >= 5_000)).toBe(true);
    expect(readdirSync(dir).filter((n) => n.startsWith('segment-'))).toEqual(before);
    expect(spool.results).toBe(8);
  }, 90_000);
});
