// Server mode (docs/server.md): the checks file's private locations and
// checks into the store, the session scheduler, protocol v1 for agents and
// the public read API on API_PORT, probes on AGENT_HEALTH_PORT, and the
// ordered shutdown.

import { existsSync } from 'node:fs';
import { hostname } from 'node:os';
import path from 'node:path';
import { type PrivateLocation, parseServerChecksFile, readChecksFileText, type ServerCheck } from './checks/checks-file.js';
import { definitionRegistry } from './checks/registry.js';
import { type Config, ConfigError, EXIT_CONFIG } from './config.js';
import { AGENT_ROUTE_LIMIT_PER_MINUTE } from './core/protocol.js';
import { Lifecycle } from './health/lifecycle.js';
import { describePolicy, type NetworkPolicy } from './net/network-policy.js';
import type { Logger } from './observability/logger.js';
import { createMetrics } from './observability/metrics.js';
import { Scrubber } from './secrets/scrubber.js';
import { agentRoutes } from './server/agent-api.js';
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
import { heartbeatRoutes } from './server/heartbeat-api.js';
import { HeartbeatWatcher, heartbeatSyncs, storedHeartbeatChecks } from './server/heartbeats.js';
import { readRoutes } from './server/read-api.js';
import { SessionScheduler } from './server/scheduler.js';
import { SqliteHeartbeatStore } from './store/sqlite/heartbeats-store.js';
import { SqliteAnalyticsStore } from './store/sqlite/analytics-store.js';
import { errorGroupRoutes } from './server/error-groups-api.js';
import { maintenanceRoutes } from './server/maintenance-api.js';
import { SqliteMaintenanceWindowStore } from './store/sqlite/maintenance-windows-store.js';
import type { SqliteStore } from './store/sqlite/sqlite-store.js';
import type { Store, StoredCheck } from './store/store.js';
import type { AlertStore } from './store/alerts.js';
import { suppressed } from './server/maintenance.js';
import { ChecksFileReloader } from './checks-file-reload.js';
import { dashboardRoutes, fileDashboards } from './server/dashboards-api.js';
import type { DashboardStore } from './store/dashboards.js';
import { SqliteDashboardStore } from './store/sqlite/dashboards-store.js';

/** The public API's limit per key (the service's, for most routes). */
export const PUBLIC_LIMIT_PER_MINUTE = 600;
/** Requests in flight get this long to finish at shutdown; long polls are then cut (their jobs are handed back). */
const API_CLOSE_GRACE_MS = 10_000;

/** node:sqlite came with Node.js 22.13 (without a flag); the images and the npm scripts run Node.js 24. */
async function requireSqlite(): Promise<void> {
  try {
    await import('node:sqlite');
  } catch {
    throw new ConfigError(`the server's database needs Node.js 22.13 or newer (node:sqlite); this is Node.js ${process.versions.node}`, EXIT_CONFIG);
  }
}

async function openStore(file: string): Promise<SqliteStore> {
  await requireSqlite();
  const { SqliteStore } = await import('./store/sqlite/sqlite-store.js');
  return SqliteStore.open(file);
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
  store: SqliteStore;
  heartbeats: SqliteHeartbeatStore;
  windows: SqliteMaintenanceWindowStore;
  alerts: AlertStore;
  dashboards: DashboardStore;
}

/**
 * Puts a parsed checks file in the store, at start and at every reload:
 * locations, checks (a check missing from the file is marked removed),
 * heartbeat checks (their deadlines count from now), maintenance windows,
 * the file's alert channels, dashboards and incidents. The scheduler picks the checks up on its start
 * or its next reschedule().
 */
export async function applyChecksFile(stores: ChecksFileStores, parsed: ParsedChecksFile, now = new Date()): Promise<void> {
  await stores.store.syncLocations(parsed.privateLocations satisfies PrivateLocation[]);
  await stores.store.syncChecks([...storedChecks(parsed.checks), ...storedHeartbeatChecks(parsed.heartbeats)], now);
  await stores.heartbeats.sync(heartbeatSyncs(parsed.heartbeats), now);
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
  },
): Promise<{ evaluator: AlertEvaluator; deliverer: AlertDeliverer; rememberSecrets(checks: readonly ServerCheck[]): void; stop(): Promise<void> }> {
  // Payloads never carry the checks file's secrets.
  const secretsOf = (checks: readonly ServerCheck[]) => checks.flatMap((c) => c.variables.filter((v) => v.secret === true).map((v) => v.value));
  const scrubber = Scrubber.of(secretsOf(options.checks));
  const deliverer = new AlertDeliverer({ alerts, logger: options.logger, ...(options.networkPolicy ? { networkPolicy: options.networkPolicy } : {}) });
  const evaluator = new AlertEvaluator({
    store,
    alerts,
    logger: options.logger,
    origin: options.origin,
    scrubber,
    onQueued: () => deliverer.wake(),
    ...(options.suppressed ? { suppressed: options.suppressed } : {}),
  });
  deliverer.start();
  evaluator.start();
  return {
    evaluator,
    deliverer,
    // A reloaded file's secrets join the old ones: a notification about a run from before the reload may still carry those.
    rememberSecrets(checks) {
      for (const secret of secretsOf(checks)) if (!scrubber.has(secret)) scrubber.add(secret);
    },
    async stop() {
      await evaluator.stop();
      await deliverer.stop();
    },
  };
}

export interface RunningServer {
  done: Promise<number>;
}

