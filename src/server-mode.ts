// Server mode (docs/server.md): the checks file's private locations and
// checks into the store, the session scheduler, protocol v1 for agents and
// the public read API on API_PORT, probes on AGENT_HEALTH_PORT, and the
// ordered shutdown.

import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { hostname } from 'node:os';
import path from 'node:path';
import { logIgnoredFields, type PrivateLocation, parseServerChecksFile, readChecksFileText, type ServerCheck } from './checks/checks-file.js';
import { definitionRegistry } from './checks/registry.js';
import { type Config, ConfigError, EXIT_CONFIG } from './config.js';
import { AGENT_ROUTE_LIMIT_PER_MINUTE } from './core/protocol.js';
import { Lifecycle } from './health/lifecycle.js';
import type { StartupSignals } from './health/startup-signals.js';
import { describePolicy, type NetworkPolicy } from './net/network-policy.js';
import type { Logger } from './observability/logger.js';
import { createMetrics, type Metrics } from './observability/metrics.js';
import type { ResultEnvelope } from './core/protocol.js';
import { Scrubber } from './secrets/scrubber.js';
import { agentRoutes } from './server/agent-api.js';
import { WriteBudget } from './server/write-budget.js';
import { AgentAddressBook, staticIpv6Routes } from './server/agent-addresses.js';
import { analyticsRoutes } from './server/analytics-api.js';
import { badgeRoutes } from './server/badge-api.js';
import { AlertDeliverer } from './server/alert-delivery.js';
import { AlertEvaluator } from './server/alert-evaluator.js';
import { alertsRoutes } from './server/alerts-api.js';
import { keyHash } from './server/http/credentials.js';
import { RateLimiter } from './server/http/rate-limit.js';
import { closeApiServer, Router, startApiServer } from './server/http/router.js';
import { JobSignal } from './server/job-signal.js';
import { DatabaseWrites } from './server/database-writes.js';
import { heartbeatRoutes } from './server/heartbeat-api.js';
import { HeartbeatSeries, HeartbeatWatcher, heartbeatSyncs, storedHeartbeatChecks } from './server/heartbeats.js';
import { readRoutes } from './server/read-api.js';
import { SessionScheduler } from './server/scheduler.js';
import { errorGroupRoutes } from './server/error-groups-api.js';
import { maintenanceRoutes } from './server/maintenance-api.js';
import type { HeartbeatStore, HeartbeatSyncMoment } from './store/heartbeats.js';
import type { MaintenanceWindowStore } from './store/maintenance-windows.js';
import { type DatabaseSetting, openServerStores, type ServerStores } from './store/server-stores.js';
import { Leadership } from './server/leadership.js';
import type { Store, StoredCheck } from './store/store.js';
import type { AlertStore } from './store/alerts.js';
import { suppressed } from './server/maintenance.js';
import { ChecksFileReloader } from './checks-file-reload.js';
import { dashboardRoutes, fileDashboards } from './server/dashboards-api.js';
import type { DashboardStore } from './store/dashboards.js';

/** The public API's limit per key (the service's, for most routes). */
export const PUBLIC_LIMIT_PER_MINUTE = 600;
/** Requests in flight get this long to finish at shutdown; long polls are then cut (their jobs are handed back). */
const API_CLOSE_GRACE_MS = 10_000;

/** node:sqlite came with Node.js 22.13 (without a flag); the images and the npm scripts run Node.js 24. */
async function requireSqlite(): Promise<void> {
  try {
    await import('node:sqlite');
  } catch {
    throw new ConfigError(
      `the server's database needs Node.js 22.13 or newer (node:sqlite); this is Node.js ${process.versions.node} (from a clone, \`npx outpost server …\` runs on the Node.js 24 that npm ci installed)`,
      EXIT_CONFIG,
    );
  }
}

/** The server's database: DATABASE_URL's PostgreSQL, or the SQLite file in STATE_DIR (store/server-stores.ts). */
async function openStores(config: Config): Promise<ServerStores> {
  const setting: DatabaseSetting = config.server?.database ?? { kind: 'sqlite', file: databaseFile(config.stateDir) };
  if (setting.kind === 'sqlite') await requireSqlite();
  return openServerStores(setting);
}

/** A replica's name in the leader lease: host, process and a random part (a restarted pod is a new holder). */
function replicaName(): string {
  return `${hostname()}/${process.pid}/${randomUUID().slice(0, 8)}`;
}

