// The server's protocol v1 routes (src/server/agent-api.ts) against the real
// router and a real SqliteStore over HTTP, and then the real agent
// (dist/main.js) against them.

import { createHash, randomBytes } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync } from 'node:fs';
import http from 'node:http';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Job } from '../../src/core/protocol.js';
import type { CheckResultEntry } from '../../src/core/result-entry.js';
import { MAX_BODY_DEPTH } from '../../src/server/http/router.js';
import { agentCall, type AgentApiServer, PUBLIC_KEY, startAgentApiServer } from '../support/agent-api-server.js';
import { type AgentProcess, cleanEnv, startAgent, tempDir } from '../support/agent-process.js';
import { startTargetServer, type TargetServer } from '../support/target-server.js';
import { jobResultEntry } from '../support/server-store.js';

const LOCATIONS = [
  { id: 'loc-a', name: 'Location A' },
  { id: 'loc-b', name: 'Location B' },
];

const servers: AgentApiServer[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) await server.close();
});

async function serve(options: Parameters<typeof startAgentApiServer>[1] = {}) {
  const server = await startAgentApiServer(LOCATIONS, options);
  servers.push(server);
  return { server, keyA: await server.key('loc-a'), keyB: await server.key('loc-b') };
}

const agentBody = (extra: Record<string, unknown> = {}) => ({
  max: 5,
  waitSeconds: 0,
  agent: { id: 'agent-1', version: '0.1.0', checkTypes: ['URL', 'API', 'TCP'], runtimes: [] },
  ...extra,
});

function claimBody(checkTypes: string[], runtimes: string[] = [], waitSeconds = 0) {
  return { max: 10, waitSeconds, agent: { id: 'agent-1', version: '0.1.0', checkTypes, runtimes } };
}

async function claim(server: AgentApiServer, key: string, body: unknown = agentBody(), agentId = 'agent-1'): Promise<Job[]> {
  const answer = await agentCall(server.url, '/v1/agent/claim', key, body, { agentId });
  expect(answer.status, JSON.stringify(answer.body)).toBe(200);
  return (answer.body as { jobs: Job[] }).jobs;
}

const entry = jobResultEntry;

const envelope = (jobId: string, result: CheckResultEntry) => ({ jobId, resultId: result.id, result });

async function results(server: AgentApiServer, key: string, list: unknown[], agentId = 'agent-1') {
  const answer = await agentCall(server.url, '/v1/agent/results', key, { results: list }, { agentId });
  expect(answer.status, JSON.stringify(answer.body)).toBe(200);
  return answer.body as { accepted: string[]; rejected: Array<{ resultId: string; statusCode: number; message: string }> };
}

