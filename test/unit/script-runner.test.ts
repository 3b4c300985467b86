// The script runner (src/checks/scripted/runner.ts) on its own: SCRIPT_CONCURRENCY
// bounds scripts agent-wide, an abort (shutdown, lost lease) kills the
// script's process group at once, a MULTI_STEP run stopped at its time limit
// keeps its steps, and a script awaiting forever is named as such. Runs on a
// runtime folder without packages.

import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type { ExecutionContext } from '../../src/checks/executor.js';
import { runScript } from '../../src/checks/scripted/runner.js';
import { Variables } from '../../src/checks/variables.js';
import type { Logger } from '../../src/observability/logger.js';
import { readRuntime, type Runtime } from '../../src/checks/scripted/runtimes.js';
import { tempDir } from '../support/agent-process.js';

function emptyRuntime(): Runtime {
  const dir = path.join(tempDir('outpost-rt-'), 'bare');
  mkdirSync(dir);
  writeFileSync(
    path.join(dir, 'runtime.json'),
    JSON.stringify({ name: 'bare', stage: 'CURRENT', multiStepSupport: true, nodeJsVersion: '20', runtimeEndOfLife: '01/01/2030', description: 'no packages', dependencies: {} }),
  );
  const runtime = readRuntime(dir);
  if (typeof runtime === 'string') throw new Error(runtime);
  return runtime;
}

function context(signal: AbortSignal, scriptConcurrency: number): ExecutionContext {
  return {
    signal,
    logger: console as unknown as Logger,
    jobLog: [],
    variables: new Variables([]),
    settings: { responseBodyLimitBytes: 0, userAgent: 'test', scriptConcurrency },
  };
}

describe('script runner', () => {
  it('runs at most SCRIPT_CONCURRENCY scripts at once', async () => {
    const runtime = emptyRuntime();
    const code = `console.log('start ' + Date.now()); await new Promise((r) => setTimeout(r, 300)); console.log('end ' + Date.now());`;
    const contexts = [1, 2, 3].map(() => context(new AbortController().signal, 1));
    const runs = await Promise.all(contexts.map((ctx) => runScript({ kind: 'MULTI_STEP', code, runtime, timeoutMs: 20_000, environment: {} }, ctx)));
    expect(runs.map((r) => r.ok)).toEqual([true, true, true]);
    const spans = contexts
      .map((ctx) => ctx.jobLog.map((line) => Number(line.split(' ')[1])) as [number, number])
      .sort((a, b) => a[0] - b[0]);
    for (let i = 1; i < spans.length; i++) expect(spans[i]?.[0]).toBeGreaterThanOrEqual(spans[i - 1]?.[1] ?? Number.POSITIVE_INFINITY);
  });

  it('kills the script when the job is aborted', async () => {
    const controller = new AbortController();
    const ctx = context(controller.signal, 2);
    setTimeout(() => controller.abort(new Error('Aborted: shutting down')), 300);
    const run = await runScript({ kind: 'MULTI_STEP', code: 'while (true) {}', runtime: emptyRuntime(), timeoutMs: 60_000, environment: {} }, ctx);
    expect(run).toMatchObject({ ok: false, killed: 'aborted', error: 'MULTI_STEP was killed: Aborted: shutting down' });
  });

  it('stops a MULTI_STEP run at its time limit and keeps the steps it finished, and the one the limit ended', async () => {
    const ctx = context(new AbortController().signal, 2);
    const code = `await step('quick', async () => {});\nawait step('slow', async () => { await new Promise((r) => setTimeout(r, 60_000)); });`;
    const run = await runScript({ kind: 'MULTI_STEP', code, runtime: emptyRuntime(), timeoutMs: 1_000, environment: {} }, ctx);
    expect(run).toMatchObject({ ok: false, killed: 'timeout', step: 'slow', error: 'MULTI_STEP was stopped at step "slow": it ran past its time limit of 1000 ms' });
    expect(run.steps).toEqual([
      { name: 'quick', passed: true, error: null, durationMs: expect.any(Number) },
      { name: 'slow', passed: false, error: 'the time limit was reached during this step', durationMs: expect.any(Number) },
    ]);
    // The steps come from the harness's own output: it stopped itself rather than being killed.
    expect(run.steps[1]?.durationMs).toBeGreaterThan(500);
  });

  it('names a setup script that awaits a promise that never settles', async () => {
    const ctx = context(new AbortController().signal, 2);
    const run = await runScript({ kind: 'setupScript', code: 'await new Promise(() => {});', runtime: emptyRuntime(), timeoutMs: 10_000, environment: {} }, ctx);
    expect(run).toMatchObject({ ok: false, error: 'setupScript failed: the script ended while still awaiting a promise that never settles' });
  });
});
