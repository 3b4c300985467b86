// Agent mode: wires the control-plane source, the queue, the executors, the
// spool-backed sink, lease keeping, health and shutdown.

import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { ControlPlaneArtifacts } from './control-plane/artifact-store.js';
import { JobAbortedError } from './core/errors.js';
import type { ExecutorRegistry } from './checks/executor-registry.js';
import { type Config, checkSettings, maskUrlCredentials } from './config.js';
import { startCheckWorkers } from './check-workers.js';
import { ControlPlaneClient } from './control-plane/client.js';
import { LeaseKeeper } from './control-plane/leases.js';
import { ControlPlaneSink } from './control-plane/sink.js';
import { ControlPlaneSource } from './control-plane/source.js';
import { Spool } from './control-plane/spool.js';
import { superviseLoop } from './health/supervise.js';
import { Lifecycle } from './health/lifecycle.js';
import type { StartupSignals } from './health/startup-signals.js';
import { describePolicy } from './net/network-policy.js';
import { EventReporter, jobTargetStrings } from './control-plane/events.js';
import type { Logger } from './observability/logger.js';
import { DEFAULT_STALE_SECONDS } from './observability/check-metrics.js';
import { createMetrics } from './observability/metrics.js';
import { JobQueue } from './jobs/queue.js';
import { ipv6AddressesReader } from './net/ipv6-addresses.js';
import type { RunOptions } from './jobs/run.js';
import { usableRuntimeNames } from './checks/scripted/runtimes.js';
import { SecretPolicy } from './secrets/policy.js';
import { VERSION } from './core/version.js';

export interface RunningAgent {
  /** Resolves with the exit code once the agent has stopped. */
  done: Promise<number>;
  /** Error events to the control plane; absent with EXTERNAL_OBSERVABILITY=off. */
  events?: EventReporter;
}

