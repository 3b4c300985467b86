// vitest globalSetup: one PostgreSQL cluster for the whole run
// (test/support/postgres.ts), whose admin URL the test processes inherit. The
// `postgres` project of test/vitest.config.ts sets OUTPOST_TEST_DATABASE=postgres
// for the server's test files, which then give each STATE_DIR a database of
// its own in it (testDatabaseFor); every other file keeps SQLite.

import { type PostgresServer, startPostgres, TEST_POSTGRES_ENV } from '../support/postgres.js';

let server: PostgresServer | undefined;

export async function setup(): Promise<void> {
  if (process.env.OUTPOST_TEST_DATABASE === 'sqlite') return;
  server = await startPostgres();
  process.env[TEST_POSTGRES_ENV] = server.url('postgres');
}

export async function teardown(): Promise<void> {
  await server?.stop();
}
