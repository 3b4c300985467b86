// `npm run bench`: how long /metrics takes to render with 10,000 checks'
// series (URL checks with TLS, DNS and ICMP checks in equal parts) on top of
// the process's own registry. The target is under 100 ms; like every
// benchmark here it reports the figure and asserts only that the text is
// whole (every check has its probe_success line), never a speed.
//
// BENCH_METRICS_CHECKS changes the number of checks.

import os from 'node:os';
import { performance } from 'node:perf_hooks';
import { expect, test } from 'vitest';
import type { CheckResultEntry } from '../../src/core/result-entry.js';
import { createMetrics } from '../../src/observability/metrics.js';

const CHECKS = Number(process.env.BENCH_METRICS_CHECKS ?? 10_000);
const RUNS = 15;
const TARGET_MS = 100;

function result(i: number): CheckResultEntry {
  const type = ['URL', 'DNS', 'ICMP'][i % 3] ?? 'URL';
  const now = new Date().toISOString();
  return {
    resultType: 'FINAL',
    id: `r-${i}`,
    name: `Check number ${i}`,
    checkId: `check-${i}`,
    checkType: type,
    hasFailures: i % 7 === 0,
    hasErrors: false,
    isDegraded: i % 11 === 0,
    overMaxResponseTime: false,
    runLocation: `location-${i % 4}`,
    startedAt: now,
    stoppedAt: now,
    created_at: now,
    responseTime: 120 + (i % 50),
    checkRunId: null,
    attempts: 1,
    sequenceId: null,
    ...(type === 'URL'
      ? {
          apiCheckResult: {
            assertions: [{ source: 'TEXT_BODY', passed: true }],
            response: { status: 200, redirects: 1, bodySize: 5120, tls: { protocol: 'TLSv1.3', chainEarliestExpiry: '2027-01-01T00:00:00.000Z' } },
          },
        }
      : type === 'DNS'
        ? { dnsCheckResult: { timings: { total: 8 }, response: { answer: [{}, {}] } } }
        : { icmpCheckResult: { response: { timings: { dns: 1 }, latency: { avg: 12 } } } }),
  };
}

test(`/metrics render time with ${CHECKS.toLocaleString('en')} checks' series`, async () => {
  const metrics = createMetrics();
  for (let i = 0; i < CHECKS; i++) metrics.checks.record(result(i), { frequencySeconds: 60 });
  const render = async () => (await metrics.registry.metrics()) + metrics.checks.render();
  const warm = await render();
  expect(warm.match(/^probe_success\{/gm)?.length).toBe(CHECKS);
  const times: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const start = performance.now();
    await render();
    times.push(performance.now() - start);
  }
  times.sort((a, b) => a - b);
  const median = times[Math.floor(times.length / 2)] ?? 0;
  const lines = warm.split('\n').length;
  process.stdout.write(
    `\n/metrics with ${CHECKS.toLocaleString('en')} checks: ${lines.toLocaleString('en')} lines, ${(warm.length / 1e6).toFixed(1)} MB; ` +
      `render median ${median.toFixed(1)} ms (min ${times[0]?.toFixed(1)}, max ${times.at(-1)?.toFixed(1)}) over ${RUNS} runs; ` +
      `target < ${TARGET_MS} ms: ${median < TARGET_MS ? 'met' : 'MISSED'}; load average ${os.loadavg()[0]?.toFixed(2)}\n`,
  );
});
