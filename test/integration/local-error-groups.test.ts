// Error groups and maintenance windows end to end, in local mode as a real
// process (dist/main.js): real checks fail against real peers (a closed
// port, a target answering 418), their stored results carry errorGroupIds,
// and the groups and the checks file's windows are read and archived over
// the read API.

import { writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { CheckResultEntry } from '../../src/core/result-entry.js';
import { type AgentProcess, tempDir } from '../support/agent-process.js';
import { useHarness } from '../support/harness.js';

const h = useHarness();

const running: AgentProcess[] = [];
afterEach(async () => {
  for (const proc of running.splice(0)) {
    proc.kill('SIGKILL');
    await proc.exit;
  }
});

// biome-ignore lint/suspicious/noExplicitAny: answers are checked field by field
async function call(port: number, method: string, route: string, body?: unknown): Promise<{ status: number; body: any }> {
  const response = await fetch(`http://127.0.0.1:${port}${route}`, {
    method,
    ...(body !== undefined ? { body: JSON.stringify(body), headers: { 'content-type': 'application/json' } } : {}),
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : undefined };
}

/** A port nothing listens on: bound, then closed. */
async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

async function stored(port: number, checkId: string, atLeast: number, proc: AgentProcess): Promise<CheckResultEntry[]> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const page = await call(port, 'GET', `/v2/check-results/${checkId}?limit=100`);
    if (page.status === 200 && page.body.entries.length >= atLeast) return page.body.entries as CheckResultEntry[];
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${atLeast} results of ${checkId}; stderr: ${proc.stderr().slice(-2000)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('error groups and maintenance windows in local mode', () => {
  it('groups real failures per check, serves and archives the groups, lists the windows', async () => {
    const refusedPort = await closedPort();
    const dir = tempDir();
    const file = path.join(dir, 'checks.json');
    writeFileSync(
      file,
      JSON.stringify({
        maintenanceWindows: [
          { id: 5, name: 'Nightly', tags: ['db'], startsAt: '2026-01-01T01:00:00Z', endsAt: '2026-01-01T02:00:00Z', repeatUnit: 'DAY', repeatInterval: 1 },
        ],
        checks: [
          { id: 'refused', checkType: 'URL', frequency: 1, tags: ['db'], request: { url: `http://127.0.0.1:${refusedPort}/` } },
          { id: 'teapot', checkType: 'URL', frequency: 1, request: { url: `${h.target.url}/status/418` } },
          { id: 'ok', checkType: 'URL', frequency: 1, request: { url: `${h.target.url}/ok` } },
        ],
      }),
    );
    const proc = h.start(['local', file], { STATE_DIR: dir });
    running.push(proc);
    const started = await proc.waitForLog((l) => l.msg === 'outpost local mode started', 30_000, 'the start line');
    const port = started.apiPort as number;

    const refused = await stored(port, 'refused', 2, proc);
    const teapot = await stored(port, 'teapot', 2, proc);
    const ok = await stored(port, 'ok', 1, proc);
    for (const entry of ok) expect(entry.errorGroupIds).toEqual([]);
    const refusedGroup = refused[0]?.errorGroupIds?.[0];
    const teapotGroup = teapot[0]?.errorGroupIds?.[0];
    expect(refusedGroup).toEqual(expect.any(String));
    expect(teapotGroup).toEqual(expect.any(String));
    expect(teapotGroup).not.toBe(refusedGroup);
    for (const entry of refused) expect(entry.errorGroupIds).toEqual([refusedGroup]);
    for (const entry of teapot) expect(entry.errorGroupIds).toEqual([teapotGroup]);

    const group = await call(port, 'GET', `/v1/error-groups/${refusedGroup}`);
    expect(group.status).toBe(200);
    expect(group.body).toMatchObject({ id: refusedGroup, checkId: 'refused', archivedUntilNextEvent: false });
    expect(group.body.rawErrorMessage).toContain(String(refusedPort));
    expect(group.body.cleanedErrorMessage).not.toContain(String(refusedPort));
    expect(group.body.cleanedErrorMessage).toContain('<port>');

    // Archived until the next event: the check fails again every second, which reopens it.
    const archived = await call(port, 'PATCH', `/v1/error-groups/${refusedGroup}`, { archivedUntilNextEvent: true });
    expect(archived.body.archivedUntilNextEvent).toBe(true);
    const deadline = Date.now() + 30_000;
    while ((await call(port, 'GET', `/v1/error-groups/${refusedGroup}`)).body.archivedUntilNextEvent) {
      if (Date.now() > deadline) throw new Error('the group was not reopened by the next failure');
      await new Promise((r) => setTimeout(r, 100));
    }

    const windows = await call(port, 'GET', '/v1/maintenance-windows');
    expect(windows.status).toBe(200);
    expect(windows.body).toEqual([
      expect.objectContaining({ id: 5, name: 'Nightly', tags: ['db'], repeatUnit: 'DAY', repeatInterval: 1, repeatEndsAt: null, updated_at: null }),
    ]);

    proc.kill('SIGINT');
    expect((await proc.exit).code, proc.stderr()).toBe(0);
  });
});
