// `npm run bench`: artifact upload throughput, CPU and memory, beside curl.
// A 150 MB (157,286,400 bytes: the protocol's limit) artifact goes to the
// real server on loopback (test/support/control-plane.ts, past its proxy, so
// that only the uploader and the server are measured; the stored file is
// hashed each time), in alternating rounds: the built uploader in a child
// process of its own, warmed up as a running agent is (see
// test/support/upload-child.ts), then curl (Debian's, `--upload-file`, the
// same PUT to an upload URL of its own) — agent, curl, curl, agent — and last
// once more the uploader in a fresh process (cold). Each row prints MB/s, the
// uploader's CPU per 100 MB and peak RSS, and the other processes' share of
// the machine's CPU meanwhile (test/bench/cpu-share.ts), so that a noisy
// round is visible. It asserts only that the bytes arrived intact, never a
// speed.

import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { request } from 'undici';
import { expect, test } from 'vitest';
import { MAX_ARTIFACT_BYTES } from '../../src/control-plane/artifact-upload.js';
import { PROTOCOL_ROUTES } from '../../src/core/protocol.js';
import { tempDir } from '../support/agent-process.js';
import { ControlPlane } from '../support/control-plane.js';
import { runUploadChild, writeRandomFile } from '../support/upload-child.js';
import { markOthers, othersSince } from './cpu-share.js';
import { ensureDebianTools } from './install.js';

const execFileAsync = promisify(execFile);
const log = (line: string) => process.stdout.write(`[bench upload] ${line}\n`);
const mb = (bytes: number) => (bytes / 1e6).toFixed(1);
const API_KEY = 'test-key';
const JOB = 'upload-job';

interface Row {
  label: string;
  ms: number;
  cpuSeconds: number;
  peakRssBytes: number;
  otherShare: number;
}

function vmHwmBytes(pid: number): number {
  try {
    const kb = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
    return Number(kb ?? 0) * 1024;
  } catch {
    return 0;
  }
}

/**
 * curl PUTs the file to an upload URL the server handed out for it. Run under
 * `sh -c '…; times'`, whose last line is its children's user and system CPU;
 * its peak RSS is sampled from /proc while it runs (VmHWM).
 */
async function curlUpload(cp: ControlPlane, file: string, name: string): Promise<{ ms: number; cpuSeconds: number; peakRssBytes: number; id: string }> {
  const created = await request(`${cp.serverUrl}${PROTOCOL_ROUTES.artifacts}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json', 'x-agent-id': 'bench-curl' },
    body: JSON.stringify({ jobId: JOB, name, contentType: 'application/octet-stream', size: MAX_ARTIFACT_BYTES }),
  });
  const slot = (await created.body.json()) as { uploadUrl: string; url: string };
  expect(created.statusCode, JSON.stringify(slot)).toBe(201);
  const script = 'curl -sS --fail -o /dev/null -T "$1" -H "$2" -H "content-type: application/octet-stream" -H "x-agent-id: bench-curl" "$3"; status=$?; times; exit $status';
  const started = performance.now();
  // promisify(execFile) keeps the child on the promise: its pid is what the sampler below needs.
  const finished = execFileAsync('sh', ['-c', script, 'sh', file, `authorization: Bearer ${API_KEY}`, slot.uploadUrl]);
  const child = finished.child;
  // The curl process is the shell's child: find it, then sample its peak.
  let peakRssBytes = 0;
  const sampler = setInterval(() => {
    try {
      const children = readFileSync(`/proc/${child.pid}/task/${child.pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean);
      for (const pid of children) peakRssBytes = Math.max(peakRssBytes, vmHwmBytes(Number(pid)));
    } catch {
      // The shell is gone: the upload is over.
    }
  }, 10);
  const { stdout } = await finished.finally(() => clearInterval(sampler));
  const ms = performance.now() - started;
  // `times`: the shell's own line, then its children's "XmY.YYYs XmY.YYYs" (user, system).
  const seconds = (text: string) => {
    const m = /(\d+)m([\d.]+)s/.exec(text);
    return m ? Number(m[1]) * 60 + Number(m[2]) : 0;
  };
  const childrenLine = stdout.trim().split('\n').at(-1) ?? '';
  const [user = '', system = ''] = childrenLine.trim().split(/\s+/);
  return { ms, cpuSeconds: seconds(user) + seconds(system), peakRssBytes, id: slot.url.split('/').at(-1) ?? '' };
}

