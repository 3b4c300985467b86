// Local and once modes: jobs come from a checks file, results go to stdout
// and an optional JSONL file. Same queue, executors and result format as the
// agent. Local mode is server mode with one in-process agent (docs/server.md
// "Local mode"): the session scheduler, the store (STATE_DIR/outpost.db) and
// the read API on 127.0.0.1:API_PORT; where node:sqlite is missing (Node.js
// before 22.13) it runs the checks file's checks on its own scheduler, as
// once mode does, without store or API.

import { randomUUID } from 'node:crypto';
import type { Server } from 'node:http';
import path from 'node:path';
import { LocalArtifacts, localArtifactsRoot } from './artifacts/store.js';
import { JobAbortedError } from './core/errors.js';
import { makeDirectories } from './core/make-directories.js';
import type { ExecutorRegistry } from './checks/executor-registry.js';
import { type Config, checkSettings, ConfigError, EXIT_CONFIG } from './config.js';
import { startCheckWorkers } from './check-workers.js';
import type { WorkerPool } from './jobs/workers/pool.js';
import type { PreparedJob } from './jobs/prepare.js';
import { Lifecycle } from './health/lifecycle.js';
import type { StartupSignals } from './health/startup-signals.js';
import { describePolicy } from './net/network-policy.js';
import type { Logger } from './observability/logger.js';
import { createMetrics, type Metrics } from './observability/metrics.js';
import { type DrainOptions, FINAL_REPORT_MS, JobQueue } from './jobs/queue.js';
import type { SecretPolicy } from './secrets/policy.js';
import { loadChecksFile, type LocalCheck, logIgnoredFields, type PrivateLocation, parseServerChecksFile, readChecksFileText } from './checks/checks-file.js';
import { AGENT_ROUTE_LIMIT_PER_MINUTE } from './core/protocol.js';
import { Scheduler } from './local/scheduler.js';
import { LocalSink } from './local/sink.js';
import { StoreSource } from './local/store-source.js';
import { RateLimiter } from './server/http/rate-limit.js';
import { badgeRoutes } from './server/badge-api.js';
import { closeApiServer, Router, startApiServer } from './server/http/router.js';
import { readRoutes } from './server/read-api.js';
import { alertsRoutes } from './server/alerts-api.js';
import { analyticsRoutes } from './server/analytics-api.js';
import { LEASE_MS } from './server/agent-api.js';
import { SessionScheduler } from './server/scheduler.js';
import { heartbeatRoutes } from './server/heartbeat-api.js';
import { HeartbeatSeries, HeartbeatWatcher } from './server/heartbeats.js';
import { SqliteHeartbeatStore } from './store/sqlite/heartbeats-store.js';
import { SqliteAnalyticsStore } from './store/sqlite/analytics-store.js';
import type { SqliteStore } from './store/sqlite/sqlite-store.js';
import { apiOrigin, applyChecksFile, type ChecksFileStores, featurePruners, type ParsedChecksFile, PUBLIC_LIMIT_PER_MINUTE, startAlerts } from './server-mode.js';
import { ChecksFileReloader } from './checks-file-reload.js';
import { suppressed } from './server/maintenance.js';
import { errorGroupRoutes } from './server/error-groups-api.js';
import { maintenanceRoutes } from './server/maintenance-api.js';
import { dashboardRoutes } from './server/dashboards-api.js';
import { DatabaseWrites } from './server/database-writes.js';
import { SqliteDashboardStore } from './store/sqlite/dashboards-store.js';
import { SqliteMaintenanceWindowStore } from './store/sqlite/maintenance-windows-store.js';

/** The private location local mode implies and runs in this process. */
export const LOCAL_LOCATION: PrivateLocation = { id: 'local', name: 'This machine (outpost local)' };
/** Local mode's read API is for this machine only. */
export const LOCAL_API_HOST = '127.0.0.1';
/** Requests in flight get this long to finish at shutdown. */
const API_CLOSE_GRACE_MS = 5_000;

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

