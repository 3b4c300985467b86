// The dependency rule `npm run lint` enforces (test/lint/dependency-rule.ts):
// it passes on this tree and names what breaks it in a tree that does.

import { describe, expect, it } from 'vitest';
import { checkDependencies, cyclesOf } from '../lint/dependency-rule.js';
import { REPO } from '../support/agent-process.js';
import { useTempTrees } from '../support/temp-tree.js';

const tree = useTempTrees('outpost-layers-');

describe('the dependency rule', () => {
  it('holds for src/: no import against the layers, no cycle', () => {
    const { violations, cycles, modules } = checkDependencies(REPO);
    expect(violations).toEqual([]);
    expect(cycles).toEqual([]);
    expect(modules).toBeGreaterThan(80);
  });

  it('names an import from a lower layer to a higher one, a type-only one too', () => {
    const root = tree({
      'src/core/model.ts': "import type { Job } from '../jobs/queue.js';\nexport type X = Job;\n",
      'src/jobs/queue.ts': 'export type Job = string;\n',
    });
    expect(checkDependencies(root).violations).toEqual([
      { from: 'src/core/model.ts', to: 'src/jobs/queue.ts', rule: 'src/core/ is below src/jobs/: it must not import it' },
    ]);
  });

  it('refuses imports between peers and between check type folders, but lets the registry wire types in', () => {
    const root = tree({
      'src/control-plane/a.ts': "export { b } from '../local/b.js';\n",
      'src/local/b.ts': 'export const b = 1;\n',
      'src/checks/tcp/tcp.ts': "import { dns } from '../dns/dns.js';\nexport const tcp = dns;\n",
      'src/checks/dns/dns.ts': 'export const dns = 1;\n',
      'src/checks/registry.ts': "import { tcp } from './tcp/tcp.js';\nexport const all = [tcp];\n",
      'src/checks/executor.ts': "import { tcp } from './tcp/tcp.js';\nexport const one = tcp;\n",
    });
    const rules = checkDependencies(root).violations.map((v) => `${v.from} -> ${v.to}: ${v.rule}`);
    expect(rules.sort()).toEqual([
      'src/checks/executor.ts -> src/checks/tcp/tcp.ts: shared check modules do not import a check type\'s folder (only src/checks/registry.ts wires them in)',
      'src/checks/tcp/tcp.ts -> src/checks/dns/dns.ts: the check type folders tcp/ and dns/ do not import each other',
      'src/control-plane/a.ts -> src/local/b.ts: src/control-plane/ and src/local/ are peers: neither imports the other',
    ]);
  });

  it('finds cycles, a module importing itself included', () => {
    const graph = new Map([
      ['a', ['b']],
      ['b', ['c']],
      ['c', ['a']],
      ['d', ['d']],
      ['e', ['a']],
    ]);
    expect(cyclesOf(graph)).toEqual([['a', 'b', 'c'], ['d']]);
  });

  it('refuses a directory that is in no layer', () => {
    const root = tree({ 'src/new-thing/x.ts': "import { y } from '../core/y.js';\nexport const x = y;\n", 'src/core/y.ts': 'export const y = 1;\n' });
    expect(() => checkDependencies(root)).toThrow(/src\/new-thing\/ is in no layer/);
  });
});
