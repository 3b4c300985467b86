// The newest FINAL result of each of a check's locations: what a badge and a
// dashboard's per-location status read (docs/server.md "Badges",
// docs/dashboards.md "Figures"). Each is one listResults page of one entry
// filtered by location, which SQLite answers with one lookup in the index
// results_by_location (migration 9, src/store/sqlite/migrations.ts) and
// PostgreSQL with a few in results_by_kind (migration 11,
// src/store/postgres/migrations.ts; src/store/result-list.ts says why), also
// for a location that has no result yet.

import type { CheckResultEntry } from '../core/result-entry.js';
import type { Store } from '../store/store.js';

/** The newest FINAL result of each of `locations` that has one, by location. */
export async function latestFinals(store: Store, checkId: string, locations: readonly string[]): Promise<Map<string, CheckResultEntry>> {
  const pages = await Promise.all(locations.map((location) => store.listResults({ checkId, limit: 1, resultType: 'FINAL', location })));
  const out = new Map<string, CheckResultEntry>();
  pages.forEach((page, i) => {
    const entry = page.entries[0];
    if (entry) out.set(locations[i] as string, entry);
  });
  return out;
}
