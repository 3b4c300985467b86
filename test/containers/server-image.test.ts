// `outpost server` in the images (docs/server.md, docs/deployment.md): the
// uptime image runs the server as uid 10001 with its database on the state
// volume, and an agent container of the same image, with a key made through
// the keys route, runs the server's check and reports to it.

import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { GenericContainer, type StartedTestContainer, Wait } from 'testcontainers';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tempDir } from '../support/agent-process.js';
import { retryUntil } from '../support/daemon.js';
import { startTargetServer, type TargetServer } from '../support/target-server.js';
import { buildImage, exposedPorts, type Forward, forward, IMAGES, lockContainerTests, podman, holdPodmanBridge, requirePodman } from './support/images.js';

const API_KEY = 'container-test-public-key-0123';
let unlock: (() => void) | undefined;
let target: TargetServer;
let targetForward: Forward | undefined;
let serverForward: Forward | undefined;
const containers: StartedTestContainer[] = [];
let bridge: { gateway: string; release(): Promise<void> } | undefined;

beforeAll(async () => {
  await requirePodman();
  unlock = await lockContainerTests(25 * 60_000);
  await buildImage('uptime');
  target = await startTargetServer();
}, 30 * 60_000);

afterAll(async () => {
  for (const container of containers.reverse()) await container.stop({ timeout: 10_000 }).catch(() => undefined);
  await serverForward?.close();
  await targetForward?.close();
  await target?.close();
  await bridge?.release();
  unlock?.();
});

describe('outpost server in the uptime image', () => {
  it('serves the API as uid 10001, and an agent container with a key from the keys route reports a FINAL result to it', async () => {
    bridge = await holdPodmanBridge();
    const { gateway } = bridge;
    targetForward = await forward(Number(new URL(target.url).port), gateway);
    const checksFile = path.join(tempDir('outpost-server-image-'), 'checks.json');
    writeFileSync(
      checksFile,
      JSON.stringify({
        privateLocations: [{ id: 'lab', name: 'Lab' }],
        checks: [{ id: 'home', name: 'Home', checkType: 'URL', frequency: 2, request: { url: `http://host.containers.internal:${targetForward.port}/ok` } }],
      }),
      { mode: 0o644 },
    );
    const server = await new GenericContainer(IMAGES.uptime.tag)
      .withCommand(['server', '/etc/outpost/checks.json'])
      .withEnvironment({ OUTPOST_API_KEY: API_KEY })
      .withBindMounts([{ source: checksFile, target: '/etc/outpost/checks.json', mode: 'ro' }])
      .withExposedPorts(...exposedPorts(8080))
      .withWaitStrategy(Wait.forHttp('/-/readiness', 8081).forStatusCode(200))
      .withStartupTimeout(90_000)
      .start();
    containers.push(server);
    const api = `http://${server.getHost()}:${server.getMappedPort(8080)}`;
    const auth = { authorization: `Bearer ${API_KEY}` };
    // Every process (tini, and node, which Node 24 names MainThread) runs as the image's user, outpost (uid 10001).
    const top = await podman(['top', server.getId(), 'user', 'comm']);
    const users = top.stdout.trim().split('\n').slice(1).map((line) => line.split(/\s+/)[0]);
    expect(users.length, top.stdout).toBeGreaterThanOrEqual(2);
    expect(new Set(users), top.stdout).toEqual(new Set(['outpost']));
    expect((await podman(['exec', server.getId(), 'id', '-u', 'outpost'])).stdout.trim()).toBe('10001');
    const made = await fetch(`${api}/v1/private-locations/lab/keys`, { method: 'POST', headers: auth });
    expect(made.status).toBe(201);
    const { rawKey } = (await made.json()) as { rawKey: string };

    serverForward = await forward(server.getMappedPort(8080), gateway);
    const agent = await new GenericContainer(IMAGES.uptime.tag)
      .withEnvironment({ API_URL: `http://host.containers.internal:${serverForward.port}`, API_KEY: rawKey, CLAIM_WAIT_SECONDS: '2' })
      .withExposedPorts(...exposedPorts())
      .withWaitStrategy(Wait.forHttp('/-/readiness', 8081).forStatusCode(200))
      .withStartupTimeout(90_000)
      .start();
    containers.push(agent);

    let entries: Array<{ resultType: string; runLocation: string; hasFailures: boolean }> = [];
    const reported = await retryUntil(90_000, async () => {
      const page = await fetch(`${api}/v2/check-results/home?resultType=FINAL`, { headers: auth });
      entries = ((await page.json()) as { entries: typeof entries }).entries;
      return entries.length > 0;
    }, 500);
    expect(reported, 'a FINAL result reached the server').toBe(true);
    expect(entries[0]).toMatchObject({ resultType: 'FINAL', runLocation: 'lab', hasFailures: false });
    // The database is on the state volume, written as uid 10001.
    const listing = await podman(['exec', server.getId(), 'ls', '-ln', '/var/lib/outpost']);
    expect(listing.stdout).toMatch(/10001\s+10001\s+\d+ .* outpost\.db/);
  }, 300_000);
});
