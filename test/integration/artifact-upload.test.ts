// Artifact uploads over protocol v1 against the real server (behind the fault proxy):
// a 149 MiB file arrives byte for byte (sha256) while the
// uploader's RSS grows by less than 32 MB; a file over 150 MB is refused
// with a clear line; failed PUTs are retried; a PUT refused for good is one
// jobLog line and one log line with job, file, size, attempt, status and
// the control plane's error body.

import { rmSync, truncateSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Writable } from 'node:stream';
import pino from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { MAX_ARTIFACT_BYTES, uploadArtifact } from '../../src/control-plane/artifact-upload.js';
import type { ArtifactFile } from '../../src/artifacts/writer.js';
import { ControlPlaneClient } from '../../src/control-plane/client.js';
import { createMetrics } from '../../src/observability/metrics.js';
import { tempDir } from '../support/agent-process.js';
import { ControlPlane } from '../support/control-plane.js';
import { runUploadChild, writeRandomFile } from '../support/upload-child.js';

const MiB = 1024 * 1024;
let cp: ControlPlane;
let dir: string;

beforeAll(async () => {
  // The upload child authenticates with 'test-key'; the server takes artifacts only for jobs of the key's location.
  cp = await ControlPlane.start({ apiKey: 'test-key' });
  for (const id of ['job-1', 'upload-job']) await cp.addJob({ id: `check-${id}`, checkType: 'API' }, { id });
  dir = tempDir('outpost-upload-');
});
afterEach(() => cp.clearFaults());
afterAll(async () => {
  await cp.close();
  rmSync(dir, { recursive: true, force: true });
});

function inProcess() {
  const lines: Array<Record<string, unknown>> = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString().split('\n').filter(Boolean)) lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  const logger = pino({ level: 'info' }, stream);
  const client = new ControlPlaneClient(
    { apiUrl: cp.url, apiKey: cp.apiKey, agentId: '6f1c7b2e-4f7d-4c1e-9a43-0d7f6c1d2a10', version: 'test', timeoutMs: 10_000, proxy: {} },
    createMetrics(),
  );
  const upload = (file: ArtifactFile) => uploadArtifact(client, file, { jobId: 'job-1', logger, signal: AbortSignal.timeout(60_000), authRetryMs: 1000 });
  return { lines, client, upload };
}

function fileOf(name: string, size: number): ArtifactFile {
  return { name, path: path.join(dir, name), contentType: 'application/octet-stream', size, role: 'asset' };
}

describe('artifact uploads', () => {
  it('streams a 149 MiB artifact byte for byte, with the RSS growing by less than 32 MB', async () => {
    const size = 149 * MiB;
    const file = path.join(dir, 'big.bin');
    const sha256 = writeRandomFile(file, size);
    try {
      const run = await runUploadChild(cp.url, file, 'big.bin');
      expect(run.out.ok, JSON.stringify(run.out)).toBe(true);
      const stored = [...cp.artifacts.values()].find((a) => a.name === 'big.bin');
      expect(stored).toMatchObject({ jobId: 'upload-job', size, received: size, sha256 });
      expect(run.out.asset).toMatchObject({ name: 'big.bin', size, contentType: 'application/octet-stream' });
      expect(run.out.asset?.url.startsWith(`${cp.url}/v1/artifacts/`)).toBe(true);
      const growthMb = (run.peakRss - run.baseRss) / 1e6;
      console.log(`149 MiB upload: ${((size / 1e6) / (run.ms / 1000)).toFixed(1)} MB/s, RSS growth ${growthMb.toFixed(1)} MB`);
      expect(growthMb).toBeLessThan(32);
      expect(cp.violations).toEqual([]);
    } finally {
      rmSync(file, { force: true });
    }
  }, 240_000);

  it('refuses an artifact over 150 MB before announcing it, saying which file, its size and the limit', async () => {
    const file = fileOf('huge.pcap', 0);
    writeFileSync(file.path, '');
    truncateSync(file.path, 151 * MiB);
    const { lines, client, upload } = inProcess();
    const before = cp.countRequests('artifacts');
    const out = await upload(file);
    await client.close();
    expect(out).toEqual({
      ok: false,
      attempts: 0,
      line: `Artifact huge.pcap (158,334,976 bytes) was not uploaded: it is larger than the 157,286,400-byte (150 MB) limit`,
    });
    expect(cp.countRequests('artifacts')).toBe(before);
    expect(lines.find((l) => l.msg === 'artifact not uploaded: larger than the limit')).toMatchObject({ jobId: 'job-1', file: 'huge.pcap', size: 158_334_976, limit: MAX_ARTIFACT_BYTES });
  });

  it('retries PUTs that fail with 5xx: a control plane failing the first two still receives the file', async () => {
    const file = fileOf('retry.bin', 3 * MiB);
    const sha256 = writeRandomFile(file.path, file.size);
    cp.inject({ route: 'upload', status: 500, count: 2 });
    const { lines, client, upload } = inProcess();
    const out = await upload(file);
    await client.close();
    expect(out.ok, JSON.stringify(out)).toBe(true);
    expect(out.attempts).toBe(3);
    const stored = [...cp.artifacts.values()].find((a) => a.name === 'retry.bin');
    expect(stored).toMatchObject({ size: file.size, received: file.size, sha256 });
    const failures = lines.filter((l) => l.msg === 'artifact upload attempt failed');
    expect(failures.map((l) => [l.attempt, l.status])).toEqual([
      [1, 500],
      [2, 500],
    ]);
    expect(failures[0]).toMatchObject({ jobId: 'job-1', file: 'retry.bin', size: file.size });
    expect(String(failures[0]?.body)).toContain('injected fault');
    expect(cp.violations).toEqual([]);
  });

  it('gives up on a PUT refused for good: one jobLog line, one error log line with status and body', async () => {
    const file = fileOf('refused.bin', 1000);
    writeRandomFile(file.path, file.size);
    cp.inject({ route: 'upload', status: 400, count: 5 });
    const { lines, client, upload } = inProcess();
    const out = await upload(file);
    await client.close();
    expect(out).toEqual({
      ok: false,
      attempts: 1,
      line: 'Artifact refused.bin (1,000 bytes) was not uploaded after 1 attempt: upload: HTTP 400 (Bad Request: injected fault)',
    });
    const failed = lines.find((l) => l.msg === 'artifact upload failed; the result is delivered without it');
    expect(failed).toMatchObject({ jobId: 'job-1', file: 'refused.bin', size: 1000, attempts: 1, status: 400 });
    expect(JSON.parse(String(failed?.body))).toMatchObject({ statusCode: 400, message: 'injected fault' });
  });
});
