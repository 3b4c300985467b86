// The result size limit (MAX_RESULT_BYTES): sizes measured as serialized JSON
// (a NUL byte is six characters there), what is cut first, what the result
// says about it, and how a memory lease bounds what a result may keep.

import { describe, expect, it } from 'vitest';
import type { Outcome } from '../../src/core/outcome.js';
import { MemoryBudget } from '../../src/core/memory-budget.js';
import { buildResult } from '../../src/results/result.js';
import type { CheckResultEntry } from '../../src/core/result-entry.js';
import { capResultSize, jsonPrefix, jsonStringBytes, structureBytes } from '../../src/results/result-size.js';
import { mulberry32 } from '../support/random.js';

const MIB = 1024 * 1024;
const identity = { checkRunId: 1, sequenceId: 'seq', runLocation: 'here' };
const thresholds = { degradedResponseTime: 10_000, maxResponseTime: 20_000, shouldFail: false };

function apiResult(body: string, jobLog: string[] = ['Connected to 127.0.0.1:80'], extra: Record<string, unknown> = {}): CheckResultEntry {
  const now = new Date('2026-01-01T00:00:00.000Z');
  const outcome: Outcome = {
    startedAt: now,
    stoppedAt: now,
    responseTime: 12,
    assertionsFailed: false,
    member: 'apiCheckResult',
    detail: {
      assertions: [],
      request: { method: 'GET', url: 'http://target.test/' },
      response: { status: 200, statusText: 'OK', headers: {}, body, bodySize: body.length, bodyTruncated: false },
      requestError: null,
      jobLog,
      ...extra,
    },
  };
  return buildResult(outcome, thresholds, identity, { id: 'c', name: 'big', checkType: 'API' });
}

const size = (entry: CheckResultEntry) => Buffer.byteLength(JSON.stringify(entry));
const detail = (entry: CheckResultEntry) =>
  entry.apiCheckResult as { response: { body: string; bodyTruncated: boolean }; jobLog: string[]; resultTruncated?: boolean };

describe('jsonStringBytes and jsonPrefix', () => {
  const samples = [
    '',
    'plain ascii',
    '\u0000\u0001\u001f',
    '\b\f\n\r\t',
    '"quoted" \\ back',
    'ü é ß',
    '€ 中文',
    '😀 pair',
    'lone high \ud800 end',
    'lone low \udc00 end',
    '\ud83d',
    '\u007f del',
  ];

  it('measures exactly what JSON.stringify writes, in UTF-8 bytes', () => {
    for (const text of samples) expect(jsonStringBytes(text), JSON.stringify(text)).toBe(Buffer.byteLength(JSON.stringify(text)));
    let random = '';
    for (let i = 0; i < 5000; i++) random += String.fromCharCode(Math.floor(Math.random() * 0x10000));
    expect(jsonStringBytes(random)).toBe(Buffer.byteLength(JSON.stringify(random)));
  });

  it('counts a NUL as six bytes: 1 MiB of NULs is 6 MiB of JSON', () => {
    expect(jsonStringBytes('\u0000'.repeat(MIB))).toBe(6 * MIB + 2);
  });

  it('cuts to the longest start that fits, never inside a surrogate pair', () => {
    const text = 'ab😀cd';
    for (let bytes = 2; bytes <= 12; bytes++) {
      const prefix = jsonPrefix(text, bytes);
      expect(text.startsWith(prefix)).toBe(true);
      expect(jsonStringBytes(prefix)).toBeLessThanOrEqual(bytes);
      expect(prefix).not.toMatch(/[\ud800-\udbff]$/);
    }
    expect(jsonPrefix(text, 5)).toBe('ab');
    expect(jsonPrefix(text, 8)).toBe('ab😀');
    expect(jsonPrefix('\u0000\u0000', 13)).toBe('\u0000');
  });
});

