// Installs the benchmark's Debian peers (nginx-light, prometheus-blackbox-exporter, curl)
// when they are missing. Idempotent: nothing runs when every binary is present,
// and `apt-get update` runs only when an install is needed.

import { spawnSync } from 'node:child_process';
import { findExecutable } from '../support/nginx.js';

export interface DebianTool {
  /** Executable looked up like `command -v` (PATH plus the sbin directories). */
  binary: string;
  /** Debian package that provides it. */
  pkg: string;
}

const APT_TIMEOUT_MS = 300_000;

function apt(args: string[]): void {
  const run = spawnSync('apt-get', args, {
    env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
    encoding: 'utf8',
    timeout: APT_TIMEOUT_MS,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  if (run.error || run.status !== 0) {
    const why = run.error ? run.error.message : `exit code ${run.status}`;
    throw new Error(`apt-get ${args.join(' ')} failed (${why}):\n${(run.stdout ?? '').slice(-2000)}\n${(run.stderr ?? '').slice(-2000)}`);
  }
}

/** Returns the absolute path of each tool's binary, installing missing packages first. */
export function ensureDebianTools(tools: DebianTool[], log: (line: string) => void = () => undefined): Record<string, string> {
  const missing = tools.filter((t) => findExecutable(t.binary) === undefined);
  if (missing.length > 0) {
    const pkgs = [...new Set(missing.map((t) => t.pkg))];
    if (typeof process.getuid === 'function' && process.getuid() !== 0) {
      throw new Error(`missing ${missing.map((t) => t.binary).join(', ')}; install as root: apt-get install -y ${pkgs.join(' ')}`);
    }
    log(`installing ${pkgs.join(' ')} (apt-get update + install)…`);
    apt(['update', '-qq']);
    apt(['install', '-y', '-qq', '--no-install-recommends', ...pkgs]);
  }
  const found: Record<string, string> = {};
  for (const tool of tools) {
    const file = findExecutable(tool.binary);
    if (!file) throw new Error(`${tool.binary} is still missing after installing ${tool.pkg}`);
    found[tool.binary] = file;
  }
  return found;
}