/** How often readiness asks the database whether it answers. */
const DATABASE_PING_EVERY_MS = 5_000;

/** A check of the file with the labels of its series: its id and name scrubbed of the file's secrets, as its results are. */
interface LabelledCheck {
  server: ServerCheck;
  id: string;
  name: string;
}

function fileCheckLabels(checks: readonly ServerCheck[]): Map<string, LabelledCheck> {
  const scrubber = Scrubber.of(checks.flatMap((c) => c.variables.filter((v) => v.secret === true).map((v) => v.value)));
  return new Map(checks.map((c) => [c.check.id, { server: c, id: scrubber.scrubText(c.check.id), name: scrubber.scrubText(c.check.name) }]));
}

/** A result an agent delivered, in the per-check series of its check, labelled as the file names it; nothing for a check the file does not run there. */
function recordFileCheck(metrics: Metrics, fileChecks: ReadonlyMap<string, LabelledCheck>, envelope: ResultEnvelope, location: string): void {
  const known = fileChecks.get(envelope.result.checkId ?? '');
  if (!known?.server.locations.includes(location)) return;
  const { id, name, checkType, frequency } = known.server.check;
  metrics.checks.record({ ...envelope.result, checkId: id, name, checkType, runLocation: location }, { frequencySeconds: frequency, location, shown: { checkId: known.id, name: known.name, location } });
}

/** The database of a STATE_DIR. */
export function databaseFile(stateDir: string): string {
  return path.join(stateDir, 'outpost.db');
}

/** `outpost db-check`: the integrity check of STATE_DIR's database; exit 0 when sound, 1 with what is wrong. */
export async function checkDatabase(stateDir: string): Promise<{ ok: boolean; lines: string[] }> {
  const file = databaseFile(stateDir);
  if (!existsSync(file)) throw new ConfigError(`${file} does not exist: set STATE_DIR to the server's state directory`, EXIT_CONFIG);
  await requireSqlite();
  const { SqliteStore } = await import('./store/sqlite/sqlite-store.js');
  const lines = await SqliteStore.checkFile(file);
  return { ok: lines.length === 1 && lines[0] === 'ok', lines };
}

export function storedChecks(checks: readonly ServerCheck[]): StoredCheck[] {
  return checks.map(({ check, executor, variables, locations, definition }) => {
    const runtimeId = (check.request as { runtimeId?: unknown } | null)?.runtimeId;
    return {
      id: check.id,
      name: check.name,
      checkType: check.checkType,
      frequencySeconds: check.frequency,
      locations,
      definition,
      environmentVariables: variables,
      runtimeId: typeof runtimeId === 'string' ? runtimeId : null,
      capMs: executor.limits.capMs,
    };
  });
}

export type ParsedChecksFile = ReturnType<typeof parseServerChecksFile>;

/** The stores a checks file fills. */
export interface ChecksFileStores {
  store: Store;
  heartbeats: HeartbeatStore;
  windows: MaintenanceWindowStore;
  alerts: AlertStore;
  dashboards: DashboardStore;
}

/**
 * Puts a parsed checks file in the store, at start and at every reload:
 * locations, checks (a check missing from the file is marked removed),
 * heartbeat checks (at start their deadlines count from now; at a reload only
 * those of new or re-timed checks do, HeartbeatStore.sync), maintenance windows,
 * the file's alert channels, dashboards and incidents. The scheduler picks the checks up on its start
 * or its next reschedule().
 */
export async function applyChecksFile(stores: ChecksFileStores, parsed: ParsedChecksFile, when: HeartbeatSyncMoment, now = new Date()): Promise<void> {
  await stores.store.syncLocations(parsed.privateLocations satisfies PrivateLocation[]);
  await stores.store.syncChecks([...storedChecks(parsed.checks), ...storedHeartbeatChecks(parsed.heartbeats)], now);
  await stores.heartbeats.sync(heartbeatSyncs(parsed.heartbeats), now, when);
  await stores.windows.sync(parsed.maintenanceWindows, now);
  await stores.alerts.syncFileChannels(parsed.alertChannels, now);
  await stores.dashboards.sync(fileDashboards(parsed.dashboards), parsed.incidents, now);
}

/** The API's base URL for links in notifications: the address it listens on (this host's name for a wildcard). */
export function apiOrigin(host: string, port: number): string {
  const named = host === '0.0.0.0' || host === '::' || host === '' ? hostname() : host;
  return `http://${named.includes(':') ? `[${named}]` : named}:${port}`;
}