async function until<T>(probe: () => T | Promise<T>, what: string, timeoutMs = 15_000): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe('claim', () => {
  it('hands out a queued job as the protocol Job, for the caller location', async () => {
    const { server, keyA } = await serve();
    const { sessionId, jobs } = await server.queue({ locations: ['loc-a'], url: 'http://127.0.0.1:9/x' });
    const [job, ...more] = await claim(server, keyA);
    expect(more).toEqual([]);
    expect(job).toMatchObject({ id: jobs['loc-a'], sequenceId: sessionId, triggerSource: 'SCHEDULER', runLocation: 'loc-a' });
    expect(Number.isInteger(job?.checkRunId)).toBe(true);
    expect(job?.check).toMatchObject({ checkType: 'URL', request: { url: 'http://127.0.0.1:9/x' } });
    const lease = Date.parse(job?.leaseExpiresAt ?? '') - Date.now();
    expect(lease).toBeGreaterThan(30_000);
    expect(lease).toBeLessThanOrEqual(61_000);
    // Leased now: nobody else gets it.
    expect(await claim(server, keyA, agentBody(), 'agent-2')).toEqual([]);
  });

  it('long-polls: answers as soon as a job is queued for the location', async () => {
    const { server, keyA } = await serve();
    const started = Date.now();
    const pending = claim(server, keyA, agentBody({ waitSeconds: 20 }));
    await until(() => server.jobSignal.waiting('loc-a') === 1, 'the claim to wait');
    const { jobs } = await server.queue({ locations: ['loc-a'] });
    const claimed = await pending;
    expect(claimed.map((j) => j.id)).toEqual([jobs['loc-a']]);
    expect(Date.now() - started).toBeLessThan(15_000);
  });

  it('keeps waiting when the job queued is for another location or a type it lacks, and answers [] after waitSeconds', async () => {
    const { server, keyA } = await serve();
    const started = Date.now();
    const pending = claim(server, keyA, claimBody(['URL'], [], 2));
    await until(() => server.jobSignal.waiting('loc-a') === 1, 'the claim to wait');
    await server.queue({ locations: ['loc-b'] });
    await server.queue({ locations: ['loc-a'], checkType: 'TCP', definition: { id: 't', name: 't', checkType: 'TCP', request: { hostname: 'x', port: 1 } } });
    expect(await pending).toEqual([]);
    expect(Date.now() - started).toBeGreaterThanOrEqual(1_900);
  });

  it('gives each location its own jobs, and only of the types and runtimes the agent has', async () => {
    const { server, keyA, keyB } = await serve();
    const url = await server.queue({ locations: ['loc-a', 'loc-b'] });
    const tcp = await server.queue({ locations: ['loc-a'], checkType: 'TCP' });
    const scripted = await server.queue({ locations: ['loc-a'], checkType: 'MULTI_STEP', runtimeId: '2025.04' });
    expect(await claim(server, keyA, claimBody(['TCP']))).toMatchObject([{ id: tcp.jobs['loc-a'] }]);
    expect(await claim(server, keyA, claimBody(['MULTI_STEP'], ['2024.02']))).toEqual([]);
    expect(await claim(server, keyA, claimBody(['MULTI_STEP'], ['2024.02', '2025.04']))).toMatchObject([{ id: scripted.jobs['loc-a'] }]);
    expect(await claim(server, keyB, claimBody(['URL', 'TCP', 'MULTI_STEP'], ['2025.04']))).toMatchObject([{ id: url.jobs['loc-b'], runLocation: 'loc-b' }]);
    expect(await claim(server, keyA, claimBody(['URL']))).toMatchObject([{ id: url.jobs['loc-a'], runLocation: 'loc-a' }]);
  });

  it('honours max', async () => {
    const { server, keyA } = await serve();
    for (let i = 0; i < 3; i++) await server.queue({ locations: ['loc-a'] });
    expect(await claim(server, keyA, agentBody({ max: 2 }))).toHaveLength(2);
    expect(await claim(server, keyA, agentBody({ max: 2 }))).toHaveLength(1);
  });

  it('refuses a bad body with 400 naming the field', async () => {
    const { server, keyA } = await serve();
    const cases: Array<[unknown, string]> = [
      [agentBody({ max: 0 }), 'max'],
      [agentBody({ max: 1001 }), 'max'],
      [agentBody({ max: 1.5 }), 'max'],
      [agentBody({ waitSeconds: 61 }), 'waitSeconds'],
      [agentBody({ waitSeconds: -1 }), 'waitSeconds'],
      [agentBody({ waitSeconds: '5' }), 'waitSeconds'],
      [agentBody({ agent: undefined }), 'agent'],
      [agentBody({ agent: { id: 'a', version: '1', checkTypes: 'URL', runtimes: [] } }), 'agent.checkTypes'],
      [agentBody({ agent: { id: 'a', version: '1', checkTypes: [], runtimes: [7] } }), 'agent.runtimes[0]'],
      [agentBody({ agent: { version: '1', checkTypes: [], runtimes: [] } }), 'agent.id'],
      [agentBody({ agent: { id: 'a', checkTypes: [], runtimes: [] } }), 'agent.version'],
      // A zone names an interface of the agent's own host (it made new URL() throw: a 500 the agent retried for good).
      [agentBody({ agent: { id: 'a', version: '1', checkTypes: [], runtimes: [], ipv6Addresses: ['fe80::1%eth0'] } }), 'agent.ipv6Addresses[0]'],
    ];
    for (const [body, field] of cases) {
      const answer = await agentCall(server.url, '/v1/agent/claim', keyA, body);
      expect(answer.status, field).toBe(400);
      expect(answer.body).toMatchObject({ statusCode: 400, error: 'Bad Request', attributes: { field } });
      expect((answer.body as { message: string }).message).toContain(field);
    }
    expect((await agentCall(server.url, '/v1/agent/claim', keyA, '[1]')).status).toBe(400);
    expect((await agentCall(server.url, '/v1/agent/claim', keyA, '{')).status).toBe(400);
  });

  it('leaves no job leased to a caller that went away while waiting', async () => {
    const { server, keyA } = await serve();
    const gone = new AbortController();
    const pending = agentCall(server.url, '/v1/agent/claim', keyA, agentBody({ waitSeconds: 20 }), { signal: gone.signal }).catch(() => 'aborted');
    await until(() => server.jobSignal.waiting('loc-a') === 1, 'the claim to wait');
    gone.abort();
    expect(await pending).toBe('aborted');
    await until(() => server.jobSignal.waiting('loc-a') === 0, 'the wait to end');
    const { jobs } = await server.queue({ locations: ['loc-a'] });
    expect((await claim(server, keyA, agentBody(), 'agent-2')).map((j) => j.id)).toEqual([jobs['loc-a']]);
  });

  it('releases jobs it claimed for a caller that is gone by the time of the answer', async () => {
    const { server, keyA } = await serve({ claimDelayMs: 500 });
    const { jobs } = await server.queue({ locations: ['loc-a'] });
    const gone = new AbortController();
    const pending = agentCall(server.url, '/v1/agent/claim', keyA, agentBody(), { signal: gone.signal }).catch(() => 'aborted');
    await until(() => server.claimsInFlight() === 1, 'the claim to start');
    gone.abort();
    expect(await pending).toBe('aborted');
    await until(() => server.logs.find((l) => String(l.msg).startsWith('claimed jobs released')), 'the release');
    expect((await claim(server, keyA, agentBody(), 'agent-2')).map((j) => j.id)).toEqual([jobs['loc-a']]);
  });
});

