// Maintenance windows: the repetition math (UTC throughout), which checks a
// window applies to, the checks file's `maintenanceWindows` and `tags`, and
// the store's sync with suppressed() on top of it.

import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ChecksFileError, parseServerChecksFile } from '../../src/checks/checks-file.js';
import { definitionRegistry } from '../../src/checks/registry.js';
import type { MaintenanceWindowDefinition } from '../../src/core/maintenance-window.js';
import { inMaintenance, occurrenceStart, suppressed, windowAppliesTo, windowInEffect } from '../../src/server/maintenance.js';
import { SqliteMaintenanceWindowStore } from '../../src/store/sqlite/maintenance-windows-store.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { storedCheck } from '../support/server-store.js';

function window(overrides: Partial<MaintenanceWindowDefinition>): MaintenanceWindowDefinition {
  return {
    id: 1,
    name: 'w',
    tags: [],
    startsAt: '2026-01-01T22:00:00.000Z',
    endsAt: '2026-01-01T23:00:00.000Z',
    repeatUnit: null,
    repeatInterval: null,
    repeatEndsAt: null,
    ...overrides,
  };
}
const t = (iso: string) => new Date(iso);
const iso = (ms: number) => new Date(ms).toISOString();

describe('windowInEffect', () => {
  it('a one-off window: from startsAt inclusive to endsAt exclusive', () => {
    const w = window({});
    expect(windowInEffect(w, t('2026-01-01T21:59:59.999Z'))).toBe(false);
    expect(windowInEffect(w, t('2026-01-01T22:00:00.000Z'))).toBe(true);
    expect(windowInEffect(w, t('2026-01-01T22:59:59.999Z'))).toBe(true);
    expect(windowInEffect(w, t('2026-01-01T23:00:00.000Z'))).toBe(false);
    expect(windowInEffect(w, t('2026-01-02T22:30:00.000Z'))).toBe(false);
  });

  it('DAY every 1 and every 3 days', () => {
    const daily = window({ repeatUnit: 'DAY', repeatInterval: 1 });
    expect(windowInEffect(daily, t('2026-01-02T22:30:00Z'))).toBe(true);
    expect(windowInEffect(daily, t('2026-03-15T22:00:00Z'))).toBe(true);
    expect(windowInEffect(daily, t('2026-03-15T23:00:00Z'))).toBe(false);
    expect(windowInEffect(daily, t('2026-03-15T21:59:00Z'))).toBe(false);
    const every3 = window({ repeatUnit: 'DAY', repeatInterval: 3 });
    expect(windowInEffect(every3, t('2026-01-04T22:30:00Z'))).toBe(true);
    expect(windowInEffect(every3, t('2026-01-02T22:30:00Z'))).toBe(false);
    expect(windowInEffect(every3, t('2026-01-03T22:30:00Z'))).toBe(false);
    expect(windowInEffect(every3, t('2026-01-31T22:30:00Z'))).toBe(true);
  });

  it('a window that spans midnight repeats across it', () => {
    const w = window({ startsAt: '2026-01-01T23:30:00Z', endsAt: '2026-01-02T00:30:00Z', repeatUnit: 'DAY', repeatInterval: 1 });
    expect(windowInEffect(w, t('2026-02-10T00:15:00Z'))).toBe(true);
    expect(windowInEffect(w, t('2026-02-10T23:45:00Z'))).toBe(true);
    expect(windowInEffect(w, t('2026-02-10T12:00:00Z'))).toBe(false);
  });

  it('WEEK: same weekday and time, every n weeks', () => {
    // 2026-01-03 is a Saturday.
    const w = window({ startsAt: '2026-01-03T02:00:00Z', endsAt: '2026-01-03T04:00:00Z', repeatUnit: 'WEEK', repeatInterval: 2 });
    expect(windowInEffect(w, t('2026-01-17T03:00:00Z'))).toBe(true);
    expect(windowInEffect(w, t('2026-01-10T03:00:00Z'))).toBe(false);
    expect(windowInEffect(w, t('2026-01-31T02:00:00Z'))).toBe(true);
    expect(windowInEffect(w, t('2026-01-31T04:00:00Z'))).toBe(false);
  });

  it('MONTH keeps the day, falls on the last day of a shorter month, and comes back to the 31st', () => {
    const w = window({ startsAt: '2026-01-31T22:00:00Z', endsAt: '2026-01-31T23:00:00Z', repeatUnit: 'MONTH', repeatInterval: 1 });
    expect(iso(occurrenceStart(w, 1))).toBe('2026-02-28T22:00:00.000Z');
    expect(iso(occurrenceStart(w, 2))).toBe('2026-03-31T22:00:00.000Z');
    expect(iso(occurrenceStart(w, 3))).toBe('2026-04-30T22:00:00.000Z');
    expect(iso(occurrenceStart(w, 11))).toBe('2026-12-31T22:00:00.000Z');
    expect(iso(occurrenceStart(w, 13))).toBe('2027-02-28T22:00:00.000Z');
    // 2028 is a leap year.
    expect(iso(occurrenceStart(w, 25))).toBe('2028-02-29T22:00:00.000Z');
    expect(windowInEffect(w, t('2026-02-28T22:30:00Z'))).toBe(true);
    expect(windowInEffect(w, t('2026-03-28T22:30:00Z'))).toBe(false);
    expect(windowInEffect(w, t('2026-03-31T22:30:00Z'))).toBe(true);
    expect(windowInEffect(w, t('2028-02-29T22:59:59Z'))).toBe(true);
    expect(windowInEffect(w, t('2028-03-01T22:30:00Z'))).toBe(false);
  });

  it('MONTH every 3 months, across a year end; a window that spans the month end', () => {
    const quarterly = window({ startsAt: '2026-11-15T10:00:00Z', endsAt: '2026-11-15T12:00:00Z', repeatUnit: 'MONTH', repeatInterval: 3 });
    expect(windowInEffect(quarterly, t('2027-02-15T11:00:00Z'))).toBe(true);
    expect(windowInEffect(quarterly, t('2026-12-15T11:00:00Z'))).toBe(false);
    expect(windowInEffect(quarterly, t('2027-05-15T10:00:00Z'))).toBe(true);
    const spanning = window({ startsAt: '2026-01-31T23:00:00Z', endsAt: '2026-02-01T01:00:00Z', repeatUnit: 'MONTH', repeatInterval: 1 });
    // The February occurrence starts Feb 28 23:00 and runs into March 1.
    expect(windowInEffect(spanning, t('2026-03-01T00:30:00Z'))).toBe(true);
    expect(windowInEffect(spanning, t('2026-03-01T01:00:00Z'))).toBe(false);
    // The day of the month of `at` before the occurrence's: the previous month's occurrence is long over.
    expect(windowInEffect(spanning, t('2026-04-15T00:30:00Z'))).toBe(false);
  });

  it('repeatEndsAt: no repetition starts at or after it; one started before runs its whole length', () => {
    const w = window({ repeatUnit: 'DAY', repeatInterval: 1, repeatEndsAt: '2026-01-05T22:30:00Z' });
    expect(windowInEffect(w, t('2026-01-05T22:45:00Z'))).toBe(true);
    expect(windowInEffect(w, t('2026-01-06T22:15:00Z'))).toBe(false);
    const atStart = window({ repeatUnit: 'DAY', repeatInterval: 1, repeatEndsAt: '2026-01-05T22:00:00Z' });
    expect(windowInEffect(atStart, t('2026-01-05T22:15:00Z'))).toBe(false);
    expect(windowInEffect(atStart, t('2026-01-04T22:15:00Z'))).toBe(true);
    // The first occurrence is the window itself, whatever repeatEndsAt says.
    expect(windowInEffect(window({ repeatUnit: 'WEEK', repeatInterval: 1, repeatEndsAt: '2026-01-01T22:00:00Z' }), t('2026-01-01T22:10:00Z'))).toBe(true);
  });

  it('occurrences longer than the period overlap: in effect throughout', () => {
    const w = window({ startsAt: '2026-01-01T00:00:00Z', endsAt: '2026-01-03T12:00:00Z', repeatUnit: 'DAY', repeatInterval: 1, repeatEndsAt: '2026-01-10T00:00:00Z' });
    for (let h = 0; h < 24 * 10 + 12; h += 7) expect(windowInEffect(w, new Date(Date.parse('2026-01-01T00:00:00Z') + h * 3_600_000))).toBe(true);
    // The last occurrence (Jan 9) ends on Jan 11 at noon.
    expect(windowInEffect(w, t('2026-01-11T11:59:00Z'))).toBe(true);
    expect(windowInEffect(w, t('2026-01-11T12:00:00Z'))).toBe(false);
  });

  it('is never in effect before the first start, nor for a window without length', () => {
    expect(windowInEffect(window({ repeatUnit: 'DAY', repeatInterval: 1 }), t('2025-12-31T22:30:00Z'))).toBe(false);
    expect(windowInEffect(window({ endsAt: '2026-01-01T22:00:00Z', repeatUnit: 'DAY', repeatInterval: 1 }), t('2026-01-01T22:00:00Z'))).toBe(false);
  });

  it('answers far in the future at once', () => {
    const w = window({ repeatUnit: 'DAY', repeatInterval: 1 });
    const started = performance.now();
    expect(windowInEffect(w, t('2226-01-01T22:30:00Z'))).toBe(true);
    expect(windowInEffect(window({ repeatUnit: 'MONTH', repeatInterval: 1 }), t('2226-01-01T22:30:00Z'))).toBe(true);
    expect(performance.now() - started).toBeLessThan(1_000);
  });
});

