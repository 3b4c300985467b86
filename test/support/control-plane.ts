// The control plane the agent's tests run against: the real `outpost server`
// side (Router + agentRoutes + readRoutes + the store on a temporary
// STATE_DIR: SQLite, or PostgreSQL with OUTPOST_TEST_DATABASE=postgres) in-process, and in front of it a thin HTTP proxy that forwards
// every request and, when a test asks, answers a fault instead (500, 429 with
// Retry-After, a slow or reset connection, a body that is not JSON). The
// proxy also watches the traffic, so tests can read what the agent sent and
// what the server accepted synchronously (requests, claims, results, events,
// artifacts), and notes in `violations` what protocol v1 (docs/protocol.md)
// does not allow. Jobs are queued through the store's own flow
// (createSession, then JobSignal.notify), as the scheduler does.

import { createHash, randomUUID } from 'node:crypto';
import { readFile, rm } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import path from 'node:path';
import pino from 'pino';
import { CHECK_TYPES } from '../../src/core/check-type.js';
import type { CheckResultEntry } from '../../src/core/result-entry.js';
import {
  AGENT_ROUTE_LIMIT_PER_MINUTE,
  type AgentEvent,
  type ClaimRequest,
  type EnvironmentVariable,
  type Job,
  PROTOCOL_ROUTES,
  type ResultEnvelope,
  type RouteName,
} from '../../src/core/protocol.js';
import { agentRoutes } from '../../src/server/agent-api.js';
import { keyHash, maskKey, newAgentKey } from '../../src/server/http/credentials.js';
import { RateLimiter } from '../../src/server/http/rate-limit.js';
import { closeApiServer, Router, startApiServer } from '../../src/server/http/router.js';
import { JobSignal } from '../../src/server/job-signal.js';
import { readRoutes } from '../../src/server/read-api.js';
import type { SessionRecord, Store, StoredCheck } from '../../src/store/store.js';
import { tempDir } from './agent-process.js';
import { openStateStores } from './postgres.js';

export const LOCATION = 'test-location';
/** The agent a revoked lease is handed to. */
export const OTHER_AGENT = '00000000-0000-4000-8000-000000000000';
/** The public API's key (OUTPOST_API_KEY) of the server behind the proxy. */
export const PUBLIC_API_KEY = 'test-public-key';

export type FaultRoute = RouteName | 'upload';

export interface Fault {
  /** Route it applies to (`upload`: the PUT of an artifact's bytes); any route, uploads included, when absent. */
  route?: FaultRoute;
  /** Answer with this status and the service's error body instead of forwarding. */
  status?: number;
  retryAfter?: string;
  /** Wait this long before forwarding (or before the other fault effects). */
  delayMs?: number;
  /** Destroy the connection instead of answering. */
  reset?: boolean;
  /** Answer 200 with a body that is not JSON. */
  malformed?: boolean;
  /** Forward to the server, then close the connection instead of passing its answer on: the answer lost on the way back. */
  lostAnswer?: boolean;
  /** How many matching requests it affects (default 1). */
  count?: number;
}

export interface RequestRecord {
  route: string;
  at: number;
  status: number;
  agentId: string | undefined;
}

export interface StoredResult extends ResultEnvelope {
  receivedAt: number;
}

export interface StoredArtifact {
  jobId: string;
  name: string;
  contentType: string;
  size: number;
  /** Set once the server stored the bytes: their count and SHA-256, read from its artifacts directory. */
  received?: number;
  sha256?: string;
}

/** A job as the traffic shows it: handed out (leased), back in the queue once its lease ran out, done after its FINAL. */
export interface JobView {
  state: 'ready' | 'leased' | 'done';
  /** The check type it was queued with. */
  checkType: string;
  /** The job as the last claim answer carried it. */
  job?: Job;
  agentId?: string;
  leaseExpiresAt: number;
  /** Claim answers that carried it. */
  claims: number;
}

