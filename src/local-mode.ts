// Local and once modes: jobs come from a checks file, results go to stdout
// and an optional JSONL file. Same queue, executors and result format as the
// agent.

import { randomUUID } from 'node:crypto';
import { LocalArtifacts, localArtifactsRoot } from './artifacts/store.js';
import { JobAbortedError } from './core/errors.js';
import type { ExecutorRegistry } from './checks/executor-registry.js';
import { bodyMemoryBudget, type Config, checkSettings, EXIT_CONFIG } from './config.js';
import type { PreparedJob } from './jobs/prepare.js';
import { Lifecycle } from './health/lifecycle.js';
import type { Logger } from './observability/logger.js';
import { createMetrics } from './observability/metrics.js';
import { JobQueue } from './jobs/queue.js';
import type { SecretPolicy } from './secrets/policy.js';
import { loadChecksFile, type LocalCheck } from './checks/checks-file.js';
import { Scheduler } from './local/scheduler.js';
import { LocalSink } from './local/sink.js';

function prepareLocal(local: LocalCheck, logger: Logger): PreparedJob {
  const { check, executor } = local;
  const jobId = randomUUID();
  return {
    jobId,
    identity: { checkRunId: null, sequenceId: randomUUID(), runLocation: 'local' },
    checkIdentity: { id: check.id, name: check.name, checkType: check.checkType },
    runnable: { check, executor, target: executor.target(check.request) },
    variables: local.variables,
    triggerSource: null,
    logger: logger.child({ jobId, checkId: check.id, checkType: check.checkType }),
  };
}

export async function runLocal(
  config: Config,
  registry: ExecutorRegistry,
  logger: Logger,
  flushLogs: () => void,
  secrets?: SecretPolicy,
): Promise<{ done: Promise<number> }> {
  const checks = await loadChecksFile(config.checksFile as string, registry);
  const metrics = createMetrics();
  // The results file first: a --results that cannot be opened is one line and exit 78, with nothing logged before it.
  const sink = new LocalSink(process.stdout, config.resultsFile, (error) => {
    // Results can no longer be recorded: stop, saying so in one line (exit 78, like a bad --results at start).
    process.stderr.write(`outpost: --results ${config.resultsFile} cannot be written (${error.code ?? error.message})\n`);
    flushLogs();
    process.exit(EXIT_CONFIG);
  });
  await sink.open();
  const bodyMemory = bodyMemoryBudget(config, logger);
  // No error events here: local and once modes have no control plane.
  const queue = new JobQueue(config.jobConcurrency, metrics, checkSettings(config), {
    ...(secrets ? { secrets } : {}),
    // Artifacts (diagnostics', BROWSER scripts') stay in a folder beside the results file (docs/diagnostics.md).
    artifacts: new LocalArtifacts(localArtifactsRoot(config.resultsFile, config.stateDir)),
    diagnostics: config.diagnostics,
    bodyMemory,
    maxResultBytes: config.maxResultBytes,
    ...(config.testFault === 'executor-throw' ? { testFault: config.testFault } : {}),
  });
  const lifecycle = new Lifecycle(config.mode, metrics, { inFlight: () => queue.inFlight, queued: () => queue.queued, spooled: () => 0, quarantined: () => 0, spoolDropped: () => 0, spoolWritable: () => true }, logger);
  const runOne = async (local: LocalCheck) => {
    const completion = await queue.submit(prepareLocal(local, logger), async (attempt) => sink.deliver(attempt));
    try {
      // The memory its body held is given back once the result is written out, not merely queued to be.
      if (completion.result) await sink.deliver(completion.result);
    } finally {
      completion.release();
    }
  };

  if (config.mode === 'once') {
    lifecycle.started = true;
    let interrupted = false;
    lifecycle.onSignals(
      () => {
        interrupted = true;
        queue.abortAll(new JobAbortedError('shutdown', 'Aborted: interrupted'));
      },
      (signal) => {
        flushLogs();
        process.exit(signal === 'SIGINT' ? 130 : 143);
      },
    );
    const done = Promise.all(checks.map(runOne)).then(async () => {
      await sink.close();
      const { passed, degraded, failed, error } = sink.counts;
      const total = passed + degraded + failed + error;
      process.stderr.write(
        `outpost once: ${total} checks: ${passed} passed, ${degraded} degraded, ${failed} failed, ${error} errors${interrupted ? ' (interrupted)' : ''}\n`,
      );
      return failed + error === 0 && !interrupted ? 0 : 1;
    });
    return { done };
  }

  await lifecycle.startHealth(config.healthPort, config.healthHost);
  const scheduler = new Scheduler(
    checks.map((c) => ({ ...c, id: c.check.id, frequencySeconds: c.check.frequency })),
    runOne,
    logger,
    Date.now,
    lifecycle.watchdog.heart('scheduler'),
  );
  scheduler.start();
  lifecycle.started = true;
  logger.info({ checks: checks.length, file: config.checksFile, resultsFile: config.resultsFile ?? null }, 'outpost local mode started');

  const drain = async (signal: NodeJS.Signals) => {
    logger.info({ signal, running: queue.inFlight }, 'shutting down: finishing running checks');
    // A check is reported once runOne has written its result.
    await queue.drain(config.shutdownGraceSeconds * 1000, {
      stopTaking: () => scheduler.stop(),
      abortWith: new JobAbortedError('shutdown', 'Aborted: the agent shut down before the check finished'),
    });
    await sink.close();
    await lifecycle.closeHealth();
    logger.info(sink.counts, 'outpost local mode stopped');
  };
  const done = lifecycle.shutdownOnSignals(drain, () => ({ ...sink.counts }), flushLogs);
  return { done };
}
