// Maintenance windows and alerts (docs/server.md, "Maintenance windows"):
// the built server, a real agent and a webhook receiver. Two checks fail; the
// one whose tag a window in effect matches still runs and stores results and
// its status turns FAILING, but no notification is sent for it; the other
// alerts as usual.

import { writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AgentProcess, cleanEnv, startAgent, tempDir } from '../support/agent-process.js';
import { retryUntil } from '../support/daemon.js';
import { apiCall, serverReady, startServerProcess } from '../support/server-process.js';

const API_KEY = 'alerts-maintenance-public-key-0123456789';
const processes: AgentProcess[] = [];
let target: Server;
let receiver: Server;
const received: Array<{ event: string; check: { id: string } }> = [];
let dir: string;
let checksFile: string;
let port = 0;

function startServer(apiPort: number): AgentProcess {
  const proc = startServerProcess({ checksFile, stateDir: path.join(dir, 'server'), apiKey: API_KEY, apiPort });
  processes.push(proc);
  return proc;
}

const api = (method: string, route: string) => apiCall(port, API_KEY, method, route);

async function finals(checkId: string): Promise<number> {
  const answer = await api('GET', `/v2/check-results/${checkId}?resultType=FINAL&limit=100`);
  expect(answer.status, JSON.stringify(answer.body)).toBe(200);
  return (answer.body as { length: number }).length;
}

beforeAll(async () => {
  target = createServer((_req, res) => res.writeHead(500).end('broken'));
  receiver = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      received.push(JSON.parse(Buffer.concat(chunks).toString('utf8')));
      res.writeHead(200).end();
    });
  });
  await Promise.all([target, receiver].map((s) => new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve))));
  dir = tempDir('outpost-alerts-maintenance-');
  checksFile = path.join(dir, 'checks.json');
  const now = Date.now();
  const url = `http://127.0.0.1:${(target.address() as AddressInfo).port}/`;
  writeFileSync(
    checksFile,
    JSON.stringify({
      privateLocations: [{ id: 'lab', name: 'Lab' }],
      maintenanceWindows: [
        { id: 1, name: 'Patch hour', tags: ['patching'], startsAt: new Date(now - 3_600_000).toISOString(), endsAt: new Date(now + 3_600_000).toISOString() },
      ],
      alertChannels: [
        { id: 1, type: 'WEBHOOK', config: { url: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook` }, sendFailure: true, autoSubscribe: true },
      ],
      checks: [
        { id: 'in-window', name: 'Being patched', checkType: 'URL', frequency: 2, tags: ['patching'], request: { url } },
        { id: 'outside', name: 'Not in a window', checkType: 'URL', frequency: 2, tags: ['other'], request: { url } },
      ],
    }),
  );
}, 60_000);

afterAll(async () => {
  for (const proc of processes) proc.kill('SIGKILL');
  await Promise.all(processes.map((p) => p.exit));
  await Promise.all([target, receiver].map((s) => new Promise((resolve) => s?.close(resolve))));
});

describe('a maintenance window', () => {
  it('holds back the notifications of the checks it covers, but not their results, nor other checks\' alerts', { timeout: 240_000 }, async () => {
    const server = startServer(0);
    port = await serverReady(server);
    const made = await api('POST', '/v1/private-locations/lab/keys');
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    const agent = startAgent(
      ['agent'],
      cleanEnv({ API_URL: `http://127.0.0.1:${port}`, API_KEY: (made.body as { rawKey: string }).rawKey, STATE_DIR: path.join(dir, 'agent'), CLAIM_WAIT_SECONDS: '5' }),
    );
    processes.push(agent);

    // The check outside the window alerts as usual.
    expect(await retryUntil(120_000, async () => received.some((n) => n.check.id === 'outside' && n.event === 'FAILURE'), 250)).toBe(true);
    // The one inside keeps running and storing its failures, and its status is tracked: FAILING, seen by the evaluator.
    expect(await retryUntil(120_000, async () => (await finals('in-window')) >= 2, 250)).toBe(true);
    expect(
      await retryUntil(60_000, async () => ((await api('GET', '/v1/checks/in-window/status')).body as { status: string }).status === 'FAILING', 250),
    ).toBe(true);
    // Nothing was sent for it.
    expect(received.filter((n) => n.check.id === 'in-window')).toEqual([]);
    const listed = (await api('GET', '/v1/alert-channels/1/notifications')).body as Array<{ check?: { id: string }; checkId?: string }>;
    expect(JSON.stringify(listed)).not.toContain('in-window');
  });
});
