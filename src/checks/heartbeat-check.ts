// A HEARTBEAT check of a server's (or local mode's) checks file:
// `{ "id", "name", "checkType": "HEARTBEAT", "heartbeat": { "period", "grace", "token" } }`.
// Nothing runs it: the server receives its pings (src/server/heartbeat-api.ts),
// so it is read here and not by an executor, and agents keep refusing the type
// (registry.ts). The token is a credential: no problem message ever quotes it.

import type { EnvironmentVariable } from '../core/protocol.js';
import { type FieldReads, Fields } from './fields.js';
import { parseEnvironmentVariables } from './parse-definition.js';
import { UnknownVariableError, Variables } from './variables.js';

/** Seconds between pings: one second to one day. */
export const HEARTBEAT_PERIOD_SECONDS = { min: 1, max: 86_400 } as const;
/** Seconds a ping may be late before the check fails: none to one day. */
export const HEARTBEAT_GRACE_SECONDS = { min: 0, max: 86_400 } as const;
/** Characters of a token after interpolation: long enough not to be guessed, short enough for a URL path. */
export const HEARTBEAT_TOKEN_LENGTH = { min: 16, max: 256 } as const;
/** A token is one path segment of `/ping/{token}` as written, without encoding. */
const TOKEN_CHARACTERS = /^[A-Za-z0-9._~-]+$/;

export interface HeartbeatCheck {
  id: string;
  name: string;
  periodSeconds: number;
  graceSeconds: number;
  /** The interpolated token: never logged, stored only as its SHA-256. */
  token: string;
  /** The definition as the file has it, with the token's text replaced (the store keeps it). */
  definition: Record<string, unknown>;
}

/** Whether a checks file's item is meant as a heartbeat check. */
export function isHeartbeatItem(item: unknown): boolean {
  return item !== null && typeof item === 'object' && (item as { checkType?: unknown }).checkType === 'HEARTBEAT';
}

/** Parses one heartbeat check; throws DefinitionError with every problem by JSON path. `globals`: the file's variables; `reads` as parseCheck's. */
export function parseHeartbeatCheck(raw: unknown, path: string, globals: readonly EnvironmentVariable[], reads?: FieldReads): HeartbeatCheck {
  const fields = Fields.root(raw, path, reads);
  if (fields.issues.length > 0) fields.assertValid();
  // isHeartbeatItem chose this reader by it.
  fields.ignore('checkType');
  const id = fields.raw('id');
  const checkId = typeof id === 'number' && Number.isInteger(id) ? String(id) : fields.string('id', { required: true, minLength: 1, maxLength: 200 });
  const name = fields.string('name', { default: checkId ?? '', maxLength: 500 }) ?? '';
  const own = parseEnvironmentVariables(fields);
  const heartbeat = fields.object('heartbeat');
  if (!fields.has('heartbeat')) fields.fail(fields.at('heartbeat'), 'is required: {"period": seconds, "grace": seconds, "token": "{{A_SECRET_VARIABLE}}"}');
  const seconds = (key: 'period' | 'grace', bounds: { min: number; max: number }): number => {
    if (fields.has('heartbeat') && !heartbeat.has(key)) heartbeat.fail(heartbeat.at(key), `is required: whole seconds from ${bounds.min} to ${bounds.max}`);
    return heartbeat.integer(key, { ...bounds, default: bounds.min, unit: 'seconds' });
  };
  const periodSeconds = seconds('period', HEARTBEAT_PERIOD_SECONDS);
  const graceSeconds = seconds('grace', HEARTBEAT_GRACE_SECONDS);
  const written = fields.has('heartbeat') ? heartbeat.string('token', { required: true, minLength: 1, maxLength: 1_000 }) : undefined;
  let token = '';
  if (written !== undefined) {
    const merged = new Map(globals.map((v) => [v.key, v]));
    for (const v of own) merged.set(v.key, v);
    try {
      token = new Variables([...merged.values()]).interpolate(written, heartbeat.at('token'));
    } catch (error) {
      if (!(error instanceof UnknownVariableError)) throw error;
      heartbeat.fail(heartbeat.at('token'), `uses the unknown variable {{${error.variable}}}: define it in $.environmentVariables or the check's environmentVariables`);
    }
    if (token !== '' && (token.length < HEARTBEAT_TOKEN_LENGTH.min || token.length > HEARTBEAT_TOKEN_LENGTH.max)) {
      heartbeat.fail(
        heartbeat.at('token'),
        `must be ${HEARTBEAT_TOKEN_LENGTH.min} to ${HEARTBEAT_TOKEN_LENGTH.max} characters once its variables are filled in (it is ${token.length})`,
      );
    } else if (token !== '' && !TOKEN_CHARACTERS.test(token)) {
      heartbeat.fail(heartbeat.at('token'), 'must be letters, digits and . _ ~ - only once its variables are filled in (it is a path segment of /ping/{token})');
    }
  }
  fields.assertValid();
  const definition = { ...(raw as Record<string, unknown>) };
  definition.heartbeat = { ...(raw as { heartbeat: Record<string, unknown> }).heartbeat, token: '*****' };
  return { id: checkId ?? '', name, periodSeconds, graceSeconds, token, definition };
}
