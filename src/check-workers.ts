// Starting the check workers of agent and local modes (src/jobs/workers/):
// how many (CHECK_WORKERS, or the cores available), the shared body budget
// sized for them, and the one start-up log line saying so.

import { bodyMemoryBudget, type Config } from './config.js';
import type { MemoryBudget } from './core/memory-budget.js';
import type { RunOptions } from './jobs/run.js';
import { availableCores, checkWorkerCount } from './jobs/workers/cores.js';
import { WORKER_START_TIMEOUT_MS, WorkerPool } from './jobs/workers/pool.js';
import type { Logger } from './observability/logger.js';
import type { Metrics } from './observability/metrics.js';
import { checkSettings } from './config.js';
import { secretsInAgentEnv } from './secrets/policy.js';

export interface CheckWorkers {
  /** Undefined with one worker: checks run on the main thread, as without workers. */
  pool: WorkerPool | undefined;
  bodyMemory: MemoryBudget;
}

/**
 * Budgets and starts the workers, and waits (bounded) until they are up, so
 * that a mode is ready and runs its first checks on them as configured; a
 * worker that does not come up is logged and retried by the pool while the
 * mode starts anyway (not ready meanwhile). `run` is every queue option but
 * the budget and the pool.
 */
export async function startCheckWorkers(
  config: Config,
  metrics: Metrics,
  logger: Logger,
  run: Omit<RunOptions, 'bodyMemory'>,
  checkSeriesMinSeconds?: number,
): Promise<CheckWorkers> {
  const count = checkWorkerCount(config.checkWorkers, config.jobConcurrency, availableCores, config.mode !== 'once');
  const threads = count > 1 ? count : 0;
  const bodyMemory = bodyMemoryBudget(config, logger, 1 + threads);
  logger.info(
    { checkWorkers: count, from: config.checkWorkers !== undefined ? 'CHECK_WORKERS' : `${availableCores()} available cores, JOB_CONCURRENCY ${config.jobConcurrency}` },
    count > 1 ? 'check workers: URL, API, TCP, DNS and ICMP checks run on worker threads' : 'check workers: checks run on the main thread',
  );
  metrics.checkWorkers.set(0);
  if (threads === 0) return { pool: undefined, bodyMemory };
  const pool = WorkerPool.start({
    workers: threads,
    metrics,
    settings: checkSettings(config),
    run: { ...run, bodyMemory },
    agentSecrets: secretsInAgentEnv(config.processEnv),
    logLevel: config.logLevel,
    logStream: config.mode === 'agent' || config.mode === 'server' ? 'stdout' : 'stderr',
    logger,
    bodyMemory,
    ...(checkSeriesMinSeconds !== undefined ? { checkSeriesMinSeconds } : {}),
  });
  await pool.whenReady(WORKER_START_TIMEOUT_MS).catch((error: unknown) => logger.error({ err: error }, 'check workers are not all up: starting anyway, not ready until they are'));
  return { pool, bodyMemory };
}
