// vitest globalSetup: with OUTPOST_TEST_DATABASE=postgres, one PostgreSQL
// cluster for the whole run (test/support/postgres.ts), whose admin URL the
// server processes' start (agent-process.ts startAgent) reads to give each
// STATE_DIR a database of its own. Without it, nothing starts: the server
// tests run on SQLite, as always.

import { type PostgresServer, startPostgres, TEST_POSTGRES_ENV } from '../support/postgres.js';

let server: PostgresServer | undefined;

export async function setup(): Promise<void> {
  const wanted = process.env.OUTPOST_TEST_DATABASE;
  if (wanted === undefined || wanted === '' || wanted === 'sqlite') return;
  if (wanted !== 'postgres') throw new Error(`OUTPOST_TEST_DATABASE=${wanted}: use sqlite (the default) or postgres`);
  server = await startPostgres();
  process.env[TEST_POSTGRES_ENV] = server.url('postgres');
}

export async function teardown(): Promise<void> {
  await server?.stop();
}
