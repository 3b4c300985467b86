// The set-up most integration tests share: a target server for the file, and
// agent processes and control planes (the real server behind a fault proxy,
// test/support/control-plane.ts) cleaned up after each test.

import { afterAll, afterEach, beforeAll } from 'vitest';
import { type AgentProcess, cleanEnv, startAgent, tempDir } from './agent-process.js';
import { ControlPlane, type ControlPlaneOptions } from './control-plane.js';
import { startTargetServer, type TargetServer } from './target-server.js';

export interface Harness {
  readonly target: TargetServer;
  /** Starts `outpost <args>` with a clean environment and its own STATE_DIR. */
  start(args: string[], env?: Record<string, string>): AgentProcess;
  /** The real server side in-process, behind a proxy that can inject faults (test/support/control-plane.ts). */
  server(options?: ControlPlaneOptions): Promise<ControlPlane>;
  /** `outpost agent` against `cp`, with short long polls. */
  agent(cp: { url: string; apiKey: string }, env?: Record<string, string>): AgentProcess;
}

export function useHarness(): Harness {
  const running: AgentProcess[] = [];
  const planes: ControlPlane[] = [];
  let target: TargetServer | undefined;
  beforeAll(async () => {
    target = await startTargetServer();
  });
  afterAll(async () => {
    await target?.close();
  });
  afterEach(async () => {
    for (const agent of running.splice(0)) {
      agent.kill('SIGKILL');
      await agent.exit;
    }
    for (const cp of planes.splice(0)) await cp.close();
  });
  const harness: Harness = {
    get target() {
      if (!target) throw new Error('the target server starts in beforeAll');
      return target;
    },
    start(args, env = {}) {
      const proc = startAgent(args, cleanEnv({ STATE_DIR: tempDir(), ...env }));
      running.push(proc);
      return proc;
    },
    async server(options = {}) {
      const cp = await ControlPlane.start(options);
      planes.push(cp);
      return cp;
    },
    agent(cp, env = {}) {
      return harness.start(['agent'], { API_URL: cp.url, API_KEY: cp.apiKey, CLAIM_WAIT_SECONDS: '1', ...env });
    },
  };
  return harness;
}
