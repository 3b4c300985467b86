// Small trees of files in a temporary folder, removed after each test.

import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach } from 'vitest';

/** Returns `tree(files)`: writes each file (path → text) under a new temporary folder and returns the folder. */
export function useTempTrees(prefix: string): (files: Record<string, string>) => string {
  const made: string[] = [];
  afterEach(() => {
    for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true });
  });
  return (files) => {
    const root = mkdtempSync(path.join(tmpdir(), prefix));
    made.push(root);
    for (const [file, text] of Object.entries(files)) {
      mkdirSync(path.dirname(path.join(root, file)), { recursive: true });
      writeFileSync(path.join(root, file), text);
    }
    return root;
  };
}
