// STATE_DIR/outpost.lock: a small SQLite file whose write lock the process
// that uses STATE_DIR keeps for its whole life (src/state-dir-lock.ts). SQLite
// locks with fcntl, so the kernel drops the lock when its holder ends, kill -9
// included, and an NFSv4 server does so across hosts: a crash never leaves a
// stale lock behind, as a pid file would. The file also records its holder,
// so that the process refused can say who it is.
//
// Synchronous, like node:sqlite itself; the caller passes the module in,
// because it is only imported where the running Node.js has it (22.13+).

import { hostname } from 'node:os';
import { pathToFileURL } from 'node:url';
import type { DatabaseSync } from 'node:sqlite';

export const STATE_DIR_LOCK_FILE = 'outpost.lock';

/**
 * How long a lock held at this moment is waited for: two processes starting
 * together each try the lock briefly (src/state-dir-lock.ts); the loser of
 * that moment must not take the other's try for a holder.
 */
const BUSY_WAIT_MS = 500;

/** Who holds the lock, as it wrote at its start. */
export interface LockHolder {
  command: string;
  pid: number;
  host: string;
  since: string;
}

/** Another process holds the lock; who, if its file says so. */
export interface Busy {
  kind: 'busy';
  holder?: LockHolder;
}

/** The lock cannot be taken here at all: why, as SQLite said it. */
export interface Failed {
  kind: 'failed';
  reason: string;
}

/** What a try says: the lock could be taken (and was let go again), or not. */
export type TrialAnswer = { kind: 'free' } | Busy | Failed;

/** What taking the lock gives: held by this process now, until it ends, or not. */
export type LockAttempt = { kind: 'held'; db: DatabaseSync } | Busy | Failed;

type Sqlite = typeof import('node:sqlite');

/** This process as a holder. */
export function thisHolder(command: string): LockHolder {
  return { command, pid: process.pid, host: hostname(), since: new Date().toISOString() };
}

function isBusy(error: unknown): boolean {
  const errcode = (error as { errcode?: unknown }).errcode;
  // The primary code is the low byte of an extended one (SQLITE_BUSY_RECOVERY and the like).
  if (typeof errcode === 'number') return (errcode & 0xff) === 5;
  return /database is locked/.test((error as Error)?.message ?? '');
}

function reasonOf(error: unknown): string {
  const errstr = (error as { errstr?: unknown }).errstr;
  return typeof errstr === 'string' ? errstr : ((error as Error)?.message ?? String(error));
}

/** Opens `file` (created if missing) and takes its write lock; the connection, or why not. */
function begin(sqlite: Sqlite, file: string): { db: DatabaseSync } | Busy | Failed {
  let db: DatabaseSync | undefined;
  try {
    db = new sqlite.DatabaseSync(file);
    db.exec(`PRAGMA busy_timeout = ${BUSY_WAIT_MS}`);
    // Exclusive locking mode: the write lock the first write transaction takes is kept after its COMMIT.
    db.exec('PRAGMA locking_mode = EXCLUSIVE');
    db.exec('BEGIN EXCLUSIVE');
    return { db };
  } catch (error) {
    db?.close();
    if (isBusy(error)) return { kind: 'busy', ...optional(readHolder(sqlite, file)) };
    return { kind: 'failed', reason: reasonOf(error) };
  }
}

/** Whether the lock of `file` can be taken now; it is let go again at once. */
export function tryLock(sqlite: Sqlite, file: string): TrialAnswer {
  const begun = begin(sqlite, file);
  if (!('db' in begun)) return begun;
  begun.db.close();
  return { kind: 'free' };
}

/**
 * Takes the lock of `file` for good and records `holder` in it. The returned
 * database must stay referenced for as long as the lock is to be held:
 * closing it (or its collection) ends the lock.
 */
export function takeLock(sqlite: Sqlite, file: string, holder: LockHolder): LockAttempt {
  const begun = begin(sqlite, file);
  if (!('db' in begun)) return begun;
  const { db } = begun;
  try {
    db.exec('CREATE TABLE IF NOT EXISTS holder (command TEXT NOT NULL, pid INTEGER NOT NULL, host TEXT NOT NULL, since TEXT NOT NULL)');
    db.exec('DELETE FROM holder');
    db.prepare('INSERT INTO holder (command, pid, host, since) VALUES (?, ?, ?, ?)').run(holder.command, holder.pid, holder.host, holder.since);
    db.exec('COMMIT');
    return { kind: 'held', db };
  } catch (error) {
    db.close();
    return { kind: 'failed', reason: reasonOf(error) };
  }
}

function optional(holder: LockHolder | undefined): { holder?: LockHolder } {
  return holder ? { holder } : {};
}

/**
 * The holder the file records, read without taking any lock (SQLite's
 * `nolock` URI parameter): the holder's exclusive lock keeps even readers
 * out. Undefined when the file says nothing (its holder is still writing it,
 * or it is not a lock file) or this Node.js opens no URI (before 22.15 or so).
 * Never called by the holder: closing any descriptor of the file ends every
 * fcntl lock the process has on it.
 */
export function readHolder(sqlite: Sqlite, file: string): LockHolder | undefined {
  const uri = pathToFileURL(file);
  uri.search = 'nolock=1';
  try {
    const reader = new sqlite.DatabaseSync(uri.href, { readOnly: true });
    try {
      const row = reader.prepare('SELECT command, pid, host, since FROM holder').get();
      if (!row || typeof row.command !== 'string' || typeof row.pid !== 'number' || typeof row.host !== 'string' || typeof row.since !== 'string') return undefined;
      return { command: row.command, pid: row.pid, host: row.host, since: row.since };
    } finally {
      reader.close();
    }
  } catch {
    return undefined;
  }
}

/** "outpost agent, pid 7 on host agent-0, since …" */
export function describeHolder(holder: LockHolder): string {
  return `outpost ${holder.command}, pid ${holder.pid} on host ${holder.host}, since ${holder.since}`;
}
