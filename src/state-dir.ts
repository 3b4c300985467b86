// STATE_DIR is checked at start: it must be (or become) a directory the agent
// can write, answered within a bound. A bad one is one line and exit 78, not a
// hang (src/core/make-directories.ts: Node's recursive mkdir spins forever on
// a path under /proc) nor a failure later, mid-run.

import { rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { ConfigError } from './config.js';
import { makeDirectories } from './core/make-directories.js';

export const STATE_DIR_PROBE_TIMEOUT_MS = 10_000;

function code(error: unknown): string {
  return (error as NodeJS.ErrnoException)?.code ?? (error as Error)?.message ?? String(error);
}

async function probe(dir: string): Promise<void> {
  await makeDirectories(dir);
  if (!(await stat(dir)).isDirectory()) throw Object.assign(new Error('not a directory'), { code: 'ENOTDIR' });
  const file = path.join(dir, `.outpost-probe-${process.pid}`);
  await writeFile(file, 'probe');
  await rm(file, { force: true });
}

/** Resolves if `dir` is a writable directory (created if missing); else throws a ConfigError naming STATE_DIR. */
export async function checkStateDir(dir: string, timeoutMs = STATE_DIR_PROBE_TIMEOUT_MS): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new ConfigError(`STATE_DIR=${JSON.stringify(dir)} must be a writable directory (no answer within ${timeoutMs / 1000} s)`)),
      timeoutMs,
    );
    timer.unref();
  });
  try {
    await Promise.race([probe(dir), timeout]);
  } catch (error) {
    if (error instanceof ConfigError) throw error;
    throw new ConfigError(`STATE_DIR=${JSON.stringify(dir)} must be a writable directory (${code(error)})`);
  } finally {
    clearTimeout(timer);
  }
}
