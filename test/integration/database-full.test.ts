// Server and local modes with STATE_DIR (and so the SQLite database) on a
// small tmpfs that fills up mid-run: reads still work there, so only the
// failed writes can tell. Not ready, the API's writes answer 503 with
// Retry-After, one warning instead of an error per scheduled check, and all
// of it undone once there is room again. Mounting needs root, which the test
// machine (and its containers) give.

import { closeSync, openSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { WRITE_PROBE_EVERY_MS } from '../../src/server/database-writes.js';
import { type AgentProcess, cleanEnv, probe, startAgent, tempDir } from '../support/agent-process.js';
import { READY_DEADLINE_MS, retryUntil } from '../support/daemon.js';
import { serverReady, startServerProcess } from '../support/server-process.js';
import { useSmallDisks } from '../support/tmpfs.js';

const DEADLINE_MS = 30_000;
const HEARTBEAT_TOKEN = 'full-disk-heartbeat-token';
const WARNING = /^the database cannot write \(the database or its disk is full\)/;
const RECOVERED = 'the database takes writes again: ready';

const running: AgentProcess[] = [];
let target: Server;
let targetUrl: string;

beforeAll(async () => {
  target = createServer((_req, res) => res.end('ok'));
  await new Promise<void>((resolve) => target.listen(0, '127.0.0.1', resolve));
  targetUrl = `http://127.0.0.1:${(target.address() as AddressInfo).port}`;
});
afterEach(async () => {
  for (const proc of running.splice(0)) {
    proc.kill('SIGKILL');
    await proc.exit;
  }
});
afterAll(async () => {
  target.closeAllConnections();
  await new Promise((resolve) => target.close(resolve));
});

const mount = useSmallDisks();
/** A 16 MB tmpfs: room for the database and its WAL until `fill` takes the rest. */
const smallDisk = () => mount('16m', 'outpost-dbdisk-');

/** Writes a file until the disk is full; returns its path (remove it to make room). */
function fill(dir: string): string {
  const file = path.join(dir, 'filler');
  const fd = openSync(file, 'w');
  const chunk = Buffer.alloc(64 * 1024);
  try {
    for (;;) {
      try {
        writeSync(fd, chunk);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOSPC') return file;
        throw error;
      }
    }
  } finally {
    closeSync(fd);
  }
}

async function until(what: string, proc: AgentProcess, condition: () => boolean | Promise<boolean>): Promise<void> {
  const ok = await retryUntil(DEADLINE_MS, async () => {
    if (proc.proc.exitCode !== null || proc.proc.signalCode !== null) throw new Error(`outpost exited while waiting for ${what}; stderr: ${proc.stderr().slice(-2000)}`);
    return condition();
  });
  if (!ok) throw new Error(`timed out after ${DEADLINE_MS} ms waiting for ${what}; stderr: ${proc.stderr().slice(-2000)}`);
}

const readiness = async (port: number) => (await probe(port, '/-/readiness')).status;
const writableGauge = async (port: number) => /^outpost_database_writable (\d)$/m.exec((await probe(port, '/metrics')).text)?.[1];
const ping = (apiPort: number) => fetch(`http://127.0.0.1:${apiPort}/ping/${HEARTBEAT_TOKEN}`, { method: 'POST' });
/** Log lines at error level or above, after the first `skip` lines. */
const errorsAfter = (proc: AgentProcess, skip: number) => proc.logs.slice(skip).filter((l) => l.level >= 50);

describe('the database on a full disk', () => {
  it('server mode: not ready and 503 on writes while full, one warning, ready again once there is room', async () => {
    const stateDir = smallDisk();
    const checksFile = path.join(tempDir('outpost-dbdisk-checks-'), 'checks.json');
    writeFileSync(
      checksFile,
      JSON.stringify({
        privateLocations: [{ id: 'lab', name: 'Lab' }],
        checks: [
          // No agent runs it: the scheduler's new session every second is the write that fails.
          { id: 'every-second', name: 'every second', checkType: 'URL', frequency: 1, locations: ['lab'], request: { url: `${targetUrl}/` } },
          { id: 'backup', name: 'backup', checkType: 'HEARTBEAT', heartbeat: { period: 3600, grace: 60, token: HEARTBEAT_TOKEN } },
        ],
      }),
    );
    const proc = startServerProcess({ checksFile, stateDir, apiKey: 'full-disk-public-key-0123456789' });
    running.push(proc);
    const apiPort = await serverReady(proc);
    const health = await proc.healthPort();
    expect((await ping(apiPort)).status).toBe(200);
    expect(await writableGauge(health)).toBe('1');

    const logsBefore = proc.logs.length;
    const filler = fill(stateDir);
    await until('readiness 503 on the full disk', proc, async () => (await readiness(health)) === 503);
    const status = (await probe(health, '/health')).body as Record<string, unknown>;
    expect(status).toMatchObject({ ready: false, databaseWriteProblem: { reason: 'the database or its disk is full', detail: 'database or disk is full' } });
    expect(await writableGauge(health)).toBe('0');
    const refused = await ping(apiPort);
    expect(refused.status).toBe(503);
    expect(refused.headers.get('retry-after')).toBe('5');
    expect(((await refused.json()) as { message: string }).message).toBe(
      'the server cannot store this now: the database or its disk is full; retry later',
    );
    // Two more seconds of sessions that cannot be created (one a second): still the one warning, and no error line.
    await new Promise((r) => setTimeout(r, 2_000));
    expect(proc.logs.filter((l) => WARNING.test(l.msg))).toHaveLength(1);
    expect(errorsAfter(proc, logsBefore)).toEqual([]);
    expect(await readiness(health)).toBe(503);

    rmSync(filler);
    await until('readiness 200 once there is room', proc, async () => (await readiness(health)) === 200);
    expect(await writableGauge(health)).toBe('1');
    expect(proc.logs.filter((l) => l.msg === RECOVERED)).toHaveLength(1);
    expect(((await probe(health, '/health')).body as Record<string, unknown>).databaseWriteProblem).toBeNull();
    expect((await ping(apiPort)).status).toBe(200);
    expect(errorsAfter(proc, logsBefore)).toEqual([]);
  });

  it('local mode: not ready while full, its checks wait, and they run and print again once there is room', async () => {
    const stateDir = smallDisk();
    const checksFile = path.join(tempDir('outpost-dbdisk-checks-'), 'checks.json');
    writeFileSync(checksFile, JSON.stringify({ checks: [{ id: 'tick', name: 'tick', checkType: 'URL', frequency: 1, request: { url: `${targetUrl}/` } }] }));
    const proc = startAgent(['local', checksFile], cleanEnv({ STATE_DIR: stateDir }));
    running.push(proc);
    const health = await proc.healthPort();
    expect(await retryUntil(READY_DEADLINE_MS, async () => (await readiness(health)) === 200)).toBe(true);
    await until('two results', proc, () => proc.stdoutLines.length >= 2);

    const logsBefore = proc.logs.length;
    const filler = fill(stateDir);
    await until('readiness 503 on the full disk', proc, async () => (await readiness(health)) === 503);
    expect(await writableGauge(health)).toBe('0');
    await new Promise((r) => setTimeout(r, 1_500));
    expect(proc.logs.filter((l) => WARNING.test(l.msg))).toHaveLength(1);
    expect(errorsAfter(proc, logsBefore)).toEqual([]);

    rmSync(filler);
    await until('readiness 200 once there is room', proc, async () => (await readiness(health)) === 200);
    const printed = proc.stdoutLines.length;
    await until('two more results', proc, () => proc.stdoutLines.length >= printed + 2);
    expect(proc.stdoutLines.slice(printed).map((line) => JSON.parse(line) as { checkId: string; hasFailures: boolean })).toEqual(
      expect.arrayContaining([expect.objectContaining({ checkId: 'tick', hasFailures: false })]),
    );
    expect(proc.logs.filter((l) => l.msg === RECOVERED)).toHaveLength(1);
    expect(errorsAfter(proc, logsBefore)).toEqual([]);
  });

  it('a disk the database fills itself: not ready, and a probe write that fits in the log does not make it ready', async () => {
    // 3 MB: the migrations' write-ahead log takes it all, and a probe's one page still fits in the log while real writes do not.
    const stateDir = mount('3m', 'outpost-dbdisk-tiny-');
    const checksFile = path.join(tempDir('outpost-dbdisk-checks-'), 'checks.json');
    // Twenty checks a second, each result a few KB, so that the log is busy when the disk runs out.
    const ticks = Array.from({ length: 20 }, (_, i) => ({ id: `tick-${i}`, name: `${i} ${'x'.repeat(400)}`, checkType: 'URL', frequency: 1, shouldFail: true, request: { url: 'http://127.0.0.1:9/' } }));
    writeFileSync(checksFile, JSON.stringify({ checks: ticks }));
    const proc = startAgent(['local', checksFile], cleanEnv({ STATE_DIR: stateDir, DIAGNOSTICS: 'off' }));
    running.push(proc);
    const health = await proc.healthPort();
    await until('the warning that the database cannot write', proc, () => proc.logs.some((l) => WARNING.test(l.msg)));
    // Past two probe writes: each must leave it not ready (it used to say "writes again" and fail again, every probe).
    await new Promise((r) => setTimeout(r, 2 * WRITE_PROBE_EVERY_MS + 1_000));
    expect(proc.logs.filter((l) => l.msg === RECOVERED)).toEqual([]);
    expect(proc.logs.filter((l) => WARNING.test(l.msg))).toHaveLength(1);
    expect(await readiness(health)).toBe(503);
  });

  it('SIGTERM while the disk is full: local mode drains to the end and exits 0', async () => {
    const checksFile = path.join(tempDir('outpost-dbdisk-checks-'), 'checks.json');
    writeFileSync(checksFile, JSON.stringify({ checks: [{ id: 'tick', name: 'tick', checkType: 'URL', frequency: 1, request: { url: `${targetUrl}/` } }] }));
    const stateDir = smallDisk();
    const proc = startAgent(['local', checksFile], cleanEnv({ STATE_DIR: stateDir }));
    running.push(proc);
    const health = await proc.healthPort();
    await until('a result', proc, () => proc.stdoutLines.length >= 1);
    fill(stateDir);
    await until('readiness 503 on the full disk', proc, async () => (await readiness(health)) === 503);
    proc.kill('SIGTERM');
    const { code } = await proc.exit;
    expect(code, proc.stderr().slice(-2000)).toBe(0);
    expect(proc.logs.filter((l) => l.msg === 'shutdown failed')).toEqual([]);
    expect(proc.logs.some((l) => l.msg === 'outpost local mode stopped')).toBe(true);
  });
});