/** What the retention loop prunes besides results: the feature stores that keep growing tables. */
export function featurePruners(stores: Record<string, { prune(before: Date, batch: number): Promise<number> }>): Record<string, (before: Date, batch: number) => Promise<number>> {
  return Object.fromEntries(Object.entries(stores).map(([name, store]) => [name, (before: Date, batch: number) => store.prune(before, batch)]));
}

/** The alerts' evaluator and deliverer on an open store the checks file was applied to (docs/server.md, "Alerts"). */
export async function startAlerts(
  store: Store,
  alerts: AlertStore,
  options: {
    logger: Logger;
    origin: string;
    checks: readonly ServerCheck[];
    /** Maintenance windows: true holds back the notifications of this check at this time. */
    suppressed?: (checkId: string, at: Date) => Promise<boolean>;
    /** BLOCKED_NETWORKS / ALLOWED_NETWORKS for the webhooks. */
    networkPolicy?: NetworkPolicy;
    /** false: the evaluator waits for evaluate(true) (several replicas: only the leader evaluates). */
    evaluate?: boolean;
  },
): Promise<{
  deliverer: AlertDeliverer;
  /** Starts or stops the evaluator (its cursor is in the store: a new one goes on where the last stopped). */
  evaluate(on: boolean): Promise<void>;
  rememberSecrets(checks: readonly ServerCheck[]): void;
  stop(): Promise<void>;
}> {
  // Payloads never carry the checks file's secrets.
  const secretsOf = (checks: readonly ServerCheck[]) => checks.flatMap((c) => c.variables.filter((v) => v.secret === true).map((v) => v.value));
  const scrubber = Scrubber.of(secretsOf(options.checks));
  const deliverer = new AlertDeliverer({ alerts, logger: options.logger, ...(options.networkPolicy ? { networkPolicy: options.networkPolicy } : {}) });
  const newEvaluator = () =>
    new AlertEvaluator({
      store,
      alerts,
      logger: options.logger,
      origin: options.origin,
      scrubber,
      onQueued: () => deliverer.wake(),
      ...(options.suppressed ? { suppressed: options.suppressed } : {}),
    });
  let evaluator: AlertEvaluator | undefined;
  deliverer.start();
  if (options.evaluate !== false) {
    evaluator = newEvaluator();
    evaluator.start();
  }
  return {
    deliverer,
    async evaluate(on) {
      if (on && !evaluator) {
        evaluator = newEvaluator();
        evaluator.start();
      } else if (!on && evaluator) {
        const running = evaluator;
        evaluator = undefined;
        await running.stop();
      }
    },
    // A reloaded file's secrets join the old ones: a notification about a run from before the reload may still carry those.
    rememberSecrets(checks) {
      for (const secret of secretsOf(checks)) if (!scrubber.has(secret)) scrubber.add(secret);
    },
    async stop() {
      await evaluator?.stop();
      await deliverer.stop();
    },
  };
}

export interface RunningServer {
  done: Promise<number>;
}

