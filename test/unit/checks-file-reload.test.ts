// ChecksFileReloader (src/checks-file-reload.ts): a reload whose apply fails
// part way leaves the process in a state nobody knows, so the next event
// applies the file again, even a text equal to the one applied before; and
// requests made while a reload runs join one waiting reload.

import { writeFileSync } from 'node:fs';
import path from 'node:path';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { ChecksFileReloader } from '../../src/checks-file-reload.js';
import { tempDir } from '../support/agent-process.js';

describe('ChecksFileReloader', () => {
  it('applies the file again after an apply that failed, even when its text is the one applied before', async () => {
    const file = path.join(tempDir(), 'checks.json');
    writeFileSync(file, 'A');
    const applied: string[] = [];
    let failNext = false;
    const reloader = new ChecksFileReloader({
      file,
      logger: pino({ level: 'silent' }),
      initialText: 'A',
      parse: (text) => ({ text, ignoredFields: [] }),
      apply: async ({ text }) => {
        if (failNext) {
          failNext = false;
          throw new Error('the database failed after the locations were synced');
        }
        applied.push(text);
        return 1;
      },
    });
    // Unchanged: nothing to do.
    expect(await reloader.reload('file change')).toMatchObject({ ok: true, unchanged: true });
    writeFileSync(file, 'B');
    failNext = true;
    expect(await reloader.reload('file change')).toMatchObject({ ok: false, status: 500 });
    // The operator puts the old file back: part of B may be in force, so A is applied, not skipped as unchanged.
    writeFileSync(file, 'A');
    expect(await reloader.reload('file change')).toEqual({ ok: true, checks: 1 });
    expect(applied).toEqual(['A']);
    // Once applied, the same text is unchanged again.
    expect(await reloader.reload('file change')).toMatchObject({ ok: true, unchanged: true });
    reloader.close();
  });

  it('coalesces requests: while one reload runs, every further request joins one waiting reload that starts after them', async () => {
    const { file, reloader, applied, release, applying } = gatedReloader((count) => count);
    const first = reloader.reload('POST /-/reload');
    await applying(1);
    expect(applied).toEqual(['A']);
    // Asked while A is being applied: these must see a reload that reads the file after they asked.
    writeFileSync(file, 'B');
    const later = Array.from({ length: 1_000 }, () => reloader.reload('POST /-/reload'));
    release();
    expect(await first).toEqual({ ok: true, checks: 1 });
    await applying(2);
    expect(applied).toEqual(['A', 'B']);
    release();
    const outcomes = await Promise.all(later);
    expect(new Set(outcomes.map((o) => JSON.stringify(o)))).toEqual(new Set([JSON.stringify({ ok: true, checks: 2 })]));
    expect(applied).toEqual(['A', 'B']);
    // Idle again: the next request starts at once.
    const next = reloader.reload('SIGHUP');
    await applying(3);
    release();
    expect(await next).toEqual({ ok: true, checks: 3 });
    reloader.close();
  });

  it('a SIGHUP or POST that joins a waiting file-change reload applies the file even when its text is unchanged', async () => {
    const { reloader, applied, release, applying } = gatedReloader(() => 1);
    const first = reloader.reload('SIGHUP');
    await applying(1);
    const change = reloader.reload('file change');
    const post = reloader.reload('POST /-/reload');
    release();
    await first;
    await applying(2);
    release();
    expect(await post).toEqual({ ok: true, checks: 1 });
    expect(await change).toEqual({ ok: true, checks: 1 });
    expect(applied).toEqual(['A', 'A']);
    reloader.close();
  });
});

/**
 * A reloader on a file holding "A" whose every apply waits for `release()`; `applying(n)` resolves once the
 * n-th apply has begun (a deadline, not a fixed sleep: the file is read first, slowly on a busy machine).
 */
function gatedReloader(checks: (count: number) => number) {
  const file = path.join(tempDir(), 'checks.json');
  writeFileSync(file, 'A');
  const applied: string[] = [];
  let open: () => void = () => undefined;
  const reloader = new ChecksFileReloader({
    file,
    logger: pino({ level: 'silent' }),
    initialText: 'A',
    parse: (text) => ({ text, ignoredFields: [] }),
    apply: async ({ text }) => {
      applied.push(text);
      await new Promise<void>((resolve) => {
        open = resolve;
      });
      return checks(applied.length);
    },
  });
  const applying = async (n: number) => {
    const deadline = Date.now() + 10_000;
    while (applied.length < n) {
      if (Date.now() > deadline) throw new Error(`apply ${n} did not begin within 10 s (${applied.length} so far)`);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  };
  return { file, reloader, applied, release: () => open(), applying };
}
