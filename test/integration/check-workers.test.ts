// Check workers (CHECK_WORKERS) in the built agent, local mode: the start-up
// line says how many, readiness is 200 once they are up, checks run and
// /metrics is one aggregate of the workers' figures (job counters, per-check
// series, outpost_check_workers), and SIGTERM stops everything with exit 0.
// The protocol, spool and shutdown files run with workers too (the
// check-workers project of test/vitest.config.ts).

import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { probe, tempDir } from '../support/agent-process.js';
import { useHarness } from '../support/harness.js';

const h = useHarness();

function sample(text: string, series: string): number {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line ? Number(line.slice(series.length + 1)) : 0;
}

describe('check workers in the built agent', () => {
  it('local mode with CHECK_WORKERS=2 runs its checks on them and reports one set of metrics', async () => {
    const dir = tempDir();
    const file = path.join(dir, 'checks.json');
    const checks = [
      ...[1, 2, 3].map((i) => ({ id: `ok-${i}`, name: `OK ${i}`, checkType: 'URL', frequency: 1, request: { url: `${h.target.url}/ok` } })),
      { id: 'teapot', name: 'Teapot', checkType: 'URL', frequency: 1, request: { url: `${h.target.url}/status/418` } },
    ];
    writeFileSync(file, JSON.stringify({ checks }));
    const proc = h.start(['local', file], { CHECK_WORKERS: '2', JOB_CONCURRENCY: '4' });
    const started = await proc.waitForLog((l) => l.msg.startsWith('check workers:'), 30_000, 'the check workers line');
    expect(started).toMatchObject({ checkWorkers: 2, from: 'CHECK_WORKERS' });
    const port = await proc.healthPort();
    expect((await probe(port, '/-/readiness')).status).toBe(200);

    const deadline = Date.now() + 30_000;
    let text = '';
    for (;;) {
      text = (await probe(port, '/metrics')).text;
      const passed = sample(text, 'outpost_jobs_total{check_type="URL",outcome="passed"}');
      const failed = sample(text, 'outpost_jobs_total{check_type="URL",outcome="failed"}');
      if (passed >= 6 && failed >= 2) break;
      if (Date.now() > deadline) throw new Error(`the checks did not run on time: ${text.slice(0, 2000)}`);
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(sample(text, 'outpost_check_workers')).toBe(2);
    expect(sample(text, 'outpost_check_worker_restarts_total')).toBe(0);
    for (const id of ['ok-1', 'ok-2', 'ok-3']) expect(text).toMatch(new RegExp(`probe_success\\{check_id="${id}"[^}]*\\} 1`));
    expect(text).toMatch(/probe_success\{check_id="teapot"[^}]*\} 0/);

    proc.kill('SIGTERM');
    expect((await proc.exit).code).toBe(0);
    expect(proc.logs.some((l) => l.msg === 'outpost local mode stopped')).toBe(true);
    expect(proc.logs.filter((l) => l.level >= 50)).toEqual([]);
  });
});