/** `startup`: what handled signals while the process started (src/main.ts); the server's Lifecycle takes over from it. */
export async function runServer(config: Config, logger: Logger, flushLogs: () => void, startup?: StartupSignals): Promise<RunningServer> {
  const settings = config.server;
  if (!settings || !config.checksFile) throw new Error('server mode without its settings or checks file');
  const file = config.checksFile;
  // Before the health server says anything: a Node.js without node:sqlite cannot run this server at all.
  if ((settings.database?.kind ?? 'sqlite') === 'sqlite') await requireSqlite();
  const startText = await readChecksFileText(file);
  const parsed = parseServerChecksFile(startText, file, definitionRegistry());
  logIgnoredFields(logger, file, parsed.ignoredFields);
  const { checks, privateLocations, heartbeats } = parsed;
  const metrics = createMetrics();
  // The per-check series are labelled from the file, never from a result's body: an agent's result names its
  // check, but only a check of the file that runs at the agent's location gets (or changes) a series.
  const fileChecks = fileCheckLabels(checks);
  const heartbeatSeries = new HeartbeatSeries(metrics.checks);
  heartbeatSeries.use(heartbeats);
  let stores: ServerStores | undefined;
  let databaseAnswers = true;
  const lifecycle = new Lifecycle(
    'server',
    metrics,
    { inFlight: () => 0, queued: () => 0, spooled: () => 0, quarantined: () => 0, spoolDropped: () => 0, spoolWritable: () => true },
    logger,
    startup,
  );
  // Not ready until the database is open and migrated, nor while it does not answer (a load balancer sends requests elsewhere).
  let writes: DatabaseWrites | undefined;
  lifecycle.modeReady = () => stores !== undefined && databaseAnswers && writes?.writable === true;
  lifecycle.networkPolicy = describePolicy(config.networkPolicy);
  await lifecycle.startHealth(config.healthPort, config.healthHost);
  const opened = await openStores(config);
  writes = new DatabaseWrites({
    writes: opened.writes,
    probeWrite: () => opened.probeWrite(),
    logger,
    registry: metrics.registry,
    where: opened.description.location,
  });
  stores = opened;
  const { store, alerts: alertStore, heartbeats: heartbeatStore, windows, analytics, dashboards } = opened;
  const addressBook = new AgentAddressBook(analytics);
  const holder = replicaName();
  const checksFileStores: ChecksFileStores = { store, heartbeats: heartbeatStore, windows, alerts: alertStore, dashboards };
  // Every heartbeat deadline counts from this start (heartbeats.ts, docs/server.md).
  await applyChecksFile(checksFileStores, parsed, 'start');

  const jobSignal = new JobSignal();
  // Another replica's new jobs wake this one's waiting claims too (docs/postgres.md).
  await opened.listenForJobs?.(
    (location) => jobSignal.notify(location),
    (error) => logger.warn({ err: error }, 'listening for other replicas’ jobs failed; claims see them at the end of their wait until it works again'),
  );
  const schedulerHeart = lifecycle.watchdog.heart('scheduler');
  const heartbeatsHeart = lifecycle.watchdog.heart('heartbeats');
  // The leader's work (scheduler with its sweeper and retention, heartbeat deadlines, alert evaluation), made anew each term.
  let scheduler: SessionScheduler | undefined;
  let watcher: HeartbeatWatcher | undefined;
  const router = new Router(
    [
      ...agentRoutes({
        store,
        jobSignal,
        artifactsDir: path.join(config.stateDir, 'artifacts'),
        logger,
        leaseMs: settings.leaseSeconds * 1000,
        addresses: addressBook,
        // Per replica, as the rate limits below (docs/server.md, "Write limits").
        ...(settings.writeBytesPerMinute > 0 ? { writeBudget: new WriteBudget(settings.writeBytesPerMinute) } : {}),
        onAccepted: (envelope, location) =>
          recordFileCheck(metrics, fileChecks, envelope, location),
      }),
      ...readRoutes({
        store,
        ...(config.runtimesDir ? { runtimesDir: config.runtimesDir } : {}),
        onCheckDeleted: (checkId) => {
          metrics.checks.forget(checkId);
          // Another replica's scheduler finds the check removed when its slot comes (scheduler.ts runOnce reads it again).
          void scheduler?.reschedule();
        },
      }),
      ...badgeRoutes({ store }),
      ...heartbeatRoutes({ heartbeats: heartbeatStore, logger, onResult: heartbeatSeries.record }),
      ...errorGroupRoutes({ errorGroups: opened.errorGroups }),
      ...maintenanceRoutes({ windows }),
      ...alertsRoutes({ store, alerts: alertStore }),
      ...analyticsRoutes({ store, analytics }),
      ...staticIpv6Routes({ book: addressBook }),
      ...dashboardRoutes({ store, dashboards, windows }),
    ],
    {
      publicKey: settings.apiKey,
      agentKey: (token) => store.keyByHash(keyHash(token)),
      // Per replica: N replicas behind a load balancer allow up to N times these (docs/postgres.md).
      publicLimiter: new RateLimiter(PUBLIC_LIMIT_PER_MINUTE, 60),
      agentLimiter: new RateLimiter(AGENT_ROUTE_LIMIT_PER_MINUTE, 60),
      logger,
    },
  );
  const api = await startApiServer(router, { host: settings.apiHost, port: settings.apiPort, maxConnectionsPerAddress: settings.maxConnectionsPerAddress, logger }).catch((error: NodeJS.ErrnoException) => {
    if (error.syscall === 'listen') {
      throw new ConfigError(`API_PORT=${settings.apiPort} on API_HOST=${settings.apiHost} cannot be used (${error.code}): choose a free port and an address of this host`, EXIT_CONFIG);
    }
    throw error;
  });
  const address = api.address();
  const alerting = await startAlerts(store, alertStore, {
    logger,
    origin: apiOrigin(settings.apiHost, typeof address === 'object' && address ? address.port : settings.apiPort),
    checks,
    suppressed: (checkId, at) => suppressed({ store, windows }, checkId, at),
    evaluate: false,
    ...(config.networkPolicy ? { networkPolicy: config.networkPolicy } : {}),
  });
  const leadership = new Leadership({
    lease: opened.lease,
    holder,
    ttlMs: settings.leaderLeaseSeconds * 1000,
    logger,
    onElected: async () => {
      const next = new SessionScheduler({
        store,
        logger,
        stateDir: config.stateDir,
        retentionDays: settings.retentionDays,
        pruners: featurePruners({ alerts: alertStore, errorGroups: opened.errorGroups, heartbeats: heartbeatStore }),
        leaseMs: settings.leaseSeconds * 1000,
        onQueued: (location) => jobSignal.notify(location),
        heartbeat: schedulerHeart,
        sharedStore: opened.shared,
      });
      await next.start();
      scheduler = next;
      watcher = new HeartbeatWatcher({ store: heartbeatStore, logger, heartbeat: heartbeatsHeart, onResult: heartbeatSeries.record });
      watcher.start();
      await alerting.evaluate(true);
    },
    onDeposed: async () => {
      const stopping = [scheduler?.stop(), watcher?.stop(), alerting.evaluate(false)];
      scheduler = undefined;
      watcher = undefined;
      await Promise.all(stopping);
    },
  });
  await leadership.start();
  // Readiness follows the database: a replica that cannot reach it is taken out of the load balancer until it can.
  let pinging: Promise<void> = Promise.resolve();
  let pingInFlight = false;
  const pinger = setInterval(() => {
    if (pingInFlight) return;
    pingInFlight = true;
    pinging = opened.ping().then((answers) => {
      pingInFlight = false;
      if (answers !== databaseAnswers) logger[answers ? 'info' : 'warn']({ database: opened.description }, answers ? 'the database answers again: ready' : 'the database does not answer: not ready');
      databaseAnswers = answers;
    });
  }, DATABASE_PING_EVERY_MS);
  pinger.unref();
  lifecycle.extraStatus = () => ({ database: opened.description, databaseWriteProblem: writes?.status() ?? null, replica: { holder, leader: leadership.isLeader } });
  const reloader = new ChecksFileReloader({
    file,
    logger,
    initialText: startText,
    parse: (text) => parseServerChecksFile(text, file, definitionRegistry()),
    apply: async (next) => {
      alerting.rememberSecrets(next.checks);
      // Each replica watches its own copy of the file and applies it; the leader then reschedules (docs/postgres.md).
      await applyChecksFile(checksFileStores, next, 'reload');
      await scheduler?.reschedule();
      // A check no longer in the file loses its series now, not three frequencies later.
      fileChecks.clear();
      for (const [id, labelled] of fileCheckLabels(next.checks)) fileChecks.set(id, labelled);
      heartbeatSeries.use(next.heartbeats);
      metrics.checks.retain([...next.checks.map((c) => c.check.id), ...next.heartbeats.map((h) => h.id)]);
      return next.checks.length;
    },
  });
  lifecycle.reload = (trigger) => reloader.reload(trigger);
  reloader.watch();
  lifecycle.started = true;
  logger.info(
    {
      apiPort: typeof address === 'object' && address ? address.port : settings.apiPort,
      apiHost: settings.apiHost,
      locations: privateLocations.map((l) => l.id),
      checks: checks.length,
      heartbeatChecks: heartbeats.length,
      retentionDays: settings.retentionDays,
      database: opened.description,
      leader: leadership.isLeader,
    },
    'outpost server started',
  );

  const drain = async (signal: NodeJS.Signals) => {
    logger.info({ signal }, 'shutting down: not ready, no new sessions, finishing requests in flight');
    reloader.close();
    clearInterval(pinger);
    writes?.stop();
    // The lease is given up at once: another replica schedules without waiting for it to run out.
    await leadership.stop();
    await closeApiServer(api, API_CLOSE_GRACE_MS);
    await alerting.stop();
    await pinging;
    // Whatever was accepted is committed already; the rest of the drain still runs.
    await opened.close().catch((error: unknown) => logger.warn({ err: error }, 'closing the database failed'));
    await lifecycle.closeHealth();
    logger.info('outpost server stopped');
  };
  const done = lifecycle.shutdownOnSignals(drain, () => ({}), flushLogs);
  return { done };
}