async function openSink(config: Config, logger: Logger, flushLogs: () => void): Promise<LocalSink> {
  try {
    return await openedSink(config, logger, flushLogs);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENXIO') throw new ConfigError(`--results ${config.resultsFile} is a FIFO that no process is reading: start its reader first`);
    throw error;
  }
}

function openedSink(config: Config, logger: Logger, flushLogs: () => void): Promise<LocalSink> {
  const sink = new LocalSink(
    process.stdout,
    config.resultsFile,
    (error) => {
      // Results can no longer be recorded: stop, saying so in one line (exit 78, like a bad --results at start).
      process.stderr.write(`outpost: --results ${config.resultsFile} cannot be written (${error.code ?? error.message})\n`);
      flushLogs();
      process.exit(EXIT_CONFIG);
    },
    (error) => {
      // Whoever read stdout is gone (`| head`) or it is full: the run goes on, its results recorded where they still can be.
      const still = [...(config.resultsFile ? [`--results ${config.resultsFile}`] : []), ...(config.mode === 'local' ? ['the store'] : [])];
      const where = still.length > 0 ? `they still go to ${still.join(' and ')}` : 'they are counted but no longer recorded';
      logger.warn({ code: error.code ?? error.message }, `stdout cannot be written (${error.code ?? error.message}): results are no longer printed; ${where}`);
    },
  );
  return sink.open().then(() => sink);
}

/** The drain's bound on handing on the last results: stdout is the one place that can hold them forever. */
function finalReport(logger: Logger): Pick<DrainOptions, 'reportWithinMs' | 'onReportTimeout'> {
  return {
    reportWithinMs: FINAL_REPORT_MS,
    onReportTimeout: (unreported) =>
      logger.warn(
        { unreported, waitedMs: FINAL_REPORT_MS },
        `${unreported} ${unreported === 1 ? 'result was' : 'results were'} not handed on within ${FINAL_REPORT_MS / 1000} s of the grace's end (stdout is not being read): stopping without printing them`,
      ),
  };
}

async function localQueue(config: Config, metrics: Metrics, logger: Logger, secrets: SecretPolicy | undefined): Promise<{ queue: JobQueue; workers: WorkerPool | undefined }> {
  // No error events here: local and once modes have no control plane.
  const run = {
    ...(secrets ? { secrets } : {}),
    // Artifacts (diagnostics', BROWSER scripts') stay in a folder beside the results file (docs/diagnostics.md).
    artifacts: new LocalArtifacts(localArtifactsRoot(config.resultsFile, config.stateDir)),
    diagnostics: config.diagnostics,
    maxResultBytes: config.maxResultBytes,
    ...(config.testFault === 'executor-throw' ? { testFault: config.testFault } : {}),
  };
  const { pool, bodyMemory } = await startCheckWorkers(config, metrics, logger, run);
  const queue = new JobQueue(config.jobConcurrency, metrics, checkSettings(config), { ...run, bodyMemory, ...(pool ? { workers: pool } : {}) });
  return { queue, workers: pool };
}

/** STATE_DIR/outpost.db, or why local mode runs without it. */
/**
 * The store in STATE_DIR (checked writable by src/cli.ts). Only a Node.js without node:sqlite runs on without one;
 * a store that cannot be opened stops the process in one line, as server mode does: running on would lose the read
 * API, dashboards, heartbeats and alerts with nothing but a warning.
 */
async function openLocalStore(stateDir: string): Promise<{ store: SqliteStore } | { reason: string }> {
  try {
    await import('node:sqlite');
  } catch {
    return { reason: `local mode runs without its store and read API: node:sqlite needs Node.js 22.13 or newer, this is Node.js ${process.versions.node}` };
  }
  const file = path.join(stateDir, 'outpost.db');
  try {
    await makeDirectories(stateDir);
    const { SqliteStore } = await import('./store/sqlite/sqlite-store.js');
    return { store: await SqliteStore.open(file) };
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? (error as Error).message;
    throw new ConfigError(`STATE_DIR=${JSON.stringify(stateDir)}: local mode's store ${file} cannot be opened (${code})`);
  }
}

