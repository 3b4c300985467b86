// A seeded fuzz of check definitions through the real parser (parseCheck with
// the real executors) and of claimed jobs through prepareJob. Cases grow from
// valid examples (docs/examples/checks.json and one request of each type) by
// mutation: wrong types, missing and huge fields, prototype keys, NaN and
// infinities, bad URLs, unicode and NUL, nesting 10,000 deep, thousands of
// assertions, hostile regular expressions and JSONPaths. Each case must give a
// check or a DefinitionError whose every problem names a field under `check`;
// anything else, a case that takes too long, or memory that keeps growing fails
// the test with the seed.
//
// FUZZ_CASES (default 3000) sets the number of cases, FUZZ_SEED the seed, and
// FUZZ_CASE runs one case of a seed alone. `npm test` uses a fixed seed, so a
// landing never depends on the clock; `FUZZ_SEED=random` (and the long
// benchmark, BENCH_LONG=1) explores with a seed from the clock.

import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { parseCheck } from '../../src/checks/parse-definition.js';
import type { Executor } from '../../src/checks/executor.js';
import { DefinitionError } from '../../src/checks/fields.js';
import { defaultRegistry } from '../../src/checks/registry.js';
import { browserExecutor, multiStepExecutor, playwrightExecutor } from '../../src/checks/scripted/executors.js';
import type { Job } from '../../src/core/protocol.js';
import { prepareJob } from '../../src/jobs/prepare.js';
import { REPO } from '../support/agent-process.js';
import { mulberry32 } from '../support/random.js';

function envInteger(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isSafeInteger(value) || value < 0) throw new Error(`${name}=${raw} must be a non-negative integer`);
  return value;
}

const CASES = envInteger('FUZZ_CASES', 3000);
/** The seed `npm test` runs; new seeds are explored with FUZZ_SEED=random. */
const FIXED_SEED = 20_261_124;
const SEED = process.env.FUZZ_SEED === 'random' ? Date.now() % 2 ** 32 : envInteger('FUZZ_SEED', FIXED_SEED);
const ONLY = process.env.FUZZ_CASE ? envInteger('FUZZ_CASE', 0) : undefined;
/** A case taking longer than this is taken as a hang (parsing is microseconds to milliseconds). */
const CASE_LIMIT_MS = 5_000;
/** Growth of the heap over the run that counts as unbounded. */
const HEAP_GROWTH_LIMIT = 512 * 1024 * 1024;

type Random = () => number;
const pick = <T>(random: Random, list: readonly T[]): T => list[Math.floor(random() * list.length)] as T;

// Registry: the agent's own, with the scripted executors whatever this machine has installed (parsing needs no runtime).
const base = defaultRegistry();
const registry = base.with(multiStepExecutor as Executor).with(browserExecutor as Executor).with(playwrightExecutor as Executor);