test('artifact upload: 150 MB beside curl, throughput, CPU and RSS', async () => {
  ensureDebianTools([{ binary: 'curl', pkg: 'curl' }]);
  const cp = await ControlPlane.start({ apiKey: API_KEY });
  await cp.addJob({ id: 'upload-check', checkType: 'API' }, { id: JOB });
  const dir = tempDir('outpost-bench-upload-');
  const file = path.join(dir, 'artifact.bin');
  try {
    const sha256 = writeRandomFile(file, MAX_ARTIFACT_BYTES);
    const stored = async (id: string) => expect(await cp.storedArtifact(id)).toMatchObject({ size: MAX_ARTIFACT_BYTES, received: MAX_ARTIFACT_BYTES, sha256 });
    const rows: Row[] = [];
    const agentRound = async (label: string, warm: boolean, name: string) => {
      const mark = markOthers();
      const run = await runUploadChild(cp.serverUrl, file, name, { warm });
      const others = othersSince(mark);
      expect(run.out.ok, JSON.stringify(run.out)).toBe(true);
      await stored(run.out.asset?.url.split('/').at(-1) ?? '');
      rows.push({ label, ms: run.ms, cpuSeconds: run.cpuSeconds, peakRssBytes: run.peakRss, otherShare: others.otherShare });
      log(`${label}: ${mb(MAX_ARTIFACT_BYTES / (run.ms / 1000))} MB/s (RSS ${mb(run.baseRss)} → peak ${mb(run.peakRss)} MB)`);
    };
    const curlRound = async (label: string, name: string) => {
      const mark = markOthers();
      const run = await curlUpload(cp, file, name);
      const others = othersSince(mark);
      await stored(run.id);
      rows.push({ label, ms: run.ms, cpuSeconds: run.cpuSeconds, peakRssBytes: run.peakRssBytes, otherShare: others.otherShare });
      log(`${label}: ${mb(MAX_ARTIFACT_BYTES / (run.ms / 1000))} MB/s`);
    };
    await agentRound('agent, warm, round 1', true, 'agent-1.bin');
    await curlRound('curl, round 1', 'curl-1.bin');
    await curlRound('curl, round 2', 'curl-2.bin');
    await agentRound('agent, warm, round 2', true, 'agent-2.bin');
    await agentRound('agent, cold (fresh process)', false, 'agent-cold.bin');

    const rate = (r: Row) => MAX_ARTIFACT_BYTES / 1e6 / (r.ms / 1000);
    const cpuPer100 = (r: Row) => (r.cpuSeconds / (MAX_ARTIFACT_BYTES / 1e8)).toFixed(3);
    log(`${MAX_ARTIFACT_BYTES.toLocaleString('en-US')} bytes to the real server on loopback (sha256 checked each time):`);
    log(`  ${'uploader'.padEnd(30)} ${'MB/s'.padStart(6)} ${'CPU s/100 MB'.padStart(13)} ${'peak RSS MB'.padStart(12)} ${'others % CPU'.padStart(13)}`);
    for (const r of rows) {
      log(`  ${r.label.padEnd(30)} ${rate(r).toFixed(0).padStart(6)} ${cpuPer100(r).padStart(13)} ${mb(r.peakRssBytes).padStart(12)} ${(r.otherShare * 100).toFixed(0).padStart(13)}`);
    }
    const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
    const warm = rows.filter((r) => r.label.startsWith('agent, warm'));
    const curl = rows.filter((r) => r.label.startsWith('curl'));
    log(
      `  agent (warm) / curl: ${(mean(warm.map(rate)) / mean(curl.map(rate))).toFixed(2)}× the MB/s, ` +
        `${(mean(warm.map((r) => r.cpuSeconds)) / Math.max(0.001, mean(curl.map((r) => r.cpuSeconds)))).toFixed(2)}× the CPU (means of 2 rounds each)`,
    );
    log('  (a cold process also pays V8\'s one-time tier-up of undici\'s WebAssembly HTTP parser, ~30 MB for a moment)');
    expect(cp.violations).toEqual([]);
  } finally {
    await cp.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
