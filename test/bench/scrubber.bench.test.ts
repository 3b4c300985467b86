// `npm run bench`: the secrets scrubber's throughput over a 10 MB
// body with 1, 100 and 1,000 secrets, side by side with a naive loop of
// `replaceAll` calls over the same patterns (every encoded form of every
// secret, longest first), in the same process and run.
//
// MB is 10^6 bytes; the body is ASCII, so characters and bytes are the same.
// Each figure is the median of several runs after a warm-up. The naive loop
// at 1,000 secrets would take minutes: it is timed on a sample of its
// patterns and extrapolated linearly (its cost is one full pass per pattern),
// and says so. Like every benchmark here it asserts correctness (the scrubber
// and the naive loop produce the same text), never a speed.
//
// BENCH_SCRUBBER_MB changes the body size and BENCH_SCRUBBER_COUNTS (e.g. "100")
// the secret counts, for a quick try. The machine's load average is printed with
// the figures: on a shared 2-core machine a busy neighbour halves them. A second
// table times a whole result as it leaves the queue: the deep scrub and
// JSON.stringify it replaced, and scrubResultLine.

import os from 'node:os';
import { performance } from 'node:perf_hooks';
import { expect, test } from 'vitest';
import type { CheckResultEntry } from '../../src/core/result-entry.js';
import { scrubResult, scrubResultLine } from '../../src/secrets/policy.js';
import { REDACTED, Scrubber, secretForms } from '../../src/secrets/scrubber.js';
import { mulberry32 } from '../support/random.js';
import { cpuShareWindow } from './cpu-share.js';

const BODY_MB = Number(process.env.BENCH_SCRUBBER_MB ?? 10);
const BODY_BYTES = Math.round(BODY_MB * 1_000_000);
const SECRET_COUNTS = (process.env.BENCH_SCRUBBER_COUNTS ?? '1,100,1000').split(',').map(Number);
/** Most replaceAll passes timed for real; beyond this the naive figure is extrapolated. */
const NAIVE_SAMPLE = 1000;
const TARGET_RATIO_AT_100 = 20;
const TARGET_MBPS_AT_100 = 200;

const ALNUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
const WORDS = ['status', 'ok', 'error', 'request', 'response', 'header', 'value', 'user', 'token', 'id', 'items', 'name', 'total', 'page'];

function token(random: () => number, length: number, alphabet = ALNUM): string {
  let out = '';
  for (let i = 0; i < length; i++) out += alphabet[Math.floor(random() * alphabet.length)];
  return out;
}

function makeSecrets(count: number, random: () => number): string[] {
  return Array.from({ length: count }, (_, i) => `${token(random, 20 + (i % 13))}${'-_.!$'[i % 5]}${token(random, 4)}`);
}

/**
 * A JSON-ish body: records of words, numbers, random alphanumeric tokens and
 * base64-looking blobs (the scanner's worst case: almost every character can
 * start some pattern), with each secret embedded a few times.
 */
function makeBody(secrets: string[], random: () => number): string {
  const parts: string[] = [];
  let size = 0;
  const embedEvery = Math.max(1, Math.floor(BODY_BYTES / 200 / Math.max(1, secrets.length * 3)));
  let record = 0;
  while (size < BODY_BYTES) {
    const word = WORDS[record % WORDS.length] as string;
    let line = `{"${word}":"${token(random, 8 + (record % 24))}","n":${Math.floor(random() * 1e6)},"blob":"${token(random, 40, `${ALNUM}+/`)}=="`;
    if (secrets.length > 0 && record % embedEvery === 0) line += `,"secret":"${secrets[Math.floor(record / embedEvery) % secrets.length]}"`;
    line += '}\n';
    parts.push(line);
    size += line.length;
    record++;
  }
  // As a response body arrives: decoded from bytes, one flat string.
  return Buffer.from(parts.join('').slice(0, BODY_BYTES), 'latin1').toString('latin1');
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] as number;
}

function time(fn: () => unknown, runs: number): number {
  fn();
  const times: number[] = [];
  for (let i = 0; i < runs; i++) {
    const start = performance.now();
    fn();
    times.push(performance.now() - start);
  }
  return median(times);
}

