// Regex captures that are pieces of a secret (src/jobs/captures.ts): which
// are withheld, which are kept, and that the rest of `actual` is scrubbed.

import v8 from 'node:v8';
import vm from 'node:vm';
import { describe, expect, it } from 'vitest';
import { type Assertion, evaluate } from '../../src/checks/assertions/assertions.js';
import type { Outcome } from '../../src/core/outcome.js';
import { evaluateJsonPath } from '../../src/checks/assertions/jsonpath.js';
import type { CheckResultEntry } from '../../src/core/result-entry.js';
import { CAPTURE_WITHHELD, guardCaptures } from '../../src/jobs/captures.js';
import { scrubResult } from '../../src/secrets/policy.js';
import { REDACTED, Scrubber } from '../../src/secrets/scrubber.js';

const SECRET = 'K9zqVb7Lp2Xc4Nw8Rt0Hy';

const assertion = (regex: string | null, source = 'TEXT_BODY', property = ''): Assertion => ({ source, property, comparison: 'EQUALS', target: 'zzz', regex });

function outcomeOf(assertions: unknown[]): Outcome {
  return { startedAt: new Date(0), stoppedAt: new Date(0), responseTime: 1, assertionsFailed: false, member: 'apiCheckResult', detail: { assertions } };
}

const actualsOf = (outcome: Outcome) => (outcome.detail.assertions as Array<{ actual: unknown }>).map((a) => a.actual);

describe('guardCaptures', () => {
  const scrubber = Scrubber.of([SECRET]);

  it('withholds a capture that overlaps a secret in the text, whatever its length, and fails the assertion', () => {
    const body = `{"url":"/echo/x-tok:${SECRET}"}`;
    const pieces = [evaluate(assertion('x-tok:.{3}(.{3})'), body), evaluate(assertion('(/x-tok:.{10}.{10})'), body), evaluate(assertion('x-tok:(.)'), body)];
    const outcome = outcomeOf(pieces);
    guardCaptures(outcome, scrubber);
    expect(actualsOf(outcome)).toEqual([CAPTURE_WITHHELD, CAPTURE_WITHHELD, CAPTURE_WITHHELD]);
    expect(pieces.every((p) => !p.passed && /withheld/.test(p.error ?? ''))).toBe(true);
    expect(outcome.assertionsFailed).toBe(true);
  });

  it('keeps a short capture that merely also occurs in a secret, where no secret is in the text', () => {
    const outcome = outcomeOf([evaluate(assertion('piece=(\\w+)'), 'piece=p2xC4'), evaluate(assertion('v(\\d)'), 'v2')]);
    guardCaptures(outcome, scrubber);
    expect(actualsOf(outcome)).toEqual(['p2xC4', '2']);
  });

  it('withholds per JSONPath node, keeping the others', () => {
    const doc = { items: [{ t: `tok ${SECRET}` }, { t: 'tok plain-value' }] };
    const outcome = outcomeOf([evaluateJsonPath(assertion('tok (.{4})', 'JSON_BODY', '$.items[*].t'), doc)]);
    guardCaptures(outcome, scrubber);
    expect(actualsOf(outcome)).toEqual([[CAPTURE_WITHHELD, 'plai']]);
  });

  it('keeps no copy of the text of each node a JSONPath selects: a nested document costs its size, not size × depth', { timeout: 60_000 }, () => {
    v8.setFlagsFromString('--expose-gc');
    const gc = vm.runInNewContext('gc') as () => void;
    let doc: unknown = `${'x'.repeat(1_000_000)}${SECRET}`;
    for (let level = 0; level < 100; level++) doc = { name: doc };
    gc();
    const before = process.memoryUsage().heapUsed;
    const outcome = outcomeOf([evaluateJsonPath(assertion('"(x)', 'JSON_BODY', '$..name'), doc)]);
    gc();
    const retained = process.memoryUsage().heapUsed - before;
    // A JSON copy per level would be 100 MB; the result itself is a few bytes per node.
    expect(retained).toBeLessThan(20_000_000);
    guardCaptures(outcome, scrubber);
    // Every object node's text holds the secret, but no capture's match overlaps it: all are kept.
    expect(actualsOf(outcome)).toEqual([[...Array.from({ length: 99 }, () => 'x'), null]]);
  });

  it('withholds a capture from an object node by the node\'s JSON text', () => {
    const doc = { items: [{ t: `tok ${SECRET}` }, { t: 'tok plain-value' }] };
    const outcome = outcomeOf([evaluateJsonPath(assertion('tok (.{4})', 'JSON_BODY', '$.items[*]'), doc)]);
    guardCaptures(outcome, scrubber);
    expect(actualsOf(outcome)).toEqual([[CAPTURE_WITHHELD, 'plai']]);
  });

  it('keeps captures that hold no secret, and everything when the job has no secrets', () => {
    const kept = outcomeOf([evaluate(assertion('status (\\d+)'), `status 200 ${SECRET}`), evaluate(assertion(null), 'no regex')]);
    guardCaptures(kept, scrubber);
    expect(actualsOf(kept)).toEqual(['200', 'no regex']);
    const none = outcomeOf([evaluate(assertion('x-tok:(.{3})'), `x-tok:${SECRET}`)]);
    guardCaptures(none, new Scrubber());
    expect(actualsOf(none)).toEqual(['K9z']);
  });
});

describe('scrubResult', () => {
  it('scrubs assertions[].actual like every other string of a result', () => {
    const entry = { hasFailures: true, apiCheckResult: { assertions: [{ source: 'TEXT_BODY', actual: `body ${SECRET} end`, passed: false }] } } as unknown as CheckResultEntry;
    const out = scrubResult(entry, Scrubber.of([SECRET]));
    const assertions = (out.apiCheckResult?.assertions ?? []) as Array<{ actual: unknown }>;
    expect(assertions[0]?.actual).toBe(`body ${REDACTED} end`);
  });
});
