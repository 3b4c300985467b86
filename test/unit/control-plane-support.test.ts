// test/support/control-plane.ts itself: the real server behind the proxy
// queues, hands out and stores as the agent's tests expect, and the proxy's
// faults answer instead of the server, once each.

import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import type { Job } from '../../src/core/protocol.js';
import { errorResult } from '../../src/results/result.js';
import { ControlPlane } from '../support/control-plane.js';

const planes: ControlPlane[] = [];
afterEach(async () => {
  for (const cp of planes.splice(0)) await cp.close();
});

async function start(): Promise<ControlPlane> {
  const cp = await ControlPlane.start();
  planes.push(cp);
  return cp;
}

const agentId = randomUUID();

function call(cp: ControlPlane, path: string, body: unknown): Promise<Response> {
  return fetch(`${cp.url}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${cp.apiKey}`, 'user-agent': 'outpost/0.0.0-test', 'x-agent-id': agentId, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
}

const claim = (cp: ControlPlane) => call(cp, '/v1/agent/claim', { max: 10, waitSeconds: 0, agent: { id: agentId, version: '0.0.0-test', checkTypes: ['URL'], runtimes: [] } });

describe('the control plane for tests', () => {
  it('hands out a queued job, and stores and shows its result', async () => {
    const cp = await start();
    const id = await cp.addJob({ id: 'c1', name: 'one', checkType: 'URL', request: { url: 'http://127.0.0.1:9/' } });
    const { jobs } = (await (await claim(cp)).json()) as { jobs: Job[] };
    expect(jobs.map((j) => j.id)).toEqual([id]);
    expect(cp.jobs.get(id)).toMatchObject({ state: 'leased', agentId, claims: 1 });
    const result = errorResult('boom', { checkRunId: jobs[0]?.checkRunId ?? null, sequenceId: jobs[0]?.sequenceId ?? null, runLocation: 'test-location' }, { id: 'c1', name: 'one', checkType: 'URL' });
    const answer = (await (await call(cp, '/v1/agent/results', { results: [{ jobId: id, resultId: result.id, result }] })).json()) as { accepted: string[] };
    expect(answer.accepted).toEqual([result.id]);
    expect(cp.resultsFor(id).map((r) => r.resultId)).toEqual([result.id]);
    expect((await cp.storedResults(id)).map((r) => r.id)).toEqual([result.id]);
    expect(cp.jobs.get(id)?.state).toBe('done');
    expect(cp.violations).toEqual([]);
  });

  it('answers an injected fault instead of the server, once, then forwards again', async () => {
    const cp = await start();
    cp.inject({ route: 'claim', status: 429, retryAfter: '7' });
    const refused = await claim(cp);
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toBe('7');
    expect(await refused.json()).toMatchObject({ statusCode: 429, message: 'injected fault' });
    expect((await claim(cp)).status).toBe(200);
    cp.inject({ route: 'claim', malformed: true });
    expect(await (await claim(cp)).text()).toBe('{"jobs": [this is not json');
    expect(cp.requests.map((r) => r.status)).toEqual([429, 200, 200]);
  });

  it('notes what the server refuses as a protocol violation', async () => {
    const cp = await start();
    const answer = await call(cp, '/v1/agent/claim', { max: 0, waitSeconds: 0, agent: { id: agentId, version: 'x', checkTypes: [], runtimes: [] } });
    expect(answer.status).toBe(400);
    expect(cp.violations).toHaveLength(1);
    expect(cp.violations[0]).toMatch(/^\/v1\/agent\/claim: the server answered 400/);
  });
});
