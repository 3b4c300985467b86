// Runs the real, built agent (dist/main.js) as a child process and gives
// tests its parsed log lines, its stdout, its health port and its exit.

import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { READY_DEADLINE_MS } from './daemon.js';
import { testDatabaseFor } from './postgres.js';

export const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const MAIN = path.join(REPO, 'dist/main.js');

export type LogLine = Record<string, unknown> & { level: number; msg: string };

export interface AgentProcess {
  proc: ChildProcess;
  logs: LogLine[];
  stdoutLines: string[];
  stderr: () => string;
  stdout: () => string;
  exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  healthPort(): Promise<number>;
  waitForLog(predicate: (line: LogLine) => boolean, timeoutMs?: number, what?: string): Promise<LogLine>;
  kill(signal?: NodeJS.Signals): void;
}

export function tempDir(prefix = 'outpost-test-'): string {
  return mkdtempSync(path.join(tmpdir(), prefix));
}

/**
 * Environment without the developer's own agent settings leaking in.
 * OUTPOST_TEST_CHECK_WORKERS (set by the check-workers project of
 * test/vitest.config.ts) becomes the agent's CHECK_WORKERS, so the same
 * files run once more with checks on worker threads.
 */
export function cleanEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const key of ['PATH', 'HOME', 'LANG', 'TMPDIR']) if (process.env[key]) env[key] = process.env[key];
  const workers = process.env.OUTPOST_TEST_CHECK_WORKERS;
  return { ...env, AGENT_HEALTH_PORT: '0', API_PORT: '0', LOG_LEVEL: 'info', ...(workers ? { CHECK_WORKERS: workers } : {}), ...extra };
}

/**
 * `prefix`: a command that execs the agent's command line given after it (another user, a namespace).
 * `node`: the Node.js binary that runs it (another version than the tests').
 */
export function startAgent(args: string[], env: NodeJS.ProcessEnv, prefix: string[] = [], node = process.execPath): AgentProcess {
  // OUTPOST_TEST_DATABASE=postgres: a server keeps its state in PostgreSQL, one database per STATE_DIR (postgres.ts).
  const database = args[0] === 'server' && env.DATABASE_URL === undefined ? testDatabaseFor(env.STATE_DIR) : undefined;
  if (database !== undefined) env = { ...env, DATABASE_URL: database };
  const [file, ...rest] = [...prefix, node, MAIN, ...args] as [string, ...string[]];
  const proc = spawn(file, rest, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  const logs: LogLine[] = [];
  const stdoutLines: string[] = [];
  let stdout = '';
  let stderr = '';
  let pendingOut = '';
  let pendingErr = '';
  const listeners = new Set<() => void>();
  const take = (line: string, fromStdout: boolean) => {
    if (fromStdout) stdoutLines.push(line);
    if (line.startsWith('{"level":')) {
      try {
        logs.push(JSON.parse(line) as LogLine);
      } catch {
        // Not a log line after all.
      }
    }
    for (const l of [...listeners]) l();
  };
  proc.stdout?.on('data', (chunk: Buffer) => {
    stdout += chunk;
    pendingOut += chunk;
    const lines = pendingOut.split('\n');
    pendingOut = lines.pop() ?? '';
    for (const line of lines) take(line, true);
  });
  proc.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk;
    pendingErr += chunk;
    const lines = pendingErr.split('\n');
    pendingErr = lines.pop() ?? '';
    for (const line of lines) take(line, false);
  });
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    proc.on('exit', (code, signal) => {
      setImmediate(() => {
        for (const l of [...listeners]) l();
        resolve({ code, signal });
      });
    });
  });
  let exited = false;
  exit.then(() => {
    exited = true;
  });
  const waitForLog = (predicate: (line: LogLine) => boolean, timeoutMs = 15_000, what = 'a log line') =>
    new Promise<LogLine>((resolve, reject) => {
      const found = () => logs.find(predicate);
      const hit = found();
      if (hit) return resolve(hit);
      // Gone already: no line can come, so no point waiting out the deadline.
      if (exited) return reject(new Error(`agent had exited before waiting for ${what}; stderr: ${stderr.slice(-2000)}; stdout: ${stdout.slice(-2000)}`));
      const timer = setTimeout(() => {
        listeners.delete(listener);
        reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}; stderr: ${stderr.slice(-2000)}; stdout: ${stdout.slice(-2000)}`));
      }, timeoutMs);
      const listener = () => {
        const line = found();
        if (line) {
          clearTimeout(timer);
          listeners.delete(listener);
          resolve(line);
        } else if (exited) {
          clearTimeout(timer);
          listeners.delete(listener);
          reject(new Error(`agent exited while waiting for ${what}; stderr: ${stderr.slice(-2000)}; stdout: ${stdout.slice(-2000)}`));
        }
      };
      listeners.add(listener);
    });
  return {
    proc,
    logs,
    stdoutLines,
    stderr: () => stderr,
    stdout: () => stdout,
    exit,
    // A start takes longer on a loaded machine (load average 16 seen): the same generous deadline as the test daemons.
    healthPort: async () => Number((await waitForLog((l) => l.msg === 'health server listening', READY_DEADLINE_MS, 'the health server')).port),
    waitForLog,
    kill: (signal = 'SIGTERM') => {
      if (!exited) proc.kill(signal);
    },
  };
}

/** GET on the agent's health server; resolves with status and parsed body (or text). */
export async function probe(port: number, path: string): Promise<{ status: number; body: unknown; text: string }> {
  const response = await fetch(`http://127.0.0.1:${port}${path}`);
  const text = await response.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // Metrics are text.
  }
  return { status: response.status, body, text };
}

/**
 * The process's exit, or a rejection naming `what` and its stderr if it is still running `timeoutMs` after the call:
 * for tests where "it never exits" is the defect, so that the failure says so rather than being the test's timeout.
 */
export async function exitWithin(proc: AgentProcess, timeoutMs: number, what: string): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`still running ${timeoutMs} ms later: ${what}; stderr: ${proc.stderr().slice(-2000)}`)), timeoutMs);
  });
  try {
    return await Promise.race([proc.exit, late]);
  } finally {
    clearTimeout(timer);
  }
}
