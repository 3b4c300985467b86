// Alerts across kill -9 (docs/server.md, "Alerts"): the built server with a
// checks file whose webhook channel answers 503, a real agent running a URL
// check against a target that answers 500. The FAILURE notification is
// queued and tried; the server is killed with it pending; after the restart
// the receiver, now answering 200, gets it, and the outbox shows it
// delivered, once (the evaluator's cursor was committed with it, so nothing
// is queued twice).

import { createHmac } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AgentProcess, cleanEnv, startAgent, tempDir } from '../support/agent-process.js';
import { retryUntil } from '../support/daemon.js';
import { apiCall, serverReady, startServerProcess } from '../support/server-process.js';

const API_KEY = 'alerts-restart-public-key-0123456789';
const HOOK_SECRET = 'restart-hook-secret-0123';
const processes: AgentProcess[] = [];
let target: Server;
let receiver: Server;
let receiverOpen = false;
const received: { status: number; body: string; signature: string | undefined }[] = [];
let dir: string;
let checksFile: string;
let port = 0;

function startServer(apiPort: number): AgentProcess {
  const proc = startServerProcess({ checksFile, stateDir: path.join(dir, 'server'), apiKey: API_KEY, apiPort });
  processes.push(proc);
  return proc;
}

const api = (method: string, route: string) => apiCall(port, API_KEY, method, route);

interface Listed {
  state: string;
  attempts: number;
  kind: string;
  attemptLog: { status: number | null }[];
}

async function notifications(): Promise<Listed[]> {
  const answer = await api('GET', '/v1/alert-channels/1/notifications');
  expect(answer.status, JSON.stringify(answer.body)).toBe(200);
  return answer.body as Listed[];
}

beforeAll(async () => {
  target = createServer((_req, res) => res.writeHead(500).end('broken'));
  receiver = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const status = receiverOpen ? 200 : 503;
      const signature = req.headers['x-outpost-signature'];
      received.push({ status, body: Buffer.concat(chunks).toString('utf8'), signature: typeof signature === 'string' ? signature : undefined });
      res.writeHead(status).end();
    });
  });
  await Promise.all([target, receiver].map((s) => new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve))));
  dir = tempDir('outpost-alerts-restart-');
  checksFile = path.join(dir, 'checks.json');
  writeFileSync(
    checksFile,
    JSON.stringify({
      privateLocations: [{ id: 'lab', name: 'Lab' }],
      alertChannels: [
        {
          id: 1,
          type: 'WEBHOOK',
          config: { url: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`, secret: HOOK_SECRET },
          sendFailure: true,
          sendRecovery: true,
          autoSubscribe: true,
        },
      ],
      checks: [{ id: 'broken', name: 'Broken target', checkType: 'URL', frequency: 2, request: { url: `http://127.0.0.1:${(target.address() as AddressInfo).port}/` } }],
    }),
  );
}, 60_000);

afterAll(async () => {
  for (const proc of processes) proc.kill('SIGKILL');
  await Promise.all(processes.map((p) => p.exit));
  await Promise.all([target, receiver].map((s) => new Promise((resolve) => s?.close(resolve))));
});

describe('alerts across a server restart', () => {
  it('delivers a notification left pending by kill -9 after the restart, once', { timeout: 240_000 }, async () => {
    let server = startServer(0);
    port = await serverReady(server);
    const made = await api('POST', '/v1/private-locations/lab/keys');
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    const agent = startAgent(
      ['agent'],
      cleanEnv({ API_URL: `http://127.0.0.1:${port}`, API_KEY: (made.body as { rawKey: string }).rawKey, STATE_DIR: path.join(dir, 'agent'), CLAIM_WAIT_SECONDS: '5' }),
    );
    processes.push(agent);

    // The failure is queued and tried at least once against the 503 receiver.
    let listed: Listed[] = [];
    const tried = await retryUntil(120_000, async () => {
      listed = await notifications();
      return listed.some((n) => n.attempts >= 1);
    }, 250);
    expect(tried, `a notification was tried (${JSON.stringify(listed)})`).toBe(true);
    expect(listed).toHaveLength(1);
    expect(listed[0]).toMatchObject({ state: 'PENDING', kind: 'FAILURE' });
    expect(received.every((r) => r.status === 503)).toBe(true);

    agent.kill('SIGKILL');
    server.kill('SIGKILL');
    await Promise.all([agent.exit, server.exit]);
    receiverOpen = true;

    server = startServer(port);
    await serverReady(server);
    const delivered = await retryUntil(120_000, async () => {
      listed = await notifications();
      return listed[0]?.state === 'DELIVERED';
    }, 250);
    expect(delivered, `delivered after the restart (${JSON.stringify(listed)})`).toBe(true);
    // Give a second queueing, were there one, time to show.
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    listed = await notifications();
    expect(listed).toHaveLength(1);
    expect(listed[0]?.attemptLog.at(-1)?.status).toBe(200);
    const ok = received.filter((r) => r.status === 200);
    expect(ok).toHaveLength(1);
    const body = (ok[0] as { body: string }).body;
    expect((ok[0] as { signature: string }).signature).toBe(`sha256=${createHmac('sha256', HOOK_SECRET).update(body).digest('hex')}`);
    expect(JSON.parse(body)).toMatchObject({ event: 'FAILURE', check: { id: 'broken' }, location: 'lab', status: { previous: 'PASSING', current: 'FAILING' } });
  });
});
