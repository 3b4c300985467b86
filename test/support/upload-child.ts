// Runs the built artifact uploader (dist/control-plane/artifact-upload.js) in a child
// process of its own, so that its memory can be measured without the test
// runner's. The child first warms up like a running agent: one small upload
// (every code path loaded) and 600 small HTTP requests to a server of its
// own, as checks would make. That matters: undici parses HTTP with llhttp
// compiled to WebAssembly, and V8 tiers that code up (Liftoff → TurboFan)
// once it is hot, a one-time compile that briefly takes ~30 MB on a V8
// worker thread; in a fresh process it would land in the middle of the big
// upload and be counted as upload memory. Then the child takes its RSS as
// the baseline, uploads the big file while sampling RSS every 10 ms, and
// prints one JSON line.

import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { closeSync, openSync, writeSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { REPO } from './agent-process.js';

export interface UploadChildResult {
  out: { ok: boolean; line?: string; attempts: number; asset?: { name: string; url: string; size: number; contentType: string } };
  baseRss: number;
  peakRss: number;
  ms: number;
  /** The uploader's CPU (user + system) during the big upload. */
  cpuSeconds: number;
}

const dist = (file: string) => pathToFileURL(path.join(REPO, 'dist', file)).href;

const SCRIPT = `
import { writeFileSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import { request } from 'undici';
import { performance } from 'node:perf_hooks';
import pino from 'pino';
import { ControlPlaneClient } from '${dist('control-plane/client.js')}';
import { uploadArtifact } from '${dist('control-plane/artifact-upload.js')}';
import { createMetrics } from '${dist('observability/metrics.js')}';
const [apiUrl, file, name, warmup, warm] = process.argv.slice(1);
const logger = pino({ level: 'warn' }, pino.destination(2));
const client = new ControlPlaneClient({ apiUrl, apiKey: 'test-key', agentId: randomUUID(), version: 'test', timeoutMs: 30000, proxy: {} }, createMetrics());
const options = { jobId: 'upload-job', logger, signal: AbortSignal.timeout(300000), authRetryMs: 1000 };
const up = (path, name, size) => uploadArtifact(client, { name, path, contentType: 'application/octet-stream', size, role: 'asset' }, options);
writeFileSync(warmup, Buffer.alloc(1024 * 1024, 7));
await up(warmup, 'warmup.bin', 1024 * 1024);
const server = http.createServer((q, s) => { q.resume(); q.on('end', () => s.end('ok')); });
await new Promise((r) => server.listen(0, '127.0.0.1', r));
for (let i = 0; i < (warm === 'warm' ? 600 : 0); i++) {
  const r = await request('http://127.0.0.1:' + server.address().port + '/', { method: 'PUT', body: 'x'.repeat(1000) });
  await r.body.text();
}
await new Promise((r) => server.close(r));
globalThis.gc?.();
const baseRss = process.memoryUsage().rss;
let peakRss = baseRss;
const sampler = setInterval(() => { peakRss = Math.max(peakRss, process.memoryUsage().rss); }, 10);
const started = performance.now();
const cpuBefore = process.cpuUsage();
const out = await up(file, name, 0);
const ms = performance.now() - started;
const used = process.cpuUsage(cpuBefore);
const cpuSeconds = (used.user + used.system) / 1e6;
clearInterval(sampler);
peakRss = Math.max(peakRss, process.memoryUsage().rss);
await client.close();
process.stdout.write(JSON.stringify({ out, baseRss, peakRss, ms, cpuSeconds }) + '\\n');
`;

/** `warm: false` skips the 600 warm-up requests (a fresh process: the first upload pays V8's one-time compile). */
export function runUploadChild(apiUrl: string, file: string, name: string, opts: { warm?: boolean } = {}): Promise<UploadChildResult> {
  return new Promise((resolve, reject) => {
    const warmup = path.join(path.dirname(file), 'warmup.bin');
    const child = spawn(process.execPath, ['--expose-gc', '--input-type=module', '-e', SCRIPT, apiUrl, file, name, warmup, opts.warm === false ? 'cold' : 'warm'], {
      cwd: REPO,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => {
      stdout += c;
    });
    child.stderr.on('data', (c: Buffer) => {
      stderr += c;
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), 300_000);
    child.once('close', (code) => {
      clearTimeout(timer);
      try {
        resolve(JSON.parse(stdout.trim().split('\n').at(-1) ?? '') as UploadChildResult);
      } catch {
        reject(new Error(`upload child exited ${code}: ${stderr.slice(-2000)} ${stdout.slice(-500)}`));
      }
    });
  });
}

/** Writes `size` random bytes to `file` in 1 MiB pieces; returns their sha256. */
export function writeRandomFile(file: string, size: number): string {
  const hash = createHash('sha256');
  const fd = openSync(file, 'w');
  try {
    for (let left = size; left > 0; ) {
      const chunk = randomBytes(Math.min(left, 1024 * 1024));
      hash.update(chunk);
      writeSync(fd, chunk);
      left -= chunk.length;
    }
  } finally {
    closeSync(fd);
  }
  return hash.digest('hex');
}