const EXAMPLES: unknown[] = [
  ...(JSON.parse(readFileSync(`${REPO}/docs/examples/checks.json`, 'utf8')) as { checks: unknown[] }).checks,
  {
    id: 'api',
    name: 'API',
    checkType: 'API',
    frequency: 60,
    degradedResponseTime: 1000,
    maxResponseTime: 5000,
    retryStrategy: { type: 'EXPONENTIAL', maxRetries: 2, baseBackoffSeconds: 1, maxDurationSeconds: 60, onlyOn: 'NETWORK_ERROR' },
    environmentVariables: [{ key: 'TOKEN', value: 'secret-token', secret: true }],
    request: {
      method: 'POST',
      url: 'https://api.example.com/items?x={{TOKEN}}',
      headers: [{ key: 'x-a', value: 'b' }],
      queryParameters: [{ key: 'q', value: 'v' }],
      body: '{"a":1}',
      bodyType: 'JSON',
      basicAuth: { username: 'u', password: 'p' },
      followRedirects: true,
      skipSSL: false,
      ipFamily: 'IPv4',
    },
    assertions: [
      { source: 'STATUS_CODE', comparison: 'EQUALS', target: '200' },
      { source: 'JSON_BODY', property: '$.items[?search(@.name, "^a.c$")].id', comparison: 'NOT_EMPTY', target: '' },
      { source: 'TEXT_BODY', comparison: 'EQUALS', target: 'x', regex: '"token":"([^"]+)"' },
      { source: 'HEADERS', property: 'content-type', comparison: 'CONTAINS', target: 'json' },
      { source: 'RESPONSE_TIME', comparison: 'LESS_THAN', target: 500 },
    ],
  },
  {
    id: 'tcp',
    checkType: 'TCP',
    request: { hostname: '127.0.0.1', port: 25, data: 'HELO x\r\n', readLimitBytes: 1024, idleTimeoutMs: 500, ipFamily: 'IPv4' },
    assertions: [{ source: 'RESPONSE_DATA', comparison: 'EQUALS', target: '220', regex: '^(\\d{3})' }],
  },
  {
    id: 'dns',
    checkType: 'DNS',
    request: { query: 'example.com', recordType: 'A', nameServer: '1.1.1.1', port: 53, protocol: 'UDP' },
    assertions: [
      { source: 'RESPONSE_CODE', comparison: 'EQUALS', target: 'NOERROR' },
      { source: 'JSON_ANSWER', property: '$.Answer[*].data', comparison: 'NOT_EMPTY' },
    ],
  },
  {
    id: 'icmp',
    checkType: 'ICMP',
    request: { hostname: '127.0.0.1', pingCount: 3, ipFamily: 'IPv4' },
    assertions: [
      { source: 'LATENCY', property: 'avg', comparison: 'LESS_THAN', target: '100' },
      { source: 'JSON_RESPONSE', property: '$.packetsReceived', comparison: 'GREATER_THAN', target: '0' },
    ],
  },
  { id: 'ms', checkType: 'MULTI_STEP', runtimeId: '2026-04', script: "await step('a', async () => {})" },
  { id: 'br', checkType: 'BROWSER', script: 'await page.goto("https://example.com")' },
  { id: 'pw', checkType: 'PLAYWRIGHT', script: "test('t', async () => {})", files: [{ path: 'helpers/a.ts', content: 'export const a = 1;' }] },
  { id: 'hb', checkType: 'HEARTBEAT' },
];

/** Built once: JSON.parse makes any depth; the parser must cope with it wherever it sits. */
const DEEP_ARRAY: unknown = JSON.parse(`${'['.repeat(10_000)}1${']'.repeat(10_000)}`);
const DEEP_OBJECT: unknown = JSON.parse(`${'{"a":'.repeat(10_000)}1${'}'.repeat(10_000)}`);
const HUGE = 'x'.repeat(200_000);

const HOSTILE_REGEXES = [
  '^(a+)+$',
  '(a|aa)+$',
  '(.*a){12}',
  '(a)\\1',
  '(?<=a)b',
  '(?=a)',
  '\\k<x>(?<x>a)',
  '[',
  '\\',
  '(?<n>a)(?<n>b)',
  'a{17}',
  'a{1,99999}',
  'x{99999}{9}',
  '\\p{L}+',
  '\u0000',
  '(?:'.repeat(2_000),
  'a'.repeat(300_000),
];

const HOSTILE_PATHS = [
  "$[?search(@, '(a+)+$')]",
  "$[?match(@.a, '(a)\\\\1')]",
  '$[?match(@.a, @.b)]',
  "$[?search(@.a, '\\p{L}')]",
  '$..*',
  `$${'[0]'.repeat(5_000)}`,
  `$[?${'('.repeat(5_000)}@${')'.repeat(5_000)}]`,
  `$[?${'!'.repeat(5_000)}@]`,
  '$[',
  '$.__proto__',
  '$.constructor.prototype',
  '',
  '\u0000',
];

const HOSTILE_STRINGS = [
  '',
  ' ',
  '\u0000',
  'a\u0000b',
  '\uD800',
  '😀'.repeat(1_000),
  'é',
  HUGE,
  '__proto__',
  'constructor',
  'toString',
  'http://',
  'http://[::1',
  'javascript:alert(1)',
  'file:///etc/passwd',
  'ftp://example.com/',
  ' http://a b/',
  `http://${'a'.repeat(300)}.example/`,
  'http://user:pa ss@host/',
  'https://xn--/',
  '{{UNDEFINED_VAR}}',
  '{{',
  '127.0.0.1:53',
  '::1',
  '999.999.999.999',
  '-1',
  'NaN',
  ...HOSTILE_REGEXES,
  ...HOSTILE_PATHS,
];

const HOSTILE_NUMBERS = [0, -0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY, 2 ** 53, -(2 ** 31), 1e308, 5e-324];

