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
  ['main.ts', 'hands process.env to config.ts'],
  // Text of the script's child process, never evaluated in the agent: the child reads the environment the agent gave it.
  ['checks/scripted/harness.ts', "the harness's source, run in the script's own process"],
]);

function files(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    return entry.isDirectory() ? files(full) : [full];
  });
}

describe('configuration boundary', () => {
  it('reads process.env only in src/config.ts (and main.ts, which hands it over)', () => {
    const readers = files(SRC)
      .map((file) => path.relative(SRC, file).split(path.sep).join('/'))
      // Files that are not TypeScript (a harness kept as .cjs) run in a script's process, not the agent.
      .filter((file) => file.endsWith('.ts') && !ALLOWED.has(file))
      .filter((file) => readFileSync(path.join(SRC, file), 'utf8').includes('process.env'));
    expect(readers, 'read the setting in src/config.ts and pass it down').toEqual([]);
  });
});
