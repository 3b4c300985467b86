// `BENCH_LONG=1 npm run bench` only (test/bench/vitest.config.ts): the agent
// at JOB_CONCURRENCY=256 for BENCH_SOAK_MINUTES (default 30) against a
// loopback nginx through the fake control plane, kept busy: whenever fewer
// than 1,024 jobs are waiting or running, 1,024 more are added, runs of
// 1,000 distinct checks. Every minute
// it prints the agent's resident set (VmRSS), its peak so far (VmHWM), the
// results delivered in that minute and the other processes' CPU share; at
// the end, RSS at the last minute against minute 5 (the target:
// within 10 %). Finished jobs and their results are pruned from the fake
// control plane every 10 s, so the bench process stays small. It asserts that
// the agent stayed up and that every result was accepted, never a speed or a
// size.

import { readFileSync, rmSync } from 'node:fs';
import { expect, test } from 'vitest';
import { RECOMMENDED_NODE_OPTIONS } from '../../src/node-options.js';
import { cleanEnv, startAgent, tempDir } from '../support/agent-process.js';
import { FakeControlPlane } from '../support/fake-control-plane.js';
import { startNginx } from '../support/nginx.js';
import { cpuShareWindow, treeCpuSeconds } from './cpu-share.js';

const MINUTES = Number(process.env.BENCH_SOAK_MINUTES ?? 30);
const CONCURRENCY = 256;
const BATCH = 1024;
/** Distinct checks the jobs cycle through. */
const CHECKS = 1000;
const COMPARE_AT_MINUTE = Math.min(5, Math.max(1, MINUTES - 1));

const log = (line: string) => process.stdout.write(`[soak] ${line}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function statusKb(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  const match = new RegExp(`^${field}:\\s+(\\d+)\\s+kB`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(match?.[1] ?? 0);
}

test(
  `soak: the agent at ${CONCURRENCY} in flight for ${MINUTES} minutes, RSS every minute`,
  async () => {
    const nginx = await startNginx({ accessLog: false });
    const cp = await FakeControlPlane.start();
    const stateDir = tempDir('outpost-soak-');
    let added = 0;
    const feed = () => {
      const delivered = cp.results.size + cp.prunedResults;
      if (added - delivered >= BATCH) return;
      // A fixed set of checks, as in production: per-check state (the /metrics series) is bounded by the checks, not the runs.
      for (let i = 0; i < BATCH; i++) cp.addJob({ id: `soak-${added % CHECKS}`, name: `soak ${added % CHECKS}`, checkType: 'URL', request: { url: `${nginx.url}/health` } }, { id: `job-${added++}` });
    };
    feed();
    const agent = startAgent(
      ['agent'],
      cleanEnv({
        API_URL: cp.url,
        API_KEY: cp.apiKey,
        JOB_CONCURRENCY: String(CONCURRENCY),
        STATE_DIR: stateDir,
        LOG_LEVEL: 'warn',
        CLAIM_WAIT_SECONDS: '1',
        SHUTDOWN_GRACE_SECONDS: '5',
        NODE_OPTIONS: RECOMMENDED_NODE_OPTIONS,
      }),
    );
    let exited = false;
    void agent.exit.then(() => {
      exited = true;
    });
    const pid = agent.proc.pid as number;
    const rows: Array<{ minute: number; rssMb: number; hwmMb: number; delivered: number; other: number }> = [];
    try {
      const start = Date.now();
      let lastDelivered = 0;
      for (let minute = 1; minute <= MINUTES; minute++) {
        const share = cpuShareWindow(() => (pid ? treeCpuSeconds(pid) : 0) + (nginx.pid ? treeCpuSeconds(nginx.pid) : 0));
        const minuteEnd = start + minute * 60_000;
        while (Date.now() < minuteEnd) {
          if (exited) throw new Error(`the agent exited in minute ${minute}; stderr: ${agent.stderr().slice(-2000)}`);
          feed();
          if (Date.now() % 10_000 < 250) cp.prune();
          await sleep(200);
        }
        const delivered = cp.results.size + cp.prunedResults;
        const row = { minute, rssMb: statusKb(pid, 'VmRSS') / 1024, hwmMb: statusKb(pid, 'VmHWM') / 1024, delivered: delivered - lastDelivered, other: share() };
        lastDelivered = delivered;
        rows.push(row);
        log(`minute ${minute}: RSS ${row.rssMb.toFixed(1)} MB, peak ${row.hwmMb.toFixed(1)} MB, ${row.delivered} results (${(row.delivered / 60).toFixed(0)}/s), other processes ${(row.other * 100).toFixed(0)} % of the CPU`);
      }
      const at = rows.find((r) => r.minute === COMPARE_AT_MINUTE);
      const last = rows.at(-1);
      if (at && last) {
        const change = (last.rssMb - at.rssMb) / at.rssMb;
        process.stdout.write(
          `\nsoak: RSS at minute ${last.minute} ${last.rssMb.toFixed(1)} MB against ${at.rssMb.toFixed(1)} MB at minute ${at.minute}: ${(change * 100).toFixed(1)} % ` +
            `(target within 10 %: ${Math.abs(change) <= 0.1 ? 'met' : 'NOT met'}); peak ${last.hwmMb.toFixed(1)} MB; ${cp.results.size + cp.prunedResults} results; ` +
            `protocol violations ${cp.violations.length}\n`,
        );
      }
      expect(cp.violations).toEqual([]);
      expect(exited).toBe(false);
    } finally {
      agent.kill('SIGTERM');
      await Promise.race([agent.exit, sleep(30_000)]);
      if (!exited) agent.kill('SIGKILL');
      await cp.close();
      await nginx.stop();
      rmSync(stateDir, { recursive: true, force: true });
    }
  },
  (MINUTES + 3) * 60_000,
);