export async function runLocal(
  config: Config,
  registry: ExecutorRegistry,
  logger: Logger,
  flushLogs: () => void,
  secrets?: SecretPolicy,
  startup?: StartupSignals,
): Promise<{ done: Promise<number> }> {
  let checks: LocalCheck[];
  let withoutStore: { reason: string } | undefined;
  let sink: LocalSink;
  if (config.mode === 'local') {
    const file = config.checksFile as string;
    const startText = await readChecksFileText(file);
    const parsed = parseServerChecksFile(startText, file, registry, LOCAL_LOCATION);
    logIgnoredFields(logger, file, parsed.ignoredFields);
    // The results file first: a --results that cannot be opened is one line and exit 78, with nothing logged before it.
    sink = await openSink(config, logger, flushLogs);
    const opened = await openLocalStore(config.stateDir);
    if ('store' in opened) return runLocalWithStore(config, registry, logger, flushLogs, secrets, { parsed, text: startText }, opened.store, sink, startup);
    withoutStore = opened;
    if (parsed.heartbeats.length > 0) {
      withoutStore = { ...opened, reason: `${opened.reason}; its ${parsed.heartbeats.length} HEARTBEAT checks are not served` };
    }
    checks = parsed.checks.filter((c) => c.locations.includes(LOCAL_LOCATION.id));
  } else {
    checks = await loadChecksFile(config.checksFile as string, registry, logger);
    sink = await openSink(config, logger, flushLogs);
  }
  const metrics = createMetrics();
  const { queue, workers } = await localQueue(config, metrics, logger, secrets);
  const lifecycle = new Lifecycle(config.mode, metrics, { inFlight: () => queue.inFlight, queued: () => queue.queued, spooled: () => 0, quarantined: () => 0, spoolDropped: () => 0, spoolWritable: () => true }, logger, startup);
  lifecycle.networkPolicy = describePolicy(config.networkPolicy);
  // Not ready while a check worker restarts.
  if (workers) lifecycle.modeReady = () => workers.ready();
  const runOne = async (local: LocalCheck) => {
    const completion = await queue.submit(prepareLocal(local, logger), async (attempt, line) => sink.deliver(attempt, line));
    try {
      // The memory its body held is given back once the result is written out, not merely queued to be.
      if (completion.result) await sink.deliver(completion.result, completion.line);
    } finally {
      completion.release();
    }
  };

  if (config.mode === 'once') {
    lifecycle.started = true;
    let interrupted = false;
    let giveUp: () => void = () => undefined;
    const gaveUp = new Promise<'gave-up'>((resolve) => {
      giveUp = () => resolve('gave-up');
    });
    lifecycle.onSignals(
      () => {
        interrupted = true;
        queue.abortAll(new JobAbortedError('shutdown', 'Aborted: interrupted'));
        // The aborted checks' results get as long to be written as local mode's last ones do: a stdout nobody reads must not hold the exit.
        setTimeout(giveUp, FINAL_REPORT_MS);
      },
      (signal) => {
        flushLogs();
        process.exit(signal === 'SIGINT' ? 130 : 143);
      },
    );
    // A check is prepared and submitted only once a slot is free: 10,000 checks are not all prepared (and held) at once.
    const submitAll = async () => {
      const runs: Array<Promise<void>> = [];
      for (const local of checks) {
        await queue.waitForFreeSlot();
        runs.push(runOne(local));
      }
      await Promise.all(runs);
    };
    const done = Promise.race([submitAll(), gaveUp]).then(async (ended) => {
      if (ended === 'gave-up') {
        logger.warn({ waitedMs: FINAL_REPORT_MS }, `results not written within ${FINAL_REPORT_MS / 1000} s of the interrupt (stdout is not being read): stopping without printing them`);
      }
      await sink.close();
      await workers?.close();
      const { passed, degraded, failed, error } = sink.counts;
      const total = passed + degraded + failed + error;
      const retries = sink.retries;
      // Only FINAL results are checks; a retried attempt is reported as a retry, and its failure does not decide the exit code.
      const retried = retries > 0 ? ` (${retries} ${retries === 1 ? 'retry' : 'retries'})` : '';
      process.stderr.write(
        `outpost once: ${total} ${total === 1 ? 'check' : 'checks'}: ${passed} passed, ${degraded} degraded, ${failed} failed, ${error} ${error === 1 ? 'error' : 'errors'}${retried}${interrupted ? ' (interrupted)' : ''}\n`,
      );
      return failed + error === 0 && !interrupted ? 0 : 1;
    });
    return { done };
  }

  await lifecycle.startHealth(config.healthPort, config.healthHost);
  if (withoutStore) logger.warn(withoutStore.reason);
  const scheduler = new Scheduler(
    checks.map((c) => ({ ...c, id: c.check.id, frequencySeconds: c.check.frequency })),
    runOne,
    logger,
    Date.now,
    lifecycle.watchdog.heart('scheduler'),
  );
  scheduler.start();
  if (config.mode === 'local') {
    // This scheduler runs a fixed list; only the store's can take a new one.
    lifecycle.reload = async () => {
      const problems = ['local mode without its store (see the warning at start) cannot reload the checks file: restart it to read the file again'];
      logger.warn({ file: config.checksFile }, problems[0] as string);
      return { ok: false, status: 503, problems };
    };
  }
  lifecycle.started = true;
  logger.info({ checks: checks.length, file: config.checksFile, resultsFile: config.resultsFile ?? null }, 'outpost local mode started');

  const drain = async (signal: NodeJS.Signals) => {
    logger.info({ signal, running: queue.inFlight }, 'shutting down: finishing running checks (a second SIGINT or SIGTERM exits at once)');
    // A check is reported once runOne has written its result.
    await queue.drain(config.shutdownGraceSeconds * 1000, {
      stopTaking: () => scheduler.stop(),
      abortWith: new JobAbortedError('shutdown', 'Aborted: the agent shut down before the check finished'),
      ...finalReport(logger),
    });
    await sink.close();
    await workers?.close();
    await lifecycle.closeHealth();
    logger.info({ ...sink.counts, retries: sink.retries }, 'outpost local mode stopped');
  };
  const done = lifecycle.shutdownOnSignals(drain, () => ({ ...sink.counts, retries: sink.retries }), flushLogs);
  return { done };
}