export async function runAgent(
  config: Config,
  registry: ExecutorRegistry,
  logger: Logger,
  flushLogs: () => void,
  secrets: SecretPolicy = new SecretPolicy(),
  startup?: StartupSignals,
): Promise<RunningAgent> {
  // The control plane schedules the checks: a job's frequency may be a default, so series stay an hour.
  const metrics = createMetrics({ checkSeriesMinSeconds: DEFAULT_STALE_SECONDS });
  const agentId = randomUUID();
  const client = new ControlPlaneClient(
    {
      apiUrl: config.apiUrl as string,
      apiKey: config.apiKey as string,
      agentId,
      version: VERSION,
      timeoutMs: config.controlPlaneTimeoutSeconds * 1000,
      proxy: config.proxy,
    },
    metrics,
  );
  const events = config.externalObservability
    ? new EventReporter(client, logger, { agentVersion: VERSION, scrubber: secrets.agentScrubber })
    : undefined;
  // Artifacts of diagnostics and of BROWSER scripts: written under STATE_DIR/artifacts, uploaded, then removed.
  const artifacts = await ControlPlaneArtifacts.open(path.join(config.stateDir, 'artifacts'), client, {
    timeoutMs: config.artifactUploadTimeoutSeconds * 1000,
    authRetryMs: config.authRetrySeconds * 1000,
    onUploadFailed: (error) => events?.report(error, { origin: 'upload' }),
  });
  const runOptions: Omit<RunOptions, 'bodyMemory'> = {
    secrets,
    artifacts,
    diagnostics: config.diagnostics,
    maxResultBytes: config.maxResultBytes,
    ...(config.testFault === 'executor-throw' ? { testFault: config.testFault } : {}),
    onExecutorError: (error, job) =>
      events?.report(error, {
        origin: 'executor',
        checkType: job.checkType,
        scrubber: job.scrubber,
        targetStrings: jobTargetStrings(job.check, job.variables),
      }),
  };
  const workers = await startCheckWorkers(config, metrics, logger, runOptions, DEFAULT_STALE_SECONDS);
  const queue = new JobQueue(config.jobConcurrency, metrics, checkSettings(config), {
    ...runOptions,
    bodyMemory: workers.bodyMemory,
    ...(workers.pool ? { workers: workers.pool } : {}),
  });
  const spool = await Spool.open(
    path.join(config.stateDir, 'spool'),
    { maxResults: config.spoolMaxResults, maxBytes: config.spoolMaxBytes },
    logger,
    (n) => metrics.spoolResults.set(n),
    (error) => events?.report(error, { origin: 'spool' }),
    { onQuarantine: (n) => metrics.spoolQuarantined.inc(n), onWritable: (writable) => metrics.spoolWritable.set(writable ? 1 : 0) },
  );
  metrics.spoolWritable.set(spool.writable ? 1 : 0);
  const lifecycle = new Lifecycle('agent', metrics, {
    inFlight: () => queue.inFlight,
    queued: () => queue.queued,
    spooled: () => spool.results,
    quarantined: () => spool.quarantined,
    spoolDropped: () => spool.dropped,
    spoolWritable: () => spool.writable,
  }, logger, startup);
  // Not ready while the spool cannot write (results would only be held in memory), nor while a check worker restarts.
  lifecycle.modeReady = () => client.authorized === true && spool.writable && (workers.pool?.ready() ?? true);
  lifecycle.networkPolicy = describePolicy(config.networkPolicy);
  const authRetryMs = config.authRetrySeconds * 1000;
  const onFailure = () => undefined;
  // The longest one call may take: a wait for the rate limiter's window, then the request's own timeout.
  const callBoundMs = client.limiter.windowMs + config.controlPlaneTimeoutSeconds * 1000;
  const sink = new ControlPlaneSink(spool, client, logger, authRetryMs, onFailure, (error) => events?.report(error, { origin: 'results-batch' }), {
    heartbeat: lifecycle.watchdog.heart('sink-loop'),
    sendBoundMs: callBoundMs,
  }, () => queue.inFlight === 0 && queue.queued === 0);
  const leaseHeartbeat = lifecycle.watchdog.heart('lease-loop');
  const leases = new LeaseKeeper(
    client,
    logger,
    (jobId) => queue.abort(jobId, new JobAbortedError('lease-lost', 'Aborted: the job lease was lost')),
    { heartbeat: leaseHeartbeat, callBoundMs },
  );
  const source = new ControlPlaneSource({
    queue,
    spool,
    client,
    leases,
    registry,
    logger,
    agent: { id: agentId, version: VERSION, checkTypes: registry.types(), runtimes: registry.has('MULTI_STEP') ? usableRuntimeNames(config.runtimesDir) : [] },
    ipv6Addresses: ipv6AddressesReader(),
    waitSeconds: config.claimWaitSeconds,
    authRetryMs,
    heartbeat: lifecycle.watchdog.heart('claim-loop'),
    claimBoundMs: callBoundMs + config.claimWaitSeconds * 1000,
    ...(config.testFault === 'claim-loop-throw' ? { testFault: config.testFault } : {}),
    onFailure,
    onAttempt: (result, job, line) => sink.deliver({ jobId: job.id, resultId: result.id, result }, line),
    onCompletion: async (completion) => {
      if (completion.result === null) return;
      await sink.deliver({ jobId: completion.jobId, resultId: completion.result.id, result: completion.result }, completion.line);
    },
  });

  await lifecycle.startHealth(config.healthPort, config.healthHost);
  const leaseLoop = new AbortController();
  const leaseRun = superviseLoop('lease-loop', () => leases.run(leaseLoop.signal), { logger, signal: leaseLoop.signal, heartbeat: leaseHeartbeat });
  sink.start();
  source.start();
  lifecycle.started = true;
  logger.info(
    { agentId, version: VERSION, apiUrl: maskUrlCredentials(config.apiUrl as string), concurrency: config.jobConcurrency, checkTypes: registry.types() },
    'outpost agent started',
  );

  const drain = async (signal: NodeJS.Signals) => {
    const graceEnd = Date.now() + config.shutdownGraceSeconds * 1000;
    logger.info({ signal, running: queue.inFlight, graceSeconds: config.shutdownGraceSeconds }, 'shutting down: not ready, no new claims, draining running jobs (a second SIGINT or SIGTERM exits at once; undelivered results stay in the spool)');
    // A job is reported once its result is spooled.
    await queue.drain(config.shutdownGraceSeconds * 1000, {
      stopTaking: () => source.stop(),
      abortWith: new JobAbortedError('shutdown', 'Aborted: the agent shut down before the check finished'),
      onGraceOver: () => logger.warn({ running: queue.inFlight }, 'shutdown grace is over: aborting running jobs and reporting them as errors'),
    });
    leaseLoop.abort();
    await leaseRun;
    leaseHeartbeat.idle();
    const flushed = await sink.flush(Math.max(graceEnd, Date.now() + 10_000));
    await spool.close();
    // After the spool's flush, the last step of the drain: nothing runs on them any more, and what they logged is flushed as
    // they stop. Before the health server closes, so that its last answers stay just before the exit.
    await workers.pool?.close();
    if (!flushed) logger.warn({ spooled: spool.results }, 'control plane unreachable: results stay in the spool and are sent on the next start');
    // Best effort: queued error events get one short try before the client closes.
    await events?.close(2_000);
    await lifecycle.closeHealth();
    await client.close();
    logger.info({ delivered: sink.delivered, spooled: spool.results }, 'outpost agent stopped');
  };
  // Results already spooled stay there for the next start.
  const done = lifecycle.shutdownOnSignals(drain, () => ({ spooled: spool.results }), flushLogs);
  return { done, ...(events ? { events } : {}) };
}
