// Transaction-level advisory lock keys (pg_advisory_xact_lock), one per
// thing several replicas must do one at a time.

/**
 * Every transaction that adds rows to `results` holds it until COMMIT, so
 * results commit in `seq` order: the alert evaluator's cursor over seq
 * (alerts-store.ts) never passes a row that commits later with a lower seq.
 */
export const RESULTS_LOCK_KEY = 0x6f7574_02;
/** Applying a checks file (several replicas reloading the same file take turns, no deadlock between their upserts). */
export const SYNC_LOCK_KEY = 0x6f7574_03;
/** Writing dashboards (file sync, PUT, DELETE): a customUrl and a dashboardId stay unique across replicas' checks. */
export const DASHBOARDS_LOCK_KEY = 0x6f7574_04;