export interface ClaimRecord {
  max: number;
  waitSeconds: number;
  given: number;
  outstandingBefore: number;
  checkTypes: string[];
  runtimes: string[];
  /** What the agent reported, when it did. */
  ipv6Addresses?: string[];
  claimId?: string;
  /** The server answered, but the answer never reached the agent (a `lostAnswer` fault). */
  lost?: boolean;
}

export interface ControlPlaneOptions {
  /** The agent key's raw value (made like a real one when absent); stored, as a real one, only as its SHA-256. */
  apiKey?: string;
  /** The server's lease length (60 s in `outpost server`). */
  leaseMs?: number;
  /** A service that ignores waitSeconds (a fault): the proxy forwards every claim with waitSeconds 0. */
  answersClaimsAtOnce?: boolean;
  /** How long an artifact upload may send nothing before the server cuts it (UPLOAD_IDLE_MS in `outpost server`). */
  uploadIdleMs?: number;
}

export interface JobExtra {
  id?: string;
  environmentVariables?: EnvironmentVariable[];
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const UPLOAD = /^\/v1\/agent\/artifacts\/([^/]+)\/content$/;
/** Answers of the real server that mean the agent sent what protocol v1 does not allow. */
const VIOLATION_STATUSES = new Set([400, 405, 411, 413, 429]);

function errorBody(statusCode: number, message: string) {
  return { statusCode, error: http.STATUS_CODES[statusCode] ?? 'Error', message, attributes: {} };
}

function readAll(stream: NodeJS.ReadableStream): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    stream.on('data', (c: Buffer) => chunks.push(c));
    stream.on('end', () => resolve(Buffer.concat(chunks)));
    stream.on('error', reject);
  });
}

function parse(raw: Buffer): unknown {
  try {
    return JSON.parse(raw.toString('utf8'));
  } catch {
    return undefined;
  }
}

export class ControlPlane {
  readonly jobs = new Map<string, JobView>();
  /** Results the server accepted, by resultId (a re-send of an accepted one is counted in resentResults). */
  readonly results = new Map<string, StoredResult>();
  readonly events: AgentEvent[] = [];
  readonly artifacts = new Map<string, StoredArtifact>();
  readonly requests: RequestRecord[] = [];
  readonly violations: string[] = [];
  /** Every result envelope posted, accepted or not, in order of arrival. */
  readonly received: Array<{ jobId: string; resultId: string }> = [];
  resentResults = 0;
  /** Results the server refused with 409 (the job has another FINAL, or is another agent's). */
  conflictingResults = 0;
  maxOutstanding = 0;
  readonly claims: ClaimRecord[] = [];
  /** The claimId of every claim request, in order, answered or not (faults included). */
  readonly claimIdsSent: Array<string | undefined> = [];
  answersClaimsAtOnce: boolean;
  /**
   * A faulty service: each job of a claim answer is sent as this text instead
   * of as the server wrote it (e.g. without its id, or not JSON at all). The
   * server still counts the job handed out; its lease runs as usual.
   */
  claimJobText: ((job: Job) => string) | undefined;
  /** A body limit on `results` (a fault, as a proxy in the way may have): larger requests are answered 413, not forwarded. */
  maxResultsBodyBytes: number | undefined;
  /** A strict service (a fault): a `results` request carrying any of these resultIds is refused whole with 400, not forwarded. */
  readonly refusedResultIds = new Set<string>();
  /** A lax service (a fault): the proxy claims for every check type, so jobs of types the agent did not advertise reach it. */
  handsOutUnadvertisedTypes = false;
  port = 0;
  private faults: Fault[] = [];
  private proxy: http.Server;
  private readonly sockets = new Set<Socket>();
  private sweeper: NodeJS.Timeout | undefined;
  private upstreamPort = 0;
  /** The session each queued job belongs to. */
  private readonly sessionOf = new Map<string, string>();

  private constructor(
    readonly store: Store,
    readonly stateDir: string,
    private readonly api: http.Server,
    readonly apiKey: string,
    /** Woken when a job is queued, as the scheduler does: claims waiting on the location claim again. */
    readonly jobSignal: JobSignal,
    options: ControlPlaneOptions,
  ) {
    this.answersClaimsAtOnce = options.answersClaimsAtOnce ?? false;
    this.claimJobText = undefined;
    this.maxResultsBodyBytes = undefined;
    this.upstreamPort = (api.address() as AddressInfo).port;
    this.proxy = this.createProxy();
  }

