// How many check workers to run by default: one thread per core this
// container may use — os.availableParallelism() capped by the cgroup CPU
// quota, rounded up. In agent and local modes the main thread counts as one
// of them, since it claims, spools, sends and takes every result a worker
// hands over: cores − 1 worker threads, and 1 (the main thread alone) on 2
// cores or fewer. On 2 cores, 2 workers beside the agent's main thread gave
// 1.02–1.04× the checks/s of the main thread alone, for 11–29 % more CPU and
// about 90 MB more RSS. `outpost once` only writes lines on its main thread:
// there 2 workers on 2 cores gave 1.2–1.35× the checks/s of one
// (docs/development.md). Never more than JOB_CONCURRENCY, and 1 when so few
// jobs run at once that a thread's cost is not repaid.

import { readFileSync } from 'node:fs';
import os from 'node:os';

/** Below this JOB_CONCURRENCY the default is 1: checks run on the main thread. */
export const MIN_CONCURRENCY_FOR_WORKERS = 4;

type Read = (file: string) => string;
const readText: Read = (file) => readFileSync(file, 'utf8');

/**
 * The CPU quota in cores (fractional), or undefined when there is none:
 * cgroup v2 `cpu.max` ("max 100000" or "150000 100000"), else v1
 * `cpu.cfs_quota_us` / `cpu.cfs_period_us` (-1 when unlimited).
 */
export function cgroupCpuQuota(read: Read = readText): number | undefined {
  try {
    const [quota, period] = read('/sys/fs/cgroup/cpu.max').trim().split(/\s+/);
    if (quota === 'max') return undefined;
    const cores = Number(quota) / Number(period);
    return Number.isFinite(cores) && cores > 0 ? cores : undefined;
  } catch {
    // No cgroup v2 controller here: try v1.
  }
  for (const dir of ['/sys/fs/cgroup/cpu', '/sys/fs/cgroup/cpu,cpuacct']) {
    try {
      const quota = Number(read(`${dir}/cpu.cfs_quota_us`).trim());
      const period = Number(read(`${dir}/cpu.cfs_period_us`).trim());
      if (!(quota > 0) || !(period > 0)) return undefined;
      return quota / period;
    } catch {
      // The next mount point, if any.
    }
  }
  return undefined;
}

/** The cores available to this process: the CPUs it may run on, capped by the cgroup quota (at least 1). */
export function availableCores(read: Read = readText, parallelism: number = os.availableParallelism()): number {
  const quota = cgroupCpuQuota(read);
  const cores = quota === undefined ? parallelism : Math.min(parallelism, Math.ceil(quota));
  return Math.max(1, cores);
}

/**
 * CHECK_WORKERS as given (the operator's choice: workers beyond JOB_CONCURRENCY stay idle), else the default above.
 * `mainThreadBusy`: false for a mode whose main thread does little besides the checks (`outpost once`).
 */
export function checkWorkerCount(configured: number | undefined, jobConcurrency: number, cores: () => number = availableCores, mainThreadBusy = true): number {
  if (configured !== undefined) return Math.max(1, configured);
  if (jobConcurrency < MIN_CONCURRENCY_FOR_WORKERS) return 1;
  const threads = cores() - (mainThreadBusy ? 1 : 0);
  return threads <= 1 ? 1 : Math.min(threads, jobConcurrency);
}