export async function runServer(config: Config, logger: Logger, flushLogs: () => void): Promise<RunningServer> {
  const settings = config.server;
  if (!settings || !config.checksFile) throw new Error('server mode without its settings or checks file');
  const file = config.checksFile;
  const startText = await readChecksFileText(file);
  const parsed = parseServerChecksFile(startText, file, definitionRegistry());
  const { checks, privateLocations, heartbeats } = parsed;
  const metrics = createMetrics();
  const frequencies = new Map(checks.map((c) => [c.check.id, c.check.frequency]));
  let store: SqliteStore | undefined;
  const lifecycle = new Lifecycle(
    'server',
    metrics,
    { inFlight: () => 0, queued: () => 0, spooled: () => 0, quarantined: () => 0, spoolDropped: () => 0, spoolWritable: () => true },
    logger,
  );
  // Not ready until the database is open and migrated.
  lifecycle.modeReady = () => store !== undefined;
  lifecycle.networkPolicy = describePolicy(config.networkPolicy);
  await lifecycle.startHealth(config.healthPort, config.healthHost);
  const opened = await openStore(databaseFile(config.stateDir));
  store = opened;
  const heartbeatStore = new SqliteHeartbeatStore(opened.access);
  const windows = new SqliteMaintenanceWindowStore(opened.access);
  const { SqliteAlertStore } = await import('./store/sqlite/alerts-store.js');
  const alertStore = new SqliteAlertStore(opened.access);
  const analytics = new SqliteAnalyticsStore(opened.access);
  const addressBook = new AgentAddressBook(analytics);
  const dashboards = new SqliteDashboardStore(opened.access);
  const stores: ChecksFileStores = { store: opened, heartbeats: heartbeatStore, windows, alerts: alertStore, dashboards };
  // Every heartbeat deadline counts from this start (heartbeats.ts, docs/server.md).
  await applyChecksFile(stores, parsed);
  const watcher = new HeartbeatWatcher({ store: heartbeatStore, logger, heartbeat: lifecycle.watchdog.heart('heartbeats') });

  const jobSignal = new JobSignal();
  const scheduler = new SessionScheduler({
    store: opened,
    logger,
    stateDir: config.stateDir,
    retentionDays: settings.retentionDays,
    pruners: featurePruners({ alerts: alertStore, errorGroups: opened.errorGroups, heartbeats: heartbeatStore }),
    leaseMs: settings.leaseSeconds * 1000,
    onQueued: (location) => jobSignal.notify(location),
    heartbeat: lifecycle.watchdog.heart('scheduler'),
  });
  const router = new Router(
    [
      ...agentRoutes({
        store: opened,
        jobSignal,
        artifactsDir: path.join(config.stateDir, 'artifacts'),
        logger,
        leaseMs: settings.leaseSeconds * 1000,
        addresses: addressBook,
        onAccepted: (envelope, location) =>
          metrics.checks.record(envelope.result, { frequencySeconds: frequencies.get(envelope.result.checkId ?? ''), location }),
      }),
      ...readRoutes({
        store: opened,
        ...(config.runtimesDir ? { runtimesDir: config.runtimesDir } : {}),
        onCheckDeleted: (checkId) => {
          metrics.checks.forget(checkId);
          void scheduler.reschedule();
        },
      }),
      ...badgeRoutes({ store: opened }),
      ...heartbeatRoutes({ heartbeats: heartbeatStore, logger }),
      ...errorGroupRoutes({ errorGroups: opened.errorGroups }),
      ...maintenanceRoutes({ windows }),
      ...alertsRoutes({ store: opened, alerts: alertStore }),
      ...analyticsRoutes({ store: opened, analytics }),
      ...staticIpv6Routes({ book: addressBook }),
      ...dashboardRoutes({ store: opened, dashboards, windows }),
    ],
    {
      publicKey: settings.apiKey,
      agentKey: (token) => opened.keyByHash(keyHash(token)),
      publicLimiter: new RateLimiter(PUBLIC_LIMIT_PER_MINUTE, 60),
      agentLimiter: new RateLimiter(AGENT_ROUTE_LIMIT_PER_MINUTE, 60),
      logger,
    },
  );
  const api = await startApiServer(router, { host: settings.apiHost, port: settings.apiPort }).catch((error: NodeJS.ErrnoException) => {
    if (error.syscall === 'listen') {
      throw new ConfigError(`API_PORT=${settings.apiPort} on API_HOST=${settings.apiHost} cannot be used (${error.code}): choose a free port and an address of this host`, EXIT_CONFIG);
    }
    throw error;
  });
  await scheduler.start();
  watcher.start();
  const address = api.address();
  const alerting = await startAlerts(opened, alertStore, {
    logger,
    origin: apiOrigin(settings.apiHost, typeof address === 'object' && address ? address.port : settings.apiPort),
    checks,
    suppressed: (checkId, at) => suppressed({ store: opened, windows }, checkId, at),
     ...(config.networkPolicy ? { networkPolicy: config.networkPolicy } : {}),
  });
  const reloader = new ChecksFileReloader({
    file,
    logger,
    initialText: startText,
    parse: (text) => parseServerChecksFile(text, file, definitionRegistry()),
    apply: async (next) => {
      alerting.rememberSecrets(next.checks);
      await applyChecksFile(stores, next);
      await scheduler.reschedule();
      // A check no longer in the file loses its series now, not three frequencies later.
      for (const c of next.checks) frequencies.set(c.check.id, c.check.frequency);
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
    },
    'outpost server started',
  );

  const drain = async (signal: NodeJS.Signals) => {
    logger.info({ signal }, 'shutting down: not ready, no new sessions, finishing requests in flight');
    reloader.close();
    await scheduler.stop();
    await watcher.stop();
    await closeApiServer(api, API_CLOSE_GRACE_MS);
    await alerting.stop();
    await opened.close();
    await lifecycle.closeHealth();
    logger.info('outpost server stopped');
  };
  const done = lifecycle.shutdownOnSignals(drain, () => ({}), flushLogs);
  return { done };
}
