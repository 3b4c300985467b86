// Turns an untrusted job (from the control plane or a checks file) into
// something the queue can run. A malformed definition is not an exception:
// it becomes a job whose result is an error naming the field.

import type { CheckDefinition } from '../checks/definition.js';
import { parseCheck, peekIdentity } from '../checks/parse-definition.js';
import type { Executor } from '../checks/executor.js';
import type { ExecutorRegistry } from '../checks/executor-registry.js';
import { SERVER_CHECK_FIELDS } from '../checks/checks-file.js';
import { DefinitionError, FieldReads, Fields } from '../checks/fields.js';
import { unreadJobLogLine } from '../checks/unread-fields.js';
import type { EnvironmentVariable, Job } from '../core/protocol.js';
import type { Logger } from '../observability/logger.js';
import type { CheckIdentity, RunIdentity } from '../core/result-entry.js';

export interface PreparedJob {
  jobId: string;
  identity: RunIdentity;
  checkIdentity: CheckIdentity;
  /** Present when the definition is valid and the type supported. */
  runnable?: { check: CheckDefinition; executor: Executor; target: string };
  /** Why the job cannot run, naming the field. */
  invalid?: string;
  variables: EnvironmentVariable[];
  triggerSource: string | null;
  logger: Logger;
  /** Lines every attempt's jobLog starts with: what the agent has to say about the job itself (fields it ignored). */
  jobLogNotes?: string[];
}

function jobLogger(base: Logger, jobId: string, identity: CheckIdentity): Logger {
  return base.child({ jobId, checkId: identity.id ?? null, checkType: identity.checkType ?? null });
}

export function prepareCheck(
  rawCheck: unknown,
  path: string,
  jobId: string,
  identity: RunIdentity,
  registry: ExecutorRegistry,
  logger: Logger,
  extra: { variables?: EnvironmentVariable[]; triggerSource?: string | null; noteUnreadFields?: boolean } = {},
): PreparedJob {
  const checkIdentity = peekIdentity(rawCheck);
  const base = {
    jobId,
    identity,
    checkIdentity,
    variables: extra.variables ?? [],
    triggerSource: extra.triggerSource ?? null,
    logger: jobLogger(logger, jobId, checkIdentity),
  };
  // The fields a server keeps for itself (its locations, tags, alertAfter) are in its jobs' definitions: not news.
  const reads = extra.noteUnreadFields ? new FieldReads() : undefined;
  if (reads && rawCheck !== null && typeof rawCheck === 'object' && !Array.isArray(rawCheck)) new Fields(rawCheck, path, [], reads).ignore(...SERVER_CHECK_FIELDS);
  try {
    const { check, executor } = parseCheck(rawCheck, path, registry, reads);
    const unread = reads ? unreadJobLogLine(reads.unread()) : undefined;
    return { ...base, runnable: { check, executor, target: executor.target(check.request) }, ...(unread ? { jobLogNotes: [unread] } : {}) };
  } catch (error) {
    if (error instanceof DefinitionError) return { ...base, invalid: `Invalid check definition: ${error.message}` };
    throw error;
  }
}

/**
 * A job from the control plane: its envelope is checked here, its check by
 * prepareCheck. Never throws: whatever goes wrong preparing it becomes the
 * job's error result, so one job cannot stop the claim loop.
 */
export function prepareJob(job: Job, registry: ExecutorRegistry, logger: Logger, options: { noteUnreadFields?: boolean } = {}): PreparedJob {
  try {
    return prepareClaimedJob(job, registry, logger, options.noteUnreadFields === true);
  } catch (error) {
    const reason = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
    logger.error({ err: error, jobId: job.id }, 'a claimed job could not be prepared; reporting it as an error');
    return unpreparedJob(job.id, `Invalid job: it could not be prepared (${reason})`, logger);
  }
}

/** A job known only by its id, whose result is the error `invalid`. */
export function unpreparedJob(jobId: string, invalid: string, logger: Logger): PreparedJob {
  return {
    jobId,
    identity: { checkRunId: null, sequenceId: null, runLocation: null },
    checkIdentity: {},
    invalid,
    variables: [],
    triggerSource: null,
    logger: logger.child({ jobId }),
  };
}

function prepareClaimedJob(job: Job, registry: ExecutorRegistry, logger: Logger, noteUnreadFields: boolean): PreparedJob {
  const identity: RunIdentity = {
    checkRunId: typeof job.checkRunId === 'number' ? job.checkRunId : null,
    sequenceId: typeof job.sequenceId === 'string' ? job.sequenceId : null,
    runLocation: typeof job.runLocation === 'string' ? job.runLocation : null,
  };
  const variables = Array.isArray(job.environmentVariables) ? job.environmentVariables : [];
  const badVariable = variables.findIndex(
    (v) => v === null || typeof v !== 'object' || typeof v.key !== 'string' || typeof v.value !== 'string',
  );
  const prepared = prepareCheck(job.check, 'check', job.id, identity, registry, logger, {
    variables: badVariable === -1 ? variables : [],
    triggerSource: typeof job.triggerSource === 'string' ? job.triggerSource : null,
    noteUnreadFields,
  });
  if (job.check === undefined || job.check === null) {
    return { ...prepared, runnable: undefined, invalid: 'Invalid job: check is required' };
  }
  if (badVariable !== -1 && !prepared.invalid) {
    return {
      ...prepared,
      runnable: undefined,
      invalid: `Invalid job: environmentVariables[${badVariable}] must be {key: string, value: string, secret?: boolean}`,
    };
  }
  return prepared;
}
