// The server's session scheduler against a real SQLite store and real (short)
// timers: sessions on schedule with a job per location, no overlap while a
// location's job is open, deleted checks stop, the sweeper requeues expired
// leases and times jobs out, retention prunes old results and their files.

import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Job } from '../../src/core/protocol.js';
import { SessionScheduler, type SessionSchedulerOptions } from '../../src/server/scheduler.js';
import type { Store, StoredCheck } from '../../src/store/store.js';
import { claimAll, envelopeFor, openTestStore, queueSessions, runSessions, storedCheck } from '../support/server-store.js';

const A = 'loc-a';
const B = 'loc-b';

let dir: string;
let store: Store;
let scheduler: SessionScheduler | undefined;
let logs: Array<{ level: number; msg: string; [key: string]: unknown }>;
let queued: string[];

function start(checks: StoredCheck[], options: Partial<SessionSchedulerOptions> = {}): Promise<SessionScheduler> {
  return (async () => {
    await store.syncChecks(checks, new Date());
    const logger = pino({ level: 'debug' }, { write: (line: string) => logs.push(JSON.parse(line)) });
    scheduler = new SessionScheduler({
      store,
      logger,
      stateDir: dir,
      retentionDays: 1,
      onQueued: (location) => queued.push(location),
      sweepEveryMs: 50,
      startupSpreadMs: 200,
      ...options,
    });
    await scheduler.start();
    return scheduler;
  })();
}

/** Retries `check` until it stops throwing or `ms` pass (a busy machine delays timers). */
async function eventually<T>(check: () => Promise<T> | T, ms = 10_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    try {
      return await check();
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await sleep(50);
    }
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function claimOne(location: string, checkTypes: string[] = ['API']): Promise<Job> {
  const jobs = await claimAll(store, location, checkTypes);
  expect(jobs).toHaveLength(1);
  return jobs[0] as Job;
}

beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'outpost-scheduler-'));
  store = await openTestStore(dir);
  await store.syncLocations([
    { id: A, name: 'A' },
    { id: B, name: 'B' },
  ]);
  logs = [];
  queued = [];
});

afterEach(async () => {
  await scheduler?.stop();
  scheduler = undefined;
  await store.close();
  await rm(dir, { recursive: true, force: true });
});

