import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    root: new URL('..', import.meta.url).pathname,
    // test/containers builds the images with podman and starts them with testcontainers (.ci/run prepares both).
    include: ['test/unit/**/*.test.ts', 'test/integration/**/*.test.ts', 'test/containers/**/*.test.ts'],
    // OUTPOST_TEST_DATABASE=postgres: one PostgreSQL for the run, the servers' state in it (test/README.md).
    globalSetup: ['test/setup/postgres-global.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // Agent processes and real peers compete for two cores; keep parallelism modest.
    maxWorkers: 2,
  },
});