describe('windowAppliesTo and inMaintenance', () => {
  const check = { id: 'api-1', name: 'Public API', tags: ['prod', 'api'] };
  it('matches a tag, the check id or its name; no tags: every check', () => {
    expect(windowAppliesTo({ tags: ['api'] }, check)).toBe(true);
    expect(windowAppliesTo({ tags: ['api-1'] }, check)).toBe(true);
    expect(windowAppliesTo({ tags: ['Public API'] }, check)).toBe(true);
    expect(windowAppliesTo({ tags: ['staging'] }, check)).toBe(false);
    expect(windowAppliesTo({ tags: [] }, check)).toBe(true);
  });
  it('is in maintenance when one applying window is in effect', () => {
    const at = t('2026-01-01T22:30:00Z');
    expect(inMaintenance([window({ tags: ['staging'] }), window({ id: 2, tags: ['prod'] })], check, at)).toBe(true);
    expect(inMaintenance([window({ tags: ['staging'] })], check, at)).toBe(false);
    expect(inMaintenance([window({ tags: ['prod'] })], check, t('2026-01-02T22:30:00Z'))).toBe(false);
  });
});

const FILE = (extra: Record<string, unknown>, checkExtra: Record<string, unknown> = {}) =>
  JSON.stringify({
    privateLocations: [{ id: 'lab', name: 'Lab' }],
    checks: [{ id: 'c1', name: 'one', checkType: 'URL', request: { url: 'http://127.0.0.1:9/' }, tags: ['prod'], ...checkExtra }],
    ...extra,
  });

