// ChecksFileReloader (src/checks-file-reload.ts): a reload whose apply fails
// part way leaves the process in a state nobody knows, so the next event
// applies the file again, even a text equal to the one applied before.

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
});
