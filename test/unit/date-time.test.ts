// src/core/date-time.ts: RFC 3339 date-times as a result's startedAt must be
// written, and the relaxed forms a maintenance window may use; every field's
// range checked rather than rolled over by Date.

import { describe, expect, it } from 'vitest';
import { parseDateTime } from '../../src/core/date-time.js';

const iso = (text: string, relaxed = false) => {
  const ms = parseDateTime(text, { relaxed });
  return ms === undefined ? undefined : new Date(ms).toISOString();
};

describe('parseDateTime', () => {
  it('takes RFC 3339 date-times, offsets converted, and only those when strict', () => {
    expect(iso('2026-11-24T01:18:11Z')).toBe('2026-11-24T01:18:11.000Z');
    expect(iso('2026-11-24t01:18:11.123456789+01:00')).toBe('2026-11-24T00:18:11.123Z');
    expect(iso('2026-11-24T01:18:11-00:00')).toBe('2026-11-24T01:18:11.000Z');
    for (const loose of ['2026', '2026-11-24', '2026-11-24T01:18Z', '2026-11-24T01:18:11', 'Nov 24 2026', '2026-11-24 01:18:11Z']) expect(iso(loose), loose).toBeUndefined();
  });

  it('takes a date alone, no seconds and no offset (UTC) when relaxed', () => {
    expect(iso('2026-11-24', true)).toBe('2026-11-24T00:00:00.000Z');
    expect(iso('2026-11-24T02:00', true)).toBe('2026-11-24T02:00:00.000Z');
    expect(iso('2026-11-24T02:00:30', true)).toBe('2026-11-24T02:00:30.000Z');
  });

  it('refuses what does not exist instead of rolling it over', () => {
    for (const impossible of ['2026-02-29', '2026-02-30', '2026-13-01', '2026-04-31', '2026-01-00', '2026-01-01T24:00', '2026-01-01T23:60', '2026-01-01T23:59:60', '2026-01-01T00:00+24:00']) {
      expect(iso(impossible, true), impossible).toBeUndefined();
    }
    expect(iso('2024-02-29', true)).toBe('2024-02-29T00:00:00.000Z');
  });

  it('reads a year from 0000 to 0099 as written, not as 1900–1999', () => {
    expect(iso('0000-01-01', true)).toBe('0000-01-01T00:00:00.000Z');
    expect(iso('0050-03-01', true)).toBe('0050-03-01T00:00:00.000Z');
    expect(iso('0099-02-29', true)).toBeUndefined();
    expect(iso('0096-02-29', true)).toBe('0096-02-29T00:00:00.000Z');
  });
});
