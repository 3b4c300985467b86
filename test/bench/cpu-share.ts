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
