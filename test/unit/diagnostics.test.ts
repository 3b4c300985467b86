// Diagnostics units: failure classes, traceroute parsing and summaries, the
// capture filter, artifact bundles (tar), pcap masking, local artifact
// folders and their retention, and the DIAGNOSTICS settings.

import { BAD_RESPONSE_CODE, errorCode } from '../../src/core/errors.js';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, utimesSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import pino from 'pino';
import { LocalArtifacts, localArtifactsRoot } from '../../src/artifacts/store.js';
import { scrubArtifactText, scrubPcapFile } from '../../src/artifacts/scrub.js';
import { ArtifactWriter, safeSegment } from '../../src/artifacts/writer.js';
import { ConfigError, configFromEnv } from '../../src/config.js';
import { classifyFailure, isNetworkFailure } from '../../src/diagnostics/failure-class.js';
import { captureFilter, tcpdumpComplaint } from '../../src/diagnostics/pcap.js';
import { locateTool } from '../../src/diagnostics/tools.js';
import { parseTracepath, parseTraceroute, summarizeTrace, type TraceResult } from '../../src/diagnostics/traceroute.js';
import { Scrubber } from '../../src/secrets/scrubber.js';
import type { CheckDefinition } from '../../src/checks/definition.js';
import type { Executor } from '../../src/checks/executor.js';
import { NO_RETRIES } from '../../src/checks/retry.js';
import { createMetrics } from '../../src/observability/metrics.js';
import { ABANDON_AFTER_MS } from '../../src/jobs/attempt.js';
import { JobQueue } from '../../src/jobs/queue.js';
import { tempDir } from '../support/agent-process.js';

describe('failure classes', () => {
  it('counts DNS, refused, reset, timeout, TLS and unreachable as network failures', () => {
    expect(classifyFailure('ENOTFOUND')).toEqual({ class: 'network', kind: 'dns' });
    expect(classifyFailure('EAI_AGAIN')).toEqual({ class: 'network', kind: 'dns' });
    expect(classifyFailure('ECONNREFUSED')).toEqual({ class: 'network', kind: 'refused' });
    expect(classifyFailure('ECONNRESET')).toEqual({ class: 'network', kind: 'reset' });
    expect(classifyFailure('UND_ERR_SOCKET')).toEqual({ class: 'network', kind: 'reset' });
    // A response undici will not read (an unsolicited 100 Continue) is the server's, not the network's.
    expect(classifyFailure(BAD_RESPONSE_CODE)).toEqual({ class: 'http' });
    const refused = Object.assign(new Error('bad response'), { code: 'UND_ERR_SOCKET' });
    expect(errorCode(refused)).toBe(BAD_RESPONSE_CODE);
    expect(errorCode(Object.assign(new Error('other side closed'), { code: 'UND_ERR_SOCKET' }))).toBe('UND_ERR_SOCKET');
    expect(classifyFailure('ETIMEDOUT')).toEqual({ class: 'network', kind: 'timeout' });
    expect(classifyFailure('EHOSTUNREACH')).toEqual({ class: 'network', kind: 'unreachable' });
    expect(classifyFailure('ENETUNREACH')).toEqual({ class: 'network', kind: 'unreachable' });
    for (const code of ['CERT_HAS_EXPIRED', 'ERR_TLS_CERT_ALTNAME_INVALID', 'DEPTH_ZERO_SELF_SIGNED_CERT', 'ERR_SSL_WRONG_VERSION_NUMBER']) {
      expect(classifyFailure(code)).toEqual({ class: 'network', kind: 'tls' });
    }
  });

  it('leaves HTTP-level failures and a timeout after the response began to the HTTP side', () => {
    expect(classifyFailure(undefined)).toBeUndefined();
    expect(classifyFailure('ERR_SOMETHING_ELSE')).toEqual({ class: 'http' });
    expect(isNetworkFailure('ETIMEDOUT', true)).toBe(false);
    expect(isNetworkFailure('ECONNRESET', true)).toBe(true);
    expect(isNetworkFailure(undefined)).toBe(false);
  });
});

const TRACEPATH = ` 1?: [LOCALHOST]                      pmtu 1500
 1:  10.213.201.1                                          0.175ms 
 1:  10.213.201.1                                          0.007ms 
 2:  no reply
 3:  no reply
 2:  10.213.202.2                                          0.082ms reached
     Resume: pmtu 1500 hops 2 back 2 
`;