describe('leases', () => {
  it('extends jobs the agent holds and reports every other one lost', async () => {
    const { server, keyA, keyB } = await serve();
    const { jobs } = await server.queue({ locations: ['loc-a', 'loc-b'] });
    const [job] = await claim(server, keyA);
    const [jobB] = await claim(server, keyB);
    const jobId = jobs['loc-a'] as string;
    const call = (key: string, jobIds: string[], agentId = 'agent-1') => agentCall(server.url, '/v1/agent/leases', key, { jobIds }, { agentId });

    const answer = await call(keyA, [jobId, 'no-such-job', jobB?.id as string]);
    expect(answer.status).toBe(200);
    const { extended, lost } = answer.body as { extended: Array<{ jobId: string; leaseExpiresAt: string }>; lost: string[] };
    expect(extended.map((e) => e.jobId)).toEqual([jobId]);
    expect(Date.parse(extended[0]?.leaseExpiresAt ?? '')).toBeGreaterThanOrEqual(Date.parse(job?.leaseExpiresAt ?? ''));
    expect(lost.sort()).toEqual(['no-such-job', jobB?.id].sort());

    // Another agent of the same location does not hold it; a key of location b never sees it.
    expect((await call(keyA, [jobId], 'agent-2')).body).toEqual({ extended: [], lost: [jobId] });
    expect((await call(keyB, [jobId])).body).toEqual({ extended: [], lost: [jobId] });

    // Done: lost.
    expect((await results(server, keyA, [envelope(jobId, entry(job as Job))])).accepted).toHaveLength(1);
    expect((await call(keyA, [jobId])).body).toEqual({ extended: [], lost: [jobId] });

    expect((await call(keyA, [])).body).toEqual({ extended: [], lost: [] });
    const bad = await agentCall(server.url, '/v1/agent/leases', keyA, { jobIds: [1] });
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({ attributes: { field: 'jobIds[0]' } });
  });
});