/** Local mode proper: server mode's scheduler, store and read API, with this process as the agent of LOCAL_LOCATION. */
async function runLocalWithStore(
  config: Config,
  registry: ExecutorRegistry,
  logger: Logger,
  flushLogs: () => void,
  secrets: SecretPolicy | undefined,
  start: { parsed: ParsedChecksFile; text: string },
  store: SqliteStore,
  sink: LocalSink,
  startup: StartupSignals | undefined,
): Promise<{ done: Promise<number> }> {
  const settings = config.local;
  if (!settings) throw new Error('local mode without its settings');
  const metrics = createMetrics();
  const { queue, workers } = await localQueue(config, metrics, logger, secrets);
  const lifecycle = new Lifecycle(config.mode, metrics, { inFlight: () => queue.inFlight, queued: () => queue.queued, spooled: () => 0, quarantined: () => 0, spoolDropped: () => 0, spoolWritable: () => true }, logger, startup);
  lifecycle.networkPolicy = describePolicy(config.networkPolicy);
  const writes = new DatabaseWrites({ writes: store.writes, probeWrite: () => store.probeWrite(), logger, registry: metrics.registry, where: store.file });
  // Not ready while a check worker restarts, nor while the database cannot write (no session can be scheduled).
  lifecycle.modeReady = () => (workers?.ready() ?? true) && writes.writable;
  lifecycle.extraStatus = () => ({ databaseWriteProblem: writes.status() });
  const { parsed } = start;
  const heartbeatStore = new SqliteHeartbeatStore(store.access);
  const windows = new SqliteMaintenanceWindowStore(store.access);
  const { SqliteAlertStore } = await import('./store/sqlite/alerts-store.js');
  const alertStore = new SqliteAlertStore(store.access);
  const dashboards = new SqliteDashboardStore(store.access);
  const stores: ChecksFileStores = { store, heartbeats: heartbeatStore, windows, alerts: alertStore, dashboards };
  try {
    await lifecycle.startHealth(config.healthPort, config.healthHost);
    await applyChecksFile(stores, parsed, 'start');
  } catch (error) {
    await store.close().catch(() => undefined);
    throw error;
  }
  const local = parsed.checks.filter((c) => c.locations.includes(LOCAL_LOCATION.id));
  const runtimes = new Set<string>();
  for (const c of local) {
    const runtimeId = (c.check.request as { runtimeId?: unknown } | null)?.runtimeId;
    if (typeof runtimeId === 'string') runtimes.add(runtimeId);
  }
  const source = new StoreSource({
    store,
    queue,
    registry,
    logger,
    location: LOCAL_LOCATION.id,
    agentId: 'local',
    // Every type and runtime of the file's local checks: one this agent cannot run ends in an error result, as in once mode, rather than waiting unclaimed.
    checkTypes: [...new Set<string>([...registry.types(), ...local.map((c) => c.check.checkType)])],
    runtimes: [...runtimes],
    leaseMs: LEASE_MS,
    deliver: (result) => sink.deliver(result),
  });
  const scheduler = new SessionScheduler({
    store,
    logger,
    stateDir: config.stateDir,
    retentionDays: settings.retentionDays,
    pruners: featurePruners({ alerts: alertStore, errorGroups: store.errorGroups, heartbeats: heartbeatStore }),
    onQueued: (location) => {
      if (location === LOCAL_LOCATION.id) source.wake();
    },
    heartbeat: lifecycle.watchdog.heart('scheduler'),
  });
  const heartbeatSeries = new HeartbeatSeries(metrics.checks);
  heartbeatSeries.use(parsed.heartbeats);
  const watcher = new HeartbeatWatcher({ store: heartbeatStore, logger, heartbeat: lifecycle.watchdog.heart('heartbeats'), onResult: heartbeatSeries.record });
  const router = new Router(
    [
      ...readRoutes({
        store,
        ...(config.runtimesDir ? { runtimesDir: config.runtimesDir } : {}),
        onCheckDeleted: () => void scheduler.reschedule(),
      }),
      ...badgeRoutes({ store }),
      ...heartbeatRoutes({ heartbeats: heartbeatStore, logger, onResult: heartbeatSeries.record }),
      ...errorGroupRoutes({ errorGroups: store.errorGroups }),
      ...maintenanceRoutes({ windows }),
      ...alertsRoutes({ store, alerts: alertStore }),
      ...analyticsRoutes({ store, analytics: new SqliteAnalyticsStore(store.access) }),
      ...dashboardRoutes({ store, dashboards, windows }),
    ],
    {
      // Unset: the read API answers without a key; it listens on loopback only.
      publicKey: settings.apiKey,
      // No agent routes: the only agent is this process.
      agentKey: async () => undefined,
      publicLimiter: new RateLimiter(PUBLIC_LIMIT_PER_MINUTE, 60),
      agentLimiter: new RateLimiter(AGENT_ROUTE_LIMIT_PER_MINUTE, 60),
      logger,
    },
  );
  let api: Server | undefined;
  try {
    api = await startApiServer(router, { host: LOCAL_API_HOST, port: settings.apiPort, logger });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if ((error as NodeJS.ErrnoException).syscall !== 'listen') throw error;
    // The checks matter more than the API: they run, print and are stored all the same.
    logger.warn(
      { apiPort: settings.apiPort, apiHost: LOCAL_API_HOST, code },
      `the read API is not served: API_PORT=${settings.apiPort} on ${LOCAL_API_HOST} cannot be used (${code}); checks run and results are stored as usual`,
    );
  }
  source.start();
  await scheduler.start();
  watcher.start();
  const address = api?.address();
  const alerting = await startAlerts(store, alertStore, {
    logger,
    origin: apiOrigin(LOCAL_API_HOST, typeof address === 'object' && address ? address.port : settings.apiPort),
    checks: parsed.checks,
    suppressed: (checkId, at) => suppressed({ store, windows }, checkId, at),
     ...(config.networkPolicy ? { networkPolicy: config.networkPolicy } : {}),
  });
  const file = config.checksFile as string;
  const reloader = new ChecksFileReloader({
    file,
    logger,
    initialText: start.text,
    parse: (text) => parseServerChecksFile(text, file, registry, LOCAL_LOCATION),
    apply: async (next) => {
      alerting.rememberSecrets(next.checks);
      await applyChecksFile(stores, next, 'reload');
      await scheduler.reschedule();
      // A check no longer in the file loses its series now, not three frequencies later.
      heartbeatSeries.use(next.heartbeats);
      metrics.checks.retain([...next.checks.map((c) => c.check.id), ...next.heartbeats.map((h) => h.id)]);
      return next.checks.filter((c) => c.locations.includes(LOCAL_LOCATION.id)).length;
    },
  });
  lifecycle.reload = (trigger) => reloader.reload(trigger);
  reloader.watch();
  lifecycle.started = true;
  logger.info(
    {
      checks: local.length,
      ...(parsed.heartbeats.length > 0 ? { heartbeatChecks: parsed.heartbeats.length } : {}),
      file: config.checksFile,
      resultsFile: config.resultsFile ?? null,
      database: path.join(config.stateDir, 'outpost.db'),
      apiPort: api ? (typeof address === 'object' && address ? address.port : settings.apiPort) : null,
      apiHost: LOCAL_API_HOST,
      ...(local.length < parsed.checks.length ? { otherLocations: parsed.checks.length - local.length } : {}),
    },
    'outpost local mode started',
  );

  const drain = async (signal: NodeJS.Signals) => {
    logger.info({ signal, running: queue.inFlight }, 'shutting down: finishing running checks (a second SIGINT or SIGTERM exits at once)');
    reloader.close();
    writes.stop();
    // A check is reported once its result is stored and written out.
    await queue.drain(config.shutdownGraceSeconds * 1000, {
      stopTaking: async () => {
        await source.stop();
        await scheduler.stop();
      },
      abortWith: new JobAbortedError('shutdown', 'Aborted: the agent shut down before the check finished'),
      ...finalReport(logger),
    });
    source.close();
    await scheduler.stop();
    await watcher.stop();
    if (api) await closeApiServer(api, API_CLOSE_GRACE_MS);
    await alerting.stop();
    // The drain goes on without it: the results were stored (or said not to be) when they came.
    await store.close().catch((error: unknown) => logger.warn({ err: error, database: store.file }, 'closing the database failed'));
    await sink.close();
    await workers?.close();
    await lifecycle.closeHealth();
    logger.info({ ...sink.counts, retries: sink.retries }, 'outpost local mode stopped');
  };
  const done = lifecycle.shutdownOnSignals(drain, () => ({ ...sink.counts, retries: sink.retries }), flushLogs);
  return { done };
}
