// The system tools diagnostics run (tcpdump, tracepath, traceroute, ip,
// stdbuf): how they are found, and one way to run them — no shell, C locale,
// bounded output, stopped on an abort signal (SIGINT, then SIGKILL).

import { type ChildProcess, spawn } from 'node:child_process';
import { accessSync, constants, readFileSync } from 'node:fs';
import path from 'node:path';

export type ToolName = 'tcpdump' | 'tracepath' | 'traceroute' | 'ip' | 'stdbuf';

/** Environment variables that name a tool's binary explicitly (used as given). */
export const TOOL_PATH_VARIABLES: Partial<Record<ToolName, string>> = {
  tcpdump: 'TCPDUMP_PATH',
  tracepath: 'TRACEPATH_PATH',
  traceroute: 'TRACEROUTE_PATH',
};

/** Searched after PATH: Debian keeps tcpdump and traceroute in sbin, which a non-root PATH often lacks. */
const EXTRA_DIRS = ['/usr/sbin', '/sbin', '/usr/bin', '/bin'];

export interface Located {
  path: string;
  /** `TCPDUMP_PATH`… when configured, else `PATH`. */
  from: string;
}

/** `<NAME>_PATH` when set, else the first executable on PATH or in the sbin/bin directories. */
export function locateTool(name: ToolName, env: NodeJS.ProcessEnv = process.env): Located | undefined {
  const variable = TOOL_PATH_VARIABLES[name];
  const configured = variable ? env[variable]?.trim() : undefined;
  if (variable && configured) return { path: configured, from: variable };
  const dirs = [...(env.PATH ?? '').split(path.delimiter).filter(Boolean), ...EXTRA_DIRS];
  for (const dir of dirs) {
    const file = path.join(dir, name);
    try {
      accessSync(file, constants.X_OK);
      return { path: file, from: 'PATH' };
    } catch {
      // Not here.
    }
  }
  return undefined;
}

const CAP_NET_RAW = 13;

/** Whether this process holds CAP_NET_RAW in its effective set (root in a default container does). */
export function hasNetRaw(statusFile = '/proc/self/status'): boolean {
  try {
    const line = /^CapEff:\s*([0-9a-f]+)$/im.exec(readFileSync(statusFile, 'utf8'))?.[1];
    return line !== undefined && (BigInt(`0x${line}`) & (1n << BigInt(CAP_NET_RAW))) !== 0n;
  } catch {
    return false;
  }
}

export interface ToolRun {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  /** spawn failed (ENOENT, EACCES, EPERM…): the tool never ran. */
  spawnError?: NodeJS.ErrnoException;
  /** True when the abort signal stopped it. */
  stopped: boolean;
}

const MAX_OUTPUT = 64 * 1024;

export interface RunningTool {
  child: ChildProcess | undefined;
  /** Output so far (bounded). */
  readonly run: ToolRun;
  /** Settles when the process has exited (or could not start). */
  done: Promise<ToolRun>;
  /** Sends SIGINT (the tools flush and print a summary on it), then SIGKILL after `killAfterMs`. */
  stop(killAfterMs?: number): void;
}

/** Starts a tool without a shell; `signal` stops it like stop(). */
export function startTool(binary: string, args: string[], signal: AbortSignal, onStderr?: (text: string) => void): RunningTool {
  const run: ToolRun = { code: null, signal: null, stdout: '', stderr: '', stopped: false };
  let child: ChildProcess | undefined;
  let killTimer: NodeJS.Timeout | undefined;
  let resolveDone: (run: ToolRun) => void = () => undefined;
  const done = new Promise<ToolRun>((resolve) => {
    resolveDone = resolve;
  });
  let settled = false;
  const settle = () => {
    if (settled) return;
    settled = true;
    if (killTimer) clearTimeout(killTimer);
    signal.removeEventListener('abort', onAbort);
    resolveDone(run);
  };
  const stop = (killAfterMs = 1_000) => {
    if (settled || run.stopped) return;
    run.stopped = true;
    child?.kill('SIGINT');
    killTimer = setTimeout(() => child?.kill('SIGKILL'), killAfterMs);
  };
  function onAbort() {
    stop();
  }
  try {
    child = spawn(binary, args, {
      shell: false,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', LC_ALL: 'C', LANG: 'C' },
    });
  } catch (error) {
    // Node throws (rather than emits) some exec failures, EPERM among them.
    run.spawnError = error as NodeJS.ErrnoException;
    settle();
    return { child: undefined, run, done, stop };
  }
  child.stdout?.on('data', (chunk: Buffer) => {
    if (run.stdout.length < MAX_OUTPUT) run.stdout += chunk.toString('utf8');
  });
  child.stderr?.on('data', (chunk: Buffer) => {
    const text = chunk.toString('utf8');
    if (run.stderr.length < MAX_OUTPUT) run.stderr += text;
    onStderr?.(run.stderr);
  });
  child.once('error', (error: NodeJS.ErrnoException) => {
    run.spawnError = error;
    settle();
  });
  child.once('close', (code, killedBy) => {
    run.code = code;
    run.signal = killedBy;
    settle();
  });
  if (signal.aborted) onAbort();
  else signal.addEventListener('abort', onAbort, { once: true });
  return { child, run, done, stop };
}

/** One line of a tool's stderr worth quoting (the last non-empty one that is not tcpdump's banner). */
export function lastLine(text: string): string {
  const lines = text
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !/^Running as user/.test(l));
  return lines.at(-1) ?? '';
}