const TRACEROUTE = `traceroute to 10.213.202.2 (10.213.202.2), 15 hops max, 60 byte packets
 1  10.213.201.1  0.040 ms *
 2  * *
 3  10.0.0.9  1.0 ms !H  10.0.0.8  2.500 ms
 4  * *
 5  * *
`;

describe('traceroute output', () => {
  it('parses tracepath into hops with addresses and RTTs', () => {
    expect(parseTracepath(TRACEPATH)).toEqual([
      { hop: 1, address: '10.213.201.1', rttMs: [0.175, 0.007] },
      { hop: 2, address: '10.213.202.2', rttMs: [0.082], notes: ['reached'] },
      { hop: 3, address: null, rttMs: [] },
    ]);
  });

  it('parses traceroute, with silent hops, several addresses per hop and annotations', () => {
    expect(parseTraceroute(TRACEROUTE)).toEqual([
      { hop: 1, address: '10.213.201.1', rttMs: [0.04] },
      { hop: 2, address: null, rttMs: [] },
      { hop: 3, address: '10.0.0.9', rttMs: [1], notes: ['!H'] },
      { hop: 3, address: '10.0.0.8', rttMs: [2.5] },
      { hop: 4, address: null, rttMs: [] },
      { hop: 5, address: null, rttMs: [] },
    ]);
  });

  it('sums a trace up in a few jobLog lines, folding runs of silent hops', () => {
    const hops = parseTraceroute(
      `${Array.from({ length: 15 }, (_, i) => (i === 0 ? ' 1  10.213.201.1  0.040 ms  0.006 ms' : `${String(i + 1).padStart(2)}  * *`)).join('\n')}\n`,
    );
    const trace: TraceResult = { tool: 'traceroute -T', command: [], target: '10.213.202.2', port: 8080, hops, reached: false, stoppedEarly: false, text: '' };
    expect(summarizeTrace(trace)).toEqual([
      'Traceroute to 10.213.202.2 (TCP port 8080): not reached (last reply from hop 1, 10.213.201.1)',
      '  1  10.213.201.1  0.04 ms 0.01 ms',
      '  2-15  no reply',
    ]);
    const long = Array.from({ length: 15 }, (_, i) => ({ hop: i + 1, address: `10.0.${i}.1`, rttMs: [1] }));
    const lines = summarizeTrace({ ...trace, hops: long, reached: true, target: '10.0.14.1', tool: 'tracepath' });
    expect(lines.length).toBe(8);
    expect(lines[0]).toBe('Traceroute to 10.0.14.1 (UDP, tracepath): reached in 15 hops');
    expect(lines).toContain('  … (15 hops in all: see the traceroute artifact)');
    expect(lines.at(-1)).toBe('  15  10.0.14.1  1.00 ms');
  });
});

