// A strict, in-memory control plane speaking protocol v1 (docs/protocol.md).
// Agent tests run against the real server instead (test/support/control-plane.ts,
// which also injects faults); this one is kept only for the benchmarks, where
// an in-memory control plane is the point: test/bench/bench.test.ts hands
// 20,000 jobs to the agent and charges the bench process's own CPU to the
// control-plane side; held in memory, that side costs next to nothing, where
// the real server's SQLite store (a synced transaction per job and per
// result) would be measured instead of the agent.
// Anything the agent sends that the protocol does not allow is answered 400
// *and* recorded in `violations`, so tests can assert that none happened.

import { createHash, randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Socket } from 'node:net';
import {
  AGENT_ROUTE_LIMIT_PER_MINUTE,
  type AgentEvent,
  type ClaimRequest,
  type Job,
  MAX_RESULTS_PER_BATCH,
  PROTOCOL_ROUTES,
  type ResultEnvelope,
  type RouteName,
} from '../../src/core/protocol.js';
import type { RequestRecord, StoredArtifact, StoredResult } from './control-plane.js';

export const MAX_ARTIFACT_BYTES = 157_286_400;

interface JobState {
  job: Job;
  state: 'ready' | 'leased' | 'done';
  agentId?: string;
  leaseExpiresAt: number;
  resultId?: string;
  claims: number;
  /** Position in the order jobs were added: ready jobs are handed out in this order. */
  readonly order: number;
}



const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

function errorBody(statusCode: number, message: string, attributes: Record<string, unknown> = {}) {
  return { statusCode, error: http.STATUS_CODES[statusCode] ?? 'Error', message, attributes };
}

class ProtocolViolation extends Error {}

function check(condition: unknown, message: string): asserts condition {
  if (!condition) throw new ProtocolViolation(message);
}

export interface FakeControlPlaneOptions {
  apiKey?: string;
  leaseMs?: number;
  port?: number;
}

export class FakeControlPlane {
  readonly jobs = new Map<string, JobState>();
  readonly results = new Map<string, StoredResult>();
  readonly events: AgentEvent[] = [];
  readonly artifacts = new Map<string, StoredArtifact>();
  readonly requests: RequestRecord[] = [];
  readonly violations: string[] = [];
  /** Every result envelope posted, accepted or not, in order of arrival. */
  readonly received: Array<{ jobId: string; resultId: string }> = [];
  /** Accepted results whose resultId had been accepted before (a re-send: fine, but counted). */
  resentResults = 0;
  /** Results refused because their job already has another result. */
  conflictingResults = 0;
  /** Most jobs ever leased to one agent at once, and the claims that saw it. */
  maxOutstanding = 0;
  readonly claims: Array<{ max: number; waitSeconds: number; given: number; outstandingBefore: number; checkTypes: string[]; runtimes: string[] }> = [];
  validKeys: Set<string>;
  leaseMs: number;
  private readonly waiters = new Set<() => void>();
  private server: http.Server;
  private readonly sockets = new Set<Socket>();
  private sweeper: NodeJS.Timeout | undefined;
  // Indexes over `jobs` by state, so that claims, lease expiry and `outstanding`
  // cost O(leased + claimed), not O(all jobs): the benchmark adds 20,000 jobs.
  // Every state change goes through setState().
  private readonly ready = new Set<JobState>();
  /** False when a job re-entered `ready` behind jobs added after it. */
  private readyInOrder = true;
  private maxReadyOrder = -1;
  private readonly leased = new Set<JobState>();
  private nextOrder = 0;
  port = 0;

  private constructor(options: FakeControlPlaneOptions) {
    this.validKeys = new Set([options.apiKey ?? 'test-key']);
    this.leaseMs = options.leaseMs ?? 30_000;
    this.server = this.createServer();
  }

