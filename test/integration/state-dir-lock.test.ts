// One Outpost process per STATE_DIR (src/state-dir-lock.ts), with real
// processes on one folder: a second local, agent or SQLite server is refused
// at once, exit 78, in one line naming STATE_DIR and the holder; the lock
// goes with its holder (kill -9 included), so the next start is not blocked,
// and not before (garbage collection); once mode, db-check and PostgreSQL
// replicas never take it; a lock file that cannot be locked, or a try that
// does not answer, costs the lock, not the start; a Node.js without
// node:sqlite runs the agent unlocked, saying so.

import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type AgentProcess, cleanEnv, exitWithin, probe, startAgent, tempDir } from '../support/agent-process.js';
import { READY_DEADLINE_MS, retryUntil } from '../support/daemon.js';
import { nodeWithoutSqlite } from '../support/old-node.js';
import { type PostgresServer, startPostgres } from '../support/postgres.js';

const API_KEY = 'state-dir-lock-test-key-0123';
/** A refused start is one line within this long: the holder is asked within 500 ms, with a start's overhead around it. */
const REFUSED_WITHIN_MS = 30_000;

const running: AgentProcess[] = [];
afterEach(async () => {
  for (const proc of running.splice(0)) {
    proc.kill('SIGKILL');
    await proc.exit;
  }
});

/** A checks file whose one check (a refused connection) runs every minute: the process stays up, doing little. */
function checksFile(locations: 'server' | 'local'): string {
  const check = { id: 'refused', checkType: 'URL', frequency: 60, request: { url: 'http://127.0.0.1:9/' } };
  const file = path.join(tempDir('outpost-lock-checks-'), 'checks.json');
  writeFileSync(file, JSON.stringify(locations === 'server' ? { privateLocations: [{ id: 'lab', name: 'Lab' }], checks: [{ ...check, locations: ['lab'] }] } : { checks: [check] }));
  return file;
}

function start(args: string[], env: Record<string, string>, node?: string): AgentProcess {
  const proc = startAgent(args, cleanEnv(env), [], node);
  running.push(proc);
  return proc;
}

const local = (stateDir: string, env: Record<string, string> = {}) => start(['local', checksFile('local')], { STATE_DIR: stateDir, ...env });
const agent = (stateDir: string, env: Record<string, string> = {}, node?: string) =>
  start(['agent'], { STATE_DIR: stateDir, API_URL: 'http://127.0.0.1:9', API_KEY: 'a-private-location-key', ...env }, node);
const server = (stateDir: string, env: Record<string, string> = {}) =>
  start(['server', checksFile('server')], { STATE_DIR: stateDir, OUTPOST_API_KEY: API_KEY, API_HOST: '127.0.0.1', ...env });

/** Its start line; fails as soon as the process ends instead (a refused start must not be mistaken for a slow one). */
function started(proc: AgentProcess, line: string): Promise<unknown> {
  const ended = proc.exit.then(({ code, signal }) => {
    throw new Error(`exited (${code ?? signal}) before "${line}"; stderr: ${proc.stderr().slice(-2000)}`);
  });
  return Promise.race([proc.waitForLog((l) => l.msg === line, READY_DEADLINE_MS, line), ended]);
}

/** Exits 78 with exactly one stderr line, which names STATE_DIR, its lock file and the holder. */
async function expectRefused(proc: AgentProcess, stateDir: string, holder: AgentProcess, holderMode: string): Promise<void> {
  const { code } = await exitWithin(proc, REFUSED_WITHIN_MS, 'the second process on one STATE_DIR');
  const lines = proc
    .stderr()
    .split('\n')
    .filter((l) => l.length > 0);
  expect(lines, proc.stderr()).toHaveLength(1);
  const named = `outpost: STATE_DIR=${JSON.stringify(stateDir)} is in use: ${path.join(stateDir, 'outpost.lock')} is locked by outpost ${holderMode}, pid ${holder.proc.pid} on host ${hostname()}, since `;
  expect(lines[0]?.slice(0, named.length)).toBe(named);
  expect(lines[0]?.slice(named.length)).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z; run one Outpost process per STATE_DIR$/);
  expect(code, proc.stderr()).toBe(78);
}

