// The health server: what it says (no credentials; stuck parts named by the
// watchdog), how many connections it holds, and where it listens.

import { writeFileSync } from 'node:fs';
import net, { type Socket } from 'node:net';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { HEALTH_MAX_CONNECTIONS } from '../../src/health/server.js';
import { EVENT_LOOP, EVENT_LOOP_LAG_BOUND_MS } from '../../src/health/watchdog.js';
import { probe, tempDir } from '../support/agent-process.js';
import { useHarness } from '../support/harness.js';

const h = useHarness();

/** A local-mode checks file with one check that runs rarely: these tests are about the health server. */
const CHECKS_FILE = path.join(tempDir(), 'checks.json');
writeFileSync(CHECKS_FILE, JSON.stringify({ checks: [{ id: 'rare', name: 'rare', checkType: 'URL', frequency: 3600, request: { url: 'http://127.0.0.1:9/' } }] }));

/** No packet capture after the check's refused connection: these tests are not about it. */
const QUIET = { DIAGNOSTICS: 'off' };

async function waitUntil(predicate: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('API_URL credentials', () => {
  it('are masked in every log line and absent from /health', async () => {
    const cp = await h.server();
    const apiUrl = cp.url.replace('http://', 'http://cp-user:cp-pass-5ecret@');
    const proc = h.start(['agent'], { API_URL: apiUrl, API_KEY: cp.apiKey, CLAIM_WAIT_SECONDS: '1' });
    const port = await proc.healthPort();
    const started = await proc.waitForLog((l) => l.msg === 'outpost agent started', 15_000, 'the start line');
    // The URL stays useful in the log: scheme, host and port, with the userinfo masked.
    expect(started.apiUrl).toBe(cp.url.replace('http://', 'http://*****@'));
    await cp.waitFor(() => cp.claims.length > 0, 15_000, 'a claim through the URL with credentials');
    const health = await probe(port, '/health');
    expect(health.status).toBe(200);
    for (const text of [proc.stdout(), proc.stderr(), health.text]) {
      expect(text).not.toContain('cp-pass-5ecret');
      expect(text).not.toContain('cp-user');
    }
  });
});

/** Opens `n` TCP connections that never send a byte; counts those the server closes, and those it answered first (a 408). */
async function holdIdleSockets(port: number, host: string, n: number): Promise<{ sockets: Socket[]; closed: () => number; answered: () => number }> {
  let closed = 0;
  let answered = 0;
  const sockets = await Promise.all(
    Array.from(
      { length: n },
      () =>
        new Promise<Socket>((resolve, reject) => {
          const socket = net.connect(port, host);
          socket.once('connect', () => resolve(socket));
          socket.once('error', reject);
          let gotData = false;
          socket.on('data', () => {
            if (!gotData) answered++;
            gotData = true;
          });
          socket.on('close', () => closed++);
          // Read what the server may send (a 408) so that its close is seen.
          socket.resume();
          // A reset from the server is expected once it drops us.
          socket.on('error', () => undefined);
        }),
    ),
  );
  return { sockets, closed: () => closed, answered: () => answered };
}

async function untilAnswered(port: number, path: string, host: string, timeoutMs: number): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      const response = await fetch(`http://${host}:${port}${path}`, { signal: AbortSignal.timeout(2_000) });
      await response.text();
      return response.status;
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

describe('health server limits', () => {
  it('drops connections over its cap, reaps idle ones, and liveness answers again', async () => {
    const proc = h.start(['local', CHECKS_FILE], QUIET);
    const port = await proc.healthPort();
    const held = await holdIdleSockets(port, '127.0.0.1', HEALTH_MAX_CONNECTIONS + 50);
    try {
      // Those over the cap are closed by the agent at once (node:http destroys them); a deadline, not a measure.
      await waitUntil(() => held.closed() >= 50, 10_000, `50 of ${held.sockets.length} idle connections closed`);
      // The idle ones are reaped by the server's idle bounds, and then a fresh probe answers.
      await waitUntil(() => held.closed() === held.sockets.length, 60_000, 'every idle connection reaped');
      // Only those the server held were answered (408 at the headers timeout); the rest were dropped unanswered.
      expect(held.answered()).toBeLessThanOrEqual(HEALTH_MAX_CONNECTIONS);
      expect(held.sockets.length - held.answered()).toBeGreaterThanOrEqual(50);
      expect(await untilAnswered(port, '/-/liveness', '127.0.0.1', 15_000)).toBe(200);
    } finally {
      for (const socket of held.sockets) socket.destroy();
    }
  });

  it('AGENT_HEALTH_HOST=127.0.0.1 binds only loopback 127.0.0.1', async () => {
    const proc = h.start(['local', CHECKS_FILE], { ...QUIET, AGENT_HEALTH_HOST: '127.0.0.1' });
    const port = await proc.healthPort();
    expect(await untilAnswered(port, '/-/liveness', '127.0.0.1', 15_000)).toBe(200);
    // 127.0.0.2 is loopback too, but another address: a socket bound to 127.0.0.1 alone refuses it.
    const refused = await new Promise<string>((resolve) => {
      const socket = net.connect(port, '127.0.0.2');
      socket.once('connect', () => {
        socket.destroy();
        resolve('connected');
      });
      socket.once('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message));
    });
    expect(refused).toBe('ECONNREFUSED');
  });

  it('AGENT_HEALTH_HOST must be an IP address (exit 78)', async () => {
    const proc = h.start(['local', CHECKS_FILE], { ...QUIET, AGENT_HEALTH_HOST: 'not an address' });
    expect((await proc.exit).code).toBe(78);
    expect(proc.stderr()).toMatch(/AGENT_HEALTH_HOST="not an address" is invalid: must be an IP address/);
  });
});

describe('the watchdog behind readiness', () => {
  it('a healthy agent reports no stuck part, and each watched loop in /health', async () => {
    const cp = await h.server();
    const proc = h.agent(cp);
    const port = await proc.healthPort();
    await cp.waitFor(() => cp.claims.length > 0, 15_000, 'a claim');
    const deadline = Date.now() + 15_000;
    while ((await probe(port, '/-/readiness')).status !== 200) {
      if (Date.now() > deadline) throw new Error('the agent never became ready');
      await new Promise((r) => setTimeout(r, 100));
    }
    const health = (await probe(port, '/health')).body as Record<string, unknown>;
    expect(health).toMatchObject({ ready: true, stuck: [] });
    // The fields that were there before stay.
    for (const key of ['version', 'mode', 'shuttingDown', 'inFlight', 'queued', 'spooled', 'uptime']) expect(health).toHaveProperty(key);
    expect(Object.keys(health.components as object).sort()).toEqual(['claim-loop', 'event-loop', 'lease-loop', 'sink-loop']);
  });

  it('a crashed claim loop is logged, restarted with backoff, and turns readiness 503 naming it', async () => {
    const cp = await h.server();
    const proc = h.agent(cp, { OUTPOST_TEST_FAULT: 'claim-loop-throw' });
    const port = await proc.healthPort();
    await proc.waitForLog((l) => l.msg === 'claim-loop crashed; restarting it', 15_000, 'the crash line');
    const deadline = Date.now() + 15_000;
    let readiness = await probe(port, '/-/readiness');
    // The key is accepted by the sink's or the events' first call; until then 503 is for another reason.
    while (readiness.status !== 503 || (readiness.body as { stuck?: string[] }).stuck === undefined) {
      if (Date.now() > deadline) throw new Error(`readiness never said stuck: ${readiness.text}`);
      await new Promise((r) => setTimeout(r, 100));
      readiness = await probe(port, '/-/readiness');
    }
    expect(readiness.body).toEqual({ status: 'stuck', stuck: ['claim-loop'] });
    const health = (await probe(port, '/health')).body as { ready: boolean; stuck: string[]; components: Record<string, { state: string; error?: string }> };
    expect(health.ready).toBe(false);
    expect(health.stuck).toEqual(['claim-loop']);
    expect(health.components['claim-loop']).toMatchObject({ state: 'crashed', error: expect.stringContaining('claim-loop-throw') });
    expect(health.components['sink-loop']?.state).not.toMatch(/stuck|crashed/);
    // Restarted, not left dead: a second crash line follows the first.
    await proc.waitForLog((l) => l.msg === 'claim-loop crashed; restarting it' && l !== proc.logs.find((f) => f.msg === l.msg), 15_000, 'a restart');
    expect(cp.claims).toEqual([]);
  });
});

describe('the watchdog and the event loop', () => {
  it('a process that stood still longer than the lag bound is reported stuck (event-loop) and not ready', async () => {
    const proc = h.start(['local', CHECKS_FILE], QUIET);
    const port = await proc.healthPort();
    expect(await untilAnswered(port, '/-/readiness', '127.0.0.1', 15_000)).toBe(200);
    // SIGSTOP freezes the whole process, its event loop included, as a long synchronous stall would.
    proc.proc.kill('SIGSTOP');
    await new Promise((r) => setTimeout(r, EVENT_LOOP_LAG_BOUND_MS + 2_000));
    proc.proc.kill('SIGCONT');
    const deadline = Date.now() + 15_000;
    let health = await probe(port, '/health');
    while (!(health.body as { stuck: string[] }).stuck.includes(EVENT_LOOP)) {
      if (Date.now() > deadline) throw new Error(`the stall was never reported: ${health.text}`);
      await new Promise((r) => setTimeout(r, 100));
      health = await probe(port, '/health');
    }
    expect(health.body).toMatchObject({ ready: false, stuck: [EVENT_LOOP], components: { [EVENT_LOOP]: { state: 'stuck' }, scheduler: { state: 'ok' } } });
    expect(((health.body as { components: Record<string, { maxLagMs: number }> }).components[EVENT_LOOP]?.maxLagMs ?? 0) > EVENT_LOOP_LAG_BOUND_MS).toBe(true);
    expect((await probe(port, '/-/readiness')).status).toBe(503);
  });
});
