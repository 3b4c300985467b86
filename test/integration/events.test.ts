// Error events to the control plane (docs/events.md): an executor exception
// (injected with the OUTPOST_TEST_FAULT test hook) yields exactly one event,
// with no target data in it; EXTERNAL_OBSERVABILITY=off sends none; events
// still queued at shutdown are flushed.

import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type AgentProcess, cleanEnv, startAgent, tempDir } from '../support/agent-process.js';
import { ControlPlane } from '../support/control-plane.js';
import { startTargetServer, type TargetServer } from '../support/target-server.js';

let target: TargetServer;
const running: AgentProcess[] = [];
const planes: ControlPlane[] = [];

beforeAll(async () => {
  target = await startTargetServer();
});
afterAll(async () => {
  await target.close();
});
afterEach(async () => {
  for (const agent of running.splice(0)) {
    agent.kill('SIGKILL');
    await agent.exit;
  }
  for (const cp of planes.splice(0)) await cp.close();
});

const JOB_SECRET = 'event-job-secret-value';
const AGENT_SECRET = 'event-agent-secret-value';
const API_KEY = 'event-test-api-key-123';

/** Everything about the target that must not reach an event. */
function targetData(): string[] {
  const { host, hostname, port } = new URL(target.url);
  return [
    JOB_SECRET,
    AGENT_SECRET,
    API_KEY,
    target.url,
    host,
    hostname,
    `:${port}`,
    'event-path-marker',
    'event-query-marker',
    'event-header-value-marker',
    'event-body-marker',
    'event-plain-variable-marker',
    'event-check-name-marker',
    'event-check-id-marker',
    'intranet-host-marker',
  ];
}

async function runFaultyJob(env: Record<string, string>): Promise<{ cp: ControlPlane; proc: AgentProcess; jobId: string }> {
  const cp = await ControlPlane.start({ apiKey: API_KEY });
  planes.push(cp);
  const jobId = await cp.addJob(
    {
      id: 'event-check-id-marker',
      name: 'event-check-name-marker',
      checkType: 'API',
      request: {
        method: 'POST',
        url: `${target.url}/echo/event-path-marker?q=event-query-marker`,
        headers: [
          { key: 'X-Header', value: 'event-header-value-marker' },
          { key: 'X-Token', value: '{{TOKEN}}' },
          { key: 'X-Other', value: 'http://intranet-host-marker:8080/x' },
        ],
        bodyType: 'RAW',
        body: 'event-body-marker {{PLAIN}} {{OUTPOST_SECRET_EVENT}}',
      },
    },
    {
      environmentVariables: [
        { key: 'TOKEN', value: JOB_SECRET, secret: true },
        { key: 'PLAIN', value: 'event-plain-variable-marker', secret: false },
      ],
    },
  );
  const proc = startAgent(
    ['agent'],
    cleanEnv({
      API_URL: cp.url,
      API_KEY,
      STATE_DIR: tempDir(),
      CLAIM_WAIT_SECONDS: '1',
      OUTPOST_SECRET_EVENT: AGENT_SECRET,
      OUTPOST_TEST_FAULT: 'executor-throw',
      ...env,
    }),
  );
  running.push(proc);
  await cp.waitFor(() => cp.resultsFor(jobId).length === 1, 30_000, 'the error result');
  return { cp, proc, jobId };
}

describe('error events', () => {
  it('an executor exception yields exactly one event, flushed at shutdown, with no target data in it', async () => {
    const { cp, proc, jobId } = await runFaultyJob({});
    expect(cp.resultsFor(jobId)[0]?.result).toMatchObject({ hasErrors: true });
    // The test hook is announced, so it can never be on unnoticed.
    expect(proc.logs.some((l) => l.msg.startsWith('OUTPOST_TEST_FAULT is set'))).toBe(true);
    // SIGTERM before the 5 s flush interval: the event goes out with the shutdown flush.
    proc.kill('SIGTERM');
    expect((await proc.exit).code).toBe(0);
    expect(cp.violations).toEqual([]);
    expect(cp.events).toHaveLength(1);
    const [event] = cp.events;
    expect(event).toMatchObject({
      level: 'error',
      name: 'Error',
      checkType: 'API',
      origin: 'executor',
      nodeVersion: process.version,
    });
    expect(event?.agentVersion).toMatch(/^\d+\.\d+\.\d+/);
    expect(event?.message).toMatch(/^OUTPOST_TEST_FAULT=executor-throw: injected executor failure; request /);
    expect(event?.stack).toMatch(/\n {4}at .*<outpost>\/dist\/jobs\/run\.js:\d+:\d+/);
    const sent = JSON.stringify(cp.events);
    if (process.env.SHOW_EVENT) console.log(JSON.stringify(cp.events, null, 2));
    for (const data of targetData()) expect(sent.includes(data), `event carries ${JSON.stringify(data)}: ${sent}`).toBe(false);
    // The result and the logs do carry the error, scrubbed of secrets (but not of target data: they stay local or go with the result).
    const result = JSON.stringify(cp.resultsFor(jobId));
    expect(result).toContain('event-path-marker');
    expect(result).not.toContain(JOB_SECRET);
    expect(proc.stdout()).not.toContain(JOB_SECRET);
  });

  it('sends queued events on the flush interval, without waiting for shutdown', async () => {
    const { cp } = await runFaultyJob({});
    await cp.waitFor(() => cp.events.length === 1, 15_000, 'the event');
    expect(cp.countRequests('events')).toBe(1);
  });

  it('EXTERNAL_OBSERVABILITY=off: the control plane receives no event at all', async () => {
    const { cp, proc } = await runFaultyJob({ EXTERNAL_OBSERVABILITY: 'off' });
    await new Promise((r) => setTimeout(r, 6_000));
    proc.kill('SIGTERM');
    expect((await proc.exit).code).toBe(0);
    expect(cp.events).toEqual([]);
    expect(cp.countRequests('events')).toBe(0);
  });

  it('OUTPOST_TEST_FAULT accepts only its one value (exit 78)', async () => {
    const proc = startAgent(['once', 'nothing.json'], cleanEnv({ OUTPOST_TEST_FAULT: 'something-else' }));
    running.push(proc);
    expect((await proc.exit).code).toBe(78);
    expect(proc.stderr()).toMatch(/OUTPOST_TEST_FAULT="something-else" is invalid: the test faults are executor-throw, claim-loop-throw/);
  });
});
