// The built `outpost server` as a test starts it: a process on a checks
// file, waited for until it says it started and its readiness is 200, and
// calls to its API with the public key.

import { expect } from 'vitest';
import { type AgentProcess, cleanEnv, probe, startAgent } from './agent-process.js';
import { READY_DEADLINE_MS, retryUntil } from './daemon.js';

export interface ServerProcessOptions {
  checksFile: string;
  stateDir: string;
  apiKey: string;
  /** 0: any free port (read it from serverReady). */
  apiPort?: number;
  env?: Record<string, string>;
}

export function startServerProcess(options: ServerProcessOptions): AgentProcess {
  return startAgent(
    ['server', options.checksFile],
    cleanEnv({
      OUTPOST_API_KEY: options.apiKey,
      API_PORT: String(options.apiPort ?? 0),
      API_HOST: '127.0.0.1',
      STATE_DIR: options.stateDir,
      ...options.env,
    }),
  );
}

/** Waits for the start line and readiness; resolves with the API port. */
export async function serverReady(proc: AgentProcess): Promise<number> {
  const started = await proc.waitForLog((l) => l.msg === 'outpost server started', READY_DEADLINE_MS, 'the server to start');
  const health = await proc.healthPort();
  expect(await retryUntil(READY_DEADLINE_MS, async () => (await probe(health, '/-/readiness')).status === 200)).toBe(true);
  return Number(started.apiPort);
}

/** A call to the server's API with the public key; the body parsed when there is one. */
export async function apiCall(port: number, apiKey: string, method: string, route: string): Promise<{ status: number; body: unknown }> {
  const response = await fetch(`http://127.0.0.1:${port}${route}`, { method, headers: { authorization: `Bearer ${apiKey}` } });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : undefined };
}