  static async start(options: ControlPlaneOptions = {}): Promise<ControlPlane> {
    const stateDir = tempDir();
    // SQLite in stateDir, or with OUTPOST_TEST_DATABASE=postgres a PostgreSQL database of its own (postgres.ts).
    const { store } = await openStateStores(stateDir);
    await store.syncLocations([{ id: LOCATION, name: 'Test location' }]);
    const made = newAgentKey();
    const rawKey = options.apiKey ?? made.rawKey;
    const { maskedKey, hash } = options.apiKey ? { maskedKey: maskKey(options.apiKey), hash: keyHash(options.apiKey) } : made;
    const at = new Date().toISOString();
    await store.createKey({ id: randomUUID(), locationId: LOCATION, maskedKey, created_at: at, updated_at: at, hash });
    const logger = pino({ level: 'silent' });
    const jobSignal = new JobSignal();
    const router = new Router(
      [
        ...agentRoutes({
          store,
          jobSignal,
          artifactsDir: path.join(stateDir, 'artifacts'),
          logger,
          ...(options.leaseMs ? { leaseMs: options.leaseMs } : {}),
          ...(options.uploadIdleMs ? { uploadIdleMs: options.uploadIdleMs } : {}),
        }),
        ...readRoutes({ store }),
      ],
      {
        publicKey: PUBLIC_API_KEY,
        agentKey: (token) => store.keyByHash(keyHash(token)),
        publicLimiter: new RateLimiter(600, 60),
        agentLimiter: new RateLimiter(AGENT_ROUTE_LIMIT_PER_MINUTE, 60),
        logger,
      },
    );
    const api = await startApiServer(router, { host: '127.0.0.1', port: 0 });
    const cp = new ControlPlane(store, stateDir, api, rawKey, jobSignal, options);
    await cp.listen(0);
    cp.sweeper = setInterval(() => void cp.expireLeases(), 50);
    return cp;
  }

  /** The proxy's URL: what the agent is given as API_URL. */
  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** The real server's URL, past the proxy. */
  get serverUrl(): string {
    return `http://127.0.0.1:${this.upstreamPort}`;
  }

  /**
   * Queues one run of a check definition in the test location, as the
   * scheduler does: a session with one job, then a wake-up for waiting claims.
   */
  async addJob(definition: unknown, extra: JobExtra = {}): Promise<string> {
    const def = (definition ?? {}) as { id?: unknown; name?: unknown; checkType?: unknown; frequency?: unknown; runtimeId?: unknown; request?: { runtimeId?: unknown } | null };
    const checkId = typeof def.id === 'string' ? def.id : randomUUID();
    // A scripted check's runtime, where the service's definition or the parsed one holds it: the server hands it only to agents that have it.
    const runtimeId = def.runtimeId ?? def.request?.runtimeId;
    const check: StoredCheck = {
      id: checkId,
      name: typeof def.name === 'string' ? def.name : checkId,
      checkType: (typeof def.checkType === 'string' ? def.checkType : 'API') as StoredCheck['checkType'],
      frequencySeconds: typeof def.frequency === 'number' ? def.frequency : 60,
      locations: [LOCATION],
      definition,
      environmentVariables: extra.environmentVariables ?? [],
      runtimeId: typeof runtimeId === 'string' ? runtimeId : null,
      capMs: 30_000,
    };
    const now = new Date();
    const session: SessionRecord = {
      id: randomUUID(),
      checkId,
      checkType: check.checkType,
      name: check.name,
      status: 'STARTED',
      runLocations: [LOCATION],
      triggerSource: 'SCHEDULER',
      startedAt: now.toISOString(),
      stoppedAt: null,
      durationMs: null,
    };
    const id = extra.id ?? randomUUID();
    // Far enough that no test outlives it: timing jobs out is the scheduler's, and it does not run here.
    const deadlineAt = new Date(now.getTime() + 3_600_000).toISOString();
    await this.store.createSession(session, [{ id, location: LOCATION, deadlineAt }], check);
    this.sessionOf.set(id, session.id);
    this.jobs.set(id, { state: 'ready', checkType: check.checkType, leaseExpiresAt: 0, claims: 0 });
    this.jobSignal.notify(LOCATION);
    return id;
  }