describe('results', () => {
  it('stores a FINAL idempotently, refuses a different one with 409 and an unknown job with 404', async () => {
    const { server, keyA } = await serve();
    const { sessionId } = await server.queue({ locations: ['loc-a'] });
    const [job] = (await claim(server, keyA)) as [Job];
    const first = entry(job);
    expect(await results(server, keyA, [envelope(job.id, first)])).toEqual({ accepted: [first.id], rejected: [] });
    // The same result again (a re-send after a lost answer), even from the agent's successor.
    expect(await results(server, keyA, [envelope(job.id, first)], 'agent-9')).toEqual({ accepted: [first.id], rejected: [] });
    const second = entry(job);
    const conflict = await results(server, keyA, [envelope(job.id, second)]);
    expect(conflict.accepted).toEqual([]);
    expect(conflict.rejected).toMatchObject([{ resultId: second.id, statusCode: 409 }]);
    const unknown = entry(job);
    expect((await results(server, keyA, [envelope('no-such-job', unknown)])).rejected).toMatchObject([{ resultId: unknown.id, statusCode: 404 }]);

    const session = await server.store.session(sessionId);
    expect(session?.status).toBe('PASSED');
    expect(session?.results.map((r) => r.id)).toEqual([first.id]);
  });

  it("files a result under its job's check, type and location, whatever its body names", async () => {
    const { server, keyA } = await serve();
    const { sessionId } = await server.queue({ locations: ['loc-a'] });
    const [job] = (await claim(server, keyA)) as [Job];
    const forged = entry(job, { checkId: 'another-check', checkType: 'TCP', runLocation: 'loc-b' });
    expect((await results(server, keyA, [envelope(job.id, forged)])).accepted).toEqual([forged.id]);
    const session = await server.store.session(sessionId);
    const stored = session?.results.find((r) => r.id === forged.id);
    expect(stored).toMatchObject({ checkId: session?.checkId, checkType: 'URL', runLocation: 'loc-a' });
    expect(stored?.checkId).not.toBe('another-check');
  });

  it('refuses a result nested too deep on its own, with 400, and stores the rest of the batch', async () => {
    const { server, keyA } = await serve();
    await server.queue({ locations: ['loc-a'] });
    await server.queue({ locations: ['loc-a'] });
    const [one, two] = (await claim(server, keyA)) as [Job, Job];
    // JSON.stringify overflows the stack on a value this deep (so the body is written as text): it must not
    // fail the batch (a 500 an agent retries for ever).
    const hostile = { ...entry(one), apiCheckResult: { nested: 'DEEP' } } as CheckResultEntry;
    const fine = entry(two);
    const batch = (depth: number) =>
      JSON.stringify({ results: [envelope(one.id, hostile), envelope(two.id, fine)] }).replace('"DEEP"', `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`);
    // Past the body's limit (src/server/http/router.ts MAX_BODY_DEPTH) the whole batch is a 400, read from
    // the text before JSON.parse builds it; an agent splits such a batch until the result at fault is alone.
    const deep = await agentCall(server.url, '/v1/agent/results', keyA, batch(100_000));
    expect(deep.status).toBe(400);
    expect(deep.body).toMatchObject({ statusCode: 400, message: `the body is nested deeper than ${MAX_BODY_DEPTH} levels`, attributes: { limit: MAX_BODY_DEPTH } });
    // Within it, a result past MAX_DOCUMENT_DEPTH is refused alone.
    const raw = await agentCall(server.url, '/v1/agent/results', keyA, batch(MAX_BODY_DEPTH - 10));
    expect(raw.status, JSON.stringify(raw.body)).toBe(200);
    const answer = raw.body as { accepted: string[]; rejected: unknown[] };
    expect(answer.accepted).toEqual([fine.id]);
    expect(answer.rejected).toEqual([{ resultId: hostile.id, statusCode: 400, message: 'results[0]: result is nested deeper than 256 levels' }]);
  });

  it('stores ATTEMPT results, then the FINAL that closes the job', async () => {
    const { server, keyA } = await serve();
    // A check that retries: one without a retryStrategy never sends an ATTEMPT, and none of its is kept.
    const definition = { id: 'retried', name: 'retried', checkType: 'URL', request: { url: 'http://127.0.0.1:9/' }, retryStrategy: { type: 'FIXED', maxRetries: 1 } };
    const { sessionId } = await server.queue({ id: 'retried', locations: ['loc-a'], definition });
    const [job] = (await claim(server, keyA)) as [Job];
    const attempt = entry(job, { resultType: 'ATTEMPT', hasFailures: true, attempts: 1 });
    expect((await results(server, keyA, [envelope(job.id, attempt)])).accepted).toEqual([attempt.id]);
    // Only FINAL verdicts move the status past PROGRESS (src/store/session-status.ts).
    expect((await server.store.session(sessionId))?.status).toBe('PROGRESS');
    const final = entry(job, { attempts: 2 });
    expect((await results(server, keyA, [envelope(job.id, final)])).accepted).toEqual([final.id]);
    const session = await server.store.session(sessionId);
    expect(session?.status).toBe('PASSED');
    expect(session?.results.map((r) => r.id).sort()).toEqual([attempt.id, final.id].sort());
  });

  it('rejects a bad envelope alone with 400 and keeps the rest of the batch', async () => {
    const { server, keyA } = await serve();
    for (let i = 0; i < 2; i++) await server.queue({ locations: ['loc-a'] });
    const [one, two] = (await claim(server, keyA)) as [Job, Job];
    const good = entry(one);
    const mismatched = entry(two);
    const answer = await results(server, keyA, [
      envelope(one.id, good),
      { jobId: two.id, resultId: 'another-id', result: mismatched },
      { jobId: two.id, resultId: 'no-result' },
      { resultId: 'no-job', result: { ...entry(two), id: 'no-job' } },
      { jobId: two.id, resultId: 'bad-type', result: { ...entry(two), id: 'bad-type', resultType: 'MAYBE' } },
      'not an envelope',
    ]);
    expect(answer.accepted).toEqual([good.id]);
    expect(answer.rejected).toEqual([
      { resultId: 'another-id', statusCode: 400, message: expect.stringContaining('result.id must equal resultId') },
      { resultId: 'no-result', statusCode: 400, message: expect.stringContaining('result must be an object') },
      { resultId: 'no-job', statusCode: 400, message: expect.stringContaining('jobId') },
      { resultId: 'bad-type', statusCode: 400, message: expect.stringContaining('resultType') },
      { resultId: 'results[5]', statusCode: 400, message: expect.stringContaining('object') },
    ]);
  });

  it('refuses a malformed batch as a whole with 400', async () => {
    const { server, keyA } = await serve();
    for (const body of [{}, { results: [] }, { results: 'x' }, { results: Array.from({ length: 501 }, () => ({})) }, [1]]) {
      const answer = await agentCall(server.url, '/v1/agent/results', keyA, body);
      expect(answer.status, JSON.stringify(body).slice(0, 50)).toBe(400);
    }
  });

  it("never lets a key of another location touch a location's jobs", async () => {
    const { server, keyA, keyB } = await serve();
    const { jobs } = await server.queue({ locations: ['loc-a'] });
    expect(await claim(server, keyB)).toEqual([]);
    const [job] = (await claim(server, keyA)) as [Job];
    const foreign = entry(job);
    expect((await results(server, keyB, [envelope(job.id, foreign)])).rejected).toMatchObject([{ resultId: foreign.id, statusCode: 404 }]);
    expect((await agentCall(server.url, '/v1/agent/leases', keyB, { jobIds: [jobs['loc-a']] })).body).toEqual({ extended: [], lost: [jobs['loc-a']] });
    const announce = await agentCall(server.url, '/v1/agent/artifacts', keyB, { jobId: job.id, name: 'a.pcap', contentType: 'application/octet-stream', size: 10 });
    expect(announce.status).toBe(404);
  });
});

