// The agent side of the server: protocol v1 (docs/protocol.md) as the
// router's routes. Every call acts for the caller's location (its key's) and
// agent (its x-agent-id): a job of another location is unknown to it. The
// store decides what a result, a lease or a claim does; these routes check
// the bodies, hold the claim long poll, and move artifact bytes to disk.

import { parseDateTime } from '../core/date-time.js';
import { MAX_DOCUMENT_DEPTH, nestedDeeperThan } from '../core/json-depth.js';
import { hasNul } from '../core/nul.js';
import { randomUUID } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { open, rename, rm } from 'node:fs/promises';
import { makeDirectories } from '../core/make-directories.js';
import { isIPv6 } from 'node:net';
import path from 'node:path';
import type { IncomingMessage } from 'node:http';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { AgentEvent, Job, ResultEnvelope } from '../core/protocol.js';
import { MAX_RESULTS_PER_BATCH } from '../core/protocol.js';
import type { Logger } from '../observability/logger.js';
import type { ResultsOutcome, Store } from '../store/store.js';
import { MAX_ADDRESSES_PER_LOCATION } from '../store/analytics.js';
import { diskFailure } from '../store/write-health.js';
import { ApiError, badRequest, notFound } from './http/api-error.js';
import type { Principal, Route, RouteContext } from './http/router.js';
import { sendJson, STORAGE_RETRY_AFTER_SECONDS } from './http/router.js';
import { AgentEventLog } from './event-log.js';
import type { JobSignal } from './job-signal.js';
import type { WriteBudget, WriteDecision } from './write-budget.js';

/** How long a claimed job is the agent's before it goes back to the queue, unless extended. */
export const LEASE_MS = 60_000;
/** Most jobs one claim answer carries, whatever the agent asked for. */
export const MAX_CLAIM = 100;
/** Longest a claim is held open, whatever the agent asked for. */
export const MAX_WAIT_SECONDS = 30;
/**
 * What an agent may ask (docs/protocol.md: `max` is its free slots, up to
 * JOB_CONCURRENCY; `waitSeconds` its CLAIM_WAIT_SECONDS): src/config.ts's
 * bounds. More than the server gives is not an error, it is capped.
 */
export const MAX_CLAIM_ASKED = 1_000;
export const MAX_WAIT_SECONDS_ASKED = 60;
export const MAX_LEASE_IDS = 1_000;
export const MAX_EVENTS_PER_BATCH = 100;
/** The largest artifact an agent may announce (docs/protocol.md). */
export const MAX_ARTIFACT_BYTES = 157_286_400;

/**
 * An artifact upload that sends no byte for this long is cut (its partial file removed): uploads alone keep the
 * API's 15-minute request deadline (src/server/http/router.ts), and a stalled one must not hold it that long.
 */
export const UPLOAD_IDLE_MS = 30_000;

const MiB = 1024 * 1024;
const RESULTS_BODY_LIMIT = 16 * MiB;
const SMALL_BODY_LIMIT = MiB;

export interface AgentApiDeps {
  store: Store;
  /** Woken by the scheduler when a job was queued; claims wait on it. */
  jobSignal: JobSignal;
  /** STATE_DIR/artifacts: `<id>` once stored, `<id>.part` while uploading. */
  artifactsDir: string;
  logger: Logger;
  now?: () => Date;
  leaseMs?: number;
  /** Told each result the store newly stored, its checkId its job's, with the location it came from (the per-check metrics). */
  onAccepted?: (envelope: ResultEnvelope, location: string) => void;
  /** Keeps the IPv6 addresses a claim reports (agent-addresses.ts; GET /v1/static-ipv6s.txt). */
  addresses?: { report(location: string, agentId: string, addresses: readonly string[]): Promise<number> };
  /** UPLOAD_IDLE_MS unless given (tests). */
  uploadIdleMs?: number;
  /** Bytes of results and events each location may send a minute (LOCATION_WRITE_BYTES_PER_MINUTE); none: unbounded. */
  writeBudget?: WriteBudget;
}

/** An upload being written: a newer PUT of the same artifact cuts it and waits until its partial file is gone. */
interface Upload {
  cut(): void;
  settled: Promise<void>;
}

