// A maintenance window as the checks file declares it (docs/server.md
// "Maintenance windows"): checks whose tags match still run and store
// results, but send no alerts while it is in effect. Times are UTC.

/** How a window repeats: every `repeatInterval` days, weeks or calendar months from its first start. */
export const REPEAT_UNITS = ['DAY', 'WEEK', 'MONTH'] as const;
export type RepeatUnit = (typeof REPEAT_UNITS)[number];

export interface MaintenanceWindowDefinition {
  id: number;
  name: string;
  /** Check tags, ids or names it applies to; empty: every check. */
  tags: string[];
  /** ISO 8601, UTC. */
  startsAt: string;
  endsAt: string;
  /** null: the window happens once. */
  repeatUnit: RepeatUnit | null;
  /** At least 1; null when the window does not repeat. */
  repeatInterval: number | null;
  /** No repetition starts at or after this; null: it repeats for ever. */
  repeatEndsAt: string | null;
}
