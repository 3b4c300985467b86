// The real agent with its spool on a small tmpfs that turns read-only
// mid-run, and with unusable content left in its spool. Mounting needs root,
// which the test machine (and its containers) give.

import { execFileSync } from 'node:child_process';
import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type { ResultEnvelope } from '../../src/core/protocol.js';
import { errorResult } from '../../src/results/result.js';
import { probe, tempDir } from '../support/agent-process.js';
import { useHarness } from '../support/harness.js';
import { useSmallDisks } from '../support/tmpfs.js';

const h = useHarness();
const mount = useSmallDisks();
/**
 * A STATE_DIR whose spool folder is a small tmpfs of its own (through a link). Not all of STATE_DIR: the agent
 * keeps its lock file there open for writing (src/state-dir-lock.ts), and `mount -o remount,ro` refuses a file
 * system with a file open for writing (busy).
 */
function spoolOnSmallDisk(): { stateDir: string; spoolDisk: string } {
  const stateDir = tempDir();
  const spoolDisk = mount('4m', 'outpost-spool-');
  symlinkSync(spoolDisk, path.join(stateDir, 'spool'));
  return { stateDir, spoolDisk };
}

/** Remounts read-only or read-write, retrying while a file open for writing keeps it busy. */
async function remount(at: string, mode: 'ro' | 'rw'): Promise<void> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    try {
      execFileSync('mount', ['-o', `remount,${mode}`, at], { stdio: 'pipe' });
      return;
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

async function until(predicate: () => Promise<boolean> | boolean, what: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await predicate())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

function urlCheck(url: string) {
  return { id: `check-${Math.random().toString(36).slice(2, 8)}`, name: 'test check', checkType: 'URL', request: { url } };
}

describe('agent with a failing spool', () => {
  it('read-only spool mid-run: every result is delivered from memory, not ready, no claims, and it recovers and stops in time', async () => {
    const { stateDir, spoolDisk } = spoolOnSmallDisk();
    const cp = await h.server();
    const proc = h.agent(cp, { STATE_DIR: stateDir, JOB_CONCURRENCY: '20', SHUTDOWN_GRACE_SECONDS: '5' });
    const port = await proc.healthPort();
    await until(async () => (await probe(port, '/-/readiness')).status === 200, 'readiness');
    await remount(spoolDisk, 'ro');

    const ids = await Promise.all(Array.from({ length: 20 }, () => cp.addJob(urlCheck(`${h.target.url}/slow/100`))));
    // Held in memory, the results still reach the control plane.
    await cp.waitFor(() => ids.every((id) => cp.resultsFor(id).length === 1), 30_000, 'all 20 results');
    expect((await probe(port, '/-/readiness')).status).toBe(503);
    const health = (await probe(port, '/health')).body as Record<string, unknown>;
    expect(health).toMatchObject({ ready: false, spoolWritable: false });
    expect((await probe(port, '/metrics')).text).toMatch(/outpost_spool_writable 0/);
    // No claims while the spool cannot write (one already waiting in a long poll may end first).
    await new Promise((r) => setTimeout(r, 2_000));
    const claimsWhileBroken = cp.claims.length;
    const late = await cp.addJob(urlCheck(`${h.target.url}/ok`));
    await new Promise((r) => setTimeout(r, 1_500));
    expect(cp.claims.length).toBe(claimsWhileBroken);
    expect(cp.resultsFor(late)).toHaveLength(0);

    await remount(spoolDisk, 'rw');
    await until(async () => (await probe(port, '/-/readiness')).status === 200, 'readiness after the disk is back');
    await cp.waitFor(() => cp.resultsFor(late).length === 1, 30_000, 'the job claimed after recovery');
    expect(proc.logs.filter((l) => l.msg === 'unhandled promise rejection')).toEqual([]);

    proc.kill('SIGTERM');
    const exit = await proc.exit;
    expect(exit.code).toBe(0);
    expect(cp.violations).toEqual([]);
  });

  it('read-only spool at shutdown: results held in memory are delivered and SIGTERM ends the agent with exit 0', async () => {
    const { stateDir, spoolDisk } = spoolOnSmallDisk();
    const cp = await h.server();
    const proc = h.agent(cp, { STATE_DIR: stateDir, JOB_CONCURRENCY: '5', SHUTDOWN_GRACE_SECONDS: '5' });
    const port = await proc.healthPort();
    await until(async () => (await probe(port, '/-/readiness')).status === 200, 'readiness');
    await remount(spoolDisk, 'ro');
    const ids = await Promise.all(Array.from({ length: 5 }, () => cp.addJob(urlCheck(`${h.target.url}/slow/2000`))));
    await until(() => ids.every((id) => cp.jobs.get(id)?.state === 'leased'), 'the 5 jobs claimed');
    // SIGTERM while they run and the disk is still read-only.
    proc.kill('SIGTERM');
    expect((await proc.exit).code).toBe(0);
    for (const id of ids) expect(cp.resultsFor(id)).toHaveLength(1);
    expect(proc.logs.some((l) => l.msg === 'outpost agent stopped')).toBe(true);
  });

  it('starts with a segment that is a directory and a segment of {} lines: quarantined, counted in /health, the rest delivered', async () => {
    const stateDir = tempDir();
    const spool = path.join(stateDir, 'spool');
    mkdirSync(path.join(spool, 'segment-000000000001.jsonl'), { recursive: true });
    writeFileSync(path.join(spool, 'segment-000000000002.jsonl'), '{}\n{}\n');
    const cp = await h.server();
    const id = await cp.addJob(urlCheck(`${h.target.url}/ok`));
    const proc = h.agent(cp, { STATE_DIR: stateDir });
    const port = await proc.healthPort();
    await cp.waitFor(() => cp.resultsFor(id).length === 1, 30_000, 'the result');
    await until(async () => ((await probe(port, '/health')).body as { quarantined: number }).quarantined === 3, '3 quarantined in /health');
    expect((await probe(port, '/metrics')).text).toMatch(/outpost_spool_quarantined_total 3/);
    // The {} lines are never sent: no request was refused for them.
    expect(cp.violations).toEqual([]);
    expect(proc.logs.filter((l) => l.msg === 'spool segment cannot be used: quarantined')).toHaveLength(1);
  });

  it('a result refused for its size (413) that cannot be quarantined is dropped and counted in /health; the rest is delivered', async () => {
    const stateDir = tempDir();
    const spool = path.join(stateDir, 'spool');
    mkdirSync(spool, { recursive: true });
    // The quarantine folder's name is taken by a file: writing there fails, as on a read-only disk.
    writeFileSync(path.join(spool, 'quarantine'), 'not a folder');
    const cp = await h.server();
    cp.maxResultsBodyBytes = 256 * 1024;
    const envelope = async (nameBytes: number): Promise<ResultEnvelope> => {
      // Jobs the control plane knows, of a type this agent does not run: never claimed, so only the spooled results arrive.
      const jobId = await cp.addJob({ checkType: 'NOT_A_TYPE' });
      const result = errorResult('x'.repeat(nameBytes), { checkRunId: 1, sequenceId: null, runLocation: 'test' }, { id: jobId });
      return { jobId, resultId: result.id, result };
    };
    const small = [await envelope(10), await envelope(10)];
    const big = await envelope(512 * 1024);
    writeFileSync(path.join(spool, 'segment-000000000001.jsonl'), `${[small[0], big, small[1]].map((e) => JSON.stringify(e)).join('\n')}\n`);
    const proc = h.agent(cp, { STATE_DIR: stateDir });
    const port = await proc.healthPort();
    await cp.waitFor(() => small.every((e) => cp.results.has(e.resultId)), 30_000, 'the two small results');
    await until(async () => ((await probe(port, '/health')).body as { spoolDropped: number }).spoolDropped === 1, '1 dropped in /health');
    expect(cp.results.has(big.resultId)).toBe(false);
    expect(proc.logs.filter((l) => l.msg === 'control plane refuses this result and it could not be quarantined: dropped')).toHaveLength(1);
    await until(async () => ((await probe(port, '/health')).body as { spooled: number }).spooled === 0, 'the spool empty');
  });
});
