// Runtime records of every stage and near or past their end of life, run by
// the real agent in once mode (test/support/scripted-run.ts), with
// SECRET_DETECTION=on agent-wide: a check's `secretDetection: false` turns it
// off, a bad value is refused naming the field.

import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { cleanEnv, MAIN, tempDir } from '../support/agent-process.js';
import { useScriptedRun } from '../support/scripted-run.js';

const DAY_MS = 86_400_000;
/** month/day/year of the UTC day `days` from today. */
function dayFromNow(days: number): string {
  const d = new Date(Date.now() + days * DAY_MS);
  return `${String(d.getUTCMonth() + 1).padStart(2, '0')}/${String(d.getUTCDate()).padStart(2, '0')}/${d.getUTCFullYear()}`;
}
const PAST = dayFromNow(-1);
const SOON = dayFromNow(10);
const AWS_KEY = 'AKIAQ3EGRZLN7VW2KX5D';
const OTHER_KEY = 'AKIAZZ7YEXAMPLE0NOTS';

const run = useScriptedRun(
  () => [
    { id: 'alpha', checkType: 'MULTI_STEP', runtimeId: '2027-01', script: "console.log('ran')" },
    { id: 'beta', checkType: 'MULTI_STEP', runtimeId: '2027-02', script: "console.log('ran')" },
    { id: 'stable', checkType: 'MULTI_STEP', runtimeId: '2026-10', script: "console.log('ran')" },
    { id: 'past-end-of-life', checkType: 'MULTI_STEP', runtimeId: '2026-05', script: "console.log('ran')" },
    { id: 'near-end-of-life', checkType: 'MULTI_STEP', runtimeId: '2026-06', script: "console.log('ran')" },
    { id: 'agent-wide', checkType: 'MULTI_STEP', script: `console.log('key ${AWS_KEY}')` },
    { id: 'check-off', checkType: 'MULTI_STEP', secretDetection: false, script: `console.log('key ${OTHER_KEY}')` },
  ],
  {
    env: { SECRET_DETECTION: 'on' },
    runtimes: [
      { name: '2027-01', stage: 'ALPHA', runtimeEndOfLife: '12/31/2030' },
      { name: '2027-02', stage: 'BETA', runtimeEndOfLife: '12/31/2030' },
      { name: '2026-10', stage: 'STABLE', runtimeEndOfLife: '12/31/2030' },
      { name: '2026-05', stage: 'STABLE', runtimeEndOfLife: PAST },
      { name: '2026-06', stage: 'STABLE', runtimeEndOfLife: SOON },
    ],
  },
);
const { final, multi } = run;
const AVAILABLE = '2025-10, 2026-04, 2026-06, 2026-10, 2027-01, 2027-02';

describe('runtime stages', () => {
  it('runs on ALPHA and BETA runtimes with a jobLog line, and on STABLE ones as on CURRENT', () => {
    for (const id of ['alpha', 'beta', 'stable']) expect(final(id), id).toMatchObject({ hasFailures: false, hasErrors: false });
    expect(multi('alpha').jobLog[0]).toBe('Runtime 2027-01 is ALPHA: a preview, whose packages may still change before it becomes STABLE');
    expect(multi('beta').jobLog[0]).toBe('Runtime 2027-02 is BETA: a preview, whose packages may still change before it becomes STABLE');
    expect(multi('stable').jobLog[0]).toBe('ran');
  });

  it('refuses a runtime past its end of life as REMOVED, with a clear error', () => {
    expect(final('past-end-of-life')).toMatchObject({ hasErrors: true });
    expect(multi('past-end-of-life').requestError).toBe(
      `Runtime 2026-05 reached its end of life on ${PAST} and is treated as REMOVED: move the check to a current runtime (available: ${AVAILABLE})`,
    );
  });

  it('lists every stage in `outpost runtimes`, and says which runtime is past its end of life', () => {
    const out = spawnSync(process.execPath, [MAIN, 'runtimes'], { env: cleanEnv({ RUNTIMES_DIR: run.runtimesDir }), encoding: 'utf8', timeout: 30_000 }).stdout;
    expect(out).toMatch(/2027-01\s+ALPHA\s+installed\s+end of life 12\/31\/2030\s+Node.js 24\n/);
    expect(out).toMatch(/2027-02\s+BETA\s+installed/);
    expect(out).toMatch(/2026-10\s+STABLE\s+installed/);
    expect(out).toContain(`2026-05    STABLE     installed     end of life ${PAST}  Node.js 24; past its end of life: refused as REMOVED\n`);
  });

  it('warns within 30 days of the end of life', () => {
    expect(final('near-end-of-life')).toMatchObject({ hasFailures: false, hasErrors: false });
    expect(multi('near-end-of-life').jobLog[0]).toBe(
      `Runtime 2026-06 reaches its end of life on ${SOON} (in 10 days): from then on checks on it are refused; move them to a current runtime`,
    );
  });
});

describe('SECRET_DETECTION=on', () => {
  it('detects in every scripted check that does not turn it off', () => {
    expect(multi('agent-wide').jobLog[0]).toBe('key *****');
    expect((multi('agent-wide') as unknown as { detectedSecrets: unknown }).detectedSecrets).toEqual([{ kind: 'aws-access-key', where: 'jobLog' }]);
    expect(run.stdout).not.toContain(AWS_KEY);
    expect(run.stderr).not.toContain(AWS_KEY);
  });

  it("leaves a check with secretDetection: false as it was, and refuses a secretDetection that is not a boolean, naming it", () => {
    expect(multi('check-off').jobLog[0]).toBe(`key ${OTHER_KEY}`);
    expect(multi('check-off')).not.toHaveProperty('detectedSecrets');
    const file = path.join(tempDir(), 'checks.json');
    writeFileSync(file, JSON.stringify({ checks: [{ id: 'bad-field', checkType: 'MULTI_STEP', secretDetection: 'yes', script: "console.log('ran')" }] }));
    const refused = spawnSync(process.execPath, [MAIN, 'once', file], { env: cleanEnv({ RUNTIMES_DIR: run.runtimesDir, STATE_DIR: tempDir() }), encoding: 'utf8', timeout: 30_000 });
    expect(refused.stderr).toContain('check "bad-field" at $.checks[0].secretDetection: must be true or false (got "yes")');
    expect(refused.status).not.toBe(0);
  });
});
