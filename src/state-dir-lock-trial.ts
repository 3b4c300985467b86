// A try of STATE_DIR's lock in a process of its own, for src/state-dir-lock.ts:
// where a file system's locks do not answer (an NFSv3 mount whose lock manager
// is gone), fcntl blocks, and a call blocked in the agent's own thread could
// not be given up on. Prints the outcome as one JSON line and ends, letting the
// lock go. Run only where node:sqlite exists (the parent imported it first).

import * as sqlite from 'node:sqlite';
import { tryLock } from './state-dir-lock-file.js';

const file = process.argv[2];
if (!file) {
  process.stderr.write('usage: state-dir-lock-trial.js <lock file>\n');
  process.exit(64);
}
process.stdout.write(`${JSON.stringify(tryLock(sqlite, file))}\n`);
