// The agent's configuration is read in one place: src/config.ts turns the
// environment into a Config, and everything else is handed what it needs.
// A `process.env` anywhere else under src/ would be a setting that escapes
// its validation (a bad value must be a one-line error and exit 78).

import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const SRC = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../src');

/** Files that may read process.env, and why. */
const ALLOWED: ReadonlyMap<string, string> = new Map([
  ['config.ts', 'reads the environment into a Config'],
  ['cli.ts', 'hands process.env to config.ts'],
]);

/** Folders whose files run in another process (a script's), reading the environment the agent gave that process. */
const CHILD_PROCESS_FOLDERS = ['checks/scripted/harness/'];

function files(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    return entry.isDirectory() ? files(full) : [full];
  });
}

describe('configuration boundary', () => {
  it('reads process.env only in src/config.ts (and cli.ts, which hands it over)', () => {
    const readers = files(SRC)
      .map((file) => path.relative(SRC, file).split(path.sep).join('/'))
      .filter((file) => /\.(c|m)?(t|j)s$/.test(file) && !ALLOWED.has(file))
      .filter((file) => !CHILD_PROCESS_FOLDERS.some((folder) => file.startsWith(folder)))
      .filter((file) => readFileSync(path.join(SRC, file), 'utf8').includes('process.env'));
    expect(readers, 'read the setting in src/config.ts and pass it down').toEqual([]);
  });
});
