// `npm run bench` only: the benchmark is not part of `npm test`.
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    root: new URL('../..', import.meta.url).pathname,
    include: ['test/bench/**/*.test.ts'],
    testTimeout: 600_000,
    hookTimeout: 120_000,
    pool: 'forks',
    // One benchmark at a time: the machine has two cores and both sides need them.
    maxWorkers: 1,
    fileParallelism: false,
    // The report goes straight to the terminal, not through vitest's console capture.
    disableConsoleIntercept: true,
  },
});
