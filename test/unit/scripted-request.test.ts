// A PLAYWRIGHT check's `script` and `files` (src/checks/scripted/executors.ts): where they may sit, and every
// way a file list is refused, each naming its field; scripted checks' largest maxResponseTime.

import { describe, expect, it } from 'vitest';
import { parseCheck } from '../../src/checks/parse-definition.js';
import type { Executor } from '../../src/checks/executor.js';
import { ExecutorRegistry } from '../../src/checks/executor-registry.js';
import { DefinitionError, Fields } from '../../src/checks/fields.js';
import { multiStepExecutor, parseSuiteRequest, playwrightExecutor } from '../../src/checks/scripted/executors.js';

function parse(check: Record<string, unknown>) {
  const root = Fields.root(check, '$');
  const request = parseSuiteRequest(root.object('request'), root);
  root.assertValid();
  return request;
}

/** The problems a definition error lists, `path: problem` each; none when `run` succeeds. */
function problemsOf(run: () => unknown): string[] {
  try {
    run();
  } catch (error) {
    if (error instanceof DefinitionError) return error.issues.map((i) => `${i.path}: ${i.problem}`);
    throw error;
  }
  return [];
}

const problems = (check: Record<string, unknown>) => problemsOf(() => parse(check));

describe('PLAYWRIGHT check files', () => {
  it('takes script and files at check level or in request', () => {
    const files = [{ path: 'helpers/pages.ts', content: 'export {}' }];
    expect(parse({ script: 'test', files, runtimeId: '2026-04' })).toEqual({ script: 'test', runtimeId: '2026-04', files });
    expect(parse({ request: { script: 'test', files } })).toEqual({ script: 'test', files });
    expect(parse({ script: 'test' })).toEqual({ script: 'test' });
  });

  it('refuses paths that leave the suite, hidden files, the spec name, repeats and wrong shapes, naming each', () => {
    expect(
      problems({
        script: 'x',
        files: [
          { path: '../escape.ts', content: '' },
          { path: '/etc/passwd', content: '' },
          { path: '.env', content: '' },
          { path: 'a/b/c/d/e/f.ts', content: '' },
          { path: 'check.spec.ts', content: '' },
          { path: 'ok.ts', content: '' },
          { path: 'ok.ts', content: '' },
          { path: 'no-content.ts' },
          'just a string',
        ],
      }),
    ).toEqual([
      '$.files[8]: must be an object (got "just a string")',
      '$.files[0].path: must be a relative path of plain names (letters, digits, . _ -; not starting with a dot; at most 5 levels), got "../escape.ts"',
      '$.files[1].path: must be a relative path of plain names (letters, digits, . _ -; not starting with a dot; at most 5 levels), got "/etc/passwd"',
      '$.files[2].path: must be a relative path of plain names (letters, digits, . _ -; not starting with a dot; at most 5 levels), got ".env"',
      '$.files[3].path: must be a relative path of plain names (letters, digits, . _ -; not starting with a dot; at most 5 levels), got "a/b/c/d/e/f.ts"',
      '$.files[4].path: check.spec.ts is the spec that `script` becomes',
      '$.files[6].path: ok.ts is given twice',
      '$.files[7].content: is required',
      '$.files[8].path: is required',
      '$.files[8].content: is required',
    ]);
  });

  it('refuses a file that would sit inside another file', () => {
    expect(
      problems({
        script: 'x',
        files: [
          { path: 'a/b.ts', content: '' },
          { path: 'a', content: '' },
          { path: 'check.spec.ts/x.ts', content: '' },
          { path: 'lib/ok.ts', content: '' },
          { path: 'lib/more/ok.ts', content: '' },
        ],
      }),
    ).toEqual([
      '$.files[0].path: a/b.ts puts a file inside a, which is a file of the suite',
      '$.files[2].path: check.spec.ts/x.ts puts a file inside check.spec.ts, which is a file of the suite',
    ]);
  });

  it('bounds the number of files and their size', () => {
    const many = Array.from({ length: 51 }, (_, i) => ({ path: `f${i}.ts`, content: '' }));
    expect(problems({ script: 'x', files: many })).toEqual(['$.files: must have at most 50 files (got 51)']);
    const big = Array.from({ length: 6 }, (_, i) => ({ path: `f${i}.ts`, content: 'x'.repeat(900_000) }));
    expect(problems({ script: 'x', files: big })).toEqual(['$.files: must hold at most 5000000 characters in all (got 5400000)']);
    expect(problems({ files: [] })).toEqual(['$.script: is required']);
  });
});

describe('scripted checks: maxResponseTime', () => {
  const registry = new ExecutorRegistry([multiStepExecutor as Executor, playwrightExecutor as Executor]);
  const issues = (raw: unknown) => problemsOf(() => parseCheck(raw, '$', registry));

  it('allows at most the 240 s a script may run (the queue cap above it is for the teardown)', () => {
    for (const checkType of ['MULTI_STEP', 'PLAYWRIGHT']) {
      expect(issues({ id: 'a', checkType, script: 'x', maxResponseTime: 240_000 })).toEqual([]);
      expect(issues({ id: 'a', checkType, script: 'x', maxResponseTime: 240_001 })).toEqual(['$.maxResponseTime: must be between 0 and 240000 ms (got 240001)']);
    }
  });
});