  static async start(options: FakeControlPlaneOptions = {}): Promise<FakeControlPlane> {
    const cp = new FakeControlPlane(options);
    await cp.listen(options.port ?? 0);
    cp.sweeper = setInterval(() => cp.expireLeases(), 50);
    return cp;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  get apiKey(): string {
    return [...this.validKeys][0] as string;
  }

  addJob(check: unknown, extra: Partial<Job> = {}): string {
    const id = extra.id ?? randomUUID();
    const job: Job = {
      id,
      leaseExpiresAt: '',
      checkRunId: this.jobs.size + 1,
      sequenceId: randomUUID(),
      triggerSource: 'SCHEDULER',
      runLocation: 'test-location',
      attempt: 1,
      check,
      environmentVariables: [],
      ...extra,
    };
    this.track(id, job);
    return id;
  }

  private track(id: string, job: Job): void {
    const previous = this.jobs.get(id);
    if (previous) this.setState(previous, 'done');
    // A re-added id keeps its place, as a Map key does.
    const state: JobState = { job, state: 'done', leaseExpiresAt: 0, claims: 0, order: previous?.order ?? this.nextOrder++ };
    this.jobs.set(id, state);
    this.setState(state, 'ready');
    this.wake();
  }

  private setState(s: JobState, state: JobState['state']): void {
    if (s.state === 'ready') this.ready.delete(s);
    if (s.state === 'leased') this.leased.delete(s);
    s.state = state;
    if (state === 'ready') {
      if (s.order < this.maxReadyOrder) this.readyInOrder = false;
      this.maxReadyOrder = Math.max(this.maxReadyOrder, s.order);
      this.ready.add(s);
    }
    if (state === 'leased') this.leased.add(s);
  }

  /** Results dropped by prune(), for a long run's count. */
  prunedResults = 0;

  /**
   * Forgets finished jobs and their results, and the request, claim and
   * receipt logs: a long run (the soak in test/bench/soak.bench.test.ts) would
   * otherwise keep every result in the bench process. Returns how many
   * results went.
   */
  prune(): number {
    let pruned = 0;
    for (const [id, s] of this.jobs) if (s.state === 'done') this.jobs.delete(id);
    for (const [resultId, r] of this.results) {
      if (this.jobs.has(r.jobId)) continue;
      this.results.delete(resultId);
      pruned++;
    }
    this.requests.length = 0;
    this.claims.length = 0;
    this.received.length = 0;
    this.prunedResults += pruned;
    return pruned;
  }

  outstanding(agentId?: string): number {
    let n = 0;
    for (const s of this.leased) if (agentId === undefined || s.agentId === agentId) n++;
    return n;
  }

  resultsFor(jobId: string): StoredResult[] {
    return [...this.results.values()].filter((r) => r.jobId === jobId);
  }

  async waitFor(predicate: () => boolean, timeoutMs: number, what: string): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!predicate()) {
      if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 25));
    }
  }

  private async stopListening(): Promise<void> {
    await new Promise<void>((resolve) => {
      this.server.close(() => resolve());
      for (const socket of this.sockets) socket.destroy();
    });
    for (const waiter of [...this.waiters]) waiter();
  }

  async close(): Promise<void> {
    clearInterval(this.sweeper);
    for (const waiter of [...this.waiters]) waiter();
    if (this.server.listening) await this.stopListening();
  }

  private listen(port: number): Promise<void> {
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, '127.0.0.1', () => {
        this.port = (this.server.address() as AddressInfo).port;
        resolve();
      });
    });
  }

  private createServer(): http.Server {
    const server = http.createServer((req, res) => {
      this.handle(req, res).catch((error: Error) => {
        if (!res.headersSent) this.send(req, res, 500, errorBody(500, error.message));
      });
    });
    server.keepAliveTimeout = 60_000;
    server.on('connection', (socket) => {
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
    });
    return server;
  }

  private wake(): void {
    for (const waiter of [...this.waiters]) waiter();
  }

  private expireLeases(): void {
    const now = Date.now();
    for (const s of [...this.leased]) {
      if (s.leaseExpiresAt <= now) {
        this.setState(s, 'ready');
        s.agentId = undefined;
        s.job = { ...s.job, attempt: (s.job.attempt ?? 1) + 1 };
        this.wake();
      }
    }
  }

  private send(req: http.IncomingMessage, res: http.ServerResponse, status: number, body: unknown, headers: http.OutgoingHttpHeaders = {}): void {
    this.requests.push({ route: req.url ?? '', at: Date.now(), status, agentId: req.headers['x-agent-id'] as string | undefined });
    const text = typeof body === 'string' ? body : JSON.stringify(body);
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers });
    res.end(text);
  }

  private routeOf(url: string): RouteName | undefined {
    return (Object.keys(PROTOCOL_ROUTES) as RouteName[]).find((name) => PROTOCOL_ROUTES[name] === url);
  }

  private rateExceeded(key: string): boolean {
    const since = Date.now() - 60_000;
    let n = 0;
    for (let i = this.requests.length - 1; i >= 0; i--) {
      const r = this.requests[i] as RequestRecord;
      if (r.at < since) break;
      n++;
    }
    return key !== '' && n >= AGENT_ROUTE_LIMIT_PER_MINUTE;
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const url = (req.url ?? '').split('?')[0] as string;
    if (req.method === 'PUT' && url.startsWith('/uploads/')) return this.upload(req, res, url.slice('/uploads/'.length));
    const route = this.routeOf(url);
    const raw = await new Promise<Buffer>((resolve, reject) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => resolve(Buffer.concat(chunks)));
      req.on('error', reject);
    });
    if (!route) return this.send(req, res, 404, errorBody(404, `No route ${url}`));
    try {
      check(req.method === 'POST', `${url}: method ${req.method}, expected POST`);
      const auth = req.headers.authorization ?? '';
      const key = auth.startsWith('Bearer ') ? auth.slice(7) : '';
      if (!this.validKeys.has(key)) return this.send(req, res, 401, errorBody(401, 'bad token'));
      if (this.rateExceeded(key)) {
        this.violations.push(`${url}: more than ${AGENT_ROUTE_LIMIT_PER_MINUTE} requests in 60 s`);
        return this.send(req, res, 429, errorBody(429, 'Too Many Requests'), { 'retry-after': '10' });
      }
      check(/^outpost\/\S+$/.test(req.headers['user-agent'] ?? ''), `${url}: User-Agent ${req.headers['user-agent']} is not outpost/<version>`);
      const agentId = req.headers['x-agent-id'];
      check(typeof agentId === 'string' && UUID.test(agentId), `${url}: x-agent-id ${agentId} is not a UUID`);
      check((req.headers['content-type'] ?? '').startsWith('application/json'), `${url}: content-type ${req.headers['content-type']}`);
      let body: unknown;
      try {
        body = JSON.parse(raw.toString('utf8'));
      } catch {
        throw new ProtocolViolation(`${url}: body is not JSON`);
      }
      check(body !== null && typeof body === 'object' && !Array.isArray(body), `${url}: body is not an object`);
      switch (route) {
        case 'claim':
          return await this.claim(req, res, body as ClaimRequest, agentId);
        case 'leases':
          return this.leases(req, res, body as { jobIds: unknown }, agentId);
        case 'results':
          return this.resultsRoute(req, res, body as { results: unknown });
        case 'artifacts':
          return this.artifact(req, res, body as Record<string, unknown>);
        case 'events':
          return this.eventsRoute(req, res, body as { events: unknown });
      }
    } catch (error) {
      if (!(error instanceof ProtocolViolation)) throw error;
      this.violations.push(error.message);
      return this.send(req, res, 400, errorBody(400, error.message));
    }
  }

  /** The service only hands out types the agent advertised. */
  private mayHandOut(s: JobState, checkTypes: string[]): boolean {
    const type = (s.job.check as { checkType?: unknown })?.checkType;
    return typeof type !== 'string' || checkTypes.includes(type);
  }

  private hasJobFor(checkTypes: string[]): boolean {
    for (const s of this.ready) if (this.mayHandOut(s, checkTypes)) return true;
    return false;
  }

  /** The first `max` ready jobs this agent may take, oldest first; the others stay for another agent. */
  private readyJobs(max: number, checkTypes: string[]): JobState[] {
    if (!this.readyInOrder) {
      const sorted = [...this.ready].sort((a, b) => a.order - b.order);
      this.ready.clear();
      for (const s of sorted) this.ready.add(s);
      this.readyInOrder = true;
    }
    const first: JobState[] = [];
    for (const s of this.ready) {
      if (first.length >= max) break;
      if (this.mayHandOut(s, checkTypes)) first.push(s);
    }
    return first;
  }

  private async claim(req: http.IncomingMessage, res: http.ServerResponse, body: ClaimRequest, agentId: string): Promise<void> {
    check(Number.isInteger(body.max) && body.max >= 1 && body.max <= 1000, `claim: max ${body.max} is not an integer 1..1000`);
    check(Number.isInteger(body.waitSeconds) && body.waitSeconds >= 0 && body.waitSeconds <= 60, `claim: waitSeconds ${body.waitSeconds}`);
    const agent = body.agent;
    check(agent && typeof agent === 'object', 'claim: agent missing');
    check(agent.id === agentId, `claim: agent.id ${agent.id} differs from x-agent-id ${agentId}`);
    check(typeof agent.version === 'string' && agent.version.length > 0, 'claim: agent.version missing');
    check(Array.isArray(agent.checkTypes) && agent.checkTypes.every((t) => typeof t === 'string'), 'claim: agent.checkTypes');
    check(Array.isArray(agent.runtimes), 'claim: agent.runtimes');
    const deadline = Date.now() + body.waitSeconds * 1000;
    let closed = false;
    res.on('close', () => {
      closed = true;
    });
    // A long poll waits until there is a job this agent may take (not merely any job).
    while (!this.hasJobFor(agent.checkTypes) && Date.now() < deadline && !closed && this.server.listening) {
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          this.waiters.delete(done);
          resolve();
        };
        const timer = setTimeout(done, Math.max(0, deadline - Date.now()));
        this.waiters.add(done);
      });
    }
    if (closed) return;
    const outstandingBefore = this.outstanding(agentId);
    const given: string[] = [];
    for (const s of this.readyJobs(body.max, agent.checkTypes)) {
      this.setState(s, 'leased');
      s.agentId = agentId;
      s.leaseExpiresAt = Date.now() + this.leaseMs;
      s.claims++;
      given.push(JSON.stringify({ ...s.job, leaseExpiresAt: new Date(s.leaseExpiresAt).toISOString() }));
    }
    this.claims.push({ max: body.max, waitSeconds: body.waitSeconds, given: given.length, outstandingBefore, checkTypes: agent.checkTypes, runtimes: agent.runtimes });
    this.maxOutstanding = Math.max(this.maxOutstanding, this.outstanding(agentId));
    this.send(req, res, 200, `{"jobs":[${given.join(',')}]}`);
  }

  private leases(req: http.IncomingMessage, res: http.ServerResponse, body: { jobIds: unknown }, agentId: string): void {
    check(Array.isArray(body.jobIds) && body.jobIds.length > 0 && body.jobIds.every((id) => typeof id === 'string'), 'leases: jobIds must be a non-empty array of strings');
    check(body.jobIds.length <= 1000, 'leases: more than 1000 jobIds');
    const extended: Array<{ jobId: string; leaseExpiresAt: string }> = [];
    const lost: string[] = [];
    for (const jobId of body.jobIds as string[]) {
      const s = this.jobs.get(jobId);
      if (s && s.state === 'leased' && s.agentId === agentId) {
        s.leaseExpiresAt = Date.now() + this.leaseMs;
        extended.push({ jobId, leaseExpiresAt: new Date(s.leaseExpiresAt).toISOString() });
      } else {
        lost.push(jobId);
      }
    }
    this.send(req, res, 200, { extended, lost });
  }

  private resultsRoute(req: http.IncomingMessage, res: http.ServerResponse, body: { results: unknown }): void {
    check(Array.isArray(body.results), 'results: results must be an array');
    check(body.results.length >= 1 && body.results.length <= MAX_RESULTS_PER_BATCH, `results: ${body.results.length} results (1..${MAX_RESULTS_PER_BATCH} allowed)`);
    const accepted: string[] = [];
    const rejected: Array<{ resultId: string; statusCode: number; message: string }> = [];
    for (const [index, item] of (body.results as ResultEnvelope[]).entries()) {
      check(item && typeof item.jobId === 'string' && typeof item.resultId === 'string', `results[${index}]: jobId and resultId must be strings`);
      this.received.push({ jobId: item.jobId, resultId: item.resultId });
      const r = item.result as unknown as Record<string, unknown>;
      check(r && typeof r === 'object', `results[${index}].result must be an object`);
      check(r.id === item.resultId, `results[${index}].result.id must equal resultId`);
      for (const field of ['hasFailures', 'hasErrors', 'isDegraded', 'overMaxResponseTime']) {
        check(typeof r[field] === 'boolean', `results[${index}].result.${field} must be a boolean`);
      }
      check(r.resultType === 'FINAL' || r.resultType === 'ATTEMPT', `results[${index}].result.resultType`);
      check(typeof r.startedAt === 'string' && typeof r.stoppedAt === 'string', `results[${index}].result.startedAt/stoppedAt`);
      check(typeof r.responseTime === 'number' && r.responseTime >= 0, `results[${index}].result.responseTime`);
      if (this.results.has(item.resultId)) {
        this.resentResults++;
        accepted.push(item.resultId);
        continue;
      }
      const s = this.jobs.get(item.jobId);
      if (!s) {
        rejected.push({ resultId: item.resultId, statusCode: 404, message: 'unknown job' });
        continue;
      }
      if (s.state === 'done') {
        this.conflictingResults++;
        rejected.push({ resultId: item.resultId, statusCode: 409, message: 'job already has a result' });
        continue;
      }
      // First result wins, whoever holds the lease now: a result spooled by an agent that
      // crashed arrives from its successor (another x-agent-id), and it is just as true.
      this.setState(s, 'done');
      s.resultId = item.resultId;
      this.results.set(item.resultId, { ...item, receivedAt: Date.now() });
      accepted.push(item.resultId);
    }
    this.send(req, res, 200, { accepted, rejected });
  }

  private artifact(req: http.IncomingMessage, res: http.ServerResponse, body: Record<string, unknown>): void {
    check(typeof body.jobId === 'string' && typeof body.name === 'string' && typeof body.contentType === 'string', 'artifacts: jobId, name and contentType must be strings');
    check(Number.isInteger(body.size) && (body.size as number) >= 0, 'artifacts: size must be a non-negative integer');
    if ((body.size as number) > MAX_ARTIFACT_BYTES) {
      return this.send(req, res, 413, errorBody(413, `artifact is larger than ${MAX_ARTIFACT_BYTES} bytes`));
    }
    const id = randomUUID();
    this.artifacts.set(id, { jobId: body.jobId as string, name: body.name as string, contentType: body.contentType as string, size: body.size as number });
    this.send(req, res, 201, { uploadUrl: `${this.url}/uploads/${id}`, url: `${this.url}/artifacts/${id}` });
  }

  private upload(req: http.IncomingMessage, res: http.ServerResponse, id: string): void {
    const artifact = this.artifacts.get(id);
    if (!artifact) return this.send(req, res, 404, errorBody(404, 'unknown upload'));
    const length = Number(req.headers['content-length']);
    if (!Number.isInteger(length) || length !== artifact.size) {
      this.violations.push(`upload ${id}: Content-Length ${req.headers['content-length']} differs from the announced size ${artifact.size}`);
      return this.send(req, res, 400, errorBody(400, 'Content-Length must equal the announced size'));
    }
    const hash = createHash('sha256');
    let received = 0;
    req.on('data', (chunk: Buffer) => {
      received += chunk.length;
      hash.update(chunk);
    });
    req.on('end', () => {
      artifact.received = received;
      artifact.sha256 = hash.digest('hex');
      if (received !== artifact.size) {
        this.violations.push(`upload ${id}: received ${received} bytes, announced ${artifact.size}`);
        return this.send(req, res, 400, errorBody(400, 'body length differs from the announced size'));
      }
      this.send(req, res, 200, {});
    });
  }

  private eventsRoute(req: http.IncomingMessage, res: http.ServerResponse, body: { events: unknown }): void {
    check(Array.isArray(body.events) && body.events.length > 0, 'events: events must be a non-empty array');
    for (const event of body.events as AgentEvent[]) {
      check(typeof event.name === 'string' && typeof event.message === 'string' && typeof event.agentVersion === 'string', 'events: name, message and agentVersion must be strings');
      this.events.push(event);
    }
    this.send(req, res, 202, {});
  }
}
