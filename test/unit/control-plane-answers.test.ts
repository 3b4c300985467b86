// What the agent reads of a control plane's answers (src/control-plane/client.ts):
// an answer larger than it needs is refused unread past the bound, as a
// malformed one is (retried with backoff), and an error message is logged
// cut short, whatever the control plane sends.

import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { ANSWER_MAX_BYTES, claimAnswerMaxBytes, ControlPlaneClient, ControlPlaneError } from '../../src/control-plane/client.js';
import { createMetrics } from '../../src/observability/metrics.js';

const servers: Server[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

/** A control plane answering every request with `status` and the body `body(url)` gives. */
async function controlPlane(status: number, body: (url: string) => string): Promise<ControlPlaneClient> {
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(body(req.url ?? ''));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  servers.push(server);
  return new ControlPlaneClient(
    { apiUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, apiKey: 'k'.repeat(24), agentId: 'a-1', version: '0.0.0-test', timeoutMs: 10_000, proxy: {} },
    createMetrics(),
  );
}

const agent = { id: 'a-1', version: '0.0.0-test', checkTypes: ['URL'], runtimes: [] };

async function failure(call: Promise<unknown>): Promise<ControlPlaneError> {
  try {
    await call;
  } catch (error) {
    if (error instanceof ControlPlaneError) return error;
    throw error;
  }
  throw new Error('the call succeeded');
}

/** A control plane that reads a request's body at `bytesPerSecond`, then accepts none of it. */
async function slowReader(bytesPerSecond: number, timeoutMs: number): Promise<ControlPlaneClient> {
  const server = createServer((req, res) => {
    req.on('data', (chunk: Buffer) => {
      req.pause();
      setTimeout(() => req.resume(), (chunk.length / bytesPerSecond) * 1000);
    });
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"accepted":[],"rejected":[]}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  servers.push(server);
  return new ControlPlaneClient(
    { apiUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, apiKey: 'k'.repeat(24), agentId: 'a-1', version: '0.0.0-test', timeoutMs, proxy: {} },
    createMetrics(),
  );
}

describe('control plane answers', () => {
  it('gives a results request the time its body takes on a slow link on top of the timeout', async () => {
    // 256 KiB read at 64 KiB/s: about 4 s, against a timeout of 1 s plus 1 s per 32 KiB (8 s).
    const lines = Array.from({ length: 64 }, (_, i) => JSON.stringify({ jobId: `j-${i}`, resultId: `r-${i}`, pad: 'x'.repeat(4 * 1024 - 40) }));
    const slow = await slowReader(64 * 1024, 1_000);
    const started = Date.now();
    expect(await slow.sendResultLines(lines)).toEqual({ accepted: [], rejected: [] });
    expect(Date.now() - started).toBeGreaterThan(1_000);
    await slow.close();
    // A request with little to send keeps the timeout alone.
    const stalled = await slowReader(1, 1_000);
    const refused = await failure(stalled.sendResultLines(['{"jobId":"j","resultId":"r","pad":"xx"}']));
    expect(refused.message).toMatch(/^results: timed out after 10\d\d ms$/);
    await stalled.close();
  });

  it('refuses a claim answer larger than its jobs can be, unread past the bound, as a retryable failure', async () => {
    const bound = claimAnswerMaxBytes(1);
    const client = await controlPlane(200, () => `{"pad":"${'x'.repeat(bound + 1)}","jobs":[]}`);
    const refused = await failure(client.claim({ max: 1, waitSeconds: 0, agent }));
    expect(refused).toMatchObject({ route: 'claim', kind: 'retryable', statusCode: 200 });
    expect(refused.message).toBe(`claim: the answer is larger than ${bound} bytes: refused unread (HTTP 200)`);
    // More jobs asked for, more room: the same answer is read.
    const room = await controlPlane(200, () => `{"pad":"${'x'.repeat(bound + 1)}","jobs":[]}`);
    expect(await room.claim({ max: 4, waitSeconds: 0, agent })).toMatchObject({ jobs: [] });
    await client.close();
    await room.close();
  });

  it('refuses a leases answer over 4 MiB', async () => {
    const client = await controlPlane(200, () => `{"extended":[],"lost":[],"pad":"${'x'.repeat(ANSWER_MAX_BYTES)}"}`);
    const refused = await failure(client.extendLeases({ jobs: [] } as unknown as Parameters<ControlPlaneClient['extendLeases']>[0]));
    expect(refused.message).toMatch(/^leases: the answer is larger than 4194304 bytes: refused unread/);
    await client.close();
  });

  it("cuts a control plane's error message to 500 characters, saying how long it was", async () => {
    const client = await controlPlane(500, () => JSON.stringify({ statusCode: 500, error: 'Internal', message: 'E'.repeat(2 * 1024 * 1024) }));
    const refused = await failure(client.claim({ max: 1, waitSeconds: 0, agent }));
    expect(refused.message).toBe(`claim: HTTP 500 (${`Internal: ${'E'.repeat(2 * 1024 * 1024)}`.slice(0, 500)}… (2097162 characters))`);
    await client.close();
  });
});