const warnings = (proc: AgentProcess) => proc.logs.filter((l) => l.level === 40 && l.msg.includes('is not locked'));

describe('one process per STATE_DIR', () => {
  it('refuses a second local, agent and server on a local mode’s STATE_DIR; once mode runs beside it; kill -9 frees it', async () => {
    const stateDir = tempDir('outpost-lock-');
    const first = local(stateDir);
    await started(first, 'outpost local mode started');

    await expectRefused(local(stateDir), stateDir, first, 'local');
    await expectRefused(agent(stateDir), stateDir, first, 'local');
    await expectRefused(server(stateDir), stateDir, first, 'local');
    // Once mode keeps nothing in STATE_DIR: it runs its check (which fails, exit 1), lock or not.
    const once = start(['once', checksFile('local')], { STATE_DIR: stateDir });
    expect((await exitWithin(once, REFUSED_WITHIN_MS, 'once mode beside local mode')).code, once.stderr()).toBe(1);
    expect(first.proc.exitCode, 'the holder runs on').toBeNull();

    first.kill('SIGKILL');
    await first.exit;
    const next = local(stateDir);
    await started(next, 'outpost local mode started');
    expect(warnings(next)).toEqual([]);
    next.kill('SIGTERM');
    expect((await next.exit).code, next.stderr()).toBe(0);
  });

  it('refuses a second agent on an agent’s STATE_DIR (its spool); kill -9 frees it', async () => {
    const stateDir = tempDir('outpost-lock-');
    const first = agent(stateDir);
    await started(first, 'outpost agent started');
    await expectRefused(agent(stateDir), stateDir, first, 'agent');
    expect(first.proc.exitCode, 'the holder runs on').toBeNull();

    first.kill('SIGKILL');
    await first.exit;
    const next = agent(stateDir);
    await started(next, 'outpost agent started');
    expect(warnings(next)).toEqual([]);
  });

  it('refuses a second SQLite server on a server’s STATE_DIR; db-check runs beside it; SIGTERM frees it', async () => {
    const stateDir = tempDir('outpost-lock-');
    const first = server(stateDir);
    await started(first, 'outpost server started');
    await expectRefused(server(stateDir), stateDir, first, 'server');
    // The integrity check reads the database and is meant to run while the server does (docs/server.md).
    const check = start(['db-check'], { STATE_DIR: stateDir });
    expect(await exitWithin(check, REFUSED_WITHIN_MS, 'db-check beside the server'), check.stderr()).toEqual({ code: 0, signal: null });

    first.kill('SIGTERM');
    expect((await first.exit).code, first.stderr()).toBe(0);
    const next = server(stateDir);
    await started(next, 'outpost server started');
  });

  it('keeps the lock through garbage collection (a collected connection would let it go)', async () => {
    const stateDir = tempDir('outpost-lock-');
    // A full collection every 50 ms in the holder, each one noted in a file.
    const dir = tempDir('outpost-lock-gc-');
    const preload = path.join(dir, 'collect.cjs');
    const noted = path.join(dir, 'collections');
    writeFileSync(
      preload,
      `require('node:v8').setFlagsFromString('--expose-gc');
const gc = require('node:vm').runInNewContext('gc');
setInterval(() => { gc(); require('node:fs').appendFileSync(${JSON.stringify(noted)}, '.'); }, 50).unref();
`,
    );
    const collections = () => (existsSync(noted) ? readFileSync(noted, 'utf8').length : 0);
    const first = agent(stateDir, { NODE_OPTIONS: `--require ${preload}` });
    await started(first, 'outpost agent started');
    const atStart = collections();
    expect(await retryUntil(READY_DEADLINE_MS, async () => collections() >= atStart + 5)).toBe(true);
    await expectRefused(agent(stateDir), stateDir, first, 'agent');
  });

  it('runs without the lock, saying so once, where STATE_DIR/outpost.lock cannot be locked', async () => {
    const stateDir = tempDir('outpost-lock-');
    // Not a file SQLite can open: as a file system that refuses locks would, it costs the lock, not the start.
    mkdirSync(path.join(stateDir, 'outpost.lock'));
    const proc = agent(stateDir);
    await started(proc, 'outpost agent started');
    expect(warnings(proc).map((l) => l.msg)).toEqual([
      `STATE_DIR=${JSON.stringify(stateDir)} is not locked (${path.join(stateDir, 'outpost.lock')} cannot be locked (unable to open database file)): a second Outpost process on it would not be refused`,
    ]);
  });

  it('gives up on a lock that does not answer within 10 s, starts without it, and leaves no try behind', { timeout: 90_000 }, async () => {
    const stateDir = tempDir('outpost-lock-');
    // The try of the lock blocks in the kernel, as fcntl does on an NFSv3 mount whose lock manager is gone;
    // the agent itself is left alone (the preload looks at which script it runs in).
    const preload = path.join(tempDir('outpost-lock-preload-'), 'block-the-try.cjs');
    const fifo = path.join(path.dirname(preload), 'nobody-writes');
    execFileSync('mkfifo', [fifo]);
    writeFileSync(preload, `if (process.argv[1]?.endsWith('state-dir-lock-trial.js')) require('node:fs').readFileSync(${JSON.stringify(fifo)});\n`);
    const begun = Date.now();
    const proc = local(stateDir, { NODE_OPTIONS: `--require ${preload}` });
    await started(proc, 'outpost local mode started');
    expect(Date.now() - begun).toBeGreaterThanOrEqual(10_000);
    expect(warnings(proc).map((l) => l.msg)).toEqual([
      `STATE_DIR=${JSON.stringify(stateDir)} is not locked (${path.join(stateDir, 'outpost.lock')} cannot be locked (no answer within 10 s)): a second Outpost process on it would not be refused`,
    ]);
    const tries = () => readdirSync('/proc').filter((pid) => /^\d+$/.test(pid) && commandLine(pid).includes(path.join(stateDir, 'outpost.lock')));
    expect(await retryUntil(READY_DEADLINE_MS, async () => tries().length === 0), `the try was ended: ${tries().join(', ')}`).toBe(true);
    // Not held up at its exit by the try it gave up on.
    proc.kill('SIGTERM');
    expect((await exitWithin(proc, 30_000, 'local mode after a lock that did not answer')).code, proc.stderr()).toBe(0);
  });
});

