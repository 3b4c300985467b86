// Runtimes (runtimes/<name>/, RUNTIMES_DIR) end to end: a module the runtime
// does not have, a missing and a REMOVED runtime, and `outpost runtimes`,
// against the folder test/support/scripted-run.ts makes (the real 2026-04, a
// DEPRECATED 2025-10 without packages, a REMOVED 2023-02).

import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { cleanEnv, MAIN } from '../support/agent-process.js';
import { RUNTIME, useScriptedRun } from '../support/scripted-run.js';

const run = useScriptedRun(() => {
  return [
    { id: 'unknown-module', checkType: 'MULTI_STEP', runtimeId: RUNTIME, script: `const x = 1;\nrequire('left-pad');` },
    { id: 'missing-runtime', checkType: 'MULTI_STEP', runtimeId: '2031-01', script: 'console.log(1)' },
    { id: 'removed-runtime', checkType: 'MULTI_STEP', runtimeId: '2023-02', script: 'console.log(1)' },
  ];
});
const { final, multi } = run;

describe('runtimes of scripted checks', () => {
  it('names a module the runtime does not have, and what it has', () => {
    expect(final('unknown-module')).toMatchObject({ hasErrors: true });
    expect(multi('unknown-module').requestError).toBe(
      "MULTI_STEP failed at line 2: Cannot find module 'left-pad' (runtime 2026-04 provides: @playwright/test, axios, date-fns, jsonwebtoken, lodash, otpauth, playwright-core, uuid, and Node.js built-ins)",
    );
  });

  it('refuses a missing or REMOVED runtime with a clear error result', () => {
    expect(multi('missing-runtime').requestError).toBe('Runtime 2031-01 is not installed on this agent (available: 2025-10, 2026-04)');
    expect(multi('removed-runtime').requestError).toBe('Runtime 2023-02 has been REMOVED: move the check to a current runtime (available: 2025-10, 2026-04)');
    expect(final('removed-runtime')).toMatchObject({ hasErrors: true });
  });
});

describe('outpost runtimes', () => {
  it('lists the runtimes with stage, whether installed, end of life, Node.js and whether they run PLAYWRIGHT suites', () => {
    const out = execFileSync(process.execPath, [MAIN, 'runtimes'], { env: cleanEnv({ RUNTIMES_DIR: run.runtimesDir }), encoding: 'utf8' });
    expect(out).toContain(`Runtimes in ${run.runtimesDir}:`);
    expect(out).toMatch(/2023-02\s+REMOVED\s+installed\s+end of life 01\/31\/2025\s+Node.js 18\n/);
    expect(out).toMatch(/2025-10\s+DEPRECATED\s+installed\s+end of life 10\/31\/2027\s+Node.js 20\n/);
    expect(out).toMatch(/2026-04\s+CURRENT\s+installed\s+end of life 04\/30\/2028\s+Node.js 24, @playwright\/test \(PLAYWRIGHT\)\n/);
  });
});
