// Runtime records with each of the service's six stages, and runtimeEndOfLife:
// which runtimes a check may run on (src/checks/scripted/runtimes.ts), and the
// jobLog lines a run on them starts with.

import { describe, expect, it } from 'vitest';
import {
  endOfLifeDate,
  isRemoved,
  listRuntimes,
  RUNTIME_STAGES,
  readRuntime,
  resolveRuntime,
  RuntimeError,
  runtimeNotices,
  usableRuntimeNames,
} from '../../src/checks/scripted/runtimes.js';
import { useTempTrees } from '../support/temp-tree.js';

const tree = useTempTrees('outpost-runtime-stages-');
const NOW = new Date('2026-11-24T12:00:00Z');

function record(name: string, stage: string, runtimeEndOfLife = '12/31/2030'): Record<string, string> {
  return {
    [`${name}/runtime.json`]: JSON.stringify({ name, stage, multiStepSupport: true, nodeJsVersion: '24', runtimeEndOfLife, description: 'a test runtime', dependencies: {} }),
    [`${name}/node_modules/.keep`]: '',
  };
}

function resolveError(runtimeId: string | undefined, dir: string): string {
  try {
    resolveRuntime(runtimeId, dir, NOW);
  } catch (error) {
    expect(error).toBeInstanceOf(RuntimeError);
    return (error as Error).message;
  }
  throw new Error(`${runtimeId} resolved`);
}

describe('runtime stages', () => {
  it('reads a record with each of the six stages, and refuses another stage naming all six', () => {
    const dir = tree({ ...Object.assign({}, ...RUNTIME_STAGES.map((stage, i) => record(`2026-0${i + 1}`, stage))), ...record('2020-01', 'GAMMA') });
    const { runtimes, problems } = listRuntimes(dir);
    expect(runtimes.map((r) => r.stage)).toEqual(['ALPHA', 'BETA', 'CURRENT', 'DEPRECATED', 'REMOVED', 'STABLE']);
    expect(problems).toEqual([`${dir}/2020-01/runtime.json: stage must be one of ALPHA, BETA, CURRENT, DEPRECATED, REMOVED, STABLE`]);
  });

  it('runs on ALPHA, BETA, CURRENT, DEPRECATED and STABLE runtimes, with a line for the preview and deprecated ones', () => {
    const dir = tree({ ...record('a', 'ALPHA'), ...record('b', 'BETA'), ...record('c', 'CURRENT'), ...record('d', 'DEPRECATED'), ...record('s', 'STABLE') });
    const notices = (id: string) => runtimeNotices(resolveRuntime(id, dir, NOW), NOW);
    expect(notices('a')).toEqual(['Runtime a is ALPHA: a preview, whose packages may still change before it becomes STABLE']);
    expect(notices('b')).toEqual(['Runtime b is BETA: a preview, whose packages may still change before it becomes STABLE']);
    expect(notices('c')).toEqual([]);
    expect(notices('s')).toEqual([]);
    expect(notices('d')).toEqual(['Runtime d is DEPRECATED (end of life 12/31/2030)']);
    // Without a runtimeId: the CURRENT one, not a STABLE or a preview one.
    expect(resolveRuntime(undefined, dir, NOW).name).toBe('c');
  });

  it('refuses a REMOVED runtime as before', () => {
    const dir = tree({ ...record('c', 'CURRENT'), ...record('r', 'REMOVED') });
    expect(resolveError('r', dir)).toBe('Runtime r has been REMOVED: move the check to a current runtime (available: c)');
  });

  it('treats a runtime whose end of life has come as REMOVED, whatever its stage, with a clear error', () => {
    const dir = tree({ ...record('c', 'CURRENT'), ...record('old', 'DEPRECATED', '11/23/2026'), ...record('today', 'STABLE', '11/24/2026'), ...record('tomorrow', 'BETA', '11/25/2026') });
    expect(resolveError('old', dir)).toBe(
      'Runtime old reached its end of life on 11/23/2026 and is treated as REMOVED: move the check to a current runtime (available: c, tomorrow)',
    );
    // The record's date is the day it is removed.
    expect(resolveError('today', dir)).toMatch(/^Runtime today reached its end of life on 11\/24\/2026 and is treated as REMOVED/);
    expect(resolveRuntime('tomorrow', dir, NOW).name).toBe('tomorrow');
  });

  it('advertises neither REMOVED runtimes nor those past their end of life', () => {
    const dir = tree({ ...record('a', 'ALPHA'), ...record('s', 'STABLE'), ...record('r', 'REMOVED'), ...record('old', 'CURRENT', '01/31/2020') });
    expect(usableRuntimeNames(dir)).toEqual(['a', 's']);
  });

  it('warns in the jobLog within 30 days of the end of life, not before', () => {
    const dir = tree({ ...record('soon', 'CURRENT', '11/25/2026'), ...record('month', 'STABLE', '12/24/2026'), ...record('later', 'STABLE', '12/25/2026'), ...record('dep', 'DEPRECATED', '12/01/2026') });
    const notices = (id: string) => runtimeNotices(resolveRuntime(id, dir, NOW), NOW);
    expect(notices('soon')).toEqual(['Runtime soon reaches its end of life on 11/25/2026 (in 1 day): from then on checks on it are refused; move them to a current runtime']);
    expect(notices('month')).toEqual(['Runtime month reaches its end of life on 12/24/2026 (in 30 days): from then on checks on it are refused; move them to a current runtime']);
    expect(notices('later')).toEqual([]);
    expect(notices('dep')).toEqual([
      'Runtime dep is DEPRECATED (end of life 12/01/2026)',
      'Runtime dep reaches its end of life on 12/01/2026 (in 7 days): from then on checks on it are refused; move them to a current runtime',
    ]);
  });

  it('reads runtimeEndOfLife as month/day/year and refuses a record whose date is not one', () => {
    expect(endOfLifeDate('04/30/2028')?.toISOString()).toBe('2028-04-30T00:00:00.000Z');
    expect(endOfLifeDate('4/3/2028')?.toISOString()).toBe('2028-04-03T00:00:00.000Z');
    for (const bad of ['30/04/2028', '2028-04-30', '02/30/2027', '13/01/2027', '04/30/28', '']) expect(endOfLifeDate(bad), bad).toBeNull();
    const dir = tree({ ...record('x', 'CURRENT', '2028-04-30') });
    expect(readRuntime(`${dir}/x`)).toBe(`${dir}/x/runtime.json: runtimeEndOfLife must be a month/day/year date such as 04/30/2028`);
    // A record without one has no end of life.
    const none = tree({ 'y/runtime.json': JSON.stringify({ name: 'y', stage: 'CURRENT', dependencies: {} }) });
    const runtime = readRuntime(`${none}/y`);
    expect(typeof runtime !== 'string' && runtime.endOfLife).toBeNull();
    expect(typeof runtime !== 'string' && isRemoved(runtime, NOW)).toBe(false);
  });
});
