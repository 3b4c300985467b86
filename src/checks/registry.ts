// The executors this agent build supports. Later check types register here.

import type { CheckType } from './definition.js';
import type { Executor, ExecutorRegistry } from './executor.js';
import { apiExecutor } from './api.js';
import { dnsExecutor } from './dns.js';
import { icmpExecutor } from './icmp.js';
import { tcpExecutor } from './tcp.js';
import { urlExecutor } from './url.js';

export function defaultRegistry(): ExecutorRegistry {
  const executors: Executor[] = [urlExecutor as Executor, apiExecutor as Executor, tcpExecutor as Executor, icmpExecutor as Executor, dnsExecutor as Executor];
  return new Map<CheckType, Executor>(executors.map((e) => [e.checkType, e]));
}