function naive(body: string, patterns: string[]): string {
  let out = body;
  for (const p of patterns) out = out.replaceAll(p, REDACTED);
  return out;
}

interface Row {
  secrets: number;
  patterns: number;
  compileMs: number;
  textMBps: number;
  bufferMBps: number;
  naiveMBps: number;
  naiveExtrapolated: boolean;
  ratio: number;
  rawOnlyMBps: number;
  /** The other processes' share of the machine's CPU while this row ran. */
  otherShare: number;
}

test('scrubber throughput: one pass for all secrets vs a naive replaceAll loop', () => {
  const rows: Row[] = [];
  for (const count of SECRET_COUNTS) {
    const random = mulberry32(count);
    const secrets = makeSecrets(count, random);
    const body = makeBody(secrets, random);
    const buffer = Buffer.from(body, 'latin1');

    const share = cpuShareWindow();
    const compileStart = performance.now();
    const scrubber = Scrubber.of(secrets);
    const compileMs = performance.now() - compileStart;
    const patterns = [...new Set(secrets.flatMap((s) => secretForms(s)))].sort((a, b) => b.length - a.length);
    expect(scrubber.patternCount).toBe(patterns.length);

    const scrubbed = scrubber.scrubText(body);
    expect(scrubbed).not.toBe(body);
    for (const s of secrets) expect(scrubbed.includes(s), `secret ${s} left in the output`).toBe(false);
    const textMs = time(() => scrubber.scrubText(body), 5);
    const bufferMs = time(() => scrubber.scrubBuffer(buffer), 3);

    const sample = patterns.length <= NAIVE_SAMPLE ? patterns : patterns.filter((_, i) => i % Math.ceil(patterns.length / NAIVE_SAMPLE) === 0);
    const naiveExtrapolated = sample.length < patterns.length;
    if (!naiveExtrapolated) expect(naive(body, patterns)).toBe(scrubbed);
    const naiveMs = (time(() => naive(body, sample), count === 1 ? 5 : 1) * patterns.length) / sample.length;
    // For scale: a naive loop over the raw values only (it misses every encoded form).
    const rawSample = secrets.slice(0, Math.min(secrets.length, 200));
    const rawOnlyMs = (time(() => naive(body, rawSample), 1) * secrets.length) / rawSample.length;

    const mb = body.length / 1e6;
    rows.push({
      secrets: count,
      patterns: patterns.length,
      compileMs,
      textMBps: mb / (textMs / 1000),
      bufferMBps: mb / (bufferMs / 1000),
      naiveMBps: mb / (naiveMs / 1000),
      naiveExtrapolated,
      ratio: naiveMs / textMs,
      rawOnlyMBps: mb / (rawOnlyMs / 1000),
      otherShare: share(),
    });
  }

  const fmt = (n: number, digits = 1) => n.toFixed(digits).padStart(9);
  const lines = [
    '',
    `scrubber benchmark: ${BODY_MB} MB body (JSON-ish, ASCII), all encoded forms of each secret, Node ${process.version}, load average ${os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}`,
    '  secrets  patterns  compile ms  scrubText MB/s  scrubBuffer MB/s  naive replaceAll MB/s  ratio     (naive, raw values only MB/s)  other processes',
    ...rows.map(
      (r) =>
        `  ${String(r.secrets).padStart(7)}  ${String(r.patterns).padStart(8)}  ${fmt(r.compileMs, 2)}   ${fmt(r.textMBps)}       ${fmt(r.bufferMBps)}         ${fmt(r.naiveMBps, 2)}${r.naiveExtrapolated ? '*' : ' '}        ${fmt(r.ratio)}×    (${fmt(r.rawOnlyMBps, 2)})  ${(r.otherShare * 100).toFixed(0).padStart(5)} % of the CPU`,
    ),
    rows.some((r) => r.naiveExtrapolated) ? `  * timed on ${NAIVE_SAMPLE} of the patterns and extrapolated linearly (the raw-only loop: on 200 values)` : '',
    '  ratio = naive loop over the same patterns (every encoded form, longest first) ÷ scrubText; the raw-only loop is for scale, it scrubs far less',
    `  target at 100 secrets: ≥ ${TARGET_RATIO_AT_100}× the naive loop and ≥ ${TARGET_MBPS_AT_100} MB/s`,
    '',
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
});

/** A URL check's result as the executor builds it: request and response headers, a small body, the jobLog. */
function urlResult(body: string): CheckResultEntry {
  return {
    resultType: 'FINAL',
    id: '5b0c7c1e-8f0e-4a4e-9d55-2f0b1f6f7a10',
    name: 'bench',
    checkId: 'bench-check',
    checkType: 'API',
    hasFailures: false,
    hasErrors: false,
    isDegraded: false,
    overMaxResponseTime: false,
    runLocation: 'private-bench',
    startedAt: '2026-11-24T03:00:00.000Z',
    stoppedAt: '2026-11-24T03:00:00.012Z',
    created_at: '2026-11-24T03:00:00.013Z',
    responseTime: 12,
    checkRunId: 1,
    attempts: 1,
    sequenceId: null,
    apiCheckResult: {
      assertions: [{ source: 'STATUS_CODE', comparison: 'EQUALS', target: '200', actual: 200, passed: true }],
      request: { method: 'GET', url: 'http://127.0.0.1:8080/health', headers: [{ key: 'user-agent', value: 'outpost/0.1.0' }], queryParameters: [] },
      response: {
        status: 200,
        statusText: 'OK',
        headers: { server: 'nginx', date: 'Tue, 24 Nov 2026 03:00:00 GMT', 'content-type': 'application/json', 'content-length': String(body.length) },
        body,
        bodySize: body.length,
        timings: { socket: 0.1, lookup: 0, connect: 0.4, response: 2.1, end: 2.3 },
        timingPhases: { wait: 0.1, dns: 0, tcp: 0.3, firstByte: 1.7, download: 0.2, total: 2.3 },
      },
      requestError: null,
      jobLog: ['Connected to 127.0.0.1:8080', `Received 200 OK (${body.length} bytes)`],
    },
  };
}

test('a result as it leaves the queue: the deep scrub then JSON.stringify (before) vs scrubResultLine (one serialization, one scan)', () => {
  const rows: string[] = [];
  for (const count of [1, 100]) {
    const random = mulberry32(1000 + count);
    const scrubber = Scrubber.of(makeSecrets(count, random));
    for (const bodyBytes of [200, 16_000]) {
      const body = JSON.stringify({ status: 'ok', items: Array.from({ length: Math.ceil(bodyBytes / 60) }, (_, i) => ({ id: i, name: token(random, 20) })) }).slice(0, bodyBytes);
      const entry = urlResult(body);
      expect(scrubResultLine(structuredClone(entry), scrubber).line).toBe(JSON.stringify(scrubResult(structuredClone(entry), scrubber)));
      const reps = bodyBytes > 1000 ? 2_000 : 20_000;
      // Each run gets its own copies (redaction works in place); copying is outside the timing.
      const copies = () => Array.from({ length: reps }, () => structuredClone(entry));
      const timeEach = (f: (e: CheckResultEntry) => unknown) => {
        const times: number[] = [];
        for (let run = 0; run < 5; run++) {
          const batch = copies();
          const start = performance.now();
          for (const e of batch) f(e);
          times.push(((performance.now() - start) * 1000) / reps);
        }
        return median(times);
      };
      const share = cpuShareWindow();
      const before = timeEach((e) => JSON.stringify(scrubResult(e, scrubber)));
      const after = timeEach((e) => scrubResultLine(e, scrubber).line);
      rows.push(
        `  ${String(count).padStart(7)}  ${String(bodyBytes).padStart(10)}  ${before.toFixed(2).padStart(14)}  ${after.toFixed(2).padStart(14)}  ${(before / after).toFixed(2).padStart(7)}×  ${(share() * 100).toFixed(0).padStart(5)} %`,
      );
    }
  }
  process.stdout.write(
    [
      '',
      `result scrubbing, per result (µs, median of 5 runs), Node ${process.version}, load average ${os
        .loadavg()
        .map((l) => l.toFixed(2))
        .join(' ')}`,
      '  secrets  body bytes  deep + stringify  scrubResultLine  speed-up  other processes (CPU share)',
      ...rows,
      '',
    ].join('\n'),
  );
});
