// A stalled artifact upload against the real server routes
// (src/server/agent-api.ts) over real sockets: a newer PUT of the same
// artifact takes over at once (its retry got 409 for up to 15 minutes, and
// the agent lost the artifact), and an upload that sends nothing for the
// idle bound is cut, its partial file removed.

import { randomBytes, randomUUID, createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ControlPlane } from '../support/control-plane.js';

const KEY = 'stall-test-key';
const SIZE = 64 * 1024;
/** The idle bound at 500 ms; `patient` at the server's own (30 s), so that only a takeover ends a stalled PUT. */
let cp: ControlPlane;
let patient: ControlPlane;
const sockets: Socket[] = [];

beforeAll(async () => {
  cp = await ControlPlane.start({ apiKey: KEY, uploadIdleMs: 500 });
  patient = await ControlPlane.start({ apiKey: KEY });
  for (const server of [cp, patient]) await server.addJob({ id: 'check-stall', checkType: 'API' }, { id: 'stall-job' });
});
afterAll(async () => {
  for (const socket of sockets) socket.destroy();
  await cp.close();
  await patient.close();
});

const agentHeaders = { authorization: `Bearer ${KEY}`, 'x-agent-id': randomUUID(), 'user-agent': 'outpost/test' };

async function announce(cp: ControlPlane): Promise<{ id: string; uploadPath: string }> {
  const response = await fetch(`${cp.serverUrl}/v1/agent/artifacts`, {
    method: 'POST',
    headers: { ...agentHeaders, 'content-type': 'application/json' },
    body: JSON.stringify({ jobId: 'stall-job', name: 'trace.zip', contentType: 'application/zip', size: SIZE }),
  });
  expect(response.status).toBe(201);
  const { uploadUrl } = (await response.json()) as { uploadUrl: string };
  const uploadPath = new URL(uploadUrl).pathname;
  return { id: uploadPath.split('/')[4] as string, uploadPath };
}

/** A PUT that sends its head and half the body, then nothing; resolves when the server lets go of it. */
function stalledPut(cp: ControlPlane, uploadPath: string, bytes: Buffer): { closed: Promise<number> } {
  const port = Number(new URL(cp.serverUrl).port);
  const socket = connect(port, '127.0.0.1');
  sockets.push(socket);
  socket.on('error', () => undefined);
  socket.resume();
  const head = Object.entries({ ...agentHeaders, 'content-type': 'application/zip', 'content-length': String(SIZE) })
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join('');
  socket.write(`PUT ${uploadPath} HTTP/1.1\r\nHost: x\r\n${head}\r\n`);
  socket.write(bytes.subarray(0, SIZE / 2));
  const started = Date.now();
  return { closed: new Promise((resolve) => socket.once('close', () => resolve(Date.now() - started))) };
}

describe('stalled artifact uploads', () => {
  it('lets a newer PUT of the same artifact take over from a stalled one, and stores the newer bytes', async () => {
    const cp = patient;
    const { id, uploadPath } = await announce(cp);
    const bytes = randomBytes(SIZE);
    const stalled = stalledPut(cp, uploadPath, bytes);
    // The stalled PUT is being written once its partial file is there.
    const part = path.join(cp.stateDir, 'artifacts', `${id}.part`);
    const deadline = Date.now() + 5_000;
    while (!existsSync(part) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(existsSync(part)).toBe(true);

    const retry = await fetch(`${cp.serverUrl}${uploadPath}`, { method: 'PUT', headers: { ...agentHeaders, 'content-type': 'application/zip' }, body: bytes });
    // Was 409 "being uploaded by another request", for good from the agent's side.
    expect(retry.status).toBe(200);
    await stalled.closed;
    const stored = await cp.storedArtifact(id);
    expect(stored?.received).toBe(SIZE);
    expect(stored?.sha256).toBe(createHash('sha256').update(bytes).digest('hex'));
  });

  it('cuts an upload that sends nothing for the idle bound and removes its partial file', async () => {
    const { id, uploadPath } = await announce(cp);
    const heldMs = await stalledPut(cp, uploadPath, randomBytes(SIZE)).closed;
    // The bound is 500 ms here (30 s in `outpost server`); was held for the 15-minute request deadline.
    expect(heldMs).toBeLessThan(5_000);
    const part = path.join(cp.stateDir, 'artifacts', `${id}.part`);
    const deadline = Date.now() + 5_000;
    while (existsSync(part) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(existsSync(part)).toBe(false);
  });
});
