// Parses a check definition (a job's or the local checks file's) from
// untrusted JSON into a typed CheckDefinition (definition.ts).

import type { EnvironmentVariable } from '../core/protocol.js';
import { parseCheckAssertions } from './assertions/assertions.js';
import type { Executor } from './executor.js';
import type { ExecutorRegistry } from './executor-registry.js';
import { DefinitionError, type FieldReads, Fields } from './fields.js';
import { parseRetryStrategy } from './retry.js';
import type { CheckDefinition } from './definition.js';
import { CHECK_TYPES, type CheckType } from '../core/check-type.js';

export const DEFAULT_FREQUENCY_SECONDS = 60;
export const MAX_FREQUENCY_SECONDS = 86_400;

/** Reads what identifies a check, as far as it can, from a definition that may be malformed. */
export function peekIdentity(raw: unknown): { id: string | null; name: string | null; checkType: string | null } {
  const record = raw !== null && typeof raw === 'object' ? (raw as Record<string, unknown>) : {};
  const text = (v: unknown): string | null => (typeof v === 'string' ? v : typeof v === 'number' ? String(v) : null);
  return { id: text(record.id), name: text(record.name), checkType: text(record.checkType) };
}

export function parseEnvironmentVariables(fields: Fields, name = 'environmentVariables'): EnvironmentVariable[] {
  return fields.list(name).map((item) => ({
    key: item.string('key', { required: true, minLength: 1 }) ?? '',
    value: item.string('value', { default: '' }) ?? '',
    secret: item.boolean('secret', false),
  }));
}

/**
 * Parses one check definition. Throws DefinitionError listing every problem,
 * each with its JSON path under `path` (e.g. `checks[2].request.url`).
 * `reads` notes the fields it asked for (a checks file names the others); a
 * field it does not read is never a problem here, so a job carrying the
 * service's fields Outpost does not implement still runs.
 */
export function parseCheck(raw: unknown, path: string, registry: ExecutorRegistry, reads?: FieldReads): {
  check: CheckDefinition;
  executor: Executor;
} {
  const fields = Fields.root(raw, path, reads);
  if (fields.issues.length > 0) fields.assertValid();
  const id = fields.raw('id');
  const checkId =
    typeof id === 'number' && Number.isInteger(id) ? String(id) : fields.string('id', { required: true, minLength: 1, maxLength: 200 });
  const name = fields.string('name', { default: checkId ?? '', maxLength: 500 }) ?? '';
  const checkType = fields.oneOf('checkType', CHECK_TYPES, { required: true });
  const executor = checkType === undefined ? undefined : registry.get(checkType);
  if (checkType !== undefined && executor === undefined) {
    fields.fail(
      fields.at('checkType'),
      `${checkType} is not supported by this agent (supported: ${registry.types().join(', ')})${why(registry, checkType)}`,
    );
  }
  fields.assertValid();
  if (executor === undefined || checkType === undefined) throw new DefinitionError(fields.issues);

  const { limits } = executor;
  const maxResponseTime = fields.integer('maxResponseTime', {
    min: 0,
    max: limits.maxResponseTimeLimitMs ?? limits.capMs,
    default: limits.maxMs,
    unit: 'ms',
  });
  const degradedResponseTime = fields.integer('degradedResponseTime', {
    min: 0,
    max: limits.capMs,
    default: Math.min(limits.degradedMs, maxResponseTime),
    unit: 'ms',
  });
  if (degradedResponseTime > maxResponseTime) {
    fields.fail(
      fields.at('degradedResponseTime'),
      `must not exceed maxResponseTime (${degradedResponseTime} > ${maxResponseTime})`,
    );
  }
  const request = fields.object('request');
  const check: CheckDefinition = {
    id: checkId ?? '',
    name,
    checkType,
    frequency: fields.integer('frequency', {
      min: 1,
      max: MAX_FREQUENCY_SECONDS,
      default: DEFAULT_FREQUENCY_SECONDS,
      unit: 'seconds',
    }),
    degradedResponseTime,
    maxResponseTime,
    shouldFail: fields.boolean('shouldFail', false),
    assertions: parseCheckAssertions(fields, request, executor.assertionSources),
    retryStrategy: parseRetryStrategy(fields),
    request: executor.parseRequest(request, fields),
    environmentVariables: parseEnvironmentVariables(fields),
  };
  fields.assertValid();
  return { check, executor };
}

function why(registry: ExecutorRegistry, checkType: CheckType): string {
  const reason = registry.whyUnsupported(checkType);
  return reason ? `: ${reason}` : '';
}
