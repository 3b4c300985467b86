// Secrets in what a script prints and saves (the real agent in once mode,
// test/support/scripted-run.ts): output scrubbed (also a secret a pipe chunk
// splits), only the job's variables and the service environment given to the
// script, text artifacts scrubbed whatever their name, a binary one holding a
// secret left out.

import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { AGENT_SECRET, type Asset, SECRET_TOKEN, useScriptedRun } from '../support/scripted-run.js';

const run = useScriptedRun(() => {
  return [
    {
      id: 'prints-secrets',
      checkType: 'MULTI_STEP',
      script: `console.log('token ' + environment.API_TOKEN + ' agent ' + process.env.OUTPOST_SECRET_AGENT);\nconsole.error('env ' + Object.keys(process.env).sort().join(','));`,
    },
    { id: 'prints-split-secret', checkType: 'MULTI_STEP', script: `process.stdout.write('a'.repeat(65535) + environment.UMLAUT_SECRET + '\\n');` },
    {
      id: 'artifacts-by-content',
      checkType: 'MULTI_STEP',
      script: `const fs = require('node:fs');
fs.writeFileSync(artifact('notes.md'), '# token ' + environment.API_TOKEN + '\\n');
fs.writeFileSync(artifact('data'), 'token=' + environment.API_TOKEN);
fs.writeFileSync(artifact('blob.bin'), Buffer.concat([Buffer.from([0, 1, 2]), Buffer.from(environment.API_TOKEN)]));
fs.writeFileSync(artifact('clean.bin'), Buffer.from([0, 1, 2, 3]));
fs.writeFileSync(artifact('bom.csv'), '\\ufeffa,b\\n');`,
    },
  ];
});
const { final, multi } = run;

describe('secrets in what a script prints and saves', () => {
  it('scrubs secrets a script prints, and gives it only its variables and the service environment', () => {
    const log = multi('prints-secrets').jobLog;
    expect(log[0]).toBe('token ***** agent *****');
    expect(run.stdout).not.toContain(SECRET_TOKEN);
    expect(run.stdout).not.toContain(AGENT_SECRET);
    expect(run.stderr).not.toContain(SECRET_TOKEN);
    const env = (log.find((l) => l.startsWith('env ')) ?? '').slice(4).split(',');
    expect(env).toEqual(expect.arrayContaining(['API_TOKEN', 'BASE', 'OUTPOST', 'OUTPOST_SECRET_AGENT', 'NODE_PATH']));
    for (const name of ['PATH', 'UNRELATED_AGENT_SETTING', 'RUNTIMES_DIR', 'SCRIPT_MEMORY_MB', 'JOB_CONCURRENCY', 'CI']) expect(env).not.toContain(name);
  });

  it('scrubs a secret whose first character a pipe chunk split in two', () => {
    const log = multi('prints-split-secret').jobLog.join('\n');
    expect(log).not.toContain('geheim-5150');
    expect(log).toContain('*****');
  });

  it("scrubs text artifacts whatever their name, and leaves out a binary one holding a secret", () => {
    const list = (final('artifacts-by-content').multiStepCheckResult as unknown as { jobAssets: Asset[] }).jobAssets;
    expect(list.map((a) => [a.name, a.contentType])).toEqual([
      ['bom.csv', 'text/csv'],
      ['clean.bin', 'application/octet-stream'],
      ['data', 'text/plain'],
      ['notes.md', 'text/plain'],
    ]);
    // A byte-order mark stays.
    expect(readFileSync(fileURLToPath(list[0]?.url ?? '')).subarray(0, 3)).toEqual(Buffer.from([0xef, 0xbb, 0xbf]));
    expect(readFileSync(fileURLToPath(list[2]?.url ?? ''), 'utf8')).toBe('token=*****');
    expect(readFileSync(fileURLToPath(list[3]?.url ?? ''), 'utf8')).toBe('# token *****\n');
    expect(multi('artifacts-by-content').jobLog).toContain("Artifact blob.bin was left out: it holds one of the job's secrets and is not text, so it cannot be scrubbed");
  });
});