type AgentPrincipal = Extract<Principal, { kind: 'agent' }>;

function agentOf(ctx: RouteContext): AgentPrincipal {
  // The router authenticates agent routes with an agent key; anything else is a wiring mistake.
  if (ctx.principal.kind !== 'agent') throw new Error('an agent route was reached without an agent key');
  return ctx.principal;
}

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

function fieldError(field: string, message: string): ApiError {
  return badRequest(`${field}: ${message}`, { field });
}

function objectBody(body: unknown): Record<string, unknown> {
  if (!isObject(body)) throw badRequest('the body must be a JSON object');
  return body;
}

function integerIn(value: unknown, field: string, min: number, max: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw fieldError(field, `must be an integer from ${min} to ${max}`);
  }
  return value;
}

function nonEmptyString(value: unknown, field: string, maxLength = 256): string {
  if (typeof value !== 'string' || value.length === 0 || value.length > maxLength) {
    throw fieldError(field, `must be a string of 1 to ${maxLength} characters`);
  }
  // Names and ids are looked up or stored as they are; PostgreSQL's TEXT cannot hold U+0000 (src/core/nul.ts).
  if (hasNul(value)) throw fieldError(field, 'must not contain U+0000');
  return value;
}

function stringArray(value: unknown, field: string, maxItems: number): string[] {
  if (!Array.isArray(value) || value.length > maxItems) throw fieldError(field, `must be an array of at most ${maxItems} strings`);
  for (const [i, item] of value.entries()) nonEmptyString(item, `${field}[${i}]`);
  return value as string[];
}

function arrayIn(value: unknown, field: string, min: number, max: number): unknown[] {
  if (!Array.isArray(value) || value.length < min || value.length > max) {
    throw fieldError(field, `must be an array of ${min} to ${max} items`);
  }
  return value;
}

export interface ClaimBody {
  max: number;
  waitSeconds: number;
  agent: { id: string; version: string; checkTypes: string[]; runtimes: string[]; ipv6Addresses?: string[] };
  claimId?: string;
}

/** What a claimId may be: the agent sends a UUID; anything short and printable names a claim as well. */
const CLAIM_ID = /^[\x21-\x7e]{1,100}$/;

/** Most IPv6 addresses one claim may report. */
export const MAX_REPORTED_ADDRESSES = 32;

/** IPv6 addresses in canonical text (lowercase, zeros compressed), each once. */
function ipv6List(value: unknown, field: string): string[] {
  const items = stringArray(value, field, MAX_REPORTED_ADDRESSES);
  const canonical = items.map((item, i) => {
    // A zone (fe80::1%eth0) names an interface of the agent's host: no address another network can use.
    if (!isIPv6(item) || item.includes('%')) throw fieldError(`${field}[${i}]`, 'must be an IPv6 address without a zone');
    return new URL(`http://[${item}]/`).hostname.slice(1, -1);
  });
  return [...new Set(canonical)];
}

export function parseClaimBody(body: unknown): ClaimBody {
  const b = objectBody(body);
  const max = Math.min(integerIn(b.max, 'max', 1, MAX_CLAIM_ASKED), MAX_CLAIM);
  const waitSeconds = b.waitSeconds;
  if (typeof waitSeconds !== 'number' || !Number.isFinite(waitSeconds) || waitSeconds < 0 || waitSeconds > MAX_WAIT_SECONDS_ASKED) {
    throw fieldError('waitSeconds', `must be a number from 0 to ${MAX_WAIT_SECONDS_ASKED}`);
  }
  if (!isObject(b.agent)) throw fieldError('agent', 'must be an object {id, version, checkTypes, runtimes}');
  const agent = {
    id: nonEmptyString(b.agent.id, 'agent.id'),
    version: nonEmptyString(b.agent.version, 'agent.version'),
    checkTypes: stringArray(b.agent.checkTypes, 'agent.checkTypes', 100),
    runtimes: stringArray(b.agent.runtimes, 'agent.runtimes', 100),
    ...(b.agent.ipv6Addresses === undefined ? {} : { ipv6Addresses: ipv6List(b.agent.ipv6Addresses, 'agent.ipv6Addresses') }),
  };
  if (b.claimId !== undefined && (typeof b.claimId !== 'string' || !CLAIM_ID.test(b.claimId))) {
    throw fieldError('claimId', 'must be a string of 1 to 100 printable ASCII characters without spaces');
  }
  return { max, waitSeconds: Math.min(waitSeconds, MAX_WAIT_SECONDS), agent, ...(b.claimId === undefined ? {} : { claimId: b.claimId }) };
}

