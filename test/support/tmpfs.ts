// A small tmpfs for a test that needs a disk it can fill or turn read-only.
// Mounting needs root, which the test machine (and its containers) give.

import { execFileSync } from 'node:child_process';
import { afterAll } from 'vitest';
import { tempDir } from './agent-process.js';

/** Mount points of this file's tests, unmounted after them; call once per test file. */
export function useSmallDisks(): (size: string, prefix?: string) => string {
  const mounts: string[] = [];
  afterAll(() => {
    for (const at of mounts.splice(0)) execFileSync('umount', ['-l', at]);
  });
  return (size, prefix = 'outpost-disk-') => {
    if (process.getuid?.() !== 0) throw new Error('these tests mount a tmpfs and must run as root');
    const at = tempDir(prefix);
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size}`, 'tmpfs', at]);
    mounts.push(at);
    return at;
  };
}
