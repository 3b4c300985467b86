// The one way Outpost makes a folder that may be missing (STATE_DIR, its
// store, spool and artifact folders): one level at a time. Node's
// mkdir({ recursive: true }) spins forever at full CPU on a path under /proc
// (it keeps retrying the ENOENT that procfs answers for any new name), so a
// bad STATE_DIR would hang a mode instead of failing with ENOENT.

import { lstat, mkdir } from 'node:fs/promises';
import path from 'node:path';

function code(error: unknown): string | undefined {
  return (error as NodeJS.ErrnoException | undefined)?.code;
}

async function exists(at: string): Promise<boolean> {
  try {
    await lstat(at);
    return true;
  } catch (error) {
    if (code(error) === 'ENOENT') return false;
    throw error;
  }
}

/**
 * Creates `dir` and its missing parents, each with `mode` (subject to the
 * umask); a folder that exists already is left as it is. Rejects with the
 * file system's error (ENOENT under /proc, EACCES, ENOTDIR, EROFS, ENOSPC).
 */
export async function makeDirectories(dir: string, mode?: number): Promise<void> {
  const missing: string[] = [];
  for (let at = path.resolve(dir); !(await exists(at)); at = path.dirname(at)) {
    missing.unshift(at);
    if (path.dirname(at) === at) break;
  }
  for (const at of missing) {
    await mkdir(at, mode === undefined ? {} : { mode }).catch((error: unknown) => {
      // Another writer (a concurrent attempt, another process) made it in between.
      if (code(error) !== 'EEXIST') throw error;
    });
  }
}
