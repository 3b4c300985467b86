// `outpost server` as an operator starts and stops it: bad settings and bad
// checks files are one clear message and exit 78; SIGTERM stops it with exit
// 0; a restart reopens the same database.

import { writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { type AgentProcess, cleanEnv, probe, startAgent, tempDir } from '../support/agent-process.js';
import { READY_DEADLINE_MS, retryUntil } from '../support/daemon.js';
import { onPostgres } from '../support/postgres.js';

const KEY = 'server-mode-test-key-0123';
const running: AgentProcess[] = [];
afterEach(async () => {
  for (const proc of running.splice(0)) proc.kill('SIGKILL');
});

function checksFile(content: unknown): { file: string; state: string } {
  const dir = tempDir('outpost-server-mode-');
  const file = path.join(dir, 'checks.json');
  writeFileSync(file, JSON.stringify(content));
  return { file, state: path.join(dir, 'state') };
}

const GOOD = {
  privateLocations: [{ id: 'lab', name: 'Lab' }],
  checks: [{ id: 'home', checkType: 'URL', frequency: 60, request: { url: 'http://127.0.0.1:9/' } }],
};

function server(file: string, env: Record<string, string>): AgentProcess {
  const proc = startAgent(['server', file], cleanEnv({ API_PORT: '0', API_HOST: '127.0.0.1', ...env }));
  running.push(proc);
  return proc;
}

describe('outpost server: starting and stopping', () => {
  it('exits 78 with one line when OUTPOST_API_KEY is not set', async () => {
    const { file, state } = checksFile(GOOD);
    const proc = server(file, { STATE_DIR: state });
    expect(await proc.exit).toEqual({ code: 78, signal: null });
    expect(proc.stderr().trim().split('\n')).toEqual([
      'outpost: OUTPOST_API_KEY is not set: server mode needs the key its public API requires (Authorization: Bearer …)',
    ]);
  });

  it('exits 78 listing every problem of a checks file', async () => {
    const { file, state } = checksFile({
      privateLocations: [{ id: 'lab', name: 'Lab' }],
      checks: [{ id: 'x', checkType: 'URL', request: { url: 'http://127.0.0.1:9/' }, locations: ['dmz'] }, { id: 'y', checkType: 'TCP' }],
    });
    const proc = server(file, { STATE_DIR: state, OUTPOST_API_KEY: KEY });
    expect((await proc.exit).code).toBe(78);
    expect(proc.stderr()).toContain('$.checks[0].locations[0]: must be the id of a location in $.privateLocations (lab)');
    expect(proc.stderr()).toContain('$.checks[1].request');
  });

  it('exits 78 naming API_PORT when the port is taken', async () => {
    const holder = createServer();
    await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
    const taken = (holder.address() as { port: number }).port;
    try {
      const { file, state } = checksFile(GOOD);
      const proc = server(file, { STATE_DIR: state, OUTPOST_API_KEY: KEY, API_PORT: String(taken) });
      expect((await proc.exit).code).toBe(78);
      expect(proc.stderr()).toContain(`API_PORT=${taken} on API_HOST=127.0.0.1 cannot be used (EADDRINUSE)`);
    } finally {
      holder.close();
    }
  });

  it('is ready once started, serves the API, stops on SIGTERM with exit 0; a restart reopens its database', { timeout: 120_000 }, async () => {
    const { file, state } = checksFile(GOOD);
    for (const round of [1, 2]) {
      const proc = server(file, { STATE_DIR: state, OUTPOST_API_KEY: KEY });
      const started = await proc.waitForLog((l) => l.msg === 'outpost server started', READY_DEADLINE_MS, `the server to start (round ${round})`);
      expect(started).toMatchObject({ locations: ['lab'], checks: 1, retentionDays: 30 });
      const health = await proc.healthPort();
      expect(await retryUntil(READY_DEADLINE_MS, async () => (await probe(health, '/-/readiness')).status === 200)).toBe(true);
      const status = await probe(health, '/health');
      expect(status.body).toMatchObject({ mode: 'server', ready: true });
      // The API answers on its port, with the key.
      const response = await fetch(`http://127.0.0.1:${started.apiPort}/v2/check-results/home`, { headers: { authorization: `Bearer ${KEY}` } });
      expect(response.status).toBe(200);
      expect(await response.json()).toEqual({ length: 0, entries: [], nextId: null });
      proc.kill('SIGTERM');
      expect(await proc.exit).toEqual({ code: 0, signal: null });
      expect(proc.logs.some((l) => l.msg === 'outpost server stopped')).toBe(true);
    }
  });
});

describe('outpost db-check', () => {
  function dbCheck(stateDir: string): AgentProcess {
    const proc = startAgent(['db-check'], cleanEnv({ STATE_DIR: stateDir }));
    running.push(proc);
    return proc;
  }

  // db-check checks the SQLite file; the PostgreSQL pass reports this one skipped (it runs in the SQLite pass).
  it.skipIf(onPostgres())("says ok and exits 0 for a server's database, exits 78 without one, and 1 for a file that is not a database", { timeout: 120_000 }, async () => {
    const { file, state } = checksFile(GOOD);
    const proc = server(file, { STATE_DIR: state, OUTPOST_API_KEY: KEY });
    await proc.waitForLog((l) => l.msg === 'outpost server started', READY_DEADLINE_MS, 'the server to start');
    // While the server runs: the check opens the file read-only.
    const sound = dbCheck(state);
    expect(await sound.exit).toEqual({ code: 0, signal: null });
    expect(sound.stdout()).toBe('ok\n');
    proc.kill('SIGTERM');
    await proc.exit;

    const empty = tempDir('outpost-db-check-');
    const missing = dbCheck(empty);
    expect((await missing.exit).code).toBe(78);
    expect(missing.stderr()).toContain(`${path.join(empty, 'outpost.db')} does not exist`);

    writeFileSync(path.join(empty, 'outpost.db'), 'not a database at all, but long enough to look like a file '.repeat(100));
    const broken = dbCheck(empty);
    expect((await broken.exit).code).toBe(1);
    expect(broken.stderr()).toMatch(/^outpost: the database cannot be checked: .*not a database/);
  });
});