async function put(url: string, key: string, body: Buffer, headers: Record<string, string> = {}): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const all: Record<string, string | number> = { authorization: `Bearer ${key}`, 'x-agent-id': 'agent-1', 'content-type': 'application/octet-stream', 'content-length': body.length, ...headers };
    // An empty header value means: leave the header out.
    for (const [name, value] of Object.entries(all)) if (value === '') delete all[name];
    const req = http.request(url, { method: 'PUT', headers: all });
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

describe('artifacts', () => {
  it('takes an announced upload and serves it back byte for byte', async () => {
    const { server, keyA } = await serve();
    await server.queue({ locations: ['loc-a'] });
    const [job] = (await claim(server, keyA)) as [Job];
    const bytes = randomBytes(3 * 1024 * 1024 + 17);
    const announce = await agentCall(server.url, '/v1/agent/artifacts', keyA, {
      jobId: job.id,
      name: 'capture.pcap',
      contentType: 'application/vnd.tcpdump.pcap',
      size: bytes.length,
    });
    expect(announce.status).toBe(201);
    const { uploadUrl, url } = announce.body as { uploadUrl: string; url: string };
    expect(uploadUrl).toMatch(new RegExp(`^${server.url}/v1/agent/artifacts/[0-9a-f-]{36}/content$`));
    expect(url).toMatch(new RegExp(`^${server.url}/v1/artifacts/[0-9a-f-]{36}$`));

    const auth = { authorization: `Bearer ${PUBLIC_KEY}` };
    expect((await fetch(url, { headers: auth })).status).toBe(404);
    // A length that is not the announced size is refused before a byte is written.
    expect((await put(uploadUrl, keyA, bytes.subarray(1))).status).toBe(400);
    expect((await put(uploadUrl, keyA, Buffer.concat([bytes, Buffer.from('x')]))).status).toBe(400);
    // Chunked, without Content-Length: the size cannot be checked before the bytes arrive.
    expect((await put(uploadUrl, keyA, bytes, { 'transfer-encoding': 'chunked', 'content-length': '' })).status).toBe(411);
    expect((await fetch(url, { headers: auth })).status).toBe(404);

    const stored = await put(uploadUrl, keyA, bytes, { 'content-type': 'application/vnd.tcpdump.pcap' });
    expect(stored.status).toBe(200);
    const response = await fetch(url, { headers: auth });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('application/vnd.tcpdump.pcap');
    expect(Number(response.headers.get('content-length'))).toBe(bytes.length);
    expect(response.headers.get('x-content-type-options')).toBe('nosniff');
    expect(response.headers.get('content-disposition')).toBe("attachment; filename*=UTF-8''capture.pcap");
    const got = Buffer.from(await response.arrayBuffer());
    expect(createHash('sha256').update(got).digest('hex')).toBe(createHash('sha256').update(bytes).digest('hex'));
    expect(readdirSync(server.artifactsDir).filter((n) => n.endsWith('.part'))).toEqual([]);
    // The public key guards the download.
    expect((await fetch(url)).status).toBe(401);
  });

  it('answers 503 with Retry-After to an upload the disk has no room for, keeps no part, and takes it once there is room', async () => {
    if (process.getuid?.() !== 0) throw new Error('this test mounts a tmpfs and must run as root');
    const { server, keyA } = await serve();
    await server.queue({ locations: ['loc-a'] });
    const [job] = (await claim(server, keyA)) as [Job];
    // The artifacts folder on a 1 MB tmpfs of its own; the database stays where it is.
    mkdirSync(server.artifactsDir, { recursive: true });
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', server.artifactsDir]);
    try {
      const bytes = randomBytes(2 * 1024 * 1024);
      const announce = await agentCall(server.url, '/v1/agent/artifacts', keyA, { jobId: job.id, name: 'big.bin', contentType: 'application/octet-stream', size: bytes.length });
      const { uploadUrl } = announce.body as { uploadUrl: string };
      const refused = await put(uploadUrl, keyA, bytes);
      expect(refused.status).toBe(503);
      expect(JSON.parse(refused.body)).toMatchObject({ statusCode: 503, message: 'the server cannot store this now: the server’s disk is full; retry later' });
      expect(readdirSync(server.artifactsDir)).toEqual([]);
      expect(server.logs.filter((l) => l.msg === 'api request failed: the disk cannot take the file')).toHaveLength(1);
      expect(server.logs.filter((l) => l.level >= 50)).toEqual([]);
      // Room again (a larger mount over it): the same upload URL works.
      execFileSync('mount', ['-o', 'remount,size=4m', server.artifactsDir]);
      expect((await put(uploadUrl, keyA, bytes)).status).toBe(200);
    } finally {
      execFileSync('umount', ['-l', server.artifactsDir]);
    }
  });

  it('removes the part of an upload cut short, and refuses bad announcements', async () => {
    const { server, keyA, keyB } = await serve();
    await server.queue({ locations: ['loc-a'] });
    const [job] = (await claim(server, keyA)) as [Job];
    const size = 1024 * 1024;
    const announce = await agentCall(server.url, '/v1/agent/artifacts', keyA, { jobId: job.id, name: 'big.bin', contentType: 'application/octet-stream', size });
    const { uploadUrl } = announce.body as { uploadUrl: string };
    const id = uploadUrl.split('/').at(-2) as string;

    // Another location's key cannot upload it.
    expect((await put(uploadUrl, keyB, randomBytes(size))).status).toBe(404);

    const req = http.request(uploadUrl, {
      method: 'PUT',
      headers: { authorization: `Bearer ${keyA}`, 'x-agent-id': 'agent-1', 'content-length': size },
    });
    req.on('error', () => {});
    req.write(randomBytes(size / 2));
    await until(() => existsSync(`${server.artifactsDir}/${id}.part`), 'the part file');
    req.destroy();
    await until(() => !existsSync(`${server.artifactsDir}/${id}.part`), 'the part file to go');
    expect(existsSync(`${server.artifactsDir}/${id}`)).toBe(false);
    // The same upload URL works afterwards.
    expect((await put(uploadUrl, keyA, randomBytes(size))).status).toBe(200);

    const bad: Array<[Record<string, unknown>, string]> = [
      [{ name: '../x' }, 'name'],
      [{ name: 'a/b' }, 'name'],
      [{ name: '..' }, 'name'],
      [{ contentType: 'not a type' }, 'contentType'],
      [{ contentType: 'text/plain\r\nx-evil: 1' }, 'contentType'],
      [{ size: 0 }, 'size'],
      [{ size: 157_286_401 }, 'size'],
      [{ jobId: 5 }, 'jobId'],
    ];
    for (const [change, field] of bad) {
      const answer = await agentCall(server.url, '/v1/agent/artifacts', keyA, { jobId: job.id, name: 'a.bin', contentType: 'application/octet-stream', size: 10, ...change });
      expect(answer.status, field).toBe(400);
      expect(answer.body).toMatchObject({ attributes: { field } });
    }
    expect((await fetch(`${server.url}/v1/artifacts/not-an-id`, { headers: { authorization: `Bearer ${PUBLIC_KEY}` } })).status).toBe(404);
  });
});

