// Lease expiries are the control plane's times (src/control-plane/leases.ts):
// with its clock 5 minutes behind this host's, an extended lease looked
// expired at once and the agent spent its whole request budget on lease
// calls (2,700 in 1.3 s). The Date header of its answers corrects for the
// skew; without one, a lease extended into the past waits a second.

import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { ControlPlaneClient } from '../../src/control-plane/client.js';
import { LeaseKeeper } from '../../src/control-plane/leases.js';
import { createMetrics } from '../../src/observability/metrics.js';

const BEHIND_MS = 5 * 60_000;
const servers: Server[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

/** A control plane whose clock is 5 minutes behind: it extends every lease by 60 s of its own time. */
async function laggingControlPlane(sendDate: boolean): Promise<{ client: ControlPlaneClient; calls: () => number }> {
  let calls = 0;
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => {
      body += chunk;
    });
    req.on('end', () => {
      calls++;
      const serverNow = Date.now() - BEHIND_MS;
      res.sendDate = false;
      const { jobIds } = JSON.parse(body) as { jobIds: string[] };
      res.writeHead(200, { 'content-type': 'application/json', ...(sendDate ? { date: new Date(serverNow).toUTCString() } : {}) });
      res.end(JSON.stringify({ extended: jobIds.map((jobId) => ({ jobId, leaseExpiresAt: new Date(serverNow + 60_000).toISOString() })), lost: [] }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  servers.push(server);
  const client = new ControlPlaneClient(
    { apiUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, apiKey: 'k'.repeat(24), agentId: 'a-1', version: '0.0.0-test', timeoutMs: 10_000, proxy: {} },
    createMetrics(),
  );
  return { client, calls: () => calls };
}

async function run(sendDate: boolean): Promise<number> {
  const { client, calls } = await laggingControlPlane(sendDate);
  const keeper = new LeaseKeeper(client, pino({ level: 'silent' }), () => undefined);
  keeper.track('job-1', new Date(Date.now() - BEHIND_MS + 60_000).toISOString());
  const stop = new AbortController();
  const loop = keeper.run(stop.signal);
  await new Promise((r) => setTimeout(r, 2_500));
  stop.abort();
  await loop;
  await client.close();
  return calls();
}

describe('leases with the control plane’s clock behind', () => {
  it('reads its expiries through the Date header: one extension, then none for about 30 s', async () => {
    expect(await run(true)).toBeLessThanOrEqual(2);
  });

  it('without a Date header, extends a lease that lands in the past once a second, not in a hot loop', async () => {
    const calls = await run(false);
    expect(calls).toBeGreaterThanOrEqual(2);
    expect(calls).toBeLessThanOrEqual(4);
  });
});
