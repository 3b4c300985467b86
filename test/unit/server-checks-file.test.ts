// A server's checks file (docs/server.md): private locations and each
// check's locations, every problem listed with its path.

import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ChecksFileError, parseChecksFile, parseServerChecksFile } from '../../src/checks/checks-file.js';
import { definitionRegistry } from '../../src/checks/registry.js';
import { REPO } from '../support/agent-process.js';

const registry = definitionRegistry();
const url = (id: string, extra: Record<string, unknown> = {}) => ({ id, checkType: 'URL', request: { url: 'http://127.0.0.1:9/' }, ...extra });

function problems(file: unknown): string[] {
  try {
    parseServerChecksFile(JSON.stringify(file), 'checks.json', registry);
  } catch (error) {
    if (error instanceof ChecksFileError) return error.problems;
    throw error;
  }
  throw new Error('the file was accepted');
}

describe("a server's checks file", () => {
  it("accepts docs/server.md's example: a check without locations runs in every location", () => {
    const doc = readFileSync(path.join(REPO, 'docs/server.md'), 'utf8');
    const example = /```json\n([\s\S]*?)```/.exec(doc)?.[1] as string;
    const { checks, privateLocations } = parseServerChecksFile(example, 'server.md', registry);
    expect(privateLocations).toEqual([
      { id: 'lab', name: 'Lab network' },
      { id: 'dmz', name: 'DMZ' },
    ]);
    expect(checks.map((c) => [c.check.id, c.locations])).toEqual([
      ['intranet', ['lab']],
      ['dns', ['lab', 'dmz']],
    ]);
  });

  it('needs at least one private location', () => {
    expect(problems({ checks: [url('a')] })).toEqual([
      '$.privateLocations: is required in server mode: at least one private location ({"id": "lab", "name": "Lab network"})',
    ]);
  });

  it('lists every problem of the locations and of the checks, with paths', () => {
    const found = problems({
      privateLocations: [{ id: 'lab', name: 'Lab' }, { id: 'Lab_2', name: 'x' }, { id: 'lab', name: 'again' }, { name: 'no id' }],
      checks: [url('a', { locations: ['lab', 'nowhere'] }), url('b', { locations: [] }), url('c', { locations: 'lab' }), { id: 'd', checkType: 'URL' }],
    });
    expect(found).toEqual(
      expect.arrayContaining([
        '$.privateLocations[1].id: must be lowercase letters, digits and dashes, starting and ending with a letter or digit',
        '$.privateLocations[2].id: "lab" is already used by another location',
        '$.privateLocations[3].id: is required',
        '$.checks[0].locations[1]: must be the id of a location in $.privateLocations (lab)',
        '$.checks[1].locations: must be an array of 1 to 100 location ids, or left out to run in every location',
        '$.checks[2].locations: must be an array of 1 to 100 location ids, or left out to run in every location',
      ]),
    );
    expect(found.some((p) => p.includes('$.checks[3].request'))).toBe(true);
  });

  it('is still a valid file for local mode, which ignores the locations', () => {
    const text = JSON.stringify({ privateLocations: [{ id: 'lab', name: 'Lab' }], checks: [url('a', { locations: ['lab'] })] });
    expect(parseChecksFile(text, 'checks.json', registry).map((c) => c.check.id)).toEqual(['a']);
  });
});

describe('a local checks file (the implied location)', () => {
  const local = { id: 'local', name: 'This machine' };

  it('needs no privateLocations, and a check without locations runs in the implied one only', () => {
    expect(parseServerChecksFile(JSON.stringify({ checks: [url('a')] }), 'checks.json', registry, local)).toMatchObject({
      privateLocations: [local],
      checks: [{ locations: ['local'] }],
    });
    const { checks, privateLocations } = parseServerChecksFile(
      JSON.stringify({ privateLocations: [{ id: 'lab', name: 'Lab' }], checks: [url('a'), url('b', { locations: ['lab', 'local'] }), url('c', { locations: ['lab'] })] }),
      'checks.json',
      registry,
      local,
    );
    expect(privateLocations).toEqual([{ id: 'lab', name: 'Lab' }, local]);
    expect(checks.map((c) => [c.check.id, c.locations])).toEqual([
      ['a', ['local']],
      ['b', ['lab', 'local']],
      ['c', ['lab']],
    ]);
  });
});