describe('events', () => {
  it('takes events with 202 and logs them at warn with location and agent', async () => {
    const { server, keyA } = await serve();
    const event = { level: 'error', name: 'TypeError', message: 'x is not a function', stack: 'at run (executor.js:1:1)', agentVersion: '0.1.0', nodeVersion: 'v24.0.0', origin: 'executor', checkType: 'URL' };
    const answer = await agentCall(server.url, '/v1/agent/events', keyA, { events: [event] }, { agentId: 'agent-7' });
    expect(answer.status).toBe(202);
    const logged = server.logs.find((l) => l.msg === 'agent event');
    expect(logged).toMatchObject({ level: 40, location: 'loc-a', agentId: 'agent-7', event });
    // Fields the protocol does not have are not kept, however deep the body may be (MAX_BODY_DEPTH).
    const nested = (depth: number) => JSON.stringify({ events: [{ ...event, extra: 'DEEP' }] }).replace('"DEEP"', `${'['.repeat(depth)}${']'.repeat(depth)}`);
    expect((await agentCall(server.url, '/v1/agent/events', keyA, nested(MAX_BODY_DEPTH - 3), { agentId: 'agent-7' })).status).toBe(202);
    expect((await agentCall(server.url, '/v1/agent/events', keyA, nested(100_000), { agentId: 'agent-7' })).status).toBe(400);
    for (const body of [{ events: [] }, { events: [{ ...event, level: 'info' }] }, { events: Array.from({ length: 101 }, () => event) }]) {
      expect((await agentCall(server.url, '/v1/agent/events', keyA, body)).status).toBe(400);
    }
  });
});

