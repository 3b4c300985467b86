// The checks file's `maintenanceWindows` and each check's `tags` (server and
// local modes; docs/server.md "Maintenance windows"). Every problem is named
// by its JSON path, as the rest of the file's.

import { type MaintenanceWindowDefinition, REPEAT_UNITS, type RepeatUnit } from '../core/maintenance-window.js';
import { parseDateTime } from '../core/date-time.js';
import type { Fields } from './fields.js';

const MAX_WINDOWS = 1_000;
const MAX_TAGS = 100;
const MAX_TAG_LENGTH = 200;
const MAX_REPEAT_INTERVAL = 1_000;

/** The time as an ISO string in UTC, or undefined (the problem recorded) when it is not one. */
function isoTime(fields: Fields, name: string, required: boolean): string | undefined {
  const value = fields.raw(name);
  if (value === undefined || value === null) {
    if (required) fields.fail(fields.at(name), 'is required: an ISO 8601 date or date-time (UTC unless it has an offset)');
    return undefined;
  }
  // A date or date-time whose every field is in range (src/core/date-time.ts): `2026-02-30` or `T24:00` is a
  // mistake to report, not a time to roll over into the next month or day.
  const ms = typeof value === 'string' ? parseDateTime(value, { relaxed: true }) : undefined;
  if (ms === undefined) {
    fields.fail(fields.at(name), `must be an ISO 8601 date or date-time such as "2026-12-24T22:00:00Z", each field in its range (got ${JSON.stringify(value)})`);
    return undefined;
  }
  return new Date(ms).toISOString();
}

/** A list of tags at `name`: strings of 1 to 200 characters, at most 100, duplicates dropped. */
export function parseTags(fields: Fields, name = 'tags'): string[] {
  const value = fields.raw(name);
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value) || value.length > MAX_TAGS) {
    fields.fail(fields.at(name), `must be an array of at most ${MAX_TAGS} strings`);
    return [];
  }
  const tags: string[] = [];
  value.forEach((tag: unknown, index) => {
    if (typeof tag !== 'string' || tag.length === 0 || tag.length > MAX_TAG_LENGTH) {
      fields.fail(`${fields.at(name)}[${index}]`, `must be a string of 1 to ${MAX_TAG_LENGTH} characters`);
    } else if (!tags.includes(tag)) {
      tags.push(tag);
    }
  });
  return tags;
}

/** `$.maintenanceWindows`: `[{id, name, tags?, startsAt, endsAt, repeatUnit?, repeatInterval?, repeatEndsAt?}]`. */
export function parseMaintenanceWindows(root: Fields): MaintenanceWindowDefinition[] {
  const declared = root.raw('maintenanceWindows');
  if (Array.isArray(declared) && declared.length > MAX_WINDOWS) {
    root.fail(root.at('maintenanceWindows'), `must have at most ${MAX_WINDOWS} windows (got ${declared.length})`);
    return [];
  }
  const windows: MaintenanceWindowDefinition[] = [];
  const ids = new Map<number, number>();
  root.list('maintenanceWindows').forEach((item, index) => {
    const before = item.issues.length;
    const idValue = item.raw('id');
    let id: number | undefined;
    if (typeof idValue !== 'number' || !Number.isSafeInteger(idValue) || idValue < 1) {
      item.fail(item.at('id'), `is required: an integer of at least 1 (got ${JSON.stringify(idValue) ?? 'nothing'})`);
    } else if (ids.has(idValue)) {
      item.fail(item.at('id'), `${idValue} is already used by $.maintenanceWindows[${ids.get(idValue)}]`);
    } else {
      ids.set(idValue, index);
      id = idValue;
    }
    const name = item.string('name', { required: true, minLength: 1, maxLength: 200 });
    const tags = parseTags(item);
    const startsAt = isoTime(item, 'startsAt', true);
    const endsAt = isoTime(item, 'endsAt', true);
    if (startsAt !== undefined && endsAt !== undefined && Date.parse(endsAt) <= Date.parse(startsAt)) {
      item.fail(item.at('endsAt'), `must be after startsAt (${startsAt})`);
    }
    const repeatUnit: RepeatUnit | undefined = item.oneOf('repeatUnit', REPEAT_UNITS);
    const hasInterval = item.has('repeatInterval');
    const repeatInterval = item.integer('repeatInterval', { min: 1, max: MAX_REPEAT_INTERVAL, default: 1 });
    const repeatEndsAt = isoTime(item, 'repeatEndsAt', false);
    if (repeatUnit === undefined && !item.has('repeatUnit')) {
      if (hasInterval) item.fail(item.at('repeatInterval'), `needs repeatUnit (one of ${REPEAT_UNITS.join(', ')})`);
      if (item.has('repeatEndsAt')) item.fail(item.at('repeatEndsAt'), `needs repeatUnit (one of ${REPEAT_UNITS.join(', ')})`);
    }
    if (repeatEndsAt !== undefined && startsAt !== undefined && Date.parse(repeatEndsAt) <= Date.parse(startsAt)) {
      item.fail(item.at('repeatEndsAt'), `must be after startsAt (${startsAt})`);
    }
    if (item.issues.length > before || id === undefined || name === undefined || startsAt === undefined || endsAt === undefined) return;
    windows.push({
      id,
      name,
      tags,
      startsAt,
      endsAt,
      repeatUnit: repeatUnit ?? null,
      repeatInterval: repeatUnit ? repeatInterval : null,
      repeatEndsAt: repeatUnit ? (repeatEndsAt ?? null) : null,
    });
  });
  return windows;
}
