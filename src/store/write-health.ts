// Whether the server's database takes writes. Reads keep working on a full
// disk (SQLITE_FULL) or a database turned read-only (a PostgreSQL primary
// demoted to a standby), so the readiness ping alone would say 200 while no
// session can be created and no result stored. The stores tell this object
// about every failed transaction, and a small probe write tells when writes
// work again; readiness, /health, /metrics and the API's 503 follow it
// (docs/server.md "When the database cannot write").

/** SQLite's primary result codes (the low byte of an extended code) that mean the storage, not the statement. */
const SQLITE_STORAGE_CODES: ReadonlyMap<number, string> = new Map([
  [8, 'the database is read-only'],
  [10, 'a disk I/O error'],
  [13, 'the database or its disk is full'],
]);

/** PostgreSQL SQLSTATEs that mean the storage or a read-only server, not the statement. */
const POSTGRES_STORAGE_CODES: ReadonlyMap<string, string> = new Map([
  ['53100', 'the database server’s disk is full'],
  ['25006', 'the database server is read-only (a standby?)'],
  ['58030', 'an I/O error on the database server'],
]);

/**
 * What a failed write says about the storage: a short reason when the
 * database could not write at all (full, read-only, I/O), undefined when the
 * failure is the statement's own (a constraint, a bug) or not a database error.
 */
export function storageFailure(error: unknown): string | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const { code, errcode } = error as { code?: unknown; errcode?: unknown };
  if (code === 'ERR_SQLITE_ERROR' && typeof errcode === 'number') return SQLITE_STORAGE_CODES.get(errcode & 0xff);
  if (typeof code === 'string') return POSTGRES_STORAGE_CODES.get(code);
  return undefined;
}

/** File-system error codes that mean the disk (an artifact written to STATE_DIR/artifacts), not the request. */
const DISK_CODES: ReadonlyMap<string, string> = new Map([
  ['ENOSPC', 'the server’s disk is full'],
  ['EDQUOT', 'the server’s disk quota is used up'],
  ['EROFS', 'the server’s file system is read-only'],
]);

/** What a failed file write says about the disk: a short reason, or undefined when it is not the disk's failure. */
export function diskFailure(error: unknown): string | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const { code } = error as { code?: unknown };
  return typeof code === 'string' ? DISK_CODES.get(code) : undefined;
}

export interface WriteProblem {
  reason: string;
  /** The database's own message of the first failure. */
  detail: string;
  since: Date;
}

export class WriteHealth {
  private problem: WriteProblem | undefined;
  private listener: ((problem: WriteProblem | undefined) => void) | undefined;

  get writable(): boolean {
    return this.problem === undefined;
  }

  /** Why writes fail now; undefined while they work. */
  get current(): WriteProblem | undefined {
    return this.problem;
  }

  /** Called on each change: a problem when writes start failing, undefined when they work again. */
  onChange(listener: (problem: WriteProblem | undefined) => void): void {
    this.listener = listener;
  }

  /**
   * A probe write committed (probeWrite of the stores). Only a probe clears a
   * problem: a transaction that committed may have written nothing (a read in
   * a transaction commits on a full disk too), and readiness should not flap
   * with every request.
   */
  recovered(): void {
    if (this.problem === undefined) return;
    this.problem = undefined;
    this.listener?.(undefined);
  }

  /** A write transaction failed; true when it failed for the storage (storageFailure), which is then remembered until a probe write succeeds (recovered). */
  failed(error: unknown): boolean {
    const reason = storageFailure(error);
    if (reason === undefined) return false;
    if (this.problem === undefined) {
      this.problem = { reason, detail: error instanceof Error ? error.message : String(error), since: new Date() };
      this.listener?.(this.problem);
    }
    return true;
  }
}

/**
 * The level to log a failed store operation at: debug when it failed for the
 * storage (the stores report that to WriteHealth, and DatabaseWrites logs it
 * once when it starts and once when it ends, not once per operation), else `level`.
 */
export function storeFailureLevel(error: unknown, level: 'warn' | 'error' = 'error'): 'debug' | 'warn' | 'error' {
  return storageFailure(error) === undefined ? level : 'debug';
}
