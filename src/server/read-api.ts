// The public read API of `outpost server` (public API key): check results
// (paged), one result, check sessions, runtimes, deleting a check and making a
// private location's agent key. Shapes follow the service's public API; a bad
// or unknown query parameter is a 400 that names it, a missing record a 404,
// both with the service's error body (http/api-error.ts).

import { randomUUID } from 'node:crypto';
import { listRuntimes, type Runtime, runtimesDir } from '../checks/scripted/runtimes.js';
import { InvalidQueryError, type ResultQuery, type SessionRecord, type Store } from '../store/store.js';
import type { CheckResultEntry } from '../core/result-entry.js';
import { badRequest, notFound } from './http/api-error.js';
import { newAgentKey } from './http/credentials.js';
import type { JsonAnswer, Route } from './http/router.js';

/** The service's check types, as its results list accepts them (AGENTIC included, though Outpost runs no such check). */
export const SERVICE_CHECK_TYPES = ['AGENTIC', 'API', 'BROWSER', 'HEARTBEAT', 'ICMP', 'MULTI_STEP', 'TCP', 'PLAYWRIGHT', 'URL', 'DNS'] as const;

export const RESULT_TYPES = ['FINAL', 'ATTEMPT', 'ALL'] as const;

export const DEFAULT_RESULTS_LIMIT = 10;
export const MAX_RESULTS_LIMIT = 100;

/** The largest UNIX time in seconds a Date can hold (8.64e15 ms). */
const MAX_UNIX_SECONDS = 8_640_000_000_000;

/** The cursor is the store's opaque token: base64url, short. Anything else cannot be one. */
const CURSOR = /^[A-Za-z0-9_-]{1,64}$/;

export interface ReadApiDeps {
  store: Store;
  /** RUNTIMES_DIR; undefined: the runtimes the package ships (runtimes.ts runtimesDir). */
  runtimesDir?: string;
  /** A check was deleted: the scheduler reloads its checks (scheduler.ts reschedule). */
  onCheckDeleted?: (checkId: string) => void;
  now?: () => Date;
}

/** The service's Runtime record. */
export interface RuntimeRecord {
  name: string;
  multiStepSupport: boolean;
  nodeJsVersion: string;
  dependencies: Record<string, string>;
  stage: string;
  runtimeEndOfLife: string;
  description: string;
}

/** The service's check session record; `duration` in ms, null while the session runs. */
export interface CheckSessionRecord {
  id: string;
  checkId: string;
  checkType: string;
  name: string;
  status: string;
  startedAt: string;
  stoppedAt: string | null;
  duration: number | null;
  runLocations: string[];
  triggerSource: string;
  results: CheckResultEntry[];
}

export interface KeyAnswer {
  id: string;
  rawKey: string;
  maskedKey: string;
  created_at: string;
  updated_at: string;
}

/** A key as GET /v1/private-locations/{id}/keys lists it: the key record without its secret. */
export type ListedKey = Omit<KeyAnswer, 'rawKey'>;

export function runtimeRecord(runtime: Runtime): RuntimeRecord {
  return {
    name: runtime.name,
    multiStepSupport: runtime.multiStepSupport,
    nodeJsVersion: runtime.nodeJsVersion,
    dependencies: runtime.dependencies,
    stage: runtime.stage,
    runtimeEndOfLife: runtime.runtimeEndOfLife,
    description: runtime.description,
  };
}

export function sessionAnswer(session: SessionRecord & { results: CheckResultEntry[] }): CheckSessionRecord {
  return {
    id: session.id,
    checkId: session.checkId,
    checkType: session.checkType,
    name: session.name,
    status: session.status,
    startedAt: session.startedAt,
    stoppedAt: session.stoppedAt,
    duration: session.durationMs,
    runLocations: session.runLocations,
    triggerSource: session.triggerSource,
    results: session.results,
  };
}

const badParameter = (parameter: string, message: string) => badRequest(message, { parameter });

/** Every parameter is one the route knows, given once: a typo is an error, not a filter silently ignored. */
function onlyKnown(query: URLSearchParams, known: readonly string[]): void {
  const seen = new Set<string>();
  for (const name of query.keys()) {
    if (!known.includes(name)) throw badParameter(name, `unknown query parameter ${name}`);
    if (seen.has(name)) throw badParameter(name, `query parameter ${name} is given more than once`);
    seen.add(name);
  }
}

