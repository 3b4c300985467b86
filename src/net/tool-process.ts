// Running an external tool (ping, tcpdump, tracepath…) without a shell:
// bounded output, stopped with SIGINT (so it flushes and summarises) and
// killed a moment later, spawn failures reported rather than thrown.

import { type ChildProcess, spawn } from 'node:child_process';

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


/**
 * Where the agent finds the system tools it runs (src/config.ts reads them):
 * binaries the operator named, used as given, else a search of PATH.
 */
export interface ToolPaths {
  /** The agent's PATH: where tools are looked for, and the PATH they run with. */
  readonly searchPath?: string;
  /** PING_PATH. */
  readonly ping?: string;
  /** TCPDUMP_PATH. */
  readonly tcpdump?: string;
  /** TRACEPATH_PATH. */
  readonly tracepath?: string;
  /** TRACEROUTE_PATH. */
  readonly traceroute?: string;
}

export interface RunningTool {
  child: ChildProcess | undefined;
  /** Output so far (bounded). */
  readonly run: ToolRun;
  /** Settles when the process has exited (or could not start). */
  done: Promise<ToolRun>;
  /** Sends SIGINT (the tools flush and print a summary on it), then SIGKILL after `killAfterMs`. */
  stop(killAfterMs?: number): void;
}

/**
 * Starts a tool without a shell, in the C locale, with the agent's PATH
 * (`searchPath`), keeping at most `maxOutput` characters of each stream;
 * `signal` stops it like stop().
 */
export function startTool(
  binary: string,
  args: string[],
  signal: AbortSignal,
  searchPath: string | undefined,
  onStderr?: (text: string) => void,
  maxOutput = 64 * 1024,
): RunningTool {
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
      env: { PATH: searchPath ?? '/usr/bin:/bin', LC_ALL: 'C', LANG: 'C' },
    });
  } catch (error) {
    // Node throws (rather than emits) some exec failures, EPERM among them.
    run.spawnError = error as NodeJS.ErrnoException;
    settle();
    return { child: undefined, run, done, stop };
  }
  child.stdout?.on('data', (chunk: Buffer) => {
    if (run.stdout.length < maxOutput) run.stdout += chunk.toString('utf8');
  });
  child.stderr?.on('data', (chunk: Buffer) => {
    const text = chunk.toString('utf8');
    if (run.stderr.length < maxOutput) run.stderr += text;
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

