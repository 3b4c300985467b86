// Debian's PostgreSQL as the tests run it (test/setup/provision.sh installs
// the package): a cluster in a temporary folder, made and run by an
// unprivileged user (uid 65534 when the test runs as root; the test's own
// user otherwise), listening on a free loopback port with password
// authentication, stopped and removed after. Each test gets a fresh
// database of its own from createDatabase().

import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { chownSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { openServerStores, type ServerStores } from '../../src/store/server-stores.js';
import { onFreePort, READY_DEADLINE_MS, retryUntil, stopEscalating } from './daemon.js';

const NOBODY = 65534;
export const PG_USER = 'outpost';

/** The newest /usr/lib/postgresql/<version>/bin holding postgres and initdb; undefined when PostgreSQL is not installed. */
export function postgresBinDir(): string | undefined {
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return undefined;
  const versions = readdirSync(root)
    .filter((v) => /^\d+$/.test(v))
    .sort((a, b) => Number(b) - Number(a));
  for (const version of versions) {
    const bin = path.join(root, version, 'bin');
    if (existsSync(path.join(bin, 'postgres')) && existsSync(path.join(bin, 'initdb'))) return bin;
  }
  return undefined;
}

export interface PostgresServer {
  port: number;
  password: string;
  /** A URL of `database` with the test user's credentials. */
  url(database: string): string;
  /** A new, empty database; its URL. */
  createDatabase(prefix?: string): Promise<string>;
  stop(): Promise<void>;
}

export interface PostgresOptions {
  /** false (the default in tests): no fsync, for speed; the bench keeps it on. */
  fsync?: boolean;
}

/** [command, args] run as the unprivileged user. */
function asUser(command: string, args: string[]): [string, string[]] {
  if (process.getuid?.() !== 0) return [command, args];
  return ['setpriv', [`--reuid=${NOBODY}`, `--regid=${NOBODY}`, '--clear-groups', command, ...args]];
}

let databases = 0;

export async function startPostgres(options: PostgresOptions = {}): Promise<PostgresServer> {
  const bin = postgresBinDir();
  if (!bin) throw new Error('PostgreSQL is not installed (Debian package postgresql; test/setup/provision.sh installs it)');
  const dir = mkdtempSync(path.join(tmpdir(), 'outpost-pg-'));
  const data = path.join(dir, 'data');
  const sockets = path.join(dir, 'sockets');
  const password = randomBytes(12).toString('base64url');
  writeFileSync(path.join(dir, 'pwfile'), `${password}\n`, { mode: 0o600 });
  mkdirSync(sockets);
  if (process.getuid?.() === 0) {
    for (const target of [dir, sockets, path.join(dir, 'pwfile')]) chownSync(target, NOBODY, NOBODY);
  }
  const [initCmd, initArgs] = asUser(path.join(bin, 'initdb'), [
    '-D',
    data,
    '-U',
    PG_USER,
    '--auth-local=trust',
    '--auth-host=scram-sha-256',
    `--pwfile=${path.join(dir, 'pwfile')}`,
    '--encoding=UTF8',
    '--no-sync',
  ]);
  execFileSync(initCmd, initArgs, { stdio: 'pipe' });
  let proc: ChildProcess | undefined;
  let output = '';
  const port = await onFreePort(
    async (candidate) => {
      const [cmd, args] = asUser(path.join(bin, 'postgres'), [
        '-D',
        data,
        '-p',
        String(candidate),
        '-k',
        sockets,
        '-c',
        'listen_addresses=127.0.0.1',
        '-c',
        `fsync=${options.fsync === true ? 'on' : 'off'}`,
        '-c',
        'max_connections=200',
        '-c',
        'shared_buffers=32MB',
      ]);
      output = '';
      const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
      const keep = (chunk: Buffer) => {
        output = (output + chunk.toString()).slice(-8000);
      };
      child.stdout?.on('data', keep);
      child.stderr?.on('data', keep);
      let exited = false;
      child.once('exit', () => {
        exited = true;
      });
      const ready = await retryUntil(READY_DEADLINE_MS, async () => {
        if (exited) throw new Error(`postgres exited: ${output}`);
        const client = new pg.Client({ host: '127.0.0.1', port: candidate, user: PG_USER, password, database: 'postgres', connectionTimeoutMillis: 2000 });
        try {
          await client.connect();
          await client.query('SELECT 1');
          return true;
        } catch {
          return false;
        } finally {
          await client.end().catch(() => undefined);
        }
      });
      if (!ready) {
        child.kill('SIGKILL');
        throw new Error(`postgres did not become ready within ${READY_DEADLINE_MS} ms: ${output}`);
      }
      proc = child;
      return candidate;
    },
    /could not bind|Address already in use/,
    'postgres',
  );
  const url = (database: string) => `postgres://${PG_USER}:${encodeURIComponent(password)}@127.0.0.1:${port}/${database}`;
  return {
    port,
    password,
    url,
    async createDatabase(prefix = 'outpost') {
      const name = `${prefix}_${process.pid}_${++databases}`;
      const client = new pg.Client({ connectionString: url('postgres') });
      await client.connect();
      try {
        await client.query(`CREATE DATABASE ${name}`);
      } finally {
        await client.end();
      }
      return url(name);
    },
    async stop() {
      const child = proc;
      if (child && child.exitCode === null && child.signalCode === null) {
        const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
        // SIGINT: PostgreSQL's fast shutdown (clients cut, no wait for them).
        await stopEscalating(
          [
            ['SIGINT', 10_000],
            ['SIGKILL', 5_000],
          ],
          (signal) => child.kill(signal),
          exited,
        );
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * Set by test/setup/postgres-global.ts when OUTPOST_TEST_DATABASE=postgres:
 * the cluster's admin URL, for the server processes the tests start.
 */
export const TEST_POSTGRES_ENV = 'OUTPOST_TEST_POSTGRES_URL';

/**
 * With OUTPOST_TEST_DATABASE=postgres (the second CI pass over the server
 * tests), the DATABASE_URL of a server process's STATE_DIR: one database
 * per state folder, made on first use, so a restarted server finds its data
 * as it would in its SQLite file. undefined otherwise (SQLite, as usual).
 */
export function testDatabaseFor(stateDir: string | undefined): string | undefined {
  if (!onPostgres() || !stateDir) return undefined;
  const admin = process.env[TEST_POSTGRES_ENV] as string;
  const name = `state_${createHash('sha256').update(stateDir).digest('hex').slice(0, 20)}`;
  const psql = (sql: string) => execFileSync('psql', [admin, '-tAqc', sql], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();
  if (psql(`SELECT 1 FROM pg_database WHERE datname = '${name}'`) !== '1') {
    try {
      psql(`CREATE DATABASE ${name}`);
    } catch (error) {
      // Two servers of one state folder started together: the other made it.
      if (!String((error as { stderr?: unknown }).stderr).includes('already exists')) throw error;
    }
  }
  const url = new URL(admin);
  url.pathname = `/${name}`;
  return url.toString();
}

/** A second connection to the database of a server's STATE_DIR, whichever store the run uses (history written behind the server's back). */
export async function openStateStores(stateDir: string): Promise<ServerStores> {
  const url = testDatabaseFor(stateDir);
  return openServerStores(
    url !== undefined ? { kind: 'postgres', url, poolSize: 2, shown: { kind: 'postgres', location: 'test' } } : { kind: 'sqlite', file: path.join(stateDir, 'outpost.db') },
  );
}

/** True in the PostgreSQL pass (OUTPOST_TEST_DATABASE=postgres): a test of the SQLite file itself has nothing to test there. */
export const onPostgres = (): boolean => process.env.OUTPOST_TEST_DATABASE === 'postgres' && Boolean(process.env[TEST_POSTGRES_ENV]);