function unixSeconds(query: URLSearchParams, name: string): Date | undefined {
  const raw = query.get(name);
  if (raw === null) return undefined;
  if (!/^\d{1,16}$/.test(raw) || Number(raw) > MAX_UNIX_SECONDS) {
    throw badParameter(name, `${name} must be a UNIX time in whole seconds (an integer of at least 0), not ${JSON.stringify(raw)}`);
  }
  return new Date(Number(raw) * 1000);
}

function oneOf<T extends string>(query: URLSearchParams, name: string, allowed: readonly T[]): T | undefined {
  const raw = query.get(name);
  if (raw === null) return undefined;
  if (!(allowed as readonly string[]).includes(raw)) throw badParameter(name, `${name} must be one of ${allowed.join(', ')}, not ${JSON.stringify(raw)}`);
  return raw as T;
}

const RESULT_PARAMETERS = ['limit', 'nextId', 'from', 'to', 'location', 'checkType', 'hasFailures', 'resultType'] as const;

/** The results list's query, checked parameter by parameter; `location` is checked against the store by the caller. */
export function parseResultQuery(checkId: string, query: URLSearchParams): ResultQuery {
  onlyKnown(query, RESULT_PARAMETERS);
  const parsed: ResultQuery = { checkId, limit: DEFAULT_RESULTS_LIMIT, resultType: 'FINAL' };
  const limit = query.get('limit');
  if (limit !== null) {
    if (!/^\d{1,3}$/.test(limit) || Number(limit) < 1 || Number(limit) > MAX_RESULTS_LIMIT) {
      throw badParameter('limit', `limit must be an integer from 1 to ${MAX_RESULTS_LIMIT}, not ${JSON.stringify(limit)}`);
    }
    parsed.limit = Number(limit);
  }
  const nextId = query.get('nextId');
  if (nextId !== null) {
    if (!CURSOR.test(nextId)) throw badParameter('nextId', 'nextId must be the nextId of a previous page');
    parsed.nextId = nextId;
  }
  const from = unixSeconds(query, 'from');
  const to = unixSeconds(query, 'to');
  if (from !== undefined && to !== undefined && from.getTime() > to.getTime()) throw badParameter('from', 'from must not be after to');
  if (from !== undefined) parsed.from = from;
  if (to !== undefined) parsed.to = to;
  const location = query.get('location');
  if (location !== null) parsed.location = location;
  const checkType = oneOf(query, 'checkType', SERVICE_CHECK_TYPES);
  if (checkType !== undefined) parsed.checkType = checkType;
  // The service's flag means "only results with failures": false asks for no filter, not for the passed ones.
  const hasFailures = oneOf(query, 'hasFailures', ['true', 'false']);
  if (hasFailures !== undefined) parsed.hasFailures = hasFailures === 'true';
  parsed.resultType = oneOf(query, 'resultType', RESULT_TYPES) ?? 'FINAL';
  return parsed;
}

/** A cursor the store did not make (well-formed or not) is the caller's bad `nextId`: 400 naming it. */
async function listPage(store: Store, query: ResultQuery): Promise<JsonAnswer> {
  try {
    const page = await store.listResults(query);
    return { status: 200, body: { length: page.entries.length, entries: page.entries, nextId: page.nextId } };
  } catch (error) {
    if (error instanceof InvalidQueryError) throw badParameter(error.parameter, error.message);
    throw error;
  }
}

