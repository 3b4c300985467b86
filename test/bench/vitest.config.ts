// `npm run bench` only: the benchmark is not part of `npm test`.
import { configDefaults, defineConfig } from 'vitest/config';

// BENCH_LONG=1: the long mode adds the definitions fuzz at 100,000 cases from a new seed (FUZZ_CASES and FUZZ_SEED override),
// and the agent's 30-minute soak (test/bench/soak.bench.test.ts; BENCH_SOAK_MINUTES overrides).
const long = process.env.BENCH_LONG === '1';
if (long) {
  process.env.FUZZ_CASES ??= '100000';
  process.env.FUZZ_SEED ??= 'random';
}

export default defineConfig({
  test: {
    root: new URL('../..', import.meta.url).pathname,
    include: ['test/bench/**/*.test.ts', ...(long ? ['test/unit/fuzz-definitions.test.ts'] : [])],
    exclude: [...configDefaults.exclude, ...(long ? [] : ['test/bench/soak.bench.test.ts'])],
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