/** Why an envelope cannot be stored, or undefined when it can. */
export function envelopeProblem(envelope: unknown): string | undefined {
  if (!isObject(envelope)) return 'the envelope must be an object {jobId, resultId, result}';
  if (typeof envelope.jobId !== 'string' || envelope.jobId === '') return 'jobId must be a non-empty string';
  if (typeof envelope.resultId !== 'string' || envelope.resultId === '') return 'resultId must be a non-empty string';
  // Both are looked up and stored as they are; PostgreSQL's TEXT cannot hold U+0000 (src/core/nul.ts).
  if (hasNul(envelope.jobId)) return 'jobId must not contain U+0000';
  if (hasNul(envelope.resultId)) return 'resultId must not contain U+0000';
  const result = envelope.result;
  if (!isObject(result)) return 'result must be an object';
  if (result.id !== envelope.resultId) return 'result.id must equal resultId';
  if (result.resultType !== 'FINAL' && result.resultType !== 'ATTEMPT') return 'result.resultType must be FINAL or ATTEMPT';
  // Strict RFC 3339: Date.parse took `2026` as 2026-01-01 and filed the result there.
  if (typeof result.startedAt !== 'string' || parseDateTime(result.startedAt) === undefined) {
    return 'result.startedAt must be an RFC 3339 date-time such as 2026-11-24T01:18:11.123Z';
  }
  // The verdict's flags are read in the database (src/store/postgres/pg-store.ts recomputeSessions casts them
  // to boolean): a string there would fail the whole batch on every try.
  for (const flag of ['hasFailures', 'hasErrors', 'isDegraded'] as const) {
    if (result[flag] !== undefined && typeof result[flag] !== 'boolean') return `result.${flag} must be a boolean`;
  }
  // Storing and serving a result walks it recursively: a value nested thousands deep would fail the whole
  // batch (a 500 the agent retries for ever) instead of this one result.
  if (nestedDeeperThan(result, MAX_DOCUMENT_DEPTH)) return `result is nested deeper than ${MAX_DOCUMENT_DEPTH} levels`;
  return undefined;
}

const EVENT_LEVELS = new Set(['error', 'warn']);

export function parseEvents(body: unknown): AgentEvent[] {
  const events = arrayIn(objectBody(body).events, 'events', 1, MAX_EVENTS_PER_BATCH);
  return events.map((event, i) => {
    const at = `events[${i}]`;
    if (!isObject(event)) throw fieldError(at, 'must be an object');
    if (typeof event.level !== 'string' || !EVENT_LEVELS.has(event.level)) throw fieldError(`${at}.level`, 'must be error or warn');
    nonEmptyString(event.name, `${at}.name`);
    if (typeof event.message !== 'string') throw fieldError(`${at}.message`, 'must be a string');
    nonEmptyString(event.agentVersion, `${at}.agentVersion`);
    const kept: AgentEvent = {
      level: event.level as AgentEvent['level'],
      name: event.name as string,
      message: event.message,
      agentVersion: event.agentVersion as string,
    };
    for (const optional of ['stack', 'nodeVersion', 'origin', 'checkType'] as const) {
      const value = event[optional];
      if (value === undefined) continue;
      if (typeof value !== 'string') throw fieldError(`${at}.${optional}`, 'must be a string');
      kept[optional] = value;
    }
    // Only the protocol's fields are kept: anything else an agent adds is not stored (nor walked).
    return kept;
  });
}

/** A plain file name: no path, no control characters. */
function plainFileName(name: string): boolean {
  if (name.length === 0 || name.length > 255 || name === '.' || name === '..') return false;
  for (const char of name) {
    const code = char.codePointAt(0) as number;
    if (code < 0x20 || code === 0x7f || char === '/' || char === '\\') return false;
  }
  return true;
}

