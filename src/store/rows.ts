// Typed reads of a row's columns, for both databases' stores: a column of the
// wrong type is a bug in the schema or a query, said with the column's name,
// never a silent undefined.

import type { KeyRecord } from './store.js';

export type Row = Record<string, unknown>;

export function str(row: Row, column: string): string {
  const value = row[column];
  if (typeof value !== 'string') throw new Error(`column ${column} is ${value === null ? 'null' : typeof value}, not text`);
  return value;
}

export function strOrNull(row: Row, column: string): string | null {
  const value = row[column];
  return typeof value === 'string' ? value : null;
}

export function num(row: Row, column: string): number {
  const value = row[column];
  if (typeof value === 'number') return value;
  if (typeof value === 'bigint') return Number(value);
  throw new Error(`column ${column} is ${value === null ? 'null' : typeof value}, not a number`);
}

export function numOrNull(row: Row, column: string): number | null {
  return row[column] === null || row[column] === undefined ? null : num(row, column);
}

export function json<T>(row: Row, column: string): T {
  return JSON.parse(str(row, column)) as T;
}

/** A row of the keys table (id, location_id, masked_key, created_at, updated_at) as a key record. */
export function keyRecordOf(row: Row): KeyRecord {
  return { id: str(row, 'id'), locationId: str(row, 'location_id'), maskedKey: str(row, 'masked_key'), created_at: str(row, 'created_at'), updated_at: str(row, 'updated_at') };
}
