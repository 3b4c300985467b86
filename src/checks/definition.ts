// A check definition as the agent runs it: the same shape for a claimed job
// and for the local checks file (parse-definition.ts reads it from JSON).

import type { EnvironmentVariable } from '../core/protocol.js';
import type { CheckType } from '../core/check-type.js';
import type { Assertion } from './assertions/assertions.js';
import type { RetryStrategy } from './retry.js';

export interface CheckDefinition<Request = unknown> {
  id: string;
  name: string;
  checkType: CheckType;
  /** Seconds between runs; only the local scheduler reads it. */
  frequency: number;
  degradedResponseTime: number;
  maxResponseTime: number;
  shouldFail: boolean;
  assertions: Assertion[];
  retryStrategy: RetryStrategy;
  request: Request;
  environmentVariables: EnvironmentVariable[];
}
