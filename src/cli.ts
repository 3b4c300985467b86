// The CLI, loaded by src/main.ts once it handles signals: outpost agent | local <file> | once <file> | runtimes | --help | --version.
// Configuration problems print one line and exit 78 (EX_CONFIG), usage
// problems 64 (EX_USAGE); never a stack trace.

import { runAgent } from './agent.js';
import { configureScriptIsolation, type ScriptIsolation } from './checks/scripted/isolation.js';
import { defaultRegistry, type ScriptedSetup, scriptedRuntimes, uptimeOnly } from './checks/registry.js';
import {
  browserPathSetting,
  type Config,
  ConfigError,
  configFromEnv,
  EXIT_CONFIG,
  migrateSettings,
  parseArgs,
  runtimesDirSetting,
  scriptIsolationSetting,
  stateDirSetting,
  USAGE,
} from './config.js';
import { ChecksFileError } from './checks/checks-file.js';
import { runLocal } from './local-mode.js';
import { checkDatabase, type RunningServer, runServer } from './server-mode.js';
import type { EventReporter } from './control-plane/events.js';
import { createLogger, type Logger } from './observability/logger.js';
import { browserPath, hasSuiteRunner, isRemoved, listRuntimes, missingPackages, runtimesDir, SUITE_RUNNER_PACKAGE } from './checks/scripted/runtimes.js';
import path from 'node:path';
import { SecretPolicy, secretsInAgentEnv } from './secrets/policy.js';
import { checkStateDir } from './state-dir.js';
import { lockStateDir, locksStateDir, type StateDirLock } from './state-dir-lock.js';
import { VERSION } from './core/version.js';
import { describePolicy } from './net/network-policy.js';
import type { StartupSignals } from './health/startup-signals.js';

/** Scrubs text written straight to stderr (a crash); agent-wide secrets once they are known. */
let scrubCrash: (text: string) => string = (text) => text;

function fail(message: string, code: number): never {
  process.stderr.write(`outpost: ${message}\n`);
  process.exit(code);
}

/** A bad setting (or several): one `outpost: …` line per problem. */
function failConfig(error: ConfigError): never {
  process.stderr.write(error.problems.map((problem) => `outpost: ${problem}\n`).join(''));
  process.exit(error.exitCode);
}

