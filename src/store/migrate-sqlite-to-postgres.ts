// `outpost migrate --from sqlite:PATH --to postgres://…` (docs/postgres.md,
// "Moving a server to PostgreSQL"): copies every table of a single server's
// SQLite database into PostgreSQL in one transaction, so the target ends up
// with all of it or none of it, then compares every table's row count
// before the commit. The source is opened read-only and never changed.
// A target that already holds data is refused unless `replace` is set: then
// its tables are emptied first, in the same transaction, which is what makes
// a re-run safe (the same source gives the same target).

import type { DatabaseSync, SQLOutputValue } from 'node:sqlite';
import { storableJson } from '../core/nul.js';
import { PgDatabase, type Sql } from './postgres/db.js';
import { migratePg } from './postgres/migrations.js';
import { SCHEMA_VERSION } from './sqlite/migrations.js';

/**
 * Every table of the SQLite schema (migrations.ts v1–v8), parents before the
 * tables that refer to them. A table a later migration adds is copied too
 * (after these, by name), once PostgreSQL's migrations have it; a table of
 * the file that PostgreSQL lacks stops the copy before anything is written.
 */
export const COPIED_TABLES = [
  'locations',
  'keys',
  'checks',
  'sessions',
  'jobs',
  'counters',
  'results',
  'artifacts',
  'events',
  'alert_channels',
  'check_status',
  'alert_cursor',
  'ssl_notices',
  'notifications',
  'notification_attempts',
  'maintenance_windows',
  'error_groups',
  'heartbeat_checks',
  'heartbeat_events',
  'dashboards',
  'dashboard_keys',
  'incidents',
  'incident_updates',
  'agent_addresses',
] as const;

/**
 * Tables not copied but rebuilt from the copied rows: PostgreSQL's triggers
 * fill result_metrics as `results` is copied (postgres/analytics-schema.ts),
 * and its row count is then compared with the file's like a copied table's.
 */
export const REBUILT_TABLES = ['result_metrics'] as const;

/** Identity columns whose next value must follow the copied rows (and SQLite's AUTOINCREMENT high-water mark). */
const SEQUENCES: ReadonlyArray<{ table: string; column: string; sequence: string }> = [
  { table: 'results', column: 'seq', sequence: "pg_get_serial_sequence('results', 'seq')" },
  { table: 'events', column: 'seq', sequence: "pg_get_serial_sequence('events', 'seq')" },
  { table: 'notifications', column: 'id', sequence: "pg_get_serial_sequence('notifications', 'id')" },
  { table: 'heartbeat_events', column: 'seq', sequence: "pg_get_serial_sequence('heartbeat_events', 'seq')" },
  { table: 'notification_attempts', column: 'id', sequence: "pg_get_serial_sequence('notification_attempts', 'id')" },
  { table: 'alert_channels', column: 'id', sequence: "'alert_channels_id_seq'" },
  { table: 'dashboards', column: 'id', sequence: "pg_get_serial_sequence('dashboards', 'id')" },
];

/** Rows sent in one INSERT. */
const BATCH_ROWS = 500;

export class MigrationRefused extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'MigrationRefused';
  }
}

export interface MigrationReport {
  /** Rows per table, as counted in both databases after the copy. */
  tables: Array<{ table: string; rows: number }>;
  /** True when the target held data that `replace` emptied first. */
  replaced: boolean;
}

async function rowCount(sql: Sql, table: string): Promise<number> {
  const row = await sql.row(`SELECT count(*)::bigint AS n FROM ${table}`);
  return Number(row?.n ?? 0);
}

function pgValue(value: SQLOutputValue): unknown {
  return typeof value === 'bigint' ? Number(value) : value;
}

