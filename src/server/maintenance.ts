// Whether a check is in a maintenance window at a given time (docs/server.md
// "Maintenance windows"). Checks in maintenance still run and store their
// results; only their alerts are held back: the alerting code asks
// `suppressed(...)` before it notifies. Every time is UTC, so there is no
// daylight-saving shift to account for.

import type { MaintenanceWindowDefinition } from '../core/maintenance-window.js';
import type { MaintenanceWindowStore } from '../store/maintenance-windows.js';
import type { Store } from '../store/store.js';

const DAY_MS = 86_400_000;

/** What a window's tags are matched against. */
export interface MaintenanceSubject {
  id: string;
  name?: string;
  tags: readonly string[];
}

function daysInMonth(year: number, month: number): number {
  return new Date(Date.UTC(year, month + 1, 0)).getUTCDate();
}

/**
 * The start of occurrence `n` (0 is the window's own start). MONTH keeps the
 * day of the month and the time of day, on the month's last day when it is
 * shorter (a window on the 31st falls on Feb 28 or 29, then on Mar 31 again:
 * each occurrence counts from the first, never from the one before).
 */
export function occurrenceStart(window: Pick<MaintenanceWindowDefinition, 'startsAt' | 'repeatUnit' | 'repeatInterval'>, n: number): number {
  const start = Date.parse(window.startsAt);
  const interval = window.repeatInterval ?? 1;
  switch (window.repeatUnit) {
    case null:
      return start;
    case 'DAY':
      return start + n * interval * DAY_MS;
    case 'WEEK':
      return start + n * interval * 7 * DAY_MS;
    case 'MONTH': {
      const first = new Date(start);
      const months = first.getUTCMonth() + n * interval;
      const year = first.getUTCFullYear() + Math.floor(months / 12);
      const month = ((months % 12) + 12) % 12;
      const day = Math.min(first.getUTCDate(), daysInMonth(year, month));
      return Date.UTC(year, month, day) + (start - Date.UTC(first.getUTCFullYear(), first.getUTCMonth(), first.getUTCDate()));
    }
  }
}

/** The occurrence whose start is the last at or before `at` (a lower bound for MONTH, whose periods differ in length). */
function lastOccurrenceBefore(window: MaintenanceWindowDefinition, at: number): number {
  const start = Date.parse(window.startsAt);
  const interval = window.repeatInterval ?? 1;
  switch (window.repeatUnit) {
    case null:
      return 0;
    case 'DAY':
      return Math.floor((at - start) / (interval * DAY_MS));
    case 'WEEK':
      return Math.floor((at - start) / (interval * 7 * DAY_MS));
    case 'MONTH': {
      const first = new Date(start);
      const now = new Date(at);
      const months = (now.getUTCFullYear() - first.getUTCFullYear()) * 12 + now.getUTCMonth() - first.getUTCMonth();
      return Math.floor(months / interval);
    }
  }
}

/**
 * Whether the window is in effect at `at`: some occurrence has
 * start ≤ at < start + (endsAt − startsAt). Repetitions that would start at
 * or after `repeatEndsAt` do not happen; one that started before it runs its
 * whole length. Occurrences may overlap (a window longer than its period).
 */
export function windowInEffect(window: MaintenanceWindowDefinition, at: Date): boolean {
  const t = at.getTime();
  const start = Date.parse(window.startsAt);
  const length = Date.parse(window.endsAt) - start;
  if (!Number.isFinite(start) || !(length > 0) || t < start) return false;
  if (window.repeatUnit === null) return t < start + length;
  const repeatEnds = window.repeatEndsAt === null ? Number.POSITIVE_INFINITY : Date.parse(window.repeatEndsAt);
  // Occurrence starts grow with n: walk back from the last one that can have begun until one has ended before `at`.
  for (let n = lastOccurrenceBefore(window, t); n >= 0; n--) {
    const begins = occurrenceStart(window, n);
    if (begins > t) continue;
    if (begins + length <= t) return false;
    if (n === 0 || begins < repeatEnds) return true;
  }
  return false;
}

/** Whether the window applies to the check: no tags (every check), or a tag equal to one of the check's tags, its id or its name. */
export function windowAppliesTo(window: Pick<MaintenanceWindowDefinition, 'tags'>, subject: MaintenanceSubject): boolean {
  if (window.tags.length === 0) return true;
  return window.tags.some((tag) => subject.tags.includes(tag) || tag === subject.id || (subject.name !== undefined && tag === subject.name));
}

/** The windows that hold the check's alerts back at `at`. */
export function activeWindows<W extends MaintenanceWindowDefinition>(windows: readonly W[], subject: MaintenanceSubject, at: Date): W[] {
  return windows.filter((window) => windowAppliesTo(window, subject) && windowInEffect(window, at));
}

/** Whether any window holds the check's alerts back at `at`. */
export function inMaintenance(windows: readonly MaintenanceWindowDefinition[], subject: MaintenanceSubject, at: Date): boolean {
  return activeWindows(windows, subject, at).length > 0;
}

/** A stored check's `tags` (the checks file's, kept in its definition). */
export function tagsOf(definition: unknown): string[] {
  const tags = (definition as { tags?: unknown } | null)?.tags;
  return Array.isArray(tags) ? tags.filter((tag): tag is string => typeof tag === 'string') : [];
}

/**
 * What the alerting code calls before it notifies: true when a maintenance
 * window in effect at `at` applies to the check (an unknown check: false).
 */
export async function suppressed(deps: { store: Store; windows: MaintenanceWindowStore }, checkId: string, at: Date): Promise<boolean> {
  const check = await deps.store.check(checkId);
  if (!check) return false;
  return inMaintenance(await deps.windows.all(), { id: check.id, name: check.name, tags: tagsOf(check.definition) }, at);
}
