// Deeply nested untrusted values are described, evaluated and prepared
// without recursion: an error naming the field, never a RangeError.

import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { evaluate } from '../../src/checks/assertions/assertions.js';
import { DefinitionError, Fields } from '../../src/checks/fields.js';
import { MAX_DEFINITION_DEPTH, MAX_DOCUMENT_DEPTH, nestedDeeperThan } from '../../src/core/json-depth.js';
import { queryJsonPath } from '../../src/checks/assertions/jsonpath.js';
import { defaultRegistry } from '../../src/checks/registry.js';
import type { Job } from '../../src/core/protocol.js';
import { prepareJob } from '../../src/jobs/prepare.js';

/** `depth` arrays around 'x', built by JSON.parse as a job or a body would be. */
function nested(depth: number): unknown {
  return JSON.parse(`${'['.repeat(depth)}"x"${']'.repeat(depth)}`);
}

describe('nestedDeeperThan', () => {
  it('measures depth without recursion, up to 100,000 levels', () => {
    expect(nestedDeeperThan('x', 0)).toBe(false);
    expect(nestedDeeperThan([], 0)).toBe(true);
    expect(nestedDeeperThan([], 1)).toBe(false);
    expect(nestedDeeperThan({ a: [{ b: 1 }] }, 3)).toBe(false);
    expect(nestedDeeperThan({ a: [{ b: 1 }] }, 2)).toBe(true);
    expect(nestedDeeperThan(nested(100_000), MAX_DOCUMENT_DEPTH)).toBe(true);
    expect(nestedDeeperThan(nested(MAX_DOCUMENT_DEPTH), MAX_DOCUMENT_DEPTH)).toBe(false);
  });

  it('takes a cycle as too deep instead of looping', () => {
    const cycle: Record<string, unknown> = {};
    cycle.self = cycle;
    expect(nestedDeeperThan(cycle, 10)).toBe(true);
  });
});

describe('a deeply nested value', () => {
  it('in a definition is described by its depth, naming the field', () => {
    const fields = Fields.root({ name: nested(10_000), id: 'x' }, 'check');
    fields.string('name');
    expect(() => fields.assertValid()).toThrow(DefinitionError);
    expect(fields.issues).toEqual([{ path: 'check.name', problem: `must be a string (got a value nested deeper than ${MAX_DEFINITION_DEPTH} levels)` }]);
  });

  it('as an assertion value fails the assertion with the reason', () => {
    const outcome = evaluate({ source: 'JSON_BODY', property: '', comparison: 'CONTAINS', target: 'x', regex: null }, nested(50_000));
    expect(outcome).toMatchObject({ passed: false, actual: null, error: `the value is nested deeper than ${MAX_DOCUMENT_DEPTH} levels` });
    expect(JSON.stringify(outcome)).toContain('nested deeper');
  });

  it('as a JSONPath document is an error, not a stack overflow', () => {
    expect(queryJsonPath(nested(50_000), '$..x')).toEqual({ ok: false, error: `cannot evaluate JSONPath "$..x": the document is nested deeper than ${MAX_DOCUMENT_DEPTH} levels` });
    expect(queryJsonPath(nested(100), '$[0][0]')).toMatchObject({ ok: true });
  });
});

describe('prepareJob', () => {
  const logger = pino({ level: 'silent' });
  const registry = defaultRegistry();

  it('turns a check nested 10,000 deep in its name into an error naming the field', () => {
    const job = { id: 'j', leaseExpiresAt: '', check: { id: 'c', checkType: 'URL', name: nested(10_000), request: { url: 'http://x/' } } } as Job;
    expect(prepareJob(job, registry, logger).invalid).toBe(
      `Invalid check definition: check.name: must be a string (got a value nested deeper than ${MAX_DEFINITION_DEPTH} levels)`,
    );
  });

  it('never throws: whatever breaks while preparing becomes the job error', () => {
    const job = {
      id: 'j',
      leaseExpiresAt: '',
      get check(): unknown {
        throw new TypeError('boom');
      },
    } as unknown as Job;
    const prepared = prepareJob(job, registry, logger);
    expect(prepared).toMatchObject({ jobId: 'j', invalid: 'Invalid job: it could not be prepared (TypeError: boom)' });
    expect(prepared.runnable).toBeUndefined();
  });
});