  /** Makes another key of the test location (a rotated one, say); the server keeps only its SHA-256. */
  async addKey(rawKey: string): Promise<void> {
    const at = new Date().toISOString();
    await this.store.createKey({ id: randomUUID(), locationId: LOCATION, maskedKey: maskKey(rawKey), created_at: at, updated_at: at, hash: keyHash(rawKey) });
  }

  /**
   * Hands a leased job to another agent of the location, as the server does
   * when a lease ran out and someone else claimed it: the holder's next leases
   * call hears it is lost. Other queued jobs the other agent's claim took go
   * back to the queue.
   */
  async revokeLease(jobId: string): Promise<void> {
    const view = this.jobs.get(jobId);
    if (view?.state !== 'leased' || view.agentId === undefined) throw new Error(`job ${jobId} is not leased`);
    await this.store.releaseJobs(view.agentId, [jobId]);
    const taken = await this.store.claimJobs({ location: LOCATION, agentId: OTHER_AGENT, checkTypes: [view.checkType], runtimes: [], max: 1000, leaseMs: 3_600_000, now: new Date() });
    if (!taken.some((job) => job.id === jobId)) throw new Error(`job ${jobId} was claimed by its agent again before another could take it`);
    await this.store.releaseJobs(OTHER_AGENT, taken.filter((job) => job.id !== jobId).map((job) => job.id));
    view.agentId = OTHER_AGENT;
    view.leaseExpiresAt = Date.now() + 3_600_000;
  }

  /** The results the server stored for a queued job (its session's), ATTEMPTs and FINAL, read from its store. */
  async storedResults(jobId: string): Promise<CheckResultEntry[]> {
    const sessionId = this.sessionOf.get(jobId);
    if (sessionId === undefined) throw new Error(`job ${jobId} was not queued by addJob`);
    return (await this.store.session(sessionId))?.results ?? [];
  }

  /** An artifact as the server stored it: its record, and the count and SHA-256 of the bytes in its artifacts directory. */
  async storedArtifact(id: string): Promise<StoredArtifact | undefined> {
    const record = await this.store.artifact(id);
    if (!record) return undefined;
    const artifact: StoredArtifact = { jobId: record.jobId, name: record.name, contentType: record.contentType, size: record.size };
    if (record.storedAt === null) return artifact;
    const bytes = await readFile(path.join(this.stateDir, 'artifacts', id));
    return { ...artifact, received: bytes.length, sha256: createHash('sha256').update(bytes).digest('hex') };
  }

  inject(fault: Fault): void {
    this.faults.push({ count: 1, ...fault });
  }

  clearFaults(): void {
    this.faults = [];
  }

  outstanding(agentId?: string): number {
    let n = 0;
    for (const job of this.jobs.values()) if (job.state === 'leased' && (agentId === undefined || job.agentId === agentId)) n++;
    return n;
  }

  resultsFor(jobId: string): StoredResult[] {
    return [...this.results.values()].filter((r) => r.jobId === jobId);
  }

  countRequests(route?: RouteName, sinceMs = 0): number {
    const path = route ? PROTOCOL_ROUTES[route] : undefined;
    return this.requests.filter((r) => (!path || r.route === path) && r.at >= sinceMs).length;
  }

