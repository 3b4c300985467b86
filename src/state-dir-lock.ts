// One Outpost process per STATE_DIR (docs/configuration.md, "One process per
// STATE_DIR"). Agent mode keeps its spool there, local mode its store, server
// mode on SQLite its database: a second process on the same folder would run
// every check twice, or send (and lose) spooled results twice. Each of them
// takes STATE_DIR/outpost.lock at start (src/state-dir-lock-file.ts), before
// its spool or store is opened, and keeps it until the process exits; a second
// one is refused in one line, exit 78.

import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { DatabaseSync } from 'node:sqlite';
import { type Config, ConfigError } from './config.js';
import { makeDirectories } from './core/make-directories.js';
import { describeHolder, type LockHolder, STATE_DIR_LOCK_FILE, takeLock, thisHolder, type TrialAnswer } from './state-dir-lock-file.js';

/** The bound on learning whether the lock can be taken, as on src/state-dir.ts's probe. */
export const STATE_DIR_LOCK_TIMEOUT_MS = 10_000;

const TRIAL = fileURLToPath(new URL('./state-dir-lock-trial.js', import.meta.url));

export type StateDirLock =
  | { kind: 'held'; file: string }
  /** No node:sqlite (Node.js before 22.13): nothing to lock with. */
  | { kind: 'no-sqlite'; reason: string }
  /** The file system cannot lock, or does not answer: the process runs without the lock. */
  | { kind: 'unlocked'; reason: string };

/** The lock, referenced for the rest of the process's life (a collected connection would let it go); the kernel ends it at exit. */
const held: DatabaseSync[] = [];

/**
 * Whether a mode's process keeps state in STATE_DIR that a second process
 * must not share. Not once mode (nothing kept), and not server mode on
 * PostgreSQL: its replicas share the database by design and may share one
 * STATE_DIR for their artifacts (docs/postgres.md).
 */
export function locksStateDir(config: Pick<Config, 'mode' | 'server'>): boolean {
  if (config.mode === 'server') return config.server?.database?.kind !== 'postgres';
  return config.mode === 'agent' || config.mode === 'local';
}

/**
 * Takes STATE_DIR's lock for this process (`command`: its mode). Throws a
 * ConfigError naming STATE_DIR and the holder when another process has it;
 * resolves with why not when this file system cannot lock, so that the
 * process runs as it did before the lock rather than not at all.
 */
export async function lockStateDir(stateDir: string, command: Config['mode'], timeoutMs = STATE_DIR_LOCK_TIMEOUT_MS): Promise<StateDirLock> {
  let sqlite: typeof import('node:sqlite');
  try {
    sqlite = await import('node:sqlite');
  } catch {
    return { kind: 'no-sqlite', reason: `node:sqlite needs Node.js 22.13 or newer, this is Node.js ${process.versions.node}` };
  }
  const file = path.join(stateDir, STATE_DIR_LOCK_FILE);
  // Tried first in another process, within the bound: a call blocked in this one could not be given up on.
  const answer = await tryElsewhere(stateDir, file, timeoutMs);
  if (answer.kind === 'busy') throw refusal(stateDir, file, answer.holder);
  if (answer.kind === 'failed') return { kind: 'unlocked', reason: `${file} cannot be locked (${answer.reason})` };
  // The file system answered just now: taken here, for good. Another process may have come in between.
  const attempt = takeLock(sqlite, file, thisHolder(command));
  if (attempt.kind === 'busy') throw refusal(stateDir, file, attempt.holder);
  if (attempt.kind === 'failed') return { kind: 'unlocked', reason: `${file} cannot be locked (${attempt.reason})` };
  held.push(attempt.db);
  return { kind: 'held', file };
}

/** The one line a second process exits with. */
function refusal(stateDir: string, file: string, holder: LockHolder | undefined): ConfigError {
  const by = holder ? describeHolder(holder) : 'another process';
  return new ConfigError(`STATE_DIR=${JSON.stringify(stateDir)} is in use: ${file} is locked by ${by}; run one Outpost process per STATE_DIR`);
}

/** Makes STATE_DIR if need be (a caller that did not check it first) and tries the lock in a child process; gives up after `timeoutMs`. */
async function tryElsewhere(stateDir: string, file: string, timeoutMs: number): Promise<TrialAnswer> {
  let timer: NodeJS.Timeout | undefined;
  let gaveUp = false;
  let stopTrial: () => void = () => undefined;
  const late = new Promise<TrialAnswer>((resolve) => {
    timer = setTimeout(() => {
      gaveUp = true;
      stopTrial();
      resolve({ kind: 'failed', reason: `no answer within ${timeoutMs / 1000} s` });
    }, timeoutMs);
  });
  const tried = (async (): Promise<TrialAnswer> => {
    try {
      await makeDirectories(stateDir);
    } catch (error) {
      return { kind: 'failed', reason: (error as NodeJS.ErrnoException).code ?? (error as Error).message };
    }
    // Too late already (the folder took the whole bound): no try that nobody waits for.
    if (gaveUp) return { kind: 'failed', reason: 'given up' };
    return runTrial(file, (stop) => {
      stopTrial = stop;
    });
  })();
  try {
    return await Promise.race([tried, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** Runs src/state-dir-lock-trial.ts on `file`; `onStart` gets a way to end it (the bound's end). */
function runTrial(file: string, onStart: (stop: () => void) => void): Promise<TrialAnswer> {
  return new Promise((resolve) => {
    const failed = (reason: string) => resolve({ kind: 'failed', reason });
    const child = spawn(process.execPath, [TRIAL, file], { stdio: ['ignore', 'pipe', 'ignore'] });
    onStart(() => {
      // Blocked in the kernel it may not even die: it must not keep this process alive.
      child.kill('SIGKILL');
      child.unref();
      child.stdout.destroy();
    });
    let out = '';
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (chunk: string) => {
      out += chunk;
    });
    child.on('error', (error: NodeJS.ErrnoException) => failed(`its try could not be started: ${error.code ?? error.message}`));
    child.on('close', (code, signal) => {
      const answer = parseAnswer(out);
      if (answer) resolve(answer);
      else failed(`its try ended without an answer (${signal ?? `exit code ${code}`})`);
    });
  });
}

function parseAnswer(text: string): TrialAnswer | undefined {
  try {
    const answer = JSON.parse(text) as TrialAnswer;
    return answer.kind === 'free' || answer.kind === 'busy' || answer.kind === 'failed' ? answer : undefined;
  } catch {
    return undefined;
  }
}