/** type/subtype with optional parameters, printable ASCII only (it is sent back as a header). */
const CONTENT_TYPE = /^[A-Za-z0-9!#$&^_.+-]+\/[A-Za-z0-9!#$&^_.+-]+(\s*;[\x20-\x7e]*)?$/;

export interface ArtifactBody {
  jobId: string;
  name: string;
  contentType: string;
  size: number;
}

export function parseArtifactBody(body: unknown): ArtifactBody {
  const b = objectBody(body);
  const jobId = nonEmptyString(b.jobId, 'jobId');
  if (typeof b.name !== 'string' || !plainFileName(b.name)) throw fieldError('name', 'must be a plain file name of 1 to 255 characters');
  if (typeof b.contentType !== 'string' || b.contentType.length > 255 || !CONTENT_TYPE.test(b.contentType)) {
    throw fieldError('contentType', 'must be a media type (type/subtype)');
  }
  const size = integerIn(b.size, 'size', 1, MAX_ARTIFACT_BYTES);
  return { jobId, name: b.name, contentType: b.contentType, size };
}

/** Ids this server made (randomUUID); anything else never names a file. */
const ARTIFACT_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

export function agentRoutes(deps: AgentApiDeps): Route[] {
  const { store, jobSignal, artifactsDir, logger } = deps;
  const now = deps.now ?? (() => new Date());
  const leaseMs = deps.leaseMs ?? LEASE_MS;
  const uploadIdleMs = deps.uploadIdleMs ?? UPLOAD_IDLE_MS;
  /**
   * Artifacts being written now. A second PUT of the same one is the agent's retry of an upload it gave up on
   * (src/control-plane/artifact-upload.ts), so it takes over: the earlier one is cut, and the newer waits until
   * the earlier's .part file is removed before writing its own. (A 409 here made the retry fail for good.)
   */
  const uploading = new Map<string, Upload>();
  const eventLog = new AgentEventLog(logger);
  const { writeBudget } = deps;

  /**
   * The bytes a request is charged as it is let in: its Content-Length, or, for a chunked body that announces
   * none, the route's limit (the most it can be; the difference is paid back once it is read). Charged only once
   * read, any number of requests let in together would each have found the budget unspent. A body over the
   * route's limit is refused unread (413) and costs nothing.
   */
  const announced = (req: IncomingMessage, limit: number): number => {
    if (req.headers['content-length'] === undefined) return req.headers['transfer-encoding'] === undefined ? 0 : limit;
    const declared = Number(req.headers['content-length']);
    return Number.isInteger(declared) && declared > 0 && declared <= limit ? declared : 0;
  };
  /** Refuses, before its body is read, a location that has sent its write budget's worth (write-budget.ts). */
  const withinBudget =
    (limit: number) =>
    (principal: Principal, req: IncomingMessage): void => {
      if (!writeBudget || principal.kind !== 'agent') return;
      const location = principal.key.locationId;
      const decision = writeBudget.admit(location);
      if (!decision.allowed) refuse(writeBudget, location, decision);
      writeBudget.charge(location, announced(req, limit));
    };
  const refuse = (budget: WriteBudget, location: string, decision: Extract<WriteDecision, { allowed: false }>): never => {
    if (decision.warn) {
      logger.warn(
        { location, bytesPerMinute: budget.bytesPerMinute, retryAfterSeconds: decision.retryAfterSeconds },
        "a location's agents sent more results and events than LOCATION_WRITE_BYTES_PER_MINUTE allows: their writes get 429 until the budget refills (told at most once an hour)",
      );
    }
    throw new ApiError(
      429,
      `location ${location} has sent its write budget (${budget.bytesPerMinute} bytes of results and events a minute); retry after ${decision.retryAfterSeconds} s`,
      { location, bytesPerMinute: budget.bytesPerMinute },
      { 'retry-after': String(decision.retryAfterSeconds) },
    );
  };
  /** The rest of the body's bytes: what it was let in with was charged already. */
  const charge = (ctx: RouteContext, limit: number): void =>
    writeBudget?.charge(agentOf(ctx).key.locationId, ctx.bodyBytes - announced(ctx.req, limit));

  const claim: Route = {
    method: 'POST',
    path: '/v1/agent/claim',
    auth: 'agent',
    bodyLimit: SMALL_BODY_LIMIT,
    async handle(ctx) {
      const { key, agentId } = agentOf(ctx);
      const body = parseClaimBody(ctx.body);
      const location = key.locationId;
      if (body.agent.ipv6Addresses && deps.addresses) {
        // The address list is a side note of the claim: failing to keep it never costs the agent its jobs.
        const dropped = await deps.addresses.report(location, agentId, body.agent.ipv6Addresses).catch((error: unknown) => {
          logger.warn({ location, agentId, err: error }, 'could not record the IPv6 addresses the agent reported');
          return 0;
        });
        if (dropped > 0) {
          logger.warn(
            { location, agentId, dropped, max: MAX_ADDRESSES_PER_LOCATION },
            'the location lists as many IPv6 addresses as it may keep; new ones are not listed until old ones go unseen for 7 days',
          );
        }
      }
      if (body.claimId !== undefined) {
        const again = await store.claimedAgain({ location, agentId, claimId: body.claimId, leaseMs, now: now() });
        if (again.length > 0) {
          // Not handed back if this answer is lost too: the next retry asks for them again. (Another try of
          // the same claim may be running them: a try the agent gave up on that is still open here.)
          logger.info({ location, agentId, jobIds: again.map((job) => job.id) }, 'claim retried: its jobs answered again');
          sendJson(ctx.res, 200, { jobs: again });
          return 'streamed';
        }
      }
      const claimOnce = () =>
        store.claimJobs({
          location,
          agentId,
          checkTypes: body.agent.checkTypes,
          runtimes: body.agent.runtimes,
          max: body.max,
          leaseMs,
          now: now(),
          claimId: body.claimId,
        });
      const deadline = Date.now() + body.waitSeconds * 1000;
      let jobs: Job[] = [];
      for (;;) {
        const generation = jobSignal.generation(location);
        jobs = await claimOnce();
        const left = deadline - Date.now();
        if (jobs.length > 0 || ctx.signal.aborted || left <= 0) break;
        // Woken, the claim runs again; the job queued may be of a type this agent lacks, and then it waits on.
        const woken = await jobSignal.wait(location, generation, left, ctx.signal);
        if (ctx.signal.aborted) break;
        if (!woken) {
          // The wait is over: one last claim takes a job whose lease ran out meanwhile (no signal for that).
          jobs = await claimOnce();
          break;
        }
      }
      const release = (why: string) => {
        if (jobs.length === 0) return;
        const ids = jobs.map((job) => job.id);
        jobs = [];
        store.releaseJobs(agentId, ids).then(
          () => {
            logger.info({ location, agentId, jobIds: ids }, `claimed jobs released: ${why}`);
            // Back in the queue: a claim waiting now takes them at once.
            jobSignal.notify(location);
          },
          (error: unknown) => logger.error({ err: error, location, agentId, jobIds: ids }, 'releasing undelivered jobs failed'),
        );
      };
      if (ctx.signal.aborted) {
        release('the caller went away before the answer');
        return 'streamed';
      }
      // Jobs handed to a socket that closes before the whole answer went out would stay leased to nobody until the lease ran out.
      ctx.res.once('close', () => {
        if (!ctx.res.writableFinished) release('the connection closed before the answer was sent');
      });
      sendJson(ctx.res, 200, { jobs });
      return 'streamed';
    },
  };

  const leases: Route = {
    method: 'POST',
    path: '/v1/agent/leases',
    auth: 'agent',
    bodyLimit: SMALL_BODY_LIMIT,
    async handle(ctx) {
      const { key, agentId } = agentOf(ctx);
      const jobIds = stringArray(objectBody(ctx.body).jobIds, 'jobIds', MAX_LEASE_IDS);
      const update = await store.extendLeases(agentId, key.locationId, jobIds, leaseMs, now());
      return { status: 200, body: update };
    },
  };

  const results: Route = {
    method: 'POST',
    path: '/v1/agent/results',
    auth: 'agent',
    bodyLimit: RESULTS_BODY_LIMIT,
    beforeBody: withinBudget(RESULTS_BODY_LIMIT),
    async handle(ctx) {
      const { key, agentId } = agentOf(ctx);
      // Charged whatever becomes of the batch: a refused one cost the budget as much as a stored one.
      charge(ctx, RESULTS_BODY_LIMIT);
      const envelopes = arrayIn(objectBody(ctx.body).results, 'results', 1, MAX_RESULTS_PER_BATCH);
      const valid: ResultEnvelope[] = [];
      const rejected: ResultsOutcome['rejected'] = [];
      envelopes.forEach((envelope, i) => {
        const problem = envelopeProblem(envelope);
        if (problem === undefined) {
          valid.push(envelope as ResultEnvelope);
          return;
        }
        const resultId = isObject(envelope) && typeof envelope.resultId === 'string' ? envelope.resultId : `results[${i}]`;
        rejected.push({ resultId, statusCode: 400, message: `results[${i}]: ${problem}` });
      });
      const outcome = valid.length > 0 ? await store.acceptResults(agentId, key.locationId, valid, now()) : { accepted: [], rejected: [] };
      if (deps.onAccepted && outcome.stored && outcome.stored.length > 0) {
        // Newly stored results only (a re-send changes nothing), each under its job's check whatever its body says.
        const checkOf = new Map(outcome.stored.map((s) => [s.resultId, s.checkId]));
        for (const envelope of valid) {
          const checkId = checkOf.get(envelope.resultId);
          checkOf.delete(envelope.resultId);
          if (checkId !== undefined) deps.onAccepted({ ...envelope, result: { ...envelope.result, checkId } }, key.locationId);
        }
      }
      return { status: 200, body: { accepted: outcome.accepted, rejected: [...outcome.rejected, ...rejected] } };
    },
  };

  const announce: Route = {
    method: 'POST',
    path: '/v1/agent/artifacts',
    auth: 'agent',
    bodyLimit: SMALL_BODY_LIMIT,
    async handle(ctx) {
      const { key } = agentOf(ctx);
      const artifact = parseArtifactBody(ctx.body);
      const id = randomUUID();
      // The store refuses (NotFoundError → 404) a job that is unknown or of another location.
      await store.createArtifact({ id, location: key.locationId, created_at: now().toISOString(), ...artifact });
      return {
        status: 201,
        body: { uploadUrl: `${ctx.origin}/v1/agent/artifacts/${id}/content`, url: `${ctx.origin}/v1/artifacts/${id}` },
      };
    },
  };

  const upload: Route = {
    method: 'PUT',
    path: '/v1/agent/artifacts/:id/content',
    auth: 'agent',
    bodyLimit: 0,
    async handle(ctx) {
      const { key } = agentOf(ctx);
      const id = ctx.params.id as string;
      const artifact = ARTIFACT_ID.test(id) ? await store.artifact(id) : undefined;
      // A refused upload's body is not worth reading to its end (up to 150 MiB): the connection closes after the answer.
      const close = { connection: 'close' };
      if (!artifact || artifact.location !== key.locationId) throw new ApiError(404, `artifact ${id} does not exist`, { id }, close);
      const lengthHeader = ctx.req.headers['content-length'];
      if (lengthHeader === undefined) throw new ApiError(411, `Content-Length is required: the upload is ${artifact.size} bytes`, {}, close);
      if (Number(lengthHeader) !== artifact.size) {
        throw new ApiError(400, `Content-Length ${lengthHeader} is not the announced size ${artifact.size}`, { header: 'content-length' }, close);
      }
      for (let earlier = uploading.get(id); earlier; earlier = uploading.get(id)) {
        earlier.cut();
        await earlier.settled;
      }
      if (ctx.signal.aborted) return 'streamed';
      let settle = () => {};
      // Set when this server cut the request (stalled, or taken over): no answer is owed then.
      let cut = false;
      const mine: Upload = {
        cut: () => {
          cut = true;
          ctx.req.destroy(new Error('a newer upload of this artifact took over'));
        },
        settled: new Promise<void>((resolve) => {
          settle = resolve;
        }),
      };
      uploading.set(id, mine);
      let idle: NodeJS.Timeout | undefined;
      const part = path.join(artifactsDir, `${id}.part`);
      try {
        await makeDirectories(artifactsDir);
        let received = 0;
        // Cutting the request ends the pipeline below with an error; the answer has nowhere to go.
        const stalled = () => {
          cut = true;
          ctx.req.destroy(new Error(`no byte of the upload for ${uploadIdleMs / 1000} s`));
        };
        idle = setTimeout(stalled, uploadIdleMs);
        ctx.acceptBody();
        const count = new Transform({
          transform(chunk: Buffer, _encoding, done) {
            idle?.refresh();
            received += chunk.length;
            if (received > artifact.size) done(badRequest(`the upload is longer than the announced ${artifact.size} bytes`));
            else done(null, chunk);
          },
        });
        try {
          // Read through an async iterator rather than piped: a file that cannot be written (a full disk) then
          // reaches the request only after the 503 below is on its way (piped, the request was destroyed at once
          // and the agent saw a reset connection, not the answer).
          await pipeline(Readable.from(ctx.req.iterator({ destroyOnReturn: false })), count, createWriteStream(part, { mode: 0o600 }));
          if (received !== artifact.size) throw badRequest(`the upload has ${received} bytes, not the announced ${artifact.size}`);
        } catch (error) {
          await rm(part, { force: true });
          if (error instanceof ApiError) throw error;
          // Cut (stalled, or taken over by a newer PUT) or gone: there is no one to answer.
          if (ctx.signal.aborted || cut) return 'streamed';
          const disk = diskFailure(error);
          if (disk === undefined) throw error;
          logger.warn({ err: error, artifactId: id }, 'api request failed: the disk cannot take the file');
          throw new ApiError(503, `the server cannot store this now: ${disk}; retry later`, {}, { ...close, 'retry-after': String(STORAGE_RETRY_AFTER_SECONDS) });
        }
        await rename(part, path.join(artifactsDir, id));
        await store.markArtifactStored(id, now());
      } finally {
        clearTimeout(idle);
        if (uploading.get(id) === mine) uploading.delete(id);
        settle();
      }
      return { status: 200, body: { id, size: artifact.size } };
    },
  };

  const download: Route = {
    method: 'GET',
    path: '/v1/artifacts/:id',
    auth: 'public',
    bodyLimit: 0,
    async handle(ctx) {
      const id = ctx.params.id as string;
      const artifact = ARTIFACT_ID.test(id) ? await store.artifact(id) : undefined;
      if (!artifact || artifact.storedAt === null) throw notFound('artifact', id);
      // Pruned, or removed by hand: the record alone is no artifact.
      const handle = await open(path.join(artifactsDir, id), 'r').catch(() => undefined);
      if (!handle) throw notFound('artifact', id);
      const { size } = await handle.stat();
      const stream = handle.createReadStream();
      ctx.res.writeHead(200, {
        'content-type': artifact.contentType,
        'content-length': size,
        // The type is the agent's word: never let a browser guess another.
        'x-content-type-options': 'nosniff',
        'content-disposition': `attachment; filename*=UTF-8''${encodeURIComponent(artifact.name)}`,
      });
      await pipeline(stream, ctx.res).catch((error: unknown) => {
        if (!ctx.signal.aborted) logger.warn({ err: error, artifactId: id }, 'sending an artifact failed');
      });
      return 'streamed';
    },
  };

  const events: Route = {
    method: 'POST',
    path: '/v1/agent/events',
    auth: 'agent',
    bodyLimit: SMALL_BODY_LIMIT,
    beforeBody: withinBudget(SMALL_BODY_LIMIT),
    async handle(ctx) {
      const { key, agentId } = agentOf(ctx);
      charge(ctx, SMALL_BODY_LIMIT);
      const list = parseEvents(ctx.body);
      await store.addEvents(key.locationId, agentId, list, now());
      eventLog.log(key.locationId, agentId, list);
      return { status: 202 };
    },
  };

  return [claim, leases, results, announce, upload, download, events];
}