function hostileValue(random: Random): unknown {
  switch (Math.floor(random() * 9)) {
    case 0:
      return pick(random, HOSTILE_STRINGS);
    case 1:
      return pick(random, HOSTILE_NUMBERS);
    case 2:
      return pick(random, [null, undefined, true, false]);
    case 3:
      return pick(random, [[], {}, [1, 'a'], { a: 1 }, [[[]]], [null]]);
    case 4:
      return pick(random, [DEEP_ARRAY, DEEP_OBJECT]);
    case 5:
      return withOwn({}, pick(random, ['__proto__', 'constructor', 'prototype']), pick(random, [{ polluted: true }, 'x', null]));
    case 6:
      return pick(random, HOSTILE_REGEXES);
    case 7:
      return pick(random, HOSTILE_PATHS);
    default:
      return Math.floor(random() * 1_000_000) - 1_000;
  }
}

/** Sets an own, enumerable property, even `__proto__` (as JSON.parse would). */
function withOwn(target: Record<string, unknown>, key: string, value: unknown): Record<string, unknown> {
  Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
  return target;
}

/** A plain deep copy of the JSON-like parts (shares the big prebuilt values). */
function copy(value: unknown): unknown {
  if (value === DEEP_ARRAY || value === DEEP_OBJECT || value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) return value.map(copy);
  const out: Record<string, unknown> = {};
  for (const [key, child] of Object.entries(value)) withOwn(out, key, copy(child));
  return out;
}

/** Every container in `value` (the prebuilt deep values not entered), with the way to reach it. */
function containers(value: unknown, found: Array<Record<string, unknown> | unknown[]> = []): Array<Record<string, unknown> | unknown[]> {
  if (value === null || typeof value !== 'object' || value === DEEP_ARRAY || value === DEEP_OBJECT) return found;
  found.push(value as Record<string, unknown> | unknown[]);
  for (const child of Object.values(value)) containers(child, found);
  return found;
}

const FIELD_NAMES = [
  'id',
  'name',
  'checkType',
  'frequency',
  'maxResponseTime',
  'degradedResponseTime',
  'shouldFail',
  'assertions',
  'request',
  'retryStrategy',
  'environmentVariables',
  'url',
  'method',
  'headers',
  'body',
  'bodyType',
  'hostname',
  'port',
  'query',
  'recordType',
  'nameServer',
  'pingCount',
  'script',
  'files',
  'runtimeId',
  'regex',
  'property',
  'source',
  'comparison',
  'target',
  'key',
  'value',
  'secret',
  '__proto__',
  'constructor',
];

function mutate(random: Random, root: Record<string, unknown>): void {
  const all = containers(root);
  const target = pick(random, all);
  const kind = random();
  if (Array.isArray(target)) {
    if (kind < 0.1 && target.length > 0) {
      // Thousands of copies of one element (thousands of assertions, headers, files …).
      const one = target[0];
      const n = 1_000 + Math.floor(random() * 2_000);
      for (let i = 0; i < n; i++) target.push(copy(one));
    } else if (kind < 0.4 && target.length > 0) {
      target[Math.floor(random() * target.length)] = hostileValue(random);
    } else if (kind < 0.6) {
      target.push(hostileValue(random));
    } else if (target.length > 0) {
      target.splice(Math.floor(random() * target.length), 1);
    }
    return;
  }
  const keys = Object.keys(target);
  if (kind < 0.5 && keys.length > 0) {
    withOwn(target, pick(random, keys), hostileValue(random));
  } else if (kind < 0.7 && keys.length > 0) {
    delete target[pick(random, keys)];
  } else {
    withOwn(target, pick(random, FIELD_NAMES), hostileValue(random));
  }
}

function makeCase(seed: number, index: number): { check: unknown; job: Job } {
  const random = mulberry32((seed ^ Math.imul(index + 1, 0x9e3779b1)) >>> 0);
  const check = copy(pick(random, EXAMPLES)) as Record<string, unknown>;
  // Some cases stay valid; the others get one to five mutations (the root itself sometimes).
  const mutations = random() < 0.1 ? 0 : 1 + Math.floor(random() * 5);
  for (let i = 0; i < mutations; i++) mutate(random, check);
  const root = random() < 0.03 ? hostileValue(random) : check;
  const job = {
    id: `job-${index}`,
    leaseExpiresAt: random() < 0.9 ? new Date(0).toISOString() : hostileValue(random),
    checkRunId: random() < 0.9 ? index : hostileValue(random),
    sequenceId: random() < 0.9 ? 'seq' : hostileValue(random),
    triggerSource: random() < 0.9 ? 'SCHEDULER' : hostileValue(random),
    runLocation: random() < 0.9 ? 'here' : hostileValue(random),
    environmentVariables: random() < 0.8 ? [{ key: 'K', value: 'v' }] : [hostileValue(random), { key: hostileValue(random), value: 'v' }],
    check: root,
  } as Job;
  return { check: root, job };
}