export async function migrateSqliteToPostgres(options: {
  sqliteFile: string;
  postgres: { url: string; poolSize?: number };
  /** host:port/database as user: for messages, never the password. */
  where: string;
  replace: boolean;
  onTable?: (table: string, rows: number) => void;
}): Promise<MigrationReport> {
  const { DatabaseSync } = await import('node:sqlite');
  let source: DatabaseSync;
  try {
    source = new DatabaseSync(options.sqliteFile, { readOnly: true });
  } catch (error) {
    throw new MigrationRefused(`cannot open ${options.sqliteFile}: ${(error as Error).message}`);
  }
  const target = new PgDatabase({ url: options.postgres.url, poolSize: options.postgres.poolSize ?? 2, applicationName: 'outpost migrate' });
  try {
    const version = Number(source.prepare('SELECT MAX(version) AS v FROM schema_version').get()?.v ?? 0);
    if (version !== SCHEMA_VERSION) {
      throw new MigrationRefused(
        `${options.sqliteFile} has schema version ${version}, this Outpost copies version ${SCHEMA_VERSION}: start this release's server on it once (it upgrades the file), or use the release that wrote it`,
      );
    }
    await migratePg(target.pool, options.where);
    const inFile = source
      .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT IN ('schema_version', 'sqlite_sequence') AND name NOT LIKE 'sqlite_%' ORDER BY name")
      .all()
      .map((row) => String(row.name));
    const known = new Set<string>([...COPIED_TABLES, ...REBUILT_TABLES]);
    const tablesToCopy = [...COPIED_TABLES.filter((t) => inFile.includes(t)), ...inFile.filter((t) => !known.has(t))];
    const tablesRebuilt = REBUILT_TABLES.filter((t) => inFile.includes(t));
    const inTarget = new Set((await target.rows("SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()")).map((row) => String(row.table_name)));
    const missing = [...tablesToCopy, ...tablesRebuilt].filter((t) => !inTarget.has(t));
    if (missing.length > 0) throw new MigrationRefused(`${options.where} has no table ${missing.join(', ')} of ${options.sqliteFile}: this Outpost's PostgreSQL schema lacks it`);
    const report = await target.tx(async (sql) => {
      const held: string[] = [];
      for (const table of tablesToCopy) if ((await rowCount(sql, table)) > 0) held.push(table);
      if (held.length > 0 && !options.replace) {
        throw new MigrationRefused(`${options.where} already holds data (${held.join(', ')}): copy into an empty database, or pass --replace to empty it first`);
      }
      if (held.length > 0) await sql.run(`TRUNCATE ${[...tablesToCopy, ...tablesRebuilt, 'schedule_slots', 'leader_lease'].join(', ')}`);
      const tables: MigrationReport['tables'] = [];
      for (const table of tablesToCopy) {
        const columns = source
          .prepare(`PRAGMA table_info(${table})`)
          .all()
          .map((c) => String(c.name));
        let copied = 0;
        let after = -1n;
        // By rowid, a batch at a time: bounded memory whatever the table's size.
        for (;;) {
          const rows = source.prepare(`SELECT rowid AS __rowid, ${columns.join(', ')} FROM ${table} WHERE rowid > ? ORDER BY rowid LIMIT ?`).all(after, BATCH_ROWS);
          if (rows.length === 0) break;
          const params: unknown[] = [];
          const tuples = rows.map((row) => {
            const marks = columns.map((column) => {
              const value = pgValue(row[column] as SQLOutputValue);
              // A body SQLite stored before src/core/nul.ts replaced U+0000 and lone surrogates: PostgreSQL's trigger reads it as json.
              params.push(table === 'results' && column === 'body' && typeof value === 'string' ? storableJson(value) : value);
              return `$${params.length}`;
            });
            return `(${marks.join(', ')})`;
          });
          await sql.run(`INSERT INTO ${table} (${columns.join(', ')}) VALUES ${tuples.join(', ')}`, params);
          copied += rows.length;
          after = BigInt(rows.at(-1)?.__rowid as number | bigint);
        }
        const sourceRows = Number(source.prepare(`SELECT count(*) AS n FROM ${table}`).get()?.n ?? 0);
        const targetRows = await rowCount(sql, table);
        if (copied !== sourceRows || targetRows !== sourceRows) {
          throw new Error(`${table}: ${sourceRows} rows in ${options.sqliteFile}, ${targetRows} in ${options.where} after the copy; nothing was committed`);
        }
        tables.push({ table, rows: targetRows });
        options.onTable?.(table, targetRows);
      }
      for (const table of tablesRebuilt) {
        const sourceRows = Number(source.prepare(`SELECT count(*) AS n FROM ${table}`).get()?.n ?? 0);
        const targetRows = await rowCount(sql, table);
        if (targetRows !== sourceRows) {
          throw new Error(`${table}: ${sourceRows} rows in ${options.sqliteFile}, ${targetRows} rebuilt in ${options.where} from the copied rows; nothing was committed`);
        }
        tables.push({ table, rows: targetRows });
        options.onTable?.(table, targetRows);
      }
      // New rows take ids after the copied ones, and after any SQLite handed out and pruned since (AUTOINCREMENT).
      const highWater = new Map<string, number>();
      const hasSequenceTable = source.prepare("SELECT 1 AS x FROM sqlite_master WHERE name = 'sqlite_sequence'").get() !== undefined;
      if (hasSequenceTable) for (const row of source.prepare('SELECT name, seq FROM sqlite_sequence').all()) highWater.set(String(row.name), Number(row.seq));
      for (const { table, column, sequence } of SEQUENCES) {
        const max = Number((await sql.row(`SELECT COALESCE(MAX(${column}), 0) AS m FROM ${table}`))?.m ?? 0);
        const next = Math.max(max, highWater.get(table) ?? 0);
        if (next > 0) await sql.run(`SELECT setval(${sequence}, $1)`, [next]);
      }
      return { tables, replaced: held.length > 0 };
    });
    // Fresh statistics for the planner: the copied tables would otherwise wait for autovacuum to notice them.
    await target.run(`ANALYZE ${[...tablesToCopy, ...tablesRebuilt].join(', ')}`);
    return report;
  } finally {
    source.close();
    await target.close();
  }
}
