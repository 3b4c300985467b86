// The server's agent side for tests: the real router, the protocol routes
// (src/server/agent-api.ts) and a real SqliteStore in a temporary STATE_DIR,
// on 127.0.0.1 and port 0. Locations, keys and queued jobs are made directly
// through the store, as the scheduler would.

import { randomUUID } from 'node:crypto';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import pino from 'pino';
import type { CheckType } from '../../src/core/check-type.js';
import { AGENT_ROUTE_LIMIT_PER_MINUTE } from '../../src/core/protocol.js';
import { attemptsPerRun } from '../../src/checks/retry.js';
import { agentRoutes, LEASE_MS } from '../../src/server/agent-api.js';
import { WriteBudget } from '../../src/server/write-budget.js';
import { keyHash, newAgentKey } from '../../src/server/http/credentials.js';
import { RateLimiter } from '../../src/server/http/rate-limit.js';
import { closeApiServer, Router, startApiServer } from '../../src/server/http/router.js';
import { JobSignal } from '../../src/server/job-signal.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import type { LocationRecord, Store, StoredCheck } from '../../src/store/store.js';
import { tempDir } from './agent-process.js';

export const PUBLIC_KEY = 'test-public-key';

export interface LogRecord {
  level: number;
  msg: string;
  [key: string]: unknown;
}

export interface AgentApiServer {
  url: string;
  store: SqliteStore;
  jobSignal: JobSignal;
  stateDir: string;
  artifactsDir: string;
  logs: LogRecord[];
  /** A new agent key for the location; the raw key. */
  key(location: string): Promise<string>;
  /** Adds a check (kept with the ones added before) and queues one session with a job in each of its locations; returns the job ids by location. */
  queue(check: CheckSpec): Promise<{ sessionId: string; jobs: Record<string, string> }>;
  /** Claims the routes have under way in the store now. */
  claimsInFlight(): number;
  close(): Promise<void>;
}

export interface AgentApiServerOptions {
  leaseMs?: number;
  /** Holds each claim this long before it reaches the store: room for a caller to go away meanwhile. */
  claimDelayMs?: number;
  /** LOCATION_WRITE_BYTES_PER_MINUTE; none: unbounded. */
  writeBytesPerMinute?: number;
}

export interface CheckSpec {
  id?: string;
  checkType?: CheckType;
  locations: string[];
  /** The definition handed to agents; a URL check of `url` by default. */
  definition?: Record<string, unknown>;
  url?: string;
  runtimeId?: string | null;
  capMs?: number;
}

export async function startAgentApiServer(locations: readonly LocationRecord[], options: AgentApiServerOptions = {}): Promise<AgentApiServer> {
  const stateDir = tempDir('outpost-server-');
  const artifactsDir = path.join(stateDir, 'artifacts');
  const store = await SqliteStore.open(path.join(stateDir, 'outpost.db'));
  await store.syncLocations(locations);
  const logs: LogRecord[] = [];
  const logger = pino(
    { level: 'debug' },
    {
      write(line: string) {
        logs.push(JSON.parse(line) as LogRecord);
      },
    },
  );
  const jobSignal = new JobSignal();
  let claimsInFlight = 0;
  // The real store; only the timing of a claim is changed, when asked.
  const claimJobs: Store['claimJobs'] = async (query) => {
    claimsInFlight++;
    try {
      if (options.claimDelayMs) await new Promise((resolve) => setTimeout(resolve, options.claimDelayMs));
      return await store.claimJobs(query);
    } finally {
      claimsInFlight--;
    }
  };
  const routeStore = new Proxy<Store>(store, {
    get(target, property) {
      if (property === 'claimJobs') return claimJobs;
      const value: unknown = Reflect.get(target, property, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  const writeBudget = options.writeBytesPerMinute === undefined ? {} : { writeBudget: new WriteBudget(options.writeBytesPerMinute) };
  const router = new Router(agentRoutes({ store: routeStore, jobSignal, artifactsDir, logger, leaseMs: options.leaseMs ?? LEASE_MS, ...writeBudget }), {
    publicKey: PUBLIC_KEY,
    agentKey: (token) => store.keyByHash(keyHash(token)),
    publicLimiter: new RateLimiter(600, 60),
    agentLimiter: new RateLimiter(AGENT_ROUTE_LIMIT_PER_MINUTE, 60),
    logger,
  });
  const server: Server = await startApiServer(router, { host: '127.0.0.1', port: 0 });
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const checks = new Map<string, StoredCheck>();

  return {
    url,
    store,
    jobSignal,
    stateDir,
    artifactsDir,
    logs,
    async key(location) {
      const { rawKey, maskedKey, hash } = newAgentKey();
      const at = new Date().toISOString();
      await store.createKey({ id: randomUUID(), locationId: location, maskedKey, hash, created_at: at, updated_at: at });
      return rawKey;
    },
    async queue(spec) {
      const id = spec.id ?? `check-${randomUUID().slice(0, 8)}`;
      const checkType = spec.checkType ?? 'URL';
      const definition = spec.definition ?? { id, name: `check ${id}`, checkType, request: { url: spec.url ?? 'http://127.0.0.1:9/' } };
      const check: StoredCheck = {
        id,
        name: `check ${id}`,
        checkType,
        frequencySeconds: 60,
        locations: spec.locations,
        definition,
        environmentVariables: [],
        runtimeId: spec.runtimeId ?? null,
        capMs: spec.capMs ?? 30_000,
      };
      const now = new Date();
      checks.set(id, check);
      await store.syncChecks([...checks.values()], now);
      const sessionId = randomUUID();
      const jobs: Record<string, string> = {};
      for (const location of spec.locations) jobs[location] = randomUUID();
      await store.createSession(
        {
          id: sessionId,
          checkId: id,
          checkType,
          name: check.name,
          status: 'STARTED',
          runLocations: spec.locations,
          triggerSource: 'SCHEDULER',
          startedAt: now.toISOString(),
          stoppedAt: null,
          durationMs: null,
        },
        spec.locations.map((location) => ({
          id: jobs[location] as string,
          location,
          deadlineAt: new Date(now.getTime() + check.capMs + 2 * LEASE_MS).toISOString(),
          // As the scheduler queues it (src/server/scheduler.ts).
          attemptsPerRun: attemptsPerRun(definition),
        })),
        check,
      );
      for (const location of spec.locations) jobSignal.notify(location);
      return { sessionId, jobs };
    },
    claimsInFlight: () => claimsInFlight,
    async close() {
      await closeApiServer(server, 1_000);
      await store.close();
    },
  };
}

/** A POST to an agent route with a key; the parsed answer. */
export async function agentCall(
  base: string,
  route: string,
  key: string,
  body: unknown,
  options: { agentId?: string; signal?: AbortSignal } = {},
): Promise<{ status: number; body: unknown }> {
  const response = await fetch(`${base}${route}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'x-agent-id': options.agentId ?? 'agent-1', 'content-type': 'application/json' },
    body: typeof body === 'string' ? body : JSON.stringify(body),
    signal: options.signal,
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : undefined };
}