describe('SessionScheduler', () => {
  it('creates a session per slot with one job per location of the check, and signals each location', async () => {
    const every = storedCheck({ id: 'every-second', locations: [A, B], frequencySeconds: 1 });
    const tcp = storedCheck({ id: 'hourly-tcp', locations: [B], frequencySeconds: 3600, checkType: 'TCP', definition: { id: 'hourly-tcp' } });
    const s = await start([every, tcp]);
    expect(s.scheduled.sort()).toEqual(['every-second', 'hourly-tcp']);

    // First runs come within the startup spread.
    await eventually(() => expect(s.sessionsCreated).toBeGreaterThanOrEqual(2));
    const jobA = await eventually(() => claimOne(A));
    const [jobB, tcpJob] = await eventually(async () => {
      const jobs = await claimAll(store, B, ['API', 'TCP']);
      expect(jobs).toHaveLength(2);
      return [jobs.find((j) => j.runLocation === B && (j.check as { id: string }).id === 'every-second'), jobs.find((j) => (j.check as { id: string }).id === 'hourly-tcp')];
    });
    if (!jobB || !tcpJob) throw new Error('the jobs of location B are not the expected ones');
    expect(jobA.sequenceId).toBe(jobB.sequenceId);
    expect(jobA.check).toEqual(every.definition);
    expect(jobA.triggerSource).toBe('SCHEDULER');
    const session = await store.session(jobA.sequenceId as string);
    expect(session).toMatchObject({ checkId: 'every-second', status: 'STARTED', runLocations: [A, B], triggerSource: 'SCHEDULER', stoppedAt: null });
    expect((await store.session(tcpJob.sequenceId as string))?.runLocations).toEqual([B]);
    expect(queued.filter((l) => l === A).length).toBeGreaterThanOrEqual(1);
    expect(queued.filter((l) => l === B).length).toBeGreaterThanOrEqual(2);

    // Once both locations reported, the next slot makes a new session in both.
    await store.acceptResults(`agent-${A}`, A, [envelopeFor(jobA, every)], new Date());
    await store.acceptResults(`agent-${B}`, B, [envelopeFor(jobB, every)], new Date());
    expect((await store.session(jobA.sequenceId as string))?.status).toBe('PASSED');
    const next = await eventually(() => claimOne(A));
    expect(next.sequenceId).not.toBe(jobA.sequenceId);
    expect((await store.session(next.sequenceId as string))?.runLocations).toEqual([A, B]);
    expect(next.checkRunId).toBeGreaterThan(jobA.checkRunId as number);
  });

  it('never overlaps a run with itself: an open job skips its location and logs its streak of missed slots once', async () => {
    const every = storedCheck({ id: 'every-second', locations: [A, B], frequencySeconds: 1 });
    const s = await start([every]);
    await eventually(() => expect(s.sessionsCreated).toBe(1));
    // Nobody claims: both jobs stay QUEUED, so the following slots are missed in both locations.
    await eventually(() => expect(s.missed).toBeGreaterThanOrEqual(6));
    expect(s.sessionsCreated).toBe(1);
    const missedLines = (location: string) => logs.filter((l) => l.msg.startsWith('missed slot:') && l.location === location);
    const endLines = (location: string) => logs.filter((l) => l.msg.startsWith('missed slots ended') && l.location === location);
    // Three slots or more missed in each location, one warning each: the first of the streak.
    for (const location of [A, B]) {
      expect(missedLines(location)).toHaveLength(1);
      expect(missedLines(location)[0]?.level).toBe(40);
      expect(endLines(location)).toEqual([]);
    }

    // A's run finishes; B's is still open: the next session runs in A alone, and A's streak ends in one line.
    const jobA = await claimOne(A);
    await store.acceptResults(`agent-${A}`, A, [envelopeFor(jobA, every)], new Date());
    const next = await eventually(() => claimOne(A));
    expect(next.sequenceId).not.toBe(jobA.sequenceId);
    expect((await store.session(next.sequenceId as string))?.runLocations).toEqual([A]);
    expect(await claimAll(store, B, ['API'])).toHaveLength(1);
    expect(s.sessionsCreated).toBe(2);
    const [ended] = endLines(A);
    expect(endLines(A)).toHaveLength(1);
    expect(ended).toMatchObject({ level: 40, msg: 'missed slots ended: a slot ran again', checkId: 'every-second', firstSlot: missedLines(A)[0]?.slot });
    // One slot a second, every one of them counted from the first to the last.
    const slots = ended?.missedSlots as number;
    expect(slots).toBeGreaterThanOrEqual(3);
    // A timer late by half a period on a busy machine skips a slot (never run, never missed): at least that span.
    expect(Date.parse(String(ended?.lastSlot)) - Date.parse(String(ended?.firstSlot))).toBeGreaterThanOrEqual((slots - 1) * 1000);
    expect(missedLines(A)).toHaveLength(1);

    // B's streak goes on to the stop, which ends it in one line too.
    await s.stop();
    expect(missedLines(B)).toHaveLength(1);
    expect(endLines(B)).toEqual([expect.objectContaining({ msg: 'missed slots ended: this server stopped scheduling', missedSlots: expect.any(Number) })]);
    expect(s.missedSlots.open).toBe(0);
  });

  it('stops a deleted check at once, and picks up a check added later on reschedule', async () => {
    const every = storedCheck({ id: 'every-second', locations: [A], frequencySeconds: 1 });
    const s = await start([every]);
    const first = await eventually(() => claimOne(A));
    await store.acceptResults(`agent-${A}`, A, [envelopeFor(first, every)], new Date());
    await eventually(() => expect(s.sessionsCreated).toBe(2));

    // Deleted but not yet rescheduled: the timer still fires, and creates nothing.
    expect(await store.deleteCheck('every-second', new Date())).toBe(true);
    const created = s.sessionsCreated;
    await sleep(1_500);
    expect(s.sessionsCreated).toBe(created);
    expect(await claimAll(store, A, ['API'])).toHaveLength(0);

    await s.reschedule();
    expect(s.scheduled).toEqual([]);

    const later = storedCheck({ id: 'added-later', locations: [B], frequencySeconds: 1 });
    await store.syncChecks([later], new Date());
    await s.reschedule();
    expect(s.scheduled).toEqual(['added-later']);
    const job = await eventually(() => claimOne(B));
    expect((job.check as { id: string }).id).toBe('added-later');
    expect(await claimAll(store, A, ['API'])).toHaveLength(0);
  });

  it('sweeps: an expired lease goes back to the queue, a job past its deadline is TIMED_OUT', async () => {
    const hourly = storedCheck({ id: 'hourly', locations: [A], frequencySeconds: 3600 });
    const short = storedCheck({ id: 'short', locations: [B], frequencySeconds: 3600, capMs: 100 });
    // Deadline: capMs + 2 × leaseMs = 300 ms after the session starts.
    await start([hourly, short], { leaseMs: 100 });

    const leased = await eventually(async () => {
      const jobs = await store.claimJobs({ location: A, agentId: 'agent-1', checkTypes: ['API'], runtimes: [], max: 1, leaseMs: 1, now: new Date() });
      expect(jobs).toHaveLength(1);
      return jobs[0] as Job;
    });
    const before = queued.length;
    const again = await eventually(async () => {
      const jobs = await store.claimJobs({ location: A, agentId: 'agent-2', checkTypes: ['API'], runtimes: [], max: 1, leaseMs: 60_000, now: new Date() });
      expect(jobs).toHaveLength(1);
      return jobs[0] as Job;
    });
    expect(again.id).toBe(leased.id);
    await eventually(() => expect(queued.length).toBeGreaterThan(before));

    // Claimed or not, an open job past its deadline times out, and its session with it.
    const shortJob = await eventually(() => claimOne(B));
    const timedOut = await eventually(async () => {
      const record = await store.session(shortJob.sequenceId as string);
      expect(record?.status).toBe('TIMED_OUT');
      return record;
    });
    expect(typeof timedOut?.stoppedAt).toBe('string');
    expect(await store.hasOpenJob('short', B)).toBe(false);
  });

  it('prunes results, sessions and artifact files older than the retention, batch by batch', async () => {
    const old = storedCheck({ id: 'old', locations: [A], frequencySeconds: 3600 });
    await store.syncChecks([old], new Date());
    const tenDaysAgo = new Date(Date.now() - 10 * 86_400_000);
    const [session] = await queueSessions(store, old, [A], 1, tenDaysAgo);
    const [job] = await claimAll(store, A, ['API'], tenDaysAgo);
    if (!job || !session) throw new Error('nothing to claim');
    const artifactId = randomUUID();
    await store.createArtifact({ id: artifactId, jobId: job.id, location: A, name: 'trace.zip', contentType: 'application/zip', size: 3, created_at: tenDaysAgo.toISOString() });
    await mkdir(path.join(dir, 'artifacts'), { recursive: true });
    const file = path.join(dir, 'artifacts', artifactId);
    await writeFile(file, 'zip');
    await store.markArtifactStored(artifactId, tenDaysAgo);
    const attempts = [1, 2, 3, 4].map(() => envelopeFor(job, old, { resultType: 'ATTEMPT', hasFailures: true, startedAt: tenDaysAgo }));
    await store.acceptResults(`agent-${A}`, A, [...attempts, envelopeFor(job, old, { startedAt: tenDaysAgo })], tenDaysAgo);
    const [fresh] = await runSessions(store, old, [A], 1);

    const s = await start([old], { pruneBatch: 2 });
    await eventually(() => expect(existsSync(file)).toBe(false));
    const left = await store.listResults({ checkId: 'old', limit: 100, resultType: 'ALL' });
    expect(left.entries.map((e) => e.id)).toEqual([fresh]);
    expect(await store.session(session)).toBeUndefined();
    expect(await store.artifact(artifactId)).toBeUndefined();
    const pruned = logs.find((l) => l.msg === 'old results deleted');
    expect(pruned).toMatchObject({ results: 5, artifactFiles: 1 });
    await s.stop();
  });

  it("runs the feature stores' pruners in the retention round, batch by batch, with the same cutoff", async () => {
    const calls: Array<{ before: number; batch: number }> = [];
    let left = 5;
    const started = Date.now();
    const s = await start([], {
      pruneBatch: 2,
      pruners: {
        outbox: async (before, batch) => {
          calls.push({ before: before.getTime(), batch });
          const deleted = Math.min(batch, left);
          left -= deleted;
          return deleted;
        },
      },
    });
    await eventually(() => expect(logs.find((l) => l.msg === 'old outbox deleted')).toMatchObject({ outbox: 5 }));
    // 2 + 2 + 1: it stops at the first batch that is not full.
    expect(calls.map((c) => c.batch)).toEqual([2, 2, 2]);
    for (const call of calls) expect(Math.abs(call.before - (started - 86_400_000))).toBeLessThan(60_000);
    await s.stop();
  });

  it('leaves out a check whose frequency is not a whole number of seconds, and says so', async () => {
    const broken = storedCheck({ id: 'broken', locations: [A], frequencySeconds: 0 });
    const fine = storedCheck({ id: 'fine', locations: [A], frequencySeconds: 60 });
    const s = await start([broken, fine]);
    expect(s.scheduled).toEqual(['fine']);
    expect(logs.some((l) => l.level === 50 && l.checkId === 'broken')).toBe(true);
  });

  it('stop() clears every timer and waits for the call in flight', async () => {
    const every = storedCheck({ id: 'every-second', locations: [A], frequencySeconds: 1 });
    // The real store, with createSession held back a while: stop() must wait for it.
    let began = false;
    let finished = false;
    const real = store;
    const slow = new Proxy(real, {
      get(target, name) {
        if (name === 'createSession') {
          return async (...args: Parameters<Store['createSession']>) => {
            began = true;
            await sleep(300);
            await target.createSession(...args);
            finished = true;
          };
        }
        const value = Reflect.get(target, name, target);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    const s = await start([every], { startupSpreadMs: 0, store: slow });
    await eventually(() => expect(began).toBe(true));
    await s.stop();
    expect(finished).toBe(true);
    const created = s.sessionsCreated;
    await sleep(1_500);
    expect(s.sessionsCreated).toBe(created);
    expect(s.scheduled).toEqual([]);
    expect(created).toBeLessThanOrEqual(1);
  });
});
