// The executors this agent build supports. Later check types register here.

import type { CheckType } from './definition.js';
import type { Executor, ExecutorRegistry } from './executor.js';
import { apiExecutor } from './api.js';
import { dnsExecutor } from './dns.js';
import { icmpExecutor } from './icmp.js';
import { browserExecutor, multiStepExecutor, playwrightExecutor } from './scripted.js';
import { browserPath, hasSuiteRunner, listRuntimes, runtimesDir } from '../runtimes/runtimes.js';
import { tcpExecutor } from './tcp.js';
import { urlExecutor } from './url.js';

/** The check types of the uptime image and of `--uptime-only`. */
export const UPTIME_CHECK_TYPES: readonly CheckType[] = ['URL', 'API', 'TCP', 'DNS', 'ICMP'];

/** Only the uptime types of a registry (`outpost … --uptime-only`). */
export function uptimeOnly(registry: ExecutorRegistry): ExecutorRegistry {
  return new Map([...registry].filter(([type]) => UPTIME_CHECK_TYPES.includes(type)));
}

export function defaultRegistry(env: Record<string, string | undefined> = process.env): ExecutorRegistry {
  const executors: Executor[] = [urlExecutor as Executor, apiExecutor as Executor, tcpExecutor as Executor, icmpExecutor as Executor, dnsExecutor as Executor];
  // MULTI_STEP only where runtimes are on disk (not in the uptime image); BROWSER also needs a Chromium;
  // PLAYWRIGHT a Chromium and a runtime with @playwright/test installed.
  const runtimes = listRuntimes(runtimesDir(env)).runtimes.filter((r) => r.stage !== 'REMOVED');
  if (runtimes.length > 0) {
    executors.push(multiStepExecutor as Executor);
    if (browserPath(env)) {
      executors.push(browserExecutor as Executor);
      if (runtimes.some((r) => r.installed && hasSuiteRunner(r))) executors.push(playwrightExecutor as Executor);
    }
  }
  return new Map<CheckType, Executor>(executors.map((e) => [e.checkType, e]));
}
