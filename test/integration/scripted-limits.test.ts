// What bounds a script run (the real agent in once mode,
// test/support/scripted-run.ts): the time limit (also inside nested steps), the
// memory limit (SCRIPT_MEMORY_MB), processes a script starts (ended with it,
// even detached or when the script exits by itself), run folders left behind by
// an agent killed long ago, and a run whose agent is killed with SIGKILL.

import { readdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { cleanEnv, startAgent, tempDir } from '../support/agent-process.js';
import { processes, useScriptedRun } from '../support/scripted-run.js';

const run = useScriptedRun(({ target }) => {
  return [
    { id: 'loops', checkType: 'MULTI_STEP', maxResponseTime: 1500, script: 'while (true) {}' },
    { id: 'allocates', checkType: 'MULTI_STEP', maxResponseTime: 120_000, script: `const keep = [];\nwhile (true) keep.push({ n: Math.random(), s: 'x'.repeat(64) + Math.random() });` },
    {
      id: 'spawns-sleepers',
      checkType: 'MULTI_STEP',
      maxResponseTime: 20_000,
      script: `const { spawn } = require('node:child_process');
spawn('/bin/sleep', ['6543'], { env: {}, stdio: 'inherit' });
spawn('/bin/sleep', ['6544'], { env: {}, stdio: 'inherit', detached: true });
console.log('started');`,
    },
    {
      id: 'spawns-and-loops',
      checkType: 'MULTI_STEP',
      maxResponseTime: 1_500,
      script: `require('node:child_process').spawn('/bin/sleep', ['6545'], { env: {}, stdio: 'ignore', detached: true });\nfor (;;) {}`,
    },
    {
      id: 'nested-at-limit',
      checkType: 'MULTI_STEP',
      maxResponseTime: 1_500,
      script: `await step('outer', async () => {\n  await step('inner', async () => { await new Promise(() => {}); });\n});`,
    },
    {
      id: 'exits-itself',
      checkType: 'MULTI_STEP',
      script: `require('node:child_process').spawn('/bin/sleep', ['6546'], { env: {}, stdio: 'ignore', detached: true });\nprocess.exit(3);`,
    },
    // Shows that the agent goes on after the scripts it stopped.
    { id: 'after-all', checkType: 'URL', request: { url: `${target.url}/ok` } },
  ];
});
const { final, multi } = run;

describe('time and memory limits', () => {
  it('kills a script that loops forever at its time limit, and the agent goes on', () => {
    expect(final('loops')).toMatchObject({ hasErrors: true });
    expect(multi('loops').requestError).toBe('MULTI_STEP was stopped: it ran past its time limit of 1500 ms');
    expect(final('after-all')).toMatchObject({ hasFailures: false, hasErrors: false });
    expect(run.exitCode).toBe(1);
    // No script process is left behind.
    expect(processes()).not.toContain(run.scriptsTmp);
  });

  it('kills a script that allocates without bound at its memory limit', () => {
    expect(final('allocates')).toMatchObject({ hasErrors: true });
    expect(multi('allocates').requestError).toBe('MULTI_STEP was killed: it exceeded its memory limit of 64 MB');
    expect(multi('allocates').jobLog.join('\n')).not.toMatch(/Mark-Compact/);
  });

  it('names the innermost of nested steps the time limit ended', () => {
    expect(multi('nested-at-limit').requestError).toBe('MULTI_STEP was stopped at step "inner": it ran past its time limit of 1500 ms');
  });
});

describe('processes and folders a script run leaves behind', () => {
  it("ends processes a script started, even detached and without the run's environment, without waiting for them", () => {
    expect(final('spawns-sleepers'), JSON.stringify(multi('spawns-sleepers'))).toMatchObject({ hasFailures: false, hasErrors: false });
    expect(multi('spawns-sleepers').jobLog).toEqual(['started']);
    expect(final('spawns-and-loops')).toMatchObject({ hasErrors: true });
    expect(multi('spawns-and-loops').requestError).toBe('MULTI_STEP was stopped: it ran past its time limit of 1500 ms');
    for (const sleeper of ['sleep 6543', 'sleep 6544', 'sleep 6545']) expect(processes()).not.toContain(sleeper);
  });

  it('ends what a script started also when the script exits by itself', () => {
    expect(multi('exits-itself').requestError).toBe('MULTI_STEP ended without a result (exit code 3)');
    expect(processes()).not.toContain('sleep 6546');
  });

  it("removes a run folder an agent killed long ago left behind, and no other", () => {
    const left = readdirSync(run.scriptsTmp).filter((name) => name.startsWith('outpost-script-'));
    expect(left).toEqual(['outpost-script-fresh']);
  });
});

describe('a script run whose agent is killed with SIGKILL', () => {
  it('ends itself and its browser, and removes its folder: nothing is left to run unbounded', async () => {
    const tmp = tempDir('outpost-orphaned-');
    const dir = tempDir();
    const file = path.join(dir, 'checks.json');
    const script = `const { chromium } = require('playwright-core');
const browser = await chromium.launch();
const page = await browser.newPage();
await page.goto(environment.PAGE);
for (;;) {}`;
    writeFileSync(
      file,
      JSON.stringify({
        environmentVariables: [{ key: 'PAGE', value: run.pageUrl }],
        checks: [{ id: 'busy-browser', checkType: 'BROWSER', maxResponseTime: 120_000, script }],
      }),
    );
    const proc = startAgent(['once', file], cleanEnv({ TMPDIR: tmp, STATE_DIR: tempDir('outpost-orphaned-state-'), RUNTIMES_DIR: run.runtimesDir }));
    const ours = () =>
      processes()
        .split('\n')
        .filter((line) => line.includes(tmp));
    // The harness and Chromium (its profile is in the run's folder) are running, and the page has loaded.
    await vi.waitFor(() => expect(ours().filter((line) => line.includes('chromium')).length).toBeGreaterThan(1), { timeout: 30_000, interval: 100 });
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    expect(ours().some((line) => line.includes('harness.cjs'))).toBe(true);
    proc.kill('SIGKILL');
    expect((await proc.exit).signal).toBe('SIGKILL');
    // Bounded, not fast: a second or two on a quiet machine, but a loaded CI machine (load average 12 seen)
    // stretches both the watchdog's exit and the removal of Chromium's profile.
    await vi.waitFor(() => expect(ours()).toEqual([]), { timeout: 30_000, interval: 100 });
    // Its folder too: a HAR there may hold a secret.
    await vi.waitFor(() => expect(readdirSync(tmp).filter((name) => name.startsWith('outpost-script-'))).toEqual([]), { timeout: 30_000, interval: 100 });
  }, 120_000);
});
