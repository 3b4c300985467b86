// The machine's CPU split into "this process tree" and "everything else",
// for benchmarks that want to show when a run was noisy: the other
// processes' share of all cores over a window, from /proc/stat minus the
// CPU of the bench process and its descendants (the agent and its threads,
// nginx, tools they started). Linux only (/proc).

import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import os from 'node:os';
import { performance } from 'node:perf_hooks';

/** Processes a tree walk visits at most (the bench's tree is a handful). */
const MAX_TREE = 4096;

let clockTicks: number | undefined;
export function ticksPerSecond(): number {
  if (clockTicks === undefined) {
    try {
      clockTicks = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      clockTicks = 100;
    }
  }
  return clockTicks;
}

/** User + system CPU the whole machine has used since boot, in seconds (/proc/stat). */
export function machineCpuSeconds(): number {
  const [, user, nice, system] = (readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '').trim().split(/\s+/).map(Number);
  return ((user ?? 0) + (nice ?? 0) + (system ?? 0)) / ticksPerSecond();
}

/**
 * CPU of one live process in seconds, all its threads included, plus its
 * children it has waited for (so a tool that ran and exited in the window
 * still counts as this tree's). 0 for a process that is gone.
 */
export function processCpuSeconds(pid: number, withReaped = true): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ').map(Number);
    const own = (fields[11] ?? 0) + (fields[12] ?? 0);
    const reaped = withReaped ? (fields[13] ?? 0) + (fields[14] ?? 0) : 0;
    return (own + reaped) / ticksPerSecond();
  } catch {
    return 0;
  }
}

/** A process and its descendants, by the children files of every thread (bounded by MAX_TREE). */
export function processTree(root: number = process.pid): number[] {
  const seen = new Set<number>([root]);
  const queue = [root];
  while (queue.length > 0 && seen.size < MAX_TREE) {
    const pid = queue.shift() as number;
    let tasks: string[] = [];
    try {
      tasks = readdirSync(`/proc/${pid}/task`);
    } catch {
      continue;
    }
    for (const task of tasks) {
      let children: string[] = [];
      try {
        children = readFileSync(`/proc/${pid}/task/${task}/children`, 'utf8').trim().split(/\s+/).filter(Boolean);
      } catch {
        // A thread that ended, or a kernel without children files.
      }
      for (const child of children.map(Number)) {
        if (!seen.has(child) && seen.size < MAX_TREE) {
          seen.add(child);
          queue.push(child);
        }
      }
    }
  }
  return [...seen];
}

/** CPU of a process tree in seconds (see processCpuSeconds). */
export function treeCpuSeconds(root: number = process.pid): number {
  return processTree(root).reduce((sum, pid) => sum + processCpuSeconds(pid), 0);
}

export interface CpuMark {
  at: number;
  machine: number;
  tree: number;
}

/** Start of a window; take it while the processes to measure are running (or before they start). */
export function markOthers(root: number = process.pid): CpuMark {
  return { at: performance.now(), machine: machineCpuSeconds(), tree: treeCpuSeconds(root) };
}

export interface OthersCpu {
  /** CPU seconds the rest of the machine used in the window. */
  otherSeconds: number;
  /** otherSeconds as a share of all cores over the window (0–1). */
  otherShare: number;
  /** CPU seconds of this process tree in the window. */
  treeSeconds: number;
}

/**
 * The other processes' CPU since `mark`. Take it before stopping the
 * processes measured: a descendant that exits unreaped leaves the tree with
 * its CPU, which would then count as other.
 */
export function othersSince(mark: CpuMark, root: number = process.pid): OthersCpu {
  const treeSeconds = Math.max(0, treeCpuSeconds(root) - mark.tree);
  const otherSeconds = Math.max(0, machineCpuSeconds() - mark.machine - treeSeconds);
  const capacity = (os.cpus().length * (performance.now() - mark.at)) / 1000;
  return { otherSeconds, otherShare: capacity > 0 ? Math.min(1, otherSeconds / capacity) : 0, treeSeconds };
}

/** CPU seconds of each live thread of a process, summed by thread name (MainThread, outpost-check-w…, V8Worker). */
export function threadCpuSeconds(pid: number): Map<string, number> {
  const byName = new Map<string, number>();
  let tasks: string[] = [];
  try {
    tasks = readdirSync(`/proc/${pid}/task`);
  } catch {
    return byName;
  }
  for (const task of tasks) {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${task}/stat`, 'utf8');
      const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ').map(Number);
      byName.set(name, (byName.get(name) ?? 0) + ((fields[11] ?? 0) + (fields[12] ?? 0)) / ticksPerSecond());
    } catch {
      // A thread that ended meanwhile.
    }
  }
  return byName;
}

/**
 * Starts a window; the function it returns gives the share of all cores used
 * meanwhile by processes other than this one and `ownCpuSeconds()` (say, a
 * child being measured), from 0 to 1.
 */
export function cpuShareWindow(ownCpuSeconds: () => number = () => 0): () => number {
  const at = performance.now();
  const machine = machineCpuSeconds();
  const self = process.cpuUsage();
  const own = ownCpuSeconds();
  return () => {
    const used = process.cpuUsage(self);
    const mine = (used.user + used.system) / 1e6 + (ownCpuSeconds() - own);
    const capacity = (os.cpus().length * (performance.now() - at)) / 1000;
    return capacity > 0 ? Math.max(0, machineCpuSeconds() - machine - mine) / capacity : 0;
  };
}