export function readRoutes(deps: ReadApiDeps): Route[] {
  const { store } = deps;
  const now = deps.now ?? (() => new Date());
  /** The id of a private location the server has, or a 404. */
  const knownLocation = async (id: string): Promise<string> => {
    if (!(await store.location(id))) throw notFound('private location', id);
    return id;
  };
  // The runtimes ship with the package and change only with it: read once, on the first request.
  let runtimes: Map<string, RuntimeRecord> | undefined;
  const runtime = (id: string): RuntimeRecord | undefined => {
    runtimes ??= new Map(listRuntimes(runtimesDir(deps.runtimesDir)).runtimes.map((r) => [r.name, runtimeRecord(r)]));
    return runtimes.get(id);
  };

  return [
    {
      method: 'GET',
      path: '/v2/check-results/:checkId',
      auth: 'public',
      bodyLimit: 0,
      async handle({ params, query }) {
        const checkId = params.checkId as string;
        const parsed = parseResultQuery(checkId, query);
        // The service's `location` is one of its regions; a server's locations are its private locations, by id.
        if (parsed.location !== undefined && !(await store.location(parsed.location))) {
          throw badParameter('location', `location must be the id of a private location of this server, not ${JSON.stringify(parsed.location)}`);
        }
        if (!(await store.check(checkId))) throw notFound('check', checkId);
        return listPage(store, parsed);
      },
    },
    {
      method: 'GET',
      path: '/v1/check-results/:checkId/:checkResultId',
      auth: 'public',
      bodyLimit: 0,
      async handle({ params, query }) {
        onlyKnown(query, []);
        const checkId = params.checkId as string;
        const resultId = params.checkResultId as string;
        const result = await store.result(checkId, resultId);
        if (!result) throw notFound('check result', resultId);
        return { status: 200, body: result };
      },
    },
    {
      method: 'GET',
      path: '/v1/check-sessions/:id',
      auth: 'public',
      bodyLimit: 0,
      async handle({ params, query }) {
        onlyKnown(query, []);
        const id = params.id as string;
        const session = await store.session(id);
        if (!session) throw notFound('check session', id);
        return { status: 200, body: sessionAnswer(session) };
      },
    },
    {
      method: 'GET',
      path: '/v1/runtimes/:id',
      auth: 'public',
      bodyLimit: 0,
      async handle({ params, query }) {
        onlyKnown(query, []);
        const id = params.id as string;
        const record = runtime(id);
        if (!record) throw notFound('runtime', id);
        return { status: 200, body: record };
      },
    },
    {
      method: 'DELETE',
      path: '/v1/checks/:id',
      auth: 'public',
      bodyLimit: 0,
      async handle({ params, query }) {
        onlyKnown(query, []);
        const id = params.id as string;
        if (!(await store.deleteCheck(id, now()))) throw notFound('check', id);
        deps.onCheckDeleted?.(id);
        return { status: 204 };
      },
    },
    {
      method: 'POST',
      path: '/v1/private-locations/:id/keys',
      auth: 'public',
      bodyLimit: 0,
      async handle({ params, query }) {
        onlyKnown(query, []);
        const locationId = await knownLocation(params.id as string);
        const { rawKey, maskedKey, hash } = newAgentKey();
        const at = now().toISOString();
        const record = await store.createKey({ id: randomUUID(), locationId, maskedKey, created_at: at, updated_at: at, hash });
        const body: KeyAnswer = { id: record.id, rawKey, maskedKey: record.maskedKey, created_at: record.created_at, updated_at: record.updated_at };
        return { status: 201, body };
      },
    },
    // Listing and revoking are not in the monitoring service's API (it has only the POST): Outpost's own,
    // shaped as the key record without rawKey, which is never stored (docs/server.md, "Agent keys").
    {
      method: 'GET',
      path: '/v1/private-locations/:id/keys',
      auth: 'public',
      bodyLimit: 0,
      async handle({ params, query }) {
        onlyKnown(query, []);
        const locationId = await knownLocation(params.id as string);
        const body: ListedKey[] = (await store.keys(locationId)).map((k) => ({ id: k.id, maskedKey: k.maskedKey, created_at: k.created_at, updated_at: k.updated_at }));
        return { status: 200, body };
      },
    },
    {
      method: 'DELETE',
      path: '/v1/private-locations/:id/keys/:keyId',
      auth: 'public',
      bodyLimit: 0,
      async handle({ params, query }) {
        onlyKnown(query, []);
        const locationId = await knownLocation(params.id as string);
        const keyId = params.keyId as string;
        // Agents' requests look their key up in the store each time (server-mode.ts, agentKey): revoked at once.
        if (!(await store.deleteKey(locationId, keyId))) throw notFound('key', keyId);
        return { status: 204 };
      },
    },
  ];
}
