// Agent mode: a URL job to a refused port gets a packet capture
// and a traceroute, uploaded over protocol v1 to the real server (behind the fault proxy)
// before the result is delivered; failed PUTs are retried; a PUT refused for
// good leaves the result complete, the missing artifact named in its jobLog.

import { existsSync, readdirSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { tempDir } from '../support/agent-process.js';
import { useHarness } from '../support/harness.js';
import { netnsUnavailable } from '../support/netns.js';

const h = useHarness();
const unavailable = netnsUnavailable(['tcpdump', 'traceroute']);

interface Detail {
  requestError: string | null;
  jobLog: string[];
  jobAssets: Array<{ name: string; url: string; size: number; contentType: string }>;
  pcapDataUrl: string | null;
}

/** A local port nothing listens on (connections are refused). */
async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

describe.skipIf(unavailable !== undefined)(`diagnostics in agent mode${unavailable ? ` (skipped: ${unavailable})` : ''}`, () => {
  it('uploads the pcap and the traceroute bundle, retrying failed PUTs, before delivering the result', async () => {
    const cp = await h.server();
    const port = await closedPort();
    cp.inject({ route: 'upload', status: 500, count: 2 });
    const jobId = await cp.addJob({ id: 'refused', checkType: 'URL', request: { url: `http://127.0.0.1:${port}/` } });
    const state = tempDir();
    const agent = h.agent(cp, { STATE_DIR: state });
    await cp.waitFor(() => cp.resultsFor(jobId).length > 0, 45_000, 'the result');
    const detail = cp.resultsFor(jobId)[0]?.result.apiCheckResult as unknown as Detail;
    expect(detail.requestError).toMatch(/connection refused \(ECONNREFUSED\)/);
    expect(detail.jobAssets.map((a) => a.name)).toEqual(['capture.pcap', 'traceroute.tar.gz']);
    for (const asset of detail.jobAssets) {
      expect(asset.url.startsWith(`${cp.url}/v1/artifacts/`)).toBe(true);
      const stored = cp.artifacts.get(asset.url.slice(`${cp.url}/v1/artifacts/`.length));
      expect(stored).toMatchObject({ jobId, name: asset.name, contentType: asset.contentType, size: asset.size, received: asset.size });
      expect(stored?.sha256).toMatch(/^[0-9a-f]{64}$/);
    }
    expect(detail.pcapDataUrl).toBe(detail.jobAssets[0]?.url);
    expect(detail.jobAssets[0]?.contentType).toBe('application/vnd.tcpdump.pcap');
    expect(detail.jobAssets[1]?.contentType).toBe('application/gzip');
    expect(detail.jobLog.some((l) => l.startsWith('Packet capture (capture.pcap: ') && l.includes(`on lo`))).toBe(true);
    expect(detail.jobLog).toContain(`Traceroute to 127.0.0.1 (TCP port ${port}): reached in 1 hop`);
    const retries = agent.logs.filter((l) => l.msg === 'artifact upload attempt failed');
    expect(retries.map((l) => [l.jobId, l.status, l.attempt])).toEqual([
      [jobId, 500, 1],
      [jobId, 500, 2],
    ]);
    expect(cp.violations).toEqual([]);
    // Uploaded artifacts leave the agent's disk.
    expect(readdirSync(path.join(state, 'artifacts'))).toEqual([]);
  }, 60_000);

  it('delivers the result when an upload is refused for good, naming the missing artifact', async () => {
    const cp = await h.server();
    const port = await closedPort();
    cp.inject({ route: 'upload', status: 400, count: 10 });
    const jobId = await cp.addJob({ id: 'refused', checkType: 'URL', request: { url: `http://127.0.0.1:${port}/` } });
    const state = tempDir();
    const agent = h.agent(cp, { STATE_DIR: state });
    await cp.waitFor(() => cp.resultsFor(jobId).length > 0, 45_000, 'the result');
    const detail = cp.resultsFor(jobId)[0]?.result.apiCheckResult as unknown as Detail;
    expect(detail.requestError).toMatch(/ECONNREFUSED/);
    expect(detail.jobAssets).toEqual([]);
    expect(detail.pcapDataUrl).toBeNull();
    const missing = detail.jobLog.filter((l) => l.startsWith('Artifact '));
    expect(missing).toHaveLength(2);
    expect(missing[0]).toMatch(/^Artifact capture\.pcap \([\d,]+ bytes\) was not uploaded after 1 attempt: upload: HTTP 400 \(Bad Request: injected fault\)$/);
    const failed = agent.logs.find((l) => l.msg === 'artifact upload failed; the result is delivered without it' && l.file === 'capture.pcap');
    expect(failed).toMatchObject({ jobId, attempts: 1, status: 400 });
    expect(typeof failed?.size).toBe('number');
    expect(JSON.parse(String(failed?.body))).toMatchObject({ statusCode: 400, message: 'injected fault' });
    expect(existsSync(path.join(state, 'artifacts', jobId))).toBe(false);
    // Each failed upload is also an error event (batched: flushed within 5 s), with no target in it.
    await cp.waitFor(() => cp.events.filter((e) => e.name === 'ArtifactUploadError').length === 2, 15_000, 'two upload events');
    const events = cp.events.filter((e) => e.name === 'ArtifactUploadError');
    expect(events.map((e) => (e as { origin?: string }).origin)).toEqual(['upload', 'upload']);
    expect(JSON.stringify(events)).not.toContain(`127.0.0.1:${port}`);
  }, 60_000);
});