async function main(startup: StartupSignals): Promise<void> {
  let command: ReturnType<typeof parseArgs>;
  try {
    command = parseArgs(process.argv.slice(2));
  } catch (error) {
    if (error instanceof ConfigError) failConfig(error);
    throw error;
  }
  if (command.kind !== 'run') {
    // These end by themselves: Node.js's own handling again, and a stop that came while loading is honoured as it
    // would have been. A signal that came while src/cli.ts was being loaded is still queued in the event loop: one
    // turn of it delivers it to the handlers before they go.
    await new Promise((resolve) => setImmediate(resolve));
    const early = startup.handOver();
    if (early) process.exit(early === 'SIGINT' ? 130 : 143);
  }
  if (command.kind === 'help') {
    process.stdout.write(`outpost ${VERSION}\n\n${USAGE}\n`);
    return;
  }
  if (command.kind === 'version') {
    process.stdout.write(`${VERSION}\n`);
    return;
  }
  if (command.kind === 'db-check') {
    try {
      const { ok, lines } = await checkDatabase(stateDirSetting(process.env));
      process.stdout.write(`${lines.join('\n')}\n`);
      process.exit(ok ? 0 : 1);
    } catch (error) {
      if (error instanceof ConfigError) failConfig(error);
      fail(`the database cannot be checked: ${(error as Error).message}`, 1);
    }
  }
  if (command.kind === 'migrate') {
    try {
      const settings = migrateSettings(command, process.env);
      const { migrateSqliteToPostgres, MigrationRefused } = await import('./store/migrate-sqlite-to-postgres.js');
      const where = `${settings.target.shown.location}${settings.target.shown.user ? ` as ${settings.target.shown.user}` : ''}`;
      try {
        const report = await migrateSqliteToPostgres({
          sqliteFile: settings.sqliteFile,
          postgres: { url: settings.target.url },
          where,
          replace: settings.replace,
          onTable: (table, rows) => process.stdout.write(`${table.padEnd(22)} ${rows}\n`),
        });
        const total = report.tables.reduce((sum, t) => sum + t.rows, 0);
        process.stdout.write(`copied ${total} rows of ${report.tables.length} tables from ${settings.sqliteFile} to ${where}${report.replaced ? ' (its previous data replaced)' : ''}; every count verified\n`);
        process.exit(0);
      } catch (error) {
        // The URL's password is never in these: the target is named by host, database and user.
        if (error instanceof MigrationRefused) fail(error.message, 1);
        fail(`the migration failed, nothing was committed: ${(error as Error).message}`, 1);
      }
    } catch (error) {
      if (error instanceof ConfigError) failConfig(error);
      throw error;
    }
  }
  if (command.kind === 'runtimes') {
    const dir = runtimesDir(runtimesDirSetting(process.env));
    const { runtimes, problems } = listRuntimes(dir);
    process.stdout.write(`Runtimes in ${dir}:\n`);
    if (runtimes.length === 0) process.stdout.write('  none\n');
    for (const r of runtimes) {
      const installed = r.installed ? 'installed' : 'not installed';
      const suites = hasSuiteRunner(r) ? `, ${SUITE_RUNNER_PACKAGE} (PLAYWRIGHT)` : '';
      const ended = r.stage !== 'REMOVED' && isRemoved(r) ? '; past its end of life: refused as REMOVED' : '';
      process.stdout.write(
        `  ${r.name.padEnd(10)} ${r.stage.padEnd(10)} ${installed.padEnd(13)} end of life ${r.runtimeEndOfLife.padEnd(10)}  Node.js ${r.nodeJsVersion}${suites}${ended}\n`,
      );
    }
    for (const problem of problems) process.stderr.write(`outpost: ${problem}\n`);
    let setting: 'auto' | 'off';
    try {
      setting = scriptIsolationSetting(process.env);
    } catch (error) {
      if (error instanceof ConfigError) failConfig(error);
      throw error;
    }
    const isolation = await startScriptIsolation(setting, undefined, { runtimesDir: dir, browserPath: browserPathSetting(process.env) });
    process.stdout.write(`Script isolation: ${isolation.mechanism} (${isolation.detail})\n`);
    return;
  }
  let config: ReturnType<typeof configFromEnv>;
  try {
    config = configFromEnv(process.env, command.mode, {
      ...(command.checksFile ? { checksFile: command.checksFile } : {}),
      ...(command.resultsFile ? { resultsFile: command.resultsFile } : {}),
    });
  } catch (error) {
    if (error instanceof ConfigError) failConfig(error);
    throw error;
  }
  let stateDirLock: StateDirLock | undefined;
  try {
    // Local mode keeps its store there too; only where Node.js has no node:sqlite does it run without one, and need no STATE_DIR.
    if (config.mode === 'agent' || config.mode === 'server' || (config.mode === 'local' && (await hasSqlite()))) await checkStateDir(config.stateDir);
    // Before the spool or store is opened; held until the process exits (src/state-dir-lock.ts).
    if (locksStateDir(config)) stateDirLock = await lockStateDir(config.stateDir, config.mode);
  } catch (error) {
    if (error instanceof ConfigError) failConfig(error);
    throw error;
  }
  // The agent-wide secrets, compiled once; every log line passes the scrubber (docs/secrets.md).
  const secrets = new SecretPolicy(secretsInAgentEnv(config.processEnv));
  scrubCrash = (text) => secrets.scrubText(text);
  // Local and once modes print results on stdout, so their logs go to stderr.
  const { logger, flush } = createLogger(config.logLevel, config.mode === 'agent' || config.mode === 'server' ? 'stdout' : 'stderr', secrets.scrubLogLine);
  secrets.attachLogger(logger);
  if (stateDirLock) warnUnlocked(stateDirLock, config, logger);
  // Said once the mode runs (a bad checks file stays a one-line failure).
  const logPolicy = () => {
    const policy = describePolicy(config.networkPolicy);
    if (policy) logger.info({ networkPolicy: policy }, `network policy: ${policy.blocked.length} blocked and ${policy.allowed.length} allowed rules (BLOCKED_NETWORKS, ALLOWED_NETWORKS)`);
    else logger.info({ networkPolicy: null }, 'network policy: none (BLOCKED_NETWORKS is not set): checks may reach any address the agent can');
  };
  if (config.mode === 'server') {
    // As in the other modes: a stop that came while starting (opening and migrating the store, applying the
    // checks file) drains once the start is done, and the store is closed cleanly; a second one exits at once.
    startup.attach(logger, flush);
    process.on('uncaughtException', (error) => {
      logger.fatal({ err: error }, 'uncaught exception: exiting');
      flush();
      process.exit(70);
    });
    process.on('unhandledRejection', (reason) => logger.error({ err: reason }, 'unhandled promise rejection'));
    let server: RunningServer;
    try {
      server = await runServer(config, logger, flush, startup);
    } catch (error) {
      startupFailed(error, config, flush);
    }
    logPolicy();
    const exitCode = await server.done;
    flush();
    process.exit(exitCode);
  }
  // What came while starting is logged from here on; the mode's Lifecycle takes the signals over once it runs.
  startup.attach(logger, flush);
  if (config.testFault) {
    const effect = config.testFault === 'executor-throw' ? 'every check fails' : 'the claim loop crashes';
    logger.warn({ testFault: config.testFault }, `OUTPOST_TEST_FAULT is set: a test hook is active and ${effect}`);
  }
  // Scripts are kept from the agent's secrets by the strongest mechanism that works here, tried once now
  // (where scripts can run at all: not --uptime-only, and some runtime is there).
  let isolation: ScriptIsolation | undefined;
  const scripted: ScriptedSetup = {
    ...(config.runtimesDir ? { runtimesDir: config.runtimesDir } : {}),
    ...(config.browserPath ? { browserPath: config.browserPath } : {}),
  };
  const runtimesHere = scriptedRuntimes(runtimesDir(config.runtimesDir));
  if (!command.uptimeOnly && runtimesHere.usable.length > 0) {
    isolation = await startScriptIsolation(config.scriptIsolation, config.stateDir, scripted);
  }
  const registry = command.uptimeOnly ? uptimeOnly(defaultRegistry(scripted)) : defaultRegistry(scripted, isolation);
  // Error events (agent mode, EXTERNAL_OBSERVABILITY=on): set once the agent runs.
  let events: EventReporter | undefined;
  process.on('uncaughtException', (error) => {
    logger.fatal({ err: error }, 'uncaught exception: exiting');
    const exit = () => {
      flush();
      process.exit(70);
    };
    if (!events) return exit();
    events.report(error, { origin: 'uncaught-exception' });
    events.close(2_000).finally(exit);
  });
  process.on('unhandledRejection', (reason) => {
    logger.error({ err: reason }, 'unhandled promise rejection');
    events?.report(reason, { origin: 'unhandled-rejection' });
  });
  let running: { done: Promise<number>; events?: EventReporter };
  try {
    running =
      config.mode === 'agent' ? await runAgent(config, registry, logger, flush, secrets, startup) : await runLocal(config, registry, logger, flush, secrets, startup);
    events = running.events;
  } catch (error) {
    startupFailed(error, config, flush);
  }
  // Said once the agent runs (a bad checks file stays a one-line failure).
  logPolicy();
  // Only where it changes what is claimed: a checks file's scripted check gets a result naming the same reason.
  if (!command.uptimeOnly && config.mode === 'agent') warnUninstalled(runtimesDir(config.runtimesDir), runtimesHere, logger);
  if (isolation) {
    const log = { scriptIsolation: isolation.mechanism, detail: isolation.detail };
    if (isolation.mechanism === 'none') logger.warn(log, 'scripted checks are refused: no way to isolate scripts from the agent works here (SCRIPT_ISOLATION=off runs them anyway)');
    else if (isolation.mechanism === 'off') logger.warn(log, 'SCRIPT_ISOLATION=off: scripts can read the agent\'s API_KEY and other jobs\' secrets');
    else logger.info(log, `scripts run isolated (${isolation.mechanism})`);
  }
  const exitCode = await running.done;
  flush();
  process.exit(exitCode);
}