  async waitFor(predicate: () => boolean, timeoutMs: number, what: string): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!predicate()) {
      if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 25));
    }
  }

  /** Stops answering (connections to the proxy are refused) until `resume`; the server keeps its state. */
  async stopListening(): Promise<void> {
    await new Promise<void>((resolve) => {
      this.proxy.close(() => resolve());
      for (const socket of this.sockets) socket.destroy();
    });
  }

  async resume(): Promise<void> {
    this.proxy = this.createProxy();
    await this.listen(this.port);
  }

  async close(): Promise<void> {
    clearInterval(this.sweeper);
    if (this.proxy.listening) await this.stopListening();
    await closeApiServer(this.api, 0);
    await this.store.close();
    await rm(this.stateDir, { recursive: true, force: true });
  }

  private listen(port: number): Promise<void> {
    return new Promise((resolve, reject) => {
      this.proxy.once('error', reject);
      this.proxy.listen(port, '127.0.0.1', () => {
        this.proxy.off('error', reject);
        this.port = (this.proxy.address() as AddressInfo).port;
        resolve();
      });
    });
  }

  private createProxy(): http.Server {
    const server = http.createServer((req, res) => {
      this.handle(req, res).catch((error: Error) => {
        if (!res.headersSent) this.answer(req, res, 502, errorBody(502, `proxy: ${error.message}`));
        else res.destroy();
      });
    });
    server.keepAliveTimeout = 60_000;
    server.on('connection', (socket) => {
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
    });
    return server;
  }

  /** What the scheduler's lease sweep does: expired leases back to the queue, and waiting claims woken. */
  private async expireLeases(): Promise<void> {
    const now = Date.now();
    const requeued = await this.store.requeueExpiredLeases(new Date(now)).catch(() => 0);
    for (const job of this.jobs.values()) {
      if (job.state === 'leased' && job.leaseExpiresAt <= now) {
        job.state = 'ready';
        delete job.agentId;
      }
    }
    if (requeued > 0) this.jobSignal.notify(LOCATION);
  }

  private record(req: http.IncomingMessage, status: number): void {
    this.requests.push({ route: (req.url ?? '').split('?')[0] as string, at: Date.now(), status, agentId: req.headers['x-agent-id'] as string | undefined });
  }

  private answer(req: http.IncomingMessage, res: http.ServerResponse, status: number, body: unknown, headers: http.OutgoingHttpHeaders = {}): void {
    this.record(req, status);
    const text = typeof body === 'string' ? body : JSON.stringify(body);
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers });
    res.end(text);
  }

  private takeFault(route: FaultRoute | undefined): Fault | undefined {
    const index = this.faults.findIndex((f) => f.route === undefined || f.route === route);
    if (index === -1) return undefined;
    const fault = this.faults[index] as Fault;
    fault.count = (fault.count ?? 1) - 1;
    if (fault.count <= 0) this.faults.splice(index, 1);
    return fault;
  }

  private routeOf(method: string | undefined, url: string): FaultRoute | undefined {
    if (method === 'PUT' && UPLOAD.test(url)) return 'upload';
    return (Object.keys(PROTOCOL_ROUTES) as RouteName[]).find((name) => PROTOCOL_ROUTES[name] === url);
  }

  /** What the server does not check but protocol v1 asks of every agent call. */
  private checkHeaders(req: http.IncomingMessage, url: string, route: FaultRoute): void {
    if (!/^outpost\/\S+$/.test(req.headers['user-agent'] ?? '')) this.violations.push(`${url}: User-Agent ${req.headers['user-agent']} is not outpost/<version>`);
    const agentId = req.headers['x-agent-id'];
    if (typeof agentId !== 'string' || !UUID.test(agentId)) this.violations.push(`${url}: x-agent-id ${agentId} is not a UUID`);
    if (route !== 'upload' && !(req.headers['content-type'] ?? '').startsWith('application/json')) {
      this.violations.push(`${url}: content-type ${req.headers['content-type']}`);
    }
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const url = (req.url ?? '').split('?')[0] as string;
    const route = this.routeOf(req.method, url);
    const fault = route ? this.takeFault(route) : undefined;
    if (fault?.delayMs) await new Promise((r) => setTimeout(r, fault.delayMs));
    if (fault?.reset && route === 'upload') {
      req.socket.destroy();
      this.record(req, 0);
      return;
    }
    if (route) this.checkHeaders(req, url, route);
    if (route === 'upload') return this.upload(req, res, url, fault);
    const raw = await readAll(req);
    if (route === 'claim') this.claimIdsSent.push((parse(raw) as Partial<ClaimRequest> | undefined)?.claimId);
    if (fault?.reset) {
      req.socket.destroy();
      this.record(req, 0);
      return;
    }
    if (route === 'results' && this.maxResultsBodyBytes !== undefined && raw.length > this.maxResultsBodyBytes) {
      return this.answer(req, res, 413, errorBody(413, `request body is larger than ${this.maxResultsBodyBytes} bytes`));
    }
    if (fault?.status) {
      const headers = fault.retryAfter ? { 'retry-after': fault.retryAfter } : {};
      return this.answer(req, res, fault.status, errorBody(fault.status, 'injected fault'), headers);
    }
    if (fault?.malformed) return this.answer(req, res, 200, '{"jobs": [this is not json');
    let body = raw;
    const sent = parse(raw);
    if (route === 'results' && this.refusedResultIds.size > 0) {
      const refused = ((sent as { results?: ResultEnvelope[] } | undefined)?.results ?? []).findIndex((item) => this.refusedResultIds.has(item?.resultId));
      if (refused !== -1) return this.answer(req, res, 400, errorBody(400, `results[${refused}]: this service cannot take this result`));
    }
    if (route === 'claim' && (this.answersClaimsAtOnce || this.handsOutUnadvertisedTypes) && sent && typeof sent === 'object') {
      const claim = sent as ClaimRequest;
      body = Buffer.from(
        JSON.stringify({
          ...claim,
          ...(this.answersClaimsAtOnce ? { waitSeconds: 0 } : {}),
          ...(this.handsOutUnadvertisedTypes && claim.agent ? { agent: { ...claim.agent, checkTypes: [...CHECK_TYPES] } } : {}),
        }),
      );
    }
    const outstandingBefore = this.outstanding(req.headers['x-agent-id'] as string | undefined);
    const upstream = await this.forward(req, res, body);
    let answerText = await readAll(upstream);
    const status = upstream.statusCode ?? 502;
    const answer = parse(answerText);
    if (route === 'claim' && status === 200 && this.claimJobText) {
      const texts = ((answer as { jobs?: Job[] } | undefined)?.jobs ?? []).map(this.claimJobText);
      answerText = Buffer.from(`{"jobs":[${texts.join(',')}]}`);
    }
    if (route && VIOLATION_STATUSES.has(status)) this.violations.push(`${url}: the server answered ${status}: ${answerText.toString('utf8').slice(0, 300)}`);
    if (route && status < 300) this.observe(route, req, sent, answer, outstandingBefore);
    if (fault?.lostAnswer) {
      const last = this.claims.at(-1);
      if (route === 'claim' && last) last.lost = true;
      this.record(req, 0);
      req.socket.destroy();
      return;
    }
    this.record(req, status);
    res.writeHead(status, { ...upstream.headers, 'content-length': String(answerText.length) });
    res.end(answerText);
  }

  private forward(req: http.IncomingMessage, res: http.ServerResponse, body: Buffer | undefined): Promise<http.IncomingMessage> {
    return new Promise((resolve, reject) => {
      const headers = { ...req.headers };
      if (body !== undefined) headers['content-length'] = String(body.length);
      // The Host stays the proxy's: URLs the server puts in its answers (uploadUrl) lead back through the proxy.
      const upstream = http.request({ host: '127.0.0.1', port: this.upstreamPort, method: req.method, path: req.url, headers }, resolve);
      upstream.on('error', reject);
      // The agent gave up (a long poll cut short): the server must see the caller go away too.
      res.once('close', () => {
        if (!res.writableFinished) upstream.destroy();
      });
      if (body !== undefined) upstream.end(body);
      else req.pipe(upstream);
    });
  }

  private async upload(req: http.IncomingMessage, res: http.ServerResponse, url: string, fault: Fault | undefined): Promise<void> {
    const id = UPLOAD.exec(url)?.[1] as string;
    const artifact = this.artifacts.get(id);
    if (fault?.status) {
      req.resume();
      return this.answer(req, res, fault.status, errorBody(fault.status, 'injected fault'));
    }
    const upstream = await this.forward(req, res, undefined);
    const answerText = await readAll(upstream);
    const status = upstream.statusCode ?? 502;
    if (VIOLATION_STATUSES.has(status)) this.violations.push(`upload ${id}: the server answered ${status}: ${answerText.toString('utf8').slice(0, 300)}`);
    if (status === 200 && artifact) {
      const bytes = await readFile(path.join(this.stateDir, 'artifacts', id));
      artifact.received = bytes.length;
      artifact.sha256 = createHash('sha256').update(bytes).digest('hex');
    }
    this.record(req, status);
    res.writeHead(status, upstream.headers);
    res.end(answerText);
  }

  private observe(route: RouteName, req: http.IncomingMessage, sent: unknown, answer: unknown, outstandingBefore: number): void {
    const agentId = req.headers['x-agent-id'] as string | undefined;
    switch (route) {
      case 'claim': {
        const claim = sent as ClaimRequest;
        const jobs = ((answer as { jobs?: Job[] } | undefined)?.jobs ?? []) as Job[];
        for (const job of jobs) {
          const view = this.jobs.get(job.id) ?? { state: 'ready', checkType: '', leaseExpiresAt: 0, claims: 0 };
          view.state = 'leased';
          view.job = job;
          if (agentId !== undefined) view.agentId = agentId;
          view.leaseExpiresAt = Date.parse(job.leaseExpiresAt);
          view.claims++;
          this.jobs.set(job.id, view);
        }
        this.claims.push({
          max: claim.max,
          waitSeconds: claim.waitSeconds,
          given: jobs.length,
          outstandingBefore,
          checkTypes: claim.agent?.checkTypes ?? [],
          runtimes: claim.agent?.runtimes ?? [],
          ...(claim.agent?.ipv6Addresses ? { ipv6Addresses: claim.agent.ipv6Addresses } : {}),
          ...(claim.claimId === undefined ? {} : { claimId: claim.claimId }),
        });
        this.maxOutstanding = Math.max(this.maxOutstanding, this.outstanding(agentId));
        return;
      }
      case 'leases': {
        for (const { jobId, leaseExpiresAt } of (answer as { extended?: Array<{ jobId: string; leaseExpiresAt: string }> }).extended ?? []) {
          const view = this.jobs.get(jobId);
          if (view) view.leaseExpiresAt = Date.parse(leaseExpiresAt);
        }
        return;
      }
      case 'results': {
        const envelopes = ((sent as { results?: ResultEnvelope[] }).results ?? []) as ResultEnvelope[];
        const outcome = answer as { accepted?: string[]; rejected?: Array<{ resultId: string; statusCode: number }> };
        const accepted = new Set(outcome.accepted ?? []);
        for (const envelope of envelopes) {
          this.received.push({ jobId: envelope.jobId, resultId: envelope.resultId });
          if (!accepted.has(envelope.resultId)) continue;
          if (this.results.has(envelope.resultId)) {
            this.resentResults++;
            continue;
          }
          this.results.set(envelope.resultId, { ...envelope, receivedAt: Date.now() });
          const view = this.jobs.get(envelope.jobId);
          if (view && envelope.result.resultType === 'FINAL') view.state = 'done';
        }
        this.conflictingResults += (outcome.rejected ?? []).filter((r) => r.statusCode === 409).length;
        return;
      }
      case 'artifacts': {
        const b = sent as { jobId: string; name: string; contentType: string; size: number };
        const id = /\/v1\/agent\/artifacts\/([^/]+)\/content$/.exec((answer as { uploadUrl?: string }).uploadUrl ?? '')?.[1];
        if (id) this.artifacts.set(id, { jobId: b.jobId, name: b.name, contentType: b.contentType, size: b.size });
        return;
      }
      case 'events':
        this.events.push(...((sent as { events?: AgentEvent[] }).events ?? []));
        return;
    }
  }
}
