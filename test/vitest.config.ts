import { defineConfig } from 'vitest/config';

// The protocol, spool and shutdown files run a second time with the agent's checks on worker threads
// (CHECK_WORKERS=2 through OUTPOST_TEST_CHECK_WORKERS, test/support/agent-process.ts cleanEnv).
const WITH_CHECK_WORKERS = ['test/integration/agent-mode.test.ts', 'test/integration/spool-failures.test.ts', 'test/integration/shutdown.test.ts'];

// The server's tests a second time with its state in PostgreSQL instead of SQLite (test/README.md, "Two stores").
const ON_POSTGRES = [
  'test/integration/server-e2e.test.ts',
  'test/integration/server-mode.test.ts',
  'test/integration/server-heartbeats.test.ts',
  'test/integration/reload.test.ts',
  'test/integration/alerts-restart.test.ts',
  'test/integration/alerts-maintenance.test.ts',
  'test/integration/alerts.test.ts',
  'test/integration/server-read-api.test.ts',
  'test/integration/server-error-groups.test.ts',
  'test/integration/badges.test.ts',
  'test/integration/agent-mode.test.ts',
  'test/integration/events.test.ts',
  'test/integration/claim-pacing.test.ts',
  'test/integration/artifact-upload.test.ts',
  'test/integration/spool-failures.test.ts',
  'test/unit/server-scheduler.test.ts',
  'test/unit/heartbeat-checks.test.ts',
  'test/integration/server-analytics.test.ts',
  'test/integration/dashboards-api.test.ts',
];

export default defineConfig({
  test: {
    root: new URL('..', import.meta.url).pathname,
    // One PostgreSQL for the run; the `postgres` project's files keep their servers' state in it (test/README.md).
    globalSetup: ['test/setup/postgres-global.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // Four files at a time on two cores: most test time is spent waiting on timers, peers and
    // child processes, not computing (the cores were 60–70 % busy with two at a time). Measured on
    // the 2-core machine, the test phase took 728 s with two, 587 s with three and 538 s with four,
    // each test about 20 % slower with four than with three (docs/development.md, "The first `npm test`").
    maxWorkers: 4,
    projects: [
      {
        extends: true,
        test: {
          name: 'default',
          // test/containers builds the images with podman and starts them with testcontainers (.ci/run prepares both).
          include: ['test/unit/**/*.test.ts', 'test/integration/**/*.test.ts', 'test/containers/**/*.test.ts'],
        },
      },
      {
        extends: true,
        test: { name: 'check-workers', include: WITH_CHECK_WORKERS, env: { OUTPOST_TEST_CHECK_WORKERS: '2' } },
      },
      {
        extends: true,
        test: { name: 'postgres', include: ON_POSTGRES, env: { OUTPOST_TEST_DATABASE: 'postgres' } },
      },
    ],
  },
});
