// `npm run bench`: artifact upload throughput and memory. A
// 150 MB (157,286,400 bytes: the protocol's limit) artifact is uploaded by
// the built uploader, in a child process of its own, to the real server on
// loopback (test/support/control-plane.ts, past its proxy, so that only the
// uploader and the server are measured; the stored file is hashed); twice after the warm-up a
// running agent has had (see test/support/upload-child.ts), and once in a
// fresh process. It prints MB/s and the uploader's RSS (baseline, peak,
// growth); it asserts only that the bytes arrived intact, never a speed.

import { rmSync } from 'node:fs';
import path from 'node:path';
import { expect, test } from 'vitest';
import { MAX_ARTIFACT_BYTES } from '../../src/control-plane/artifact-upload.js';
import { tempDir } from '../support/agent-process.js';
import { ControlPlane } from '../support/control-plane.js';
import { runUploadChild, writeRandomFile } from '../support/upload-child.js';

const log = (line: string) => process.stdout.write(`[bench upload] ${line}\n`);
const mb = (bytes: number) => (bytes / 1e6).toFixed(1);

test('artifact upload: 150 MB, throughput and RSS', async () => {
  // The upload child authenticates with 'test-key' and uploads for job 'upload-job'.
  const cp = await ControlPlane.start({ apiKey: 'test-key' });
  await cp.addJob({ id: 'upload-check', checkType: 'API' }, { id: 'upload-job' });
  const dir = tempDir('outpost-bench-upload-');
  const file = path.join(dir, 'artifact.bin');
  try {
    const sha256 = writeRandomFile(file, MAX_ARTIFACT_BYTES);
    const rows: string[] = [];
    for (const [label, warm] of [
      ['warm #1', true],
      ['warm #2', true],
      ['cold (fresh process)', false],
    ] as const) {
      const run = await runUploadChild(cp.serverUrl, file, 'artifact.bin', { warm });
      expect(run.out.ok, JSON.stringify(run.out)).toBe(true);
      const stored = await cp.storedArtifact(run.out.asset?.url.split('/').at(-1) ?? '');
      expect(stored).toMatchObject({ size: MAX_ARTIFACT_BYTES, received: MAX_ARTIFACT_BYTES, sha256 });
      rows.push(
        `${label.padEnd(22)} ${(MAX_ARTIFACT_BYTES / 1e6 / (run.ms / 1000)).toFixed(0).padStart(5)} MB/s   RSS ${mb(run.baseRss)} → peak ${mb(run.peakRss)} MB (+${mb(run.peakRss - run.baseRss)} MB)`,
      );
    }
    log(`${MAX_ARTIFACT_BYTES.toLocaleString('en-US')} bytes to the real server on loopback (sha256 checked each time):`);
    for (const row of rows) log(`  ${row}`);
    log('  (a cold process also pays V8\'s one-time tier-up of undici\'s WebAssembly HTTP parser, ~30 MB for a moment)');
    expect(cp.violations).toEqual([]);
  } finally {
    await cp.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