describe('the real agent against the server', () => {
  let target: TargetServer;
  let agent: AgentProcess | undefined;
  beforeAll(async () => {
    target = await startTargetServer();
  });
  afterAll(async () => {
    await target.close();
  });
  afterEach(async () => {
    agent?.kill('SIGKILL');
    await agent?.exit;
    agent = undefined;
  });

  it('claims a queued URL job, runs it, and its FINAL result lands in the store', async () => {
    const { server, keyA } = await serve();
    agent = startAgent(['agent'], cleanEnv({ API_URL: server.url, API_KEY: keyA, STATE_DIR: tempDir(), CLAIM_WAIT_SECONDS: '5' }));
    await agent.healthPort();
    // Queued while the agent's claim is (likely) waiting: the signal wakes it.
    const { sessionId, jobs } = await server.queue({ locations: ['loc-a'], url: `${target.url}/ok` });
    const session = await until(async () => {
      const s = await server.store.session(sessionId);
      return s?.status === 'PASSED' ? s : undefined;
    }, 'the session to pass', 30_000);
    const [result] = session.results;
    expect(session.results).toHaveLength(1);
    expect(result).toMatchObject({ resultType: 'FINAL', hasFailures: false, runLocation: 'loc-a', sequenceId: sessionId });
    expect(result?.apiCheckResult?.response).toMatchObject({ status: 200 });
    expect(target.hits()).toBeGreaterThanOrEqual(1);
    // The job is closed: nothing left to claim, no lease held.
    expect((await agentCall(server.url, '/v1/agent/leases', keyA, { jobIds: [jobs['loc-a']] })).body).toMatchObject({ extended: [] });
    expect(server.logs.filter((l) => l.level >= 50)).toEqual([]);
  });

  it('behind a small write budget, delivers every result: refused with 429 and Retry-After, it keeps them spooled and sends them again', async () => {
    // Waves of 10 jobs, each wave's results about 13 KB, against a budget of 60 KB a minute (1 KB/s): one wave's
    // debt is paid back in about 13 s. Waves are queued until one is refused (the warning says so).
    const { server, keyA } = await serve({ writeBytesPerMinute: 60_000 });
    agent = startAgent(['agent'], cleanEnv({ API_URL: server.url, API_KEY: keyA, STATE_DIR: tempDir(), CLAIM_WAIT_SECONDS: '5' }));
    await agent.healthPort();
    const overBudget = () => server.logs.some((l) => String(l.msg).startsWith("a location's agents sent more results and events"));
    const passed = async (ids: readonly string[]) => {
      for (const id of ids) if ((await server.store.session(id))?.status !== 'PASSED') return false;
      return true;
    };
    const sessions: string[] = [];
    for (let wave = 0; wave < 20 && !overBudget(); wave++) {
      const queued: string[] = [];
      for (let i = 0; i < 10; i++) queued.push((await server.queue({ locations: ['loc-a'], url: `${target.url}/ok` })).sessionId);
      sessions.push(...queued);
      await until(async () => overBudget() || (await passed(queued)), `wave ${wave} to pass or be refused`, 60_000);
    }
    expect(overBudget()).toBe(true);
    await until(() => passed(sessions), 'every session to pass', 90_000);
    for (const id of sessions) expect((await server.store.session(id))?.results).toMatchObject([{ resultType: 'FINAL', hasFailures: false }]);
    // The agent was told to wait, and waited: nothing was dropped from its spool.
    expect(agent.logs.some((l) => l.status === 429 && l.route === 'results')).toBe(true);
    expect(agent.logs.filter((l) => String(l.msg).includes('dropping it from the spool'))).toEqual([]);
    expect(server.logs.filter((l) => String(l.msg).startsWith("a location's agents sent more results and events"))).toHaveLength(1);
  }, 180_000);

  it('keeps the lease of a job that outlasts it, through the leases call', async () => {
    const { server, keyA } = await serve({ leaseMs: 2_000 });
    agent = startAgent(['agent'], cleanEnv({ API_URL: server.url, API_KEY: keyA, STATE_DIR: tempDir(), CLAIM_WAIT_SECONDS: '5' }));
    await agent.healthPort();
    const definition = { id: 'slow', name: 'slow', checkType: 'URL', request: { url: `${target.url}/slow/5000` }, degradedResponseTime: 15_000, maxResponseTime: 15_000 };
    const { sessionId, jobs } = await server.queue({ id: 'slow', locations: ['loc-a'], definition });
    const jobId = jobs['loc-a'] as string;
    let requeued = 0;
    let heldByAgent = false;
    const session = await until(async () => {
      // The scheduler's sweep, run often: a lease the agent failed to extend would put the job back in the queue.
      requeued += await server.store.requeueExpiredLeases(new Date());
      const s = await server.store.session(sessionId);
      if (s?.stoppedAt) return s;
      // While it runs, a second agent finds nothing to take.
      const other = await agentCall(server.url, '/v1/agent/leases', keyA, { jobIds: [jobId] }, { agentId: 'someone-else' });
      heldByAgent ||= (other.body as { lost: string[] }).lost.includes(jobId);
      await new Promise((resolve) => setTimeout(resolve, 200));
      return undefined;
    }, 'the slow job to pass', 30_000);
    expect(requeued).toBe(0);
    expect(heldByAgent).toBe(true);
    expect(session.status).toBe('PASSED');
    expect(session.results).toMatchObject([{ resultType: 'FINAL', hasFailures: false }]);
    expect(Date.parse(session.results[0]?.stoppedAt ?? '') - Date.parse(session.results[0]?.startedAt ?? '')).toBeGreaterThanOrEqual(4_500);
  });
});