function commandLine(pid: string): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8');
  } catch {
    return '';
  }
}

describe('server replicas on PostgreSQL', () => {
  let postgres: PostgresServer;
  let databaseUrl: string;
  beforeAll(async () => {
    postgres = await startPostgres();
    databaseUrl = await postgres.createDatabase('lock');
  });
  afterAll(async () => {
    await postgres?.stop();
  });

  it('share one STATE_DIR (their artifacts’ volume) without a lock', async () => {
    const stateDir = tempDir('outpost-lock-replicas-');
    const replicas = [server(stateDir, { DATABASE_URL: databaseUrl }), server(stateDir, { DATABASE_URL: databaseUrl })];
    await Promise.all(replicas.map((replica) => started(replica, 'outpost server started')));
    for (const replica of replicas) {
      const health = await replica.healthPort();
      expect(await retryUntil(READY_DEADLINE_MS, async () => (await probe(health, '/-/readiness')).status === 200), replica.stderr()).toBe(true);
    }
    expect(existsSync(path.join(stateDir, 'outpost.lock'))).toBe(false);
  });
});


const old = nodeWithoutSqlite();

describe.skipIf(!old)('agent mode on a Node.js without node:sqlite', () => {
  it('runs without the lock and says so once', async () => {
    const stateDir = tempDir('outpost-lock-');
    const proc = agent(stateDir, {}, old);
    await started(proc, 'outpost agent started');
    expect(warnings(proc).map((l) => l.msg)).toEqual([
      `STATE_DIR=${JSON.stringify(stateDir)} is not locked (node:sqlite needs Node.js 22.13 or newer, this is Node.js ${execFileSync(old as string, ['--version'], { encoding: 'utf8' }).trim().slice(1)}): a second Outpost process on it would not be refused`,
    ]);
  });
});