/**
 * A process that keeps state in STATE_DIR but could not lock it runs all the same, saying so once. Not said by
 * local mode without node:sqlite (it keeps no store, and its own warning says why), nor by server mode without it
 * (it cannot open its SQLite database and stops).
 */
function warnUnlocked(lock: StateDirLock, config: Config, logger: Logger): void {
  if (lock.kind === 'held' || (lock.kind === 'no-sqlite' && config.mode !== 'agent')) return;
  logger.warn(
    { stateDir: config.stateDir, reason: lock.reason },
    `STATE_DIR=${JSON.stringify(config.stateDir)} is not locked (${lock.reason}): a second Outpost process on it would not be refused`,
  );
}

/** Whether this Node.js has node:sqlite (22.13 and newer). */
async function hasSqlite(): Promise<boolean> {
  try {
    await import('node:sqlite');
    return true;
  } catch {
    return false;
  }
}

/** Says once which runtimes are on disk without their packages, so an operator sees why they are not offered. */
function warnUninstalled(dir: string, runtimes: ReturnType<typeof scriptedRuntimes>, logger: Logger): void {
  if (runtimes.uninstalled.length === 0) return;
  const one = runtimes.uninstalled.length === 1;
  const names = `${one ? 'runtime' : 'runtimes'} ${runtimes.uninstalled.map((r) => r.name).join(', ')}`;
  const present = one ? 'is present but its packages are' : 'are present but their packages are';
  const offered =
    runtimes.usable.length === 0
      ? 'so MULTI_STEP, BROWSER and PLAYWRIGHT checks are not offered in claims'
      : `so ${one ? 'it is' : 'they are'} not offered in claims (offered: ${runtimes.usable.map((r) => r.name).join(', ')})`;
  logger.warn(
    { runtimesDir: dir, notInstalled: runtimes.uninstalled.map((r) => ({ runtime: r.name, dir: r.dir, missing: missingPackages(r) })) },
    `${names} in ${dir} (RUNTIMES_DIR) ${present} not installed, ${offered}; install them with npm ci --ignore-scripts in the runtime's folder`,
  );
}

