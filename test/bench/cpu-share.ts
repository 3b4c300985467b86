// The share of the machine's CPU that other processes took while a bench
// measured something: on a shared machine a busy neighbour halves a figure,
// and a row that prints this says when it happened.

import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { performance } from 'node:perf_hooks';

let ticks: number | undefined;

function ticksPerSecond(): number {
  if (ticks === undefined) {
    try {
      ticks = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      ticks = 100;
    }
  }
  return ticks;
}

/** User + system CPU the whole machine has used since boot, in seconds (/proc/stat). */
export function machineCpuSeconds(): number {
  const [, user, nice, system] = (readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '').trim().split(/\s+/).map(Number);
  return ((user ?? 0) + (nice ?? 0) + (system ?? 0)) / ticksPerSecond();
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

/** User + system CPU of a live process and its direct children (nginx's workers), in seconds; 0 once it is gone. */
export function processCpuSeconds(pid: number | undefined): number {
  if (!pid) return 0;
  let pids = [pid];
  try {
    pids = [pid, ...readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number)];
  } catch {
    // No children file on this kernel: the process alone.
  }
  let total = 0;
  for (const p of pids) {
    try {
      const fields = readFileSync(`/proc/${p}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
      total += (Number(fields[11]) + Number(fields[12])) / ticksPerSecond();
    } catch {
      // Gone meanwhile.
    }
  }
  return total;
}