function problems(text: string): string[] {
  try {
    parseServerChecksFile(text, 'checks.json', definitionRegistry());
  } catch (error) {
    if (error instanceof ChecksFileError) return error.problems;
    throw error;
  }
  return [];
}

describe('the checks file', () => {
  it('reads maintenanceWindows (UTC when no offset is given) and keeps check tags in the definition', () => {
    const parsed = parseServerChecksFile(
      FILE({
        maintenanceWindows: [
          { id: 7, name: 'Patch night', tags: ['prod'], startsAt: '2026-01-01T22:00', endsAt: '2026-01-01T23:30:00+01:00', repeatUnit: 'WEEK', repeatEndsAt: '2026-06-30' },
          { id: 8, name: 'Once', startsAt: '2026-02-01', endsAt: '2026-02-02' },
        ],
      }),
      'checks.json',
      definitionRegistry(),
    );
    expect(parsed.maintenanceWindows).toEqual([
      {
        id: 7,
        name: 'Patch night',
        tags: ['prod'],
        startsAt: '2026-01-01T22:00:00.000Z',
        endsAt: '2026-01-01T22:30:00.000Z',
        repeatUnit: 'WEEK',
        repeatInterval: 1,
        repeatEndsAt: '2026-06-30T00:00:00.000Z',
      },
      { id: 8, name: 'Once', tags: [], startsAt: '2026-02-01T00:00:00.000Z', endsAt: '2026-02-02T00:00:00.000Z', repeatUnit: null, repeatInterval: null, repeatEndsAt: null },
    ]);
    expect((parsed.checks[0]?.definition as { tags?: unknown } | undefined)?.tags).toEqual(['prod']);
    expect(problems(FILE({}))).toEqual([]);
  });

  it('refuses impossible dates and times instead of rolling them over, naming the field', () => {
    const found = problems(
      FILE({
        maintenanceWindows: [
          { id: 1, name: 'a', startsAt: '2026-02-30T01:00:00Z', endsAt: '2026-03-05T00:00:00Z' },
          { id: 2, name: 'b', startsAt: '2026-01-01T00:00:00Z', endsAt: '2026-01-01T24:00:00Z' },
          { id: 3, name: 'c', startsAt: '2026-01-01T00:00:00Z', endsAt: '2026-01-02T00:00:00+24:00', repeatUnit: 'DAY', repeatEndsAt: '2026-13-01' },
        ],
      }),
    );
    expect(found.map((p) => p.split(':')[0])).toEqual([
      '$.maintenanceWindows[0].startsAt',
      '$.maintenanceWindows[1].endsAt',
      '$.maintenanceWindows[2].endsAt',
      '$.maintenanceWindows[2].repeatEndsAt',
    ]);
    expect(found[0]).toContain('2026-02-30T01:00:00Z');
    // Leap days are real dates.
    expect(problems(FILE({ maintenanceWindows: [{ id: 1, name: 'a', startsAt: '2028-02-29T23:00', endsAt: '2028-02-29T23:59:59.5Z' }] }))).toEqual([]);
  });

  it('names every problem by its JSON path', () => {
    const found = problems(
      FILE(
        {
          maintenanceWindows: [
            { id: 0, name: '', startsAt: 'tomorrow', endsAt: '2026-01-01T00:00:00Z', repeatUnit: 'YEAR' },
            { id: 2, name: 'b', startsAt: '2026-01-02T00:00:00Z', endsAt: '2026-01-01T00:00:00Z', repeatInterval: 2, tags: ['', 3] },
            { id: 2, name: 'c', startsAt: '2026-01-01T00:00:00Z', endsAt: '2026-01-02T00:00:00Z', repeatUnit: 'DAY', repeatInterval: 0, repeatEndsAt: '2025-01-01' },
          ],
        },
        { tags: 'prod' },
      ),
    );
    const paths = found.map((p) => p.split(':')[0]);
    expect(paths).toEqual(
      expect.arrayContaining([
        '$.maintenanceWindows[0].id',
        '$.maintenanceWindows[0].name',
        '$.maintenanceWindows[0].startsAt',
        '$.maintenanceWindows[0].repeatUnit',
        '$.maintenanceWindows[1].endsAt',
        '$.maintenanceWindows[1].repeatInterval',
        '$.maintenanceWindows[1].tags[0]',
        '$.maintenanceWindows[1].tags[1]',
        '$.maintenanceWindows[2].id',
        '$.maintenanceWindows[2].repeatInterval',
        '$.maintenanceWindows[2].repeatEndsAt',
        '$.checks[0].tags',
      ]),
    );
    expect(problems(FILE({ maintenanceWindows: {} }))).toEqual(['$.maintenanceWindows: must be an array (got {})']);
  });
});