/** Chooses how scripts are isolated; what scripts must still reach (runtimes, browser) is never covered. */
function startScriptIsolation(setting: 'auto' | 'off', stateDir: string | undefined, scripted: ScriptedSetup): Promise<ScriptIsolation> {
  const browser = browserPath(scripted.browserPath);
  const keep = [runtimesDir(scripted.runtimesDir), ...(browser ? [path.dirname(browser)] : [])];
  return configureScriptIsolation(setting, { keep, ...(stateDir ? { stateDir } : {}) });
}

/** Runs the command line; `startup` has handled signals since the process began (src/main.ts). */
export function runCli(startup: StartupSignals): void {
  main(startup).catch((error: unknown) => {
    process.stderr.write(`outpost: unexpected error: ${scrubCrash((error as Error)?.stack ?? String(error))}\n`);
    process.exit(70);
  });
}

/** A mode that could not start: a one-line reason and exit 78 for what the operator can fix, else the error as is. */
function startupFailed(error: unknown, config: Config, flush: () => void): never {
  flush();
  if (error instanceof ChecksFileError) fail(error.message, EXIT_CONFIG);
  if (error instanceof ConfigError) failConfig(error);
  const code = (error as NodeJS.ErrnoException).code;
  if (code === 'EADDRNOTAVAIL') {
    fail(`AGENT_HEALTH_HOST=${config.healthHost} cannot be bound (${code}): it is not an address of this host`, EXIT_CONFIG);
  }
  if ((code === 'EADDRINUSE' || code === 'EACCES') && (error as NodeJS.ErrnoException).syscall === 'listen') {
    fail(`AGENT_HEALTH_PORT=${config.healthPort} cannot be used (${code}): choose a free port`, EXIT_CONFIG);
  }
  if (code && (error as NodeJS.ErrnoException).path) {
    // Once mode keeps nothing in STATE_DIR: only --results can be the path.
    fail(`${(error as NodeJS.ErrnoException).path}: ${code} (check ${config.mode === 'once' ? '--results' : 'STATE_DIR and --results'})`, EXIT_CONFIG);
  }
  throw error;
}