function preview(value: unknown): string {
  try {
    const text = JSON.stringify(value, (_key, v: unknown) => {
      if (v === DEEP_ARRAY) return '<array nested 10,000 deep>';
      if (v === DEEP_OBJECT) return '<object nested 10,000 deep>';
      if (typeof v === 'string' && v.length > 100) return `<${v.length} characters: ${v.slice(0, 40)}...>`;
      if (Array.isArray(v) && v.length > 5) return [...v.slice(0, 3), `<and ${v.length - 3} more>`];
      return v;
    });
    return (text ?? String(value)).slice(0, 600);
  } catch (error) {
    return `<unprintable: ${(error as Error).message}>`;
  }
}

/** One case through parseCheck and prepareJob; a string says what went wrong. */
function runCase(check: unknown, job: Job, logger: pino.Logger): string | null {
  try {
    const { check: parsed, executor } = parseCheck(check, 'check', registry);
    const target = executor.target(parsed.request);
    if (typeof target !== 'string') return `executor.target gave ${typeof target}`;
  } catch (error) {
    if (!(error instanceof DefinitionError)) return `parseCheck threw ${(error as Error)?.name}: ${(error as Error)?.message}\n${(error as Error)?.stack}`;
    if (error.issues.length === 0) return 'a DefinitionError without issues';
    for (const issue of error.issues) {
      if (!/^check(\.|\[|$)/.test(issue.path) || issue.problem.length === 0) return `an issue that names no field under check: ${JSON.stringify(issue)}`;
    }
  }
  const prepared = prepareJob(job, registry, logger);
  if (!prepared.runnable && !prepared.invalid) return 'prepareJob gave neither a runnable job nor an error';
  if (prepared.invalid?.startsWith('Invalid job: it could not be prepared')) return `prepareJob caught an unexpected exception: ${prepared.invalid}`;
  // The message lists at most MAX_LISTED_ISSUES problems, each with a value described in at most 60 characters.
  if (prepared.invalid && prepared.invalid.length > 20_000) return `an error message of ${prepared.invalid.length} characters`;
  return null;
}

describe('fuzzing check definitions and claimed jobs', () => {
  it('the unmutated examples are valid (so that mutations reach past the first check)', () => {
    for (const example of EXAMPLES) {
      // Heartbeats are the service's: the agent refuses them by design.
      if ((example as { checkType: string }).checkType === 'HEARTBEAT') continue;
      expect(() => parseCheck(copy(example), 'check', registry), preview(example)).not.toThrow();
    }
  });

  it(`${ONLY === undefined ? CASES : 1} cases yield a check or an error naming a field (FUZZ_SEED=${SEED})`, { timeout: 600_000 }, async () => {
    const logger = pino({ level: 'silent' });
    // Written at once, not at the end: a case that never returns would otherwise leave no seed behind.
    process.stderr.write(`fuzz-definitions: FUZZ_SEED=${SEED} FUZZ_CASES=${CASES}${ONLY === undefined ? '' : ` FUZZ_CASE=${ONLY}`}\n`);
    const heapAtStart = process.memoryUsage().heapUsed;
    let heapPeak = heapAtStart;
    const indexes = ONLY === undefined ? Array.from({ length: CASES }, (_, i) => i) : [ONLY];
    for (const index of indexes) {
      const { check, job } = makeCase(SEED, index);
      const started = performance.now();
      const problem = runCase(check, job, logger);
      const took = performance.now() - started;
      const failure = problem ?? (took > CASE_LIMIT_MS ? `took ${Math.round(took)} ms (limit ${CASE_LIMIT_MS} ms)` : null);
      if (failure) {
        throw new Error(`fuzz case failed; reproduce with FUZZ_SEED=${SEED} FUZZ_CASE=${index}\n${failure}\ncase: ${preview(check)}`);
      }
      if (index % 100 === 99) {
        heapPeak = Math.max(heapPeak, process.memoryUsage().heapUsed);
        // Let timers (the test timeout among them) run between batches.
        await new Promise((resolve) => setImmediate(resolve));
      }
    }
    expect(({} as Record<string, unknown>).polluted, `Object.prototype was polluted (FUZZ_SEED=${SEED})`).toBeUndefined();
    expect(heapPeak - heapAtStart, `heap grew by ${Math.round((heapPeak - heapAtStart) / 2 ** 20)} MB (FUZZ_SEED=${SEED})`).toBeLessThan(HEAP_GROWTH_LIMIT);
  });
});
