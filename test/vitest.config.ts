import { defineConfig } from 'vitest/config';

// The protocol, spool and shutdown files run a second time with the agent's checks on worker threads
// (CHECK_WORKERS=2 through OUTPOST_TEST_CHECK_WORKERS, test/support/agent-process.ts cleanEnv).
const WITH_CHECK_WORKERS = ['test/integration/agent-mode.test.ts', 'test/integration/spool-failures.test.ts', 'test/integration/shutdown.test.ts'];

export default defineConfig({
  test: {
    root: new URL('..', import.meta.url).pathname,
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // Agent processes and real peers compete for two cores; keep parallelism modest.
    maxWorkers: 2,
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
    ],
  },
});