describe('capResultSize', () => {
  it('leaves a result under the limit as it is', () => {
    const entry = apiResult('small body');
    const before = JSON.stringify(entry);
    expect(JSON.stringify(capResultSize(entry, 64 * 1024))).toBe(before);
  });

  it('cuts a 10 MiB NUL body (60 MiB as JSON) to fit, and says what and how large it was', () => {
    const entry = capResultSize(apiResult('\u0000'.repeat(10 * MIB)), 4 * MIB);
    expect(size(entry)).toBeLessThanOrEqual(4 * MIB);
    expect(size(entry)).toBeGreaterThan(4 * MIB - 8 * 1024);
    const d = detail(entry);
    expect(d.response.bodyTruncated).toBe(true);
    expect(d.resultTruncated).toBe(true);
    expect(d.response.body.length).toBeGreaterThan(600_000);
    const note = d.jobLog.at(-1) as string;
    expect(note).toMatch(/^result truncated to fit MAX_RESULT_BYTES \(4194304 bytes\): it was 629\d{5} bytes as JSON; apiCheckResult\.response\.body cut to \d+ of 10485760 characters$/);
    expect(d.jobLog[0]).toBe('Connected to 127.0.0.1:80');
  });

  it('cuts the biggest strings first, down to one common size, the body before others of its size', () => {
    const line = 'x'.repeat(100_000);
    const other = 'y'.repeat(100_000);
    const first = capResultSize(apiResult('b'.repeat(300_000), [line], { note: other }), 400_000);
    expect(size(first)).toBeLessThanOrEqual(400_000);
    expect(detail(first).jobLog[0]).toBe(line);
    expect((first.apiCheckResult as { note: string }).note).toBe(other);
    expect(detail(first).response.body.length).toBeGreaterThan(150_000);
    expect(detail(first).response.body.length).toBeLessThan(300_000);

    const second = capResultSize(apiResult('b'.repeat(300_000), [line], { note: other }), 150_000);
    expect(size(second)).toBeLessThanOrEqual(150_000);
    const lengths = [detail(second).response.body.length, (detail(second).jobLog[0] as string).length, (second.apiCheckResult as { note: string }).note.length];
    expect(Math.max(...lengths) - Math.min(...lengths)).toBeLessThanOrEqual(1);
    expect(lengths[0]).toBeGreaterThan(40_000);
    expect(detail(second).jobLog.at(-1)).toMatch(/as JSON; apiCheckResult\.response\.body cut to \d+ of 300000 characters; /);
  });

  it('does not keep a copy of the body whole while cutting the body (a TEXT_BODY actual value)', () => {
    const body = 'a'.repeat(3 * MIB);
    const entry = capResultSize(apiResult(body, [], { assertions: [{ source: 'TEXT_BODY', actual: body, passed: true }] }), 4 * MIB);
    expect(size(entry)).toBeLessThanOrEqual(4 * MIB);
    const actual = (entry.apiCheckResult as { assertions: Array<{ actual: string }> }).assertions[0]?.actual ?? '';
    expect(Math.abs(detail(entry).response.body.length - actual.length)).toBeLessThanOrEqual(1);
    expect(detail(entry).response.body.length).toBeGreaterThan(1.9 * MIB);
  });

  it('drops the last of many short jobLog lines when cutting long strings is not enough, and says how many', () => {
    const lines = Array.from({ length: 50_000 }, (_, i) => `line ${i} of the script's output`);
    const entry = capResultSize(apiResult('', lines), 256 * 1024);
    expect(size(entry)).toBeLessThanOrEqual(256 * 1024);
    const log = detail(entry).jobLog;
    expect(log[0]).toBe('line 0 of the script\'s output');
    expect(log.at(-1)).toMatch(/the last \d+ jobLog lines dropped$/);
  });

  it('drops the details, keeping what says so, when many small parts alone are too large', () => {
    const assertions = Array.from({ length: 20_000 }, (_, i) => ({ source: 'TEXT_BODY', property: '', target: String(i), passed: true }));
    const entry = capResultSize(apiResult('', [], { assertions }), 64 * 1024);
    expect(size(entry)).toBeLessThanOrEqual(64 * 1024);
    expect(entry.apiCheckResult).toEqual({
      requestError: null,
      // Not measured whole: no cut of strings could make 20,000 assertions fit.
      jobLog: ['result truncated to fit MAX_RESULT_BYTES (65536 bytes): it was more than 65536 bytes without its long strings as JSON; its details were dropped'],
      resultTruncated: true,
    });
    expect(entry.hasFailures).toBe(false);
  });

  it('counts a result without long strings exactly as JSON.stringify writes it, so one that fits keeps its details', () => {
    const random = mulberry32(20261124);
    const pick = <T>(items: T[]) => items[Math.floor(random() * items.length)] as T;
    const value = (depth: number): unknown => {
      const kind = random();
      if (depth > 4 || kind < 0.3) return pick<unknown>(['', 'a', 'é"\\\n', '\u2028', '\ud83d\ude00', 0, -1.5, 1e21, Number.NaN, true, false, null, undefined]);
      if (kind < 0.65) return Array.from({ length: Math.floor(random() * 5) }, () => value(depth + 1));
      return Object.fromEntries(Array.from({ length: Math.floor(random() * 5) }, (_, i) => [pick(['k', 'ké', 'a"b', `${i}`]), value(depth + 1)]));
    };
    for (let n = 0; n < 2_000; n++) {
      const v = value(0);
      const json = JSON.stringify(v);
      if (json === undefined) continue;
      expect(structureBytes(v, Number.POSITIVE_INFINITY), json).toBe(Buffer.byteLength(json));
    }
    // The reviewer's case: 800 small arrays, 3,426 bytes as a result, fit 4,096 and keep their details.
    const assertions = [{ source: 'JSON_BODY', property: '$[*]', comparison: 'NOT_NULL', target: '', actual: Array.from({ length: 800 }, () => [1]), passed: true }];
    const entry = apiResult('', [], { assertions });
    const bytes = size(entry);
    expect(bytes).toBeLessThan(4_096);
    expect(capResultSize(entry, 4_096).apiCheckResult).toMatchObject({ assertions });
  });

  it('drops the details of a result whose parts share subtrees, without serializing it: its JSON would pass V8’s longest string', () => {
    // A JSONPath like $..n selects each level of a nested document, and each holds every level below it.
    const leaf = Array.from({ length: 10_000 }, () => 1);
    let level: Record<string, unknown> = { a: leaf, n: 1 };
    const levels = [level];
    for (let i = 1; i < 250; i++) {
      level = { a: leaf, n: level };
      levels.push(level);
    }
    // About 625 MB as JSON: JSON.stringify throws 'Invalid string length' on it.
    expect(() => JSON.stringify(levels)).toThrow(RangeError);
    const assertions = [{ source: 'JSON_BODY', property: '$..n', comparison: 'NOT_NULL', target: '', actual: levels, passed: true }];
    const entry = capResultSize(apiResult('', [], { assertions }), 4 * MIB);
    expect(entry.apiCheckResult).toEqual({
      requestError: null,
      jobLog: ['result truncated to fit MAX_RESULT_BYTES (4194304 bytes): it was more than 4194304 bytes without its long strings as JSON; its details were dropped'],
      resultTruncated: true,
    });
  });

  it('keeps no more than the memory lease holds or can take, says so, and leaves the lease holding what the result keeps', () => {
    const budget = new MemoryBudget(2 * MIB);
    const others = budget.lease();
    others.take(2 * MIB - 300 * 1024);
    const lease = budget.lease();
    // The body was kept within the budget as bytes: 300 KiB of NULs, 1.8 MiB as JSON, which the budget has no room for.
    expect(lease.take(300 * 1024)).toBe(300 * 1024);
    const entry = capResultSize(apiResult('\u0000'.repeat(300 * 1024)), 4 * MIB, lease);
    // What the lease holds, plus the 64 KiB of long strings any result may keep uncharged.
    expect(size(entry)).toBeLessThanOrEqual(300 * 1024 + 64 * 1024);
    expect(detail(entry).jobLog.at(-1)).toMatch(/and the agent's memory budget for response bodies, which other checks were using: it was \d+ bytes as JSON/);
    expect(lease.bytes).toBeLessThanOrEqual(300 * 1024);
    expect(budget.inUseBytes).toBe(others.bytes + lease.bytes);
  });

  it('gives a lease back what a small result does not need, and never cuts a small result for memory', () => {
    const budget = new MemoryBudget(MIB);
    budget.lease().take(MIB);
    const lease = new MemoryBudget(MIB).lease();
    lease.take(1000);
    const entry = apiResult('a'.repeat(1000));
    const before = JSON.stringify(entry);
    expect(JSON.stringify(capResultSize(entry, 64 * 1024, lease))).toBe(before);
    expect(lease.bytes).toBe(0);
    const starved = budget.lease();
    expect(JSON.stringify(capResultSize(apiResult('a'.repeat(1000)), 64 * 1024, starved))).not.toContain('result truncated');
  });
});
