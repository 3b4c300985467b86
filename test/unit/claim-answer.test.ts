// A claim answer that is not valid JSON is read job by job: the good jobs
// run, a bad one with a readable id gets an error result.

import { describe, expect, it } from 'vitest';
import { MAX_NESTING, parseClaimAnswerLeniently } from '../../src/control-plane/claim-answer.js';

const job = (id: string, extra = '') => `{"id":"${id}","leaseExpiresAt":"2030-01-01T00:00:00.000Z","check":{"id":"c-${id}","checkType":"URL","request":{"url":"http://x/"}}${extra}}`;

describe('parseClaimAnswerLeniently', () => {
  it('keeps the good jobs and names the bad one by id when one job holds a bare NaN', () => {
    const text = `{"jobs":[${job('a')},${job('b', ',"attempt":NaN')},${job('c')}]}`;
    expect(() => JSON.parse(text)).toThrow();
    const answer = parseClaimAnswerLeniently(text);
    expect(answer?.jobs.map((j) => (j as { id: string }).id)).toEqual(['a', 'c']);
    expect(answer?.unreadable).toEqual([{ id: 'b', leaseExpiresAt: '2030-01-01T00:00:00.000Z', problem: expect.stringMatching(/^job is not valid JSON: Unexpected token/) }]);
    expect(answer?.lost).toBe(0);
  });

  it('follows strings, escapes and nesting: brackets and quotes inside strings do not count', () => {
    const tricky = `{"id":"t","check":{"name":"a \\"quoted\\" ] } [ { name, with \\\\ backslash","list":[[1,{"x":[]}],{}]}}`;
    const text = ` { "other" : {"jobs":"not these"} , "jobs" : [ ${tricky} , {"id":"bad","x":[1,2,Infinity]} ] , "after": true } `;
    const answer = parseClaimAnswerLeniently(text);
    expect(answer?.jobs).toEqual([JSON.parse(tricky)]);
    expect(answer?.unreadable.map((u) => u.id)).toEqual(['bad']);
  });

  it('counts a bad job without a readable id as lost, and keeps the others', () => {
    const answer = parseClaimAnswerLeniently(`{"jobs":[${job('a')},{"id":NaN},{"id":"x\\q"},[NaN]]}`);
    expect(answer?.jobs).toHaveLength(1);
    expect(answer?.unreadable).toEqual([]);
    expect(answer?.lost).toBe(3);
  });

  it.each([
    ['not an object', '[1,2]'],
    ['no jobs', '{"work":[]}'],
    ['jobs not an array', '{"jobs":{}}'],
    ['unbalanced brackets', `{"jobs":[${job('a')},{"id":"b","x":[}]}`],
    ['an unterminated string', '{"jobs":[{"id":"a]}'],
    ['cut short', `{"jobs":[${job('a')},`],
    ['the fault the fake control plane injects', '{"jobs": [this is not json'],
    ['empty', ''],
  ])('gives null (malformed as a whole) for %s', (_label, text) => {
    expect(parseClaimAnswerLeniently(text)).toBeNull();
  });

  it('is bounded in nesting, without recursion', () => {
    const deep = `{"jobs":[{"id":"d","x":${'['.repeat(MAX_NESTING + 1)}${']'.repeat(MAX_NESTING + 1)},"y":NaN}]}`;
    expect(parseClaimAnswerLeniently(deep)).toBeNull();
    const fine = `{"jobs":[{"id":"d","x":${'['.repeat(10_000)}${']'.repeat(10_000)},"y":NaN}]}`;
    expect(parseClaimAnswerLeniently(fine)?.unreadable.map((u) => u.id)).toEqual(['d']);
  });

  it('reads an empty jobs array', () => {
    expect(parseClaimAnswerLeniently('{"jobs":[ ]}')).toEqual({ jobs: [], unreadable: [], lost: 0 });
  });
});