describe('packet capture', () => {
  it('filters on the target address and port, DNS and ICMP errors', () => {
    expect(captureFilter('10.0.0.2', 8080)).toMatch(/^\(host 10\.0\.0\.2 and port 8080\) or port 53 or \(icmp and /);
    expect(captureFilter(undefined, 8080)).toMatch(/^port 53 or /);
  });

  it('turns tcpdump complaints into one line', () => {
    expect(tcpdumpComplaint("tcpdump: c0: You don't have permission to perform this capture on that device\n(socket: Operation not permitted)\n")).toBe(
      "c0: You don't have permission to perform this capture on that device; socket: Operation not permitted",
    );
  });

  it('finds tools through TCPDUMP_PATH / TRACEPATH_PATH before PATH', () => {
    expect(locateTool('tcpdump', { tcpdump: '/opt/x/tcpdump', searchPath: '' })).toEqual({ path: '/opt/x/tcpdump', from: 'TCPDUMP_PATH' });
    expect(locateTool('tracepath', { tracepath: '/opt/x/tracepath' })).toEqual({ path: '/opt/x/tracepath', from: 'TRACEPATH_PATH' });
  });
});

/** A classic little-endian pcap (Ethernet) holding these packets. */
function pcap(packets: Buffer[]): Buffer {
  const header = Buffer.alloc(24);
  header.writeUInt32LE(0xa1b2c3d4, 0);
  header.writeUInt16LE(2, 4);
  header.writeUInt16LE(4, 6);
  header.writeUInt32LE(65535, 16);
  header.writeUInt32LE(1, 20);
  const records = packets.map((data, i) => {
    const record = Buffer.alloc(16);
    record.writeUInt32LE(1_700_000_000 + i, 0);
    record.writeUInt32LE(data.length, 8);
    record.writeUInt32LE(data.length, 12);
    return Buffer.concat([record, data]);
  });
  return Buffer.concat([header, ...records]);
}

describe('artifact scrubbing', () => {
  const secret = 's3cr3t-t0ken-value';
  const scrubber = Scrubber.of([secret]);

  it('scrubs text artifacts with the job scrubber', () => {
    expect(scrubArtifactText(`# target https://${secret}@host:443\n`, scrubber)).toBe('# target https://*****@host:443\n');
    expect(scrubArtifactText('nothing here', undefined)).toBe('nothing here');
  });

  it('masks a secret in a pcap packet in place, keeping every length', async () => {
    const dir = tempDir();
    const file = path.join(dir, 'capture.pcap');
    const headers = Buffer.alloc(54, 0x11);
    const leaky = Buffer.concat([headers, Buffer.from(`GET /?token=${secret} HTTP/1.1\r\nHost: x\r\n\r\n`)]);
    const clean = Buffer.concat([headers, Buffer.from('HTTP/1.1 200 OK\r\n\r\n')]);
    const original = pcap([leaky, clean]);
    writeFileSync(file, original);
    expect(await scrubPcapFile(file, scrubber)).toBe(1);
    const masked = readFileSync(file);
    expect(masked.length).toBe(original.length);
    expect(masked.includes(Buffer.from(secret))).toBe(false);
    // Headers and the text up to the secret (less the 5 bytes of slack) are untouched; the rest of that packet is masked.
    const start = 24 + 16;
    expect(masked.subarray(start, start + 54 + 6).equals(original.subarray(start, start + 54 + 6))).toBe(true);
    expect(masked.subarray(start + leaky.length - 4, start + leaky.length).toString()).toBe('****');
    // The next packet is as it was.
    expect(masked.subarray(start + leaky.length).equals(original.subarray(start + leaky.length))).toBe(true);
    expect(await scrubPcapFile(file, Scrubber.of([]))).toBe(0);
  });
});

describe('artifact files', () => {
  it('bundles text files into a .tar.gz that tar lists, and removes the loose files', async () => {
    const writer = new ArtifactWriter(path.join(tempDir(), 'job', '1'));
    const file = await writer.bundle('traceroute.tar.gz', { 'traceroute.txt': 'hops\n', 'traceroute.json': '{"hops":[]}\n' });
    expect(file).toMatchObject({ name: 'traceroute.tar.gz', contentType: 'application/gzip', role: 'asset' });
    expect(file.size).toBeGreaterThan(0);
    expect(execFileSync('tar', ['-tzf', file.path], { encoding: 'utf8' }).split('\n').filter(Boolean).sort()).toEqual(['traceroute.json', 'traceroute.txt']);
    expect(readdirSync(writer.dir)).toEqual(['traceroute.tar.gz']);
    expect(execFileSync('tar', ['-xzOf', file.path, 'traceroute.json'], { encoding: 'utf8' })).toBe('{"hops":[]}\n');
  });

  it('never takes a job id as a path', () => {
    expect(safeSegment('2f1c-uuid')).toBe('2f1c-uuid');
    expect(safeSegment('../../etc')).toMatch(/^job-[0-9a-f]{32}$/);
    expect(safeSegment('a/b')).toMatch(/^job-[0-9a-f]{32}$/);
    expect(() => new ArtifactWriter(tempDir()).pathFor('../x')).rejects.toThrow(/not a plain file name/);
  });

  it('puts local artifacts beside the results file, or in STATE_DIR/artifacts', () => {
    expect(localArtifactsRoot('/data/run/results.jsonl', '/var/lib/outpost')).toBe('/data/run/results-artifacts');
    expect(localArtifactsRoot(undefined, '/var/lib/outpost')).toBe('/var/lib/outpost/artifacts');
  });

  it('keeps the newest job folders of a local artifacts folder', async () => {
    const root = tempDir();
    const store = new LocalArtifacts(root, 2);
    for (const [i, name] of ['old-1', 'old-2', 'old-3'].entries()) {
      mkdirSync(path.join(root, name, '1'), { recursive: true });
      const when = new Date(Date.now() - (10 - i) * 60_000);
      utimesSync(path.join(root, name), when, when);
    }
    const writer = new ArtifactWriter(store.directory('new-job', 1));
    writeFileSync(await writer.pathFor('capture.pcap'), 'x');
    const file = await writer.attach('capture.pcap', 'application/vnd.tcpdump.pcap', 'pcap');
    const published = await store.publish('new-job', writer.dir, [file], new AbortController().signal, pino({ level: 'silent' }));
    expect(published.pcapDataUrl).toBe(`file://${path.join(root, 'new-job', '1', 'capture.pcap')}`);
    expect(published.assets).toEqual([{ name: 'capture.pcap', url: published.pcapDataUrl, size: 1, contentType: 'application/vnd.tcpdump.pcap' }]);
    expect(readdirSync(root).sort()).toEqual(['new-job', 'old-3']);
    expect(existsSync(file.path)).toBe(true);
  });
});

describe('DIAGNOSTICS and ARTIFACT_UPLOAD_TIMEOUT_SECONDS', () => {
  it('defaults to on and 300 s, and rejects bad values with one line', () => {
    expect(configFromEnv({}, 'local')).toMatchObject({ diagnostics: true, artifactUploadTimeoutSeconds: 300 });
    expect(configFromEnv({ DIAGNOSTICS: 'OFF', ARTIFACT_UPLOAD_TIMEOUT_SECONDS: '60' }, 'local')).toMatchObject({ diagnostics: false, artifactUploadTimeoutSeconds: 60 });
    expect(() => configFromEnv({ DIAGNOSTICS: 'maybe' }, 'local')).toThrow(new ConfigError('DIAGNOSTICS="maybe" is invalid: must be on or off'));
    expect(() => configFromEnv({ ARTIFACT_UPLOAD_TIMEOUT_SECONDS: '5' }, 'local')).toThrow(/ARTIFACT_UPLOAD_TIMEOUT_SECONDS="5" is invalid: must be an integer from 10 to 3600/);
  });
});

describe('the queue and the diagnostics window', () => {
  it('lets an executor diagnose past the hard cap, and publishes its artifacts into the result', async () => {
    const root = tempDir();
    const executor: Executor = {
      checkType: 'URL',
      member: 'apiCheckResult',
      limits: { degradedMs: 50, maxMs: 100, capMs: 200 },
      assertionSources: [],
      parseRequest: () => ({}),
      target: () => 'test target',
      async run(_check, ctx) {
        const started = new Date();
        // The request "times out" at the cap…
        await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve, { once: true }));
        // …and diagnostics then take longer than the queue's usual 5 s grace for an aborted executor.
        const window = ctx.diagnostics?.begin();
        expect(window?.aborted).toBe(false);
        await new Promise((resolve) => setTimeout(resolve, ABANDON_AFTER_MS + 500));
        const writer = ctx.diagnostics?.artifacts as ArtifactWriter;
        writeFileSync(await writer.pathFor('capture.pcap'), 'pcap');
        await writer.attach('capture.pcap', 'application/vnd.tcpdump.pcap', 'pcap');
        ctx.jobLog.push('diagnosed');
        return {
          startedAt: started,
          stoppedAt: new Date(),
          responseTime: 200,
          error: 'timed out',
          errorCode: 'ETIMEDOUT',
          assertionsFailed: false,
          member: 'apiCheckResult',
          detail: { requestError: 'timed out', jobLog: ctx.jobLog, jobAssets: [], pcapDataUrl: null },
        };
      },
    };
    const check: CheckDefinition = {
      id: 'c',
      name: 'c',
      checkType: 'URL',
      frequency: 60,
      degradedResponseTime: 50,
      maxResponseTime: 100,
      shouldFail: false,
      assertions: [],
      retryStrategy: NO_RETRIES,
      request: {},
      environmentVariables: [],
    };
    const logger = pino({ level: 'silent' });
    const queue = new JobQueue(1, createMetrics(), { responseBodyLimitBytes: 0, userAgent: 'test' }, { artifacts: new LocalArtifacts(root) });
    const completion = await queue.submit({
      jobId: 'job-1',
      identity: { checkRunId: null, sequenceId: null, runLocation: 'local' },
      checkIdentity: { id: 'c', name: 'c', checkType: 'URL' },
      runnable: { check, executor, target: 'test target' },
      variables: [],
      triggerSource: null,
      logger,
    });
    const detail = completion.result?.apiCheckResult as { jobLog: string[]; pcapDataUrl: string; jobAssets: unknown[]; requestError: string };
    expect(detail.requestError).toBe('timed out');
    expect(detail.jobLog).toEqual(['diagnosed']);
    expect(detail.pcapDataUrl).toBe(`file://${path.join(root, 'job-1', '1', 'capture.pcap')}`);
    expect(detail.jobAssets).toHaveLength(1);
  }, 15_000);
});
