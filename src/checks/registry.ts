// The executors this agent build supports. Later check types register here.

import type { CheckType } from '../core/check-type.js';
import type { Executor } from './executor.js';
import { ExecutorRegistry } from './executor-registry.js';
import { apiExecutor } from './http/api.js';
import { dnsExecutor } from './dns/dns.js';
import { icmpExecutor } from './icmp/icmp.js';
import type { ScriptIsolation } from './scripted/isolation.js';
import { ISOLATION_REFUSAL } from './scripted/runner.js';
import { browserExecutor, multiStepExecutor, playwrightExecutor } from './scripted/executors.js';
import { browserPath, hasSuiteRunner, isRemoved, listRuntimes, type Runtime, runtimesDir, SUITE_RUNNER_PACKAGE } from './scripted/runtimes.js';
import { tcpExecutor } from './tcp/tcp.js';
import { urlExecutor } from './http/url.js';

/** The check types of the uptime image and of `--uptime-only`. */
export const UPTIME_CHECK_TYPES: readonly CheckType[] = ['URL', 'API', 'TCP', 'DNS', 'ICMP'];

const SCRIPTED_TYPES: readonly CheckType[] = ['MULTI_STEP', 'BROWSER', 'PLAYWRIGHT'];

/** Only the uptime types of a registry (`outpost … --uptime-only`). */
export function uptimeOnly(registry: ExecutorRegistry): ExecutorRegistry {
  const reasons = new Map<CheckType, string>([['HEARTBEAT', HEARTBEAT_REASON]]);
  for (const type of SCRIPTED_TYPES) reasons.set(type, 'this agent runs with --uptime-only (URL, API, TCP, DNS and ICMP checks only)');
  return registry.only(UPTIME_CHECK_TYPES, reasons);
}

const HEARTBEAT_REASON = 'heartbeats are received by the service, not run by agents';

/** What decides which scripted types run: RUNTIMES_DIR and BROWSER_PATH as src/config.ts read them. */
export interface ScriptedSetup {
  runtimesDir?: string;
  browserPath?: string;
}

/**
 * `isolation`: how scripts are kept from the agent (src/checks/scripted/isolation.ts); when nothing works (and the
 * operator did not turn it off) the scripted types are not run, and jobs of theirs get the reason.
 */
export function defaultRegistry(setup: ScriptedSetup = {}, isolation?: ScriptIsolation): ExecutorRegistry {
  const executors: Executor[] = [urlExecutor as Executor, apiExecutor as Executor, tcpExecutor as Executor, icmpExecutor as Executor, dnsExecutor as Executor];
  const reasons = new Map<CheckType, string>([['HEARTBEAT', HEARTBEAT_REASON]]);
  // MULTI_STEP only where a runtime's packages are installed (a folder without them runs nothing, and
  // advertising it would take jobs from agents that can run them); BROWSER also needs a Chromium;
  // PLAYWRIGHT a Chromium and a runtime with @playwright/test installed.
  const dir = runtimesDir(setup.runtimesDir);
  const { usable: runtimes, uninstalled } = scriptedRuntimes(dir);
  const chromium = browserPath(setup.browserPath);
  if (runtimes.length === 0) {
    const reason =
      uninstalled.length === 0
        ? `no runtime is installed in ${dir} (RUNTIMES_DIR)`
        : `no runtime in ${dir} (RUNTIMES_DIR) has its packages installed (${uninstalled.map((r) => r.name).join(', ')}: run npm ci --ignore-scripts in the runtime's folder)`;
    for (const type of SCRIPTED_TYPES) reasons.set(type, reason);
  } else if (isolation?.mechanism === 'none') {
    for (const type of SCRIPTED_TYPES) reasons.set(type, `${ISOLATION_REFUSAL} (${isolation.detail})`);
  } else {
    executors.push(multiStepExecutor as Executor);
    if (!chromium) {
      const where = setup.browserPath ? `BROWSER_PATH (${setup.browserPath}) does not exist` : 'set BROWSER_PATH, or install Debian\'s chromium';
      for (const type of ['BROWSER', 'PLAYWRIGHT'] as const) reasons.set(type, `no Chromium to run it: ${where}`);
    } else {
      executors.push(browserExecutor as Executor);
      if (runtimes.some((r) => hasSuiteRunner(r))) executors.push(playwrightExecutor as Executor);
      else reasons.set('PLAYWRIGHT', `no runtime in ${dir} has ${SUITE_RUNNER_PACKAGE} installed`);
    }
  }
  return new ExecutorRegistry(executors, reasons);
}

/**
 * The runtimes of `dir` scripted checks may run on (installed, not REMOVED, not past their end of life), and
 * those present and not REMOVED whose packages are not installed: not offered, and said so once at start.
 */
export function scriptedRuntimes(dir: string): { usable: Runtime[]; uninstalled: Runtime[] } {
  const live = listRuntimes(dir).runtimes.filter((r) => !isRemoved(r));
  return { usable: live.filter((r) => r.installed), uninstalled: live.filter((r) => !r.installed) };
}

/**
 * The executors a check worker thread runs (src/jobs/workers/): those that
 * start no script process, so SCRIPT_CONCURRENCY stays agent-wide. An API
 * check with setup or teardown scripts runs on the main thread too.
 */
export function workerRegistry(): ExecutorRegistry {
  return new ExecutorRegistry([urlExecutor as Executor, apiExecutor as Executor, tcpExecutor as Executor, icmpExecutor as Executor, dnsExecutor as Executor], new Map());
}

/**
 * Every check type this build can run, whatever this machine has installed:
 * for validating definitions where they are scheduled rather than run (the
 * server). Heartbeats are still refused: they are received, not run (a
 * server's checks file reads them itself, heartbeat-check.ts).
 */
export function definitionRegistry(): ExecutorRegistry {
  const executors: Executor[] = [
    urlExecutor as Executor,
    apiExecutor as Executor,
    tcpExecutor as Executor,
    icmpExecutor as Executor,
    dnsExecutor as Executor,
    multiStepExecutor as Executor,
    browserExecutor as Executor,
    playwrightExecutor as Executor,
  ];
  return new ExecutorRegistry(executors, new Map([['HEARTBEAT', HEARTBEAT_REASON]]));
}
