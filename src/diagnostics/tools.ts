// The system tools diagnostics run (tcpdump, tracepath, traceroute, ip,
// stdbuf): how they are found, and one way to run them — no shell, C locale,
// bounded output, stopped on an abort signal (SIGINT, then SIGKILL).

import { accessSync, constants, readFileSync } from 'node:fs';
import path from 'node:path';
import type { ToolPaths } from '../net/tool-process.js';

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
export function locateTool(name: ToolName, tools: ToolPaths): Located | undefined {
  const variable = TOOL_PATH_VARIABLES[name];
  const configured = name === 'tcpdump' || name === 'tracepath' || name === 'traceroute' ? tools[name] : undefined;
  if (variable && configured) return { path: configured, from: variable };
  const dirs = [...(tools.searchPath ?? '').split(path.delimiter).filter(Boolean), ...EXTRA_DIRS];
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

export { type RunningTool, startTool, type ToolPaths, type ToolRun } from '../net/tool-process.js';

/** One line of a tool's stderr worth quoting (the last non-empty one that is not tcpdump's banner). */
export function lastLine(text: string): string {
  const lines = text
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !/^Running as user/.test(l));
  return lines.at(-1) ?? '';
}
