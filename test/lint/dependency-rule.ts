// The dependency rule of src/ (docs/architecture.md "Layers"), checked by
// `npm run lint`: a module imports only from its own layer or the layers
// below it, a check type's folder imports no other check type's, and no
// import cycle exists, type-only imports included. Run by Node directly
// (type stripping), so it uses erasable TypeScript only.

import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** Layers from the bottom up; directories in one entry are peers that must not import each other. */
export const LAYERS: readonly (readonly string[])[] = [
  ['core'],
  ['observability'],
  ['net', 'health'],
  ['results', 'store'],
  ['secrets'],
  ['artifacts'],
  ['diagnostics'],
  ['checks'],
  ['jobs'],
  ['control-plane', 'local', 'server'],
  // The entry points and the wiring of each mode: src/*.ts.
  ['.'],
];

/** Imports between check type folders that are allowed, and why. */
export const ALLOWED_BETWEEN_CHECK_TYPES: ReadonlyMap<string, string> = new Map([
  ['http -> scripted', "an API check's setup and teardown scripts run on the scripted checks' runner"],
]);

/** Modules of src/checks/ (outside the type folders) that may import the type folders: the one place types are wired in. */
const CHECKS_WIRING = new Set(['src/checks/registry.ts']);

/** Folders of src/checks/ that are shared by the check types rather than one type. */
const CHECKS_SHARED_FOLDERS = new Set(['assertions']);

export interface Violation {
  from: string;
  to: string;
  rule: string;
}

const IMPORT = /(?:^|[\s;])(?:import|export)\s[^'"`;]*?from\s*['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)|^\s*import\s*['"]([^'"]+)['"]/gm;

function sourceFiles(dir: string): string[] {
  const found: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) found.push(...sourceFiles(full));
    else if (/\.(ts|cts|mts)$/.test(entry.name) && !entry.name.endsWith('.d.ts')) found.push(full);
  }
  return found;
}

/** The repository-relative files a module imports from src/ (relative specifiers only; packages are not layers). */
export function importsOf(file: string, text: string, root: string): string[] {
  const targets: string[] = [];
  for (const match of text.matchAll(IMPORT)) {
    const specifier = match[1] ?? match[2] ?? match[3];
    if (!specifier?.startsWith('.')) continue;
    const resolved = path.resolve(path.dirname(path.join(root, file)), specifier).replace(/\.(c|m)?js$/, '.$1ts');
    targets.push(path.relative(root, resolved));
  }
  return targets;
}

function layerOf(file: string): string {
  const parts = file.split('/');
  return parts.length > 2 ? (parts[1] as string) : '.';
}

function rankOf(layer: string): number {
  const rank = LAYERS.findIndex((group) => group.includes(layer));
  if (rank === -1) throw new Error(`src/${layer}/ is in no layer: add it to LAYERS in test/lint/dependency-rule.ts and to docs/architecture.md`);
  return rank;
}

/** The check type folder of a module under src/checks/<type>/, if it is in one. */
function checkTypeOf(file: string): string | undefined {
  const parts = file.split('/');
  if (parts[1] !== 'checks' || parts.length < 4) return undefined;
  const folder = parts[2] as string;
  return CHECKS_SHARED_FOLDERS.has(folder) ? undefined : folder;
}

function layerViolation(from: string, to: string): string | undefined {
  const [fromLayer, toLayer] = [layerOf(from), layerOf(to)];
  if (fromLayer === toLayer) return undefined;
  const [fromRank, toRank] = [rankOf(fromLayer), rankOf(toLayer)];
  if (toRank > fromRank) return `src/${fromLayer === '.' ? '' : `${fromLayer}/`} is below src/${toLayer === '.' ? '' : `${toLayer}/`}: it must not import it`;
  if (toRank === fromRank) return `src/${fromLayer}/ and src/${toLayer}/ are peers: neither imports the other`;
  return undefined;
}

function checkTypeViolation(from: string, to: string): string | undefined {
  const [fromType, toType] = [checkTypeOf(from), checkTypeOf(to)];
  if (layerOf(from) !== 'checks' || layerOf(to) !== 'checks' || toType === undefined || fromType === toType) return undefined;
  if (fromType === undefined) {
    return CHECKS_WIRING.has(from) ? undefined : `shared check modules do not import a check type's folder (only ${[...CHECKS_WIRING].join(', ')} wires them in)`;
  }
  if (ALLOWED_BETWEEN_CHECK_TYPES.has(`${fromType} -> ${toType}`)) return undefined;
  return `the check type folders ${fromType}/ and ${toType}/ do not import each other`;
}

/** Strongly connected components of more than one module (or a module importing itself): the import cycles. */
export function cyclesOf(graph: ReadonlyMap<string, readonly string[]>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const cycles: string[][] = [];
  let next = 0;
  // Iterative Tarjan: the graph is small, but recursion depth should not depend on it.
  for (const start of graph.keys()) {
    if (index.has(start)) continue;
    const work: Array<{ node: string; edges: readonly string[]; at: number }> = [];
    const visit = (node: string) => {
      index.set(node, next);
      low.set(node, next);
      next++;
      stack.push(node);
      onStack.add(node);
      work.push({ node, edges: graph.get(node) ?? [], at: 0 });
    };
    visit(start);
    while (work.length > 0) {
      const frame = work[work.length - 1] as { node: string; edges: readonly string[]; at: number };
      if (frame.at < frame.edges.length) {
        const target = frame.edges[frame.at++] as string;
        if (!graph.has(target)) continue;
        if (!index.has(target)) visit(target);
        else if (onStack.has(target)) low.set(frame.node, Math.min(low.get(frame.node) as number, index.get(target) as number));
        continue;
      }
      work.pop();
      const parent = work[work.length - 1];
      if (parent) low.set(parent.node, Math.min(low.get(parent.node) as number, low.get(frame.node) as number));
      if (low.get(frame.node) === index.get(frame.node)) {
        const component: string[] = [];
        let member: string;
        do {
          member = stack.pop() as string;
          onStack.delete(member);
          component.push(member);
        } while (member !== frame.node);
        if (component.length > 1 || frame.edges.includes(frame.node)) cycles.push(component.sort());
      }
    }
  }
  return cycles;
}

/** Every violation of the rule in `root`/src. */
export function checkDependencies(root: string): { violations: Violation[]; cycles: string[][]; modules: number } {
  const graph = new Map<string, string[]>();
  for (const full of sourceFiles(path.join(root, 'src'))) {
    const file = path.relative(root, full);
    graph.set(file, importsOf(file, readFileSync(full, 'utf8'), root).filter((target) => target.startsWith('src/')));
  }
  const violations: Violation[] = [];
  for (const [from, targets] of graph) {
    for (const to of targets) {
      const rule = layerViolation(from, to) ?? checkTypeViolation(from, to);
      if (rule) violations.push({ from, to, rule });
    }
  }
  return { violations, cycles: cyclesOf(graph), modules: graph.size };
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
  const { violations, cycles, modules } = checkDependencies(root);
  for (const v of violations) console.error(`${v.from} imports ${v.to}: ${v.rule}`);
  for (const cycle of cycles) console.error(`import cycle: ${cycle.join(' -> ')}`);
  if (violations.length > 0 || cycles.length > 0) {
    console.error(`dependency rule: ${violations.length} violation(s), ${cycles.length} cycle(s) (docs/architecture.md "Layers")`);
    process.exit(1);
  }
  console.log(`dependency rule: ${modules} modules, no import against the layers, no cycle`);
}
