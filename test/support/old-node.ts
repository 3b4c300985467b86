// A Node.js older than the one the tests run on, for what Outpost does where
// node:sqlite is missing (before 22.13): the machine's own Node, if it is one.

import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';

/** The path of a Node.js without node:sqlite on this machine, or undefined when there is none. */
export function nodeWithoutSqlite(): string | undefined {
  for (const candidate of ['/usr/bin/node', '/usr/local/bin/node']) {
    if (!existsSync(candidate)) continue;
    try {
      const version = execFileSync(candidate, ['--version'], { encoding: 'utf8' }).trim();
      const [major = 0, minor = 0] = version.replace(/^v/, '').split('.').map(Number);
      if (major < 22 || (major === 22 && minor < 13)) return candidate;
    } catch {
      // Not runnable here.
    }
  }
  return undefined;
}
