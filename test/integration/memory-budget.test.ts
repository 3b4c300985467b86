// Many concurrent API checks with large response bodies, through the real
// queue, in real agent processes with a small V8 heap: the memory the agent
// spends on bodies and results is bounded across jobs, so it stays alive,
// delivers every result, and each result says what was cut.

import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type { CheckResultEntry } from '../../src/core/result-entry.js';
import { type AgentProcess, tempDir } from '../support/agent-process.js';
import { useHarness } from '../support/harness.js';

const h = useHarness();

const TEN_MIB = 10 * 1024 * 1024;
const JOBS = 60;
const HEAP_MB = 256;
/** MAX_RESULT_BYTES' default. */
const MAX_RESULT_BYTES = 4 * 1024 * 1024;
/** Far above what a bounded agent needs with a 256 MB heap, far below what 60 unbounded 10 MiB bodies take. */
const PEAK_RSS_LIMIT = 900 * 1024 * 1024;

function bigBodyCheck(n: number) {
  return { id: `big-body-${n}`, name: `large body ${n}`, checkType: 'API', request: { method: 'GET', url: `${h.target.url}/zeros/${TEN_MIB}` } };
}

/** Exited or killed (a V8 heap abort is SIGABRT, with no exit code). */
const exited = (proc: AgentProcess) => proc.proc.exitCode !== null || proc.proc.signalCode !== null;

/** The process's peak resident set (VmHWM), while it runs. */
function peakRss(proc: AgentProcess): number {
  const status = readFileSync(`/proc/${proc.proc.pid}/status`, 'utf8');
  const kb = /^VmHWM:\s+(\d+) kB$/m.exec(status)?.[1];
  if (kb === undefined) throw new Error(`no VmHWM in /proc/${proc.proc.pid}/status`);
  return Number(kb) * 1024;
}

/** Every large-body result: complete, bounded in size, and saying what it left out. */
function expectBoundedAndSaid(result: CheckResultEntry): void {
  expect(Buffer.byteLength(JSON.stringify(result))).toBeLessThanOrEqual(MAX_RESULT_BYTES);
  const detail = result.apiCheckResult as { response: Record<string, unknown> | null; jobLog: string[]; requestError: string | null };
  expect(detail.requestError).toBeNull();
  expect(detail.response).toMatchObject({ status: 200, bodySize: TEN_MIB, bodyTruncated: true });
  const log = detail.jobLog.join('\n');
  // Cut while reading (the budget was in use) or cut from the result (over MAX_RESULT_BYTES): either is said.
  expect(log).toMatch(/response body cut at \d+ bytes: the agent's memory budget for response bodies \(32 MB\)|result truncated to fit MAX_RESULT_BYTES/);
}

describe('memory for response bodies and results is bounded across concurrent jobs', () => {
  const agentEnv = (stateDir: string) => ({
    JOB_CONCURRENCY: String(JOBS),
    NODE_OPTIONS: `--max-old-space-size=${HEAP_MB}`,
    BODY_MEMORY_BUDGET_MB: '32',
    STATE_DIR: stateDir,
  });

  it(`agent: ${JOBS} concurrent 10 MiB NUL bodies with a ${HEAP_MB} MB heap: every result delivered, cuts said, alive`, async () => {
    const cp = await h.server();
    const ids = await Promise.all(Array.from({ length: JOBS }, (_, n) => cp.addJob(bigBodyCheck(n))));
    const agent = h.agent(cp, agentEnv(tempDir()));
    await cp.waitFor(() => ids.every((id) => cp.resultsFor(id).length === 1) || exited(agent), 240_000, 'every result');
    expect(exited(agent), agent.stderr().slice(-2000)).toBe(false);
    expect(cp.violations).toEqual([]);
    for (const id of ids) expectBoundedAndSaid(cp.resultsFor(id)[0]?.result as CheckResultEntry);
    const peak = peakRss(agent);
    console.log(`agent peak RSS after ${JOBS} jobs: ${Math.round(peak / 1024 / 1024)} MB`);
    expect(peak).toBeLessThan(PEAK_RSS_LIMIT);
  }, 300_000);

  it('agent killed mid-run: the re-queued jobs run on a restarted agent without crashing it', async () => {
    const cp = await h.server({ leaseMs: 3_000 });
    const ids = await Promise.all(Array.from({ length: JOBS }, (_, n) => cp.addJob(bigBodyCheck(n))));
    const stateDir = tempDir();
    const hitsBefore = h.target.hits();
    const first = h.agent(cp, agentEnv(stateDir));
    await cp.waitFor(() => h.target.hits() >= hitsBefore + JOBS / 2 || exited(first), 120_000, 'half the jobs running');
    first.kill('SIGKILL');
    await first.exit;
    // Its leases run out; the same jobs go to the next agent, which also re-sends what the first spooled.
    const second = h.agent(cp, agentEnv(stateDir));
    await cp.waitFor(() => ids.every((id) => cp.resultsFor(id).length === 1) || exited(second), 240_000, 'every result');
    expect(exited(second), second.stderr().slice(-2000)).toBe(false);
    expect(cp.violations).toEqual([]);
    for (const id of ids) expectBoundedAndSaid(cp.resultsFor(id)[0]?.result as CheckResultEntry);
    expect(peakRss(second)).toBeLessThan(PEAK_RSS_LIMIT);
  }, 400_000);

  it(`once: ${JOBS} concurrent 10 MiB NUL bodies, budget from a ${HEAP_MB} MB heap: every line bounded and complete`, async () => {
    const dir = tempDir();
    const checksFile = path.join(dir, 'checks.json');
    writeFileSync(checksFile, JSON.stringify({ checks: Array.from({ length: JOBS }, (_, n) => bigBodyCheck(n)) }));
    const resultsFile = path.join(dir, 'results.jsonl');
    const once = h.start(['once', checksFile, '--results', resultsFile], {
      JOB_CONCURRENCY: String(JOBS),
      NODE_OPTIONS: `--max-old-space-size=${HEAP_MB}`,
    });
    const { code, signal } = await once.exit;
    expect({ code, signal }, once.stderr().slice(-2000)).toEqual({ code: 0, signal: null });
    const lines = readFileSync(resultsFile, 'utf8').split('\n').filter((l) => l.length > 0);
    expect(lines).toHaveLength(JOBS);
    for (const line of lines) {
      expect(Buffer.byteLength(line)).toBeLessThanOrEqual(MAX_RESULT_BYTES);
      const result = JSON.parse(line) as CheckResultEntry;
      expect(result.hasFailures).toBe(false);
      const detail = result.apiCheckResult as { response: Record<string, unknown>; jobLog: string[] };
      expect(detail.response).toMatchObject({ status: 200, bodySize: TEN_MIB, bodyTruncated: true });
      expect(detail.jobLog.join('\n')).toMatch(/response body cut at \d+ bytes: the agent's memory budget|result truncated to fit MAX_RESULT_BYTES/);
    }
  }, 300_000);
});