describe('the store and suppressed()', () => {
  let dir: string;
  let store: SqliteStore;
  let windows: SqliteMaintenanceWindowStore;

  beforeEach(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'outpost-maintenance-'));
    store = await SqliteStore.open(path.join(dir, 'outpost.db'));
    windows = new SqliteMaintenanceWindowStore(store.access);
    await store.syncLocations([{ id: 'lab', name: 'Lab' }]);
    const tagged = storedCheck({ id: 'tagged', locations: ['lab'] });
    await store.syncChecks(
      [{ ...tagged, definition: { ...(tagged.definition as object), tags: ['db'] } }, storedCheck({ id: 'plain', locations: ['lab'] })],
      new Date(),
    );
  });
  afterEach(async () => {
    await store.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('syncs: created, updated only when changed, deleted when gone; pages by id', async () => {
    const one = window({ id: 1, name: 'one', tags: ['db'] });
    const two = window({ id: 2, name: 'two' });
    await windows.sync([two, one], t('2026-01-01T00:00:00Z'));
    await windows.sync([two, { ...one, name: 'one renamed' }], t('2026-01-02T00:00:00Z'));
    const all = await windows.all();
    expect(all.map((w) => [w.id, w.name, w.created_at, w.updated_at])).toEqual([
      [1, 'one renamed', '2026-01-01T00:00:00.000Z', '2026-01-02T00:00:00.000Z'],
      [2, 'two', '2026-01-01T00:00:00.000Z', null],
    ]);
    expect((await windows.list(1, 2)).map((w) => w.id)).toEqual([2]);
    expect(await windows.list(10, 2)).toEqual([]);
    await windows.sync([two], t('2026-01-03T00:00:00Z'));
    expect((await windows.all()).map((w) => w.id)).toEqual([2]);
  });

  it('suppressed(): the check tagged in a window in effect, not another, not an unknown one', async () => {
    await windows.sync([window({ tags: ['db'], repeatUnit: 'DAY', repeatInterval: 1 })], new Date());
    const deps = { store, windows };
    expect(await suppressed(deps, 'tagged', t('2026-03-03T22:10:00Z'))).toBe(true);
    expect(await suppressed(deps, 'tagged', t('2026-03-03T21:10:00Z'))).toBe(false);
    expect(await suppressed(deps, 'plain', t('2026-03-03T22:10:00Z'))).toBe(false);
    expect(await suppressed(deps, 'nobody', t('2026-03-03T22:10:00Z'))).toBe(false);
  });
});
