// The DNS monitor against real servers on loopback: BIND (named) serving a
// test zone, and scripted servers for what no real server does on purpose.
// Checks run through the real agent (`once` mode) and the executor directly;
// answers are compared with dig's.

import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Assertion } from '../../src/checks/assertions/assertions.js';
import { parseCheck } from '../../src/checks/parse-definition.js';
import type { CheckDefinition } from '../../src/checks/definition.js';
import { createDnsExecutor, type DnsRequest, UDP_MAX_SENDS } from '../../src/checks/dns/dns.js';
import { JobAbortedError } from '../../src/core/errors.js';
import type { Executor } from '../../src/checks/executor.js';
import { ExecutorRegistry } from '../../src/checks/executor-registry.js';
import type { Outcome } from '../../src/core/outcome.js';
import { Variables } from '../../src/checks/variables.js';
import type { CheckResultEntry } from '../../src/core/result-entry.js';
import { cleanEnv, startAgent, tempDir } from '../support/agent-process.js';
import {
  answerTo,
  BIG_RRSET,
  type DnsServer,
  type FakeDnsServer,
  LONG_TXT,
  startFakeDnsServer,
  startNamed,
} from '../support/dns-server.js';
import { findExecutable, freePort } from '../support/nginx.js';

const run = promisify(execFile);

let named: DnsServer;
let silent: FakeDnsServer;
let tricky: FakeDnsServer;
let deadPort: number;
let results: Map<string, CheckResultEntry>;
let exitCode: number | null;

interface DnsDetail {
  request: Record<string, unknown>;
  response: {
    rcode: string;
    rcodeValue: number;
    flags: Record<string, boolean>;
    flagsText: string;
    transport: 'UDP' | 'TCP';
    truncatedOverUdp: boolean;
    question: Array<{ name: string; type: string }>;
    answer: Array<{ name: string; type: string; class: string; ttl: number; data: string }>;
    authority: Array<{ name: string; type: string; data: string }>;
    textAnswer: string;
    edns: { udpPayloadSize: number } | null;
  } | null;
  timings: Record<string, number | null>;
  requestError: string | null;
  assertions: Array<{ source: string; actual: unknown; passed: boolean; error?: string }>;
  jobLog: string[];
}

const executor = createDnsExecutor({ resendMs: 100 });

function context(signal = new AbortController().signal, variables = new Variables([])) {
  return {
    signal,
    logger: pino({ level: 'silent' }),
    jobLog: [] as string[],
    variables,
    settings: { responseBodyLimitBytes: 0, userAgent: 'outpost-test' },
  };
}

const registry = new ExecutorRegistry([executor as Executor]);

/** A parsed definition, as the agent would build it from a checks file. */
function definition(request: Partial<DnsRequest>, assertions: Partial<Assertion>[] = []): CheckDefinition<DnsRequest> {
  const raw = {
    id: 'direct',
    checkType: 'DNS',
    assertions: assertions.map((a) => ({ source: 'RESPONSE_CODE', comparison: 'EQUALS', target: '', ...a })),
    request: { recordType: 'A', query: 'www.outpost.test', nameServer: '127.0.0.1', port: named.port, protocol: 'UDP', ...request },
  };
  return parseCheck(JSON.parse(JSON.stringify(raw)), 'direct', registry).check as CheckDefinition<DnsRequest>;
}

async function direct(
  request: Partial<DnsRequest>,
  options: { assertions?: Partial<Assertion>[]; signal?: AbortSignal; exec?: typeof executor } = {},
): Promise<Outcome & { detail: DnsDetail }> {
  const outcome = await (options.exec ?? executor).run(definition(request, options.assertions), context(options.signal));
  return outcome as Outcome & { detail: DnsDetail };
}

const dns = (id: string) => results.get(id)?.dnsCheckResult as unknown as DnsDetail;

beforeAll(async () => {
  named = await startNamed();
  silent = await startFakeDnsServer(() => []);
  // Answers the way the test name asks: wrong ids and questions first, garbage, cut connections.
  tricky = await startFakeDnsServer((q) => {
    if (q.name.startsWith('flood')) {
      return [...Array.from({ length: 60 }, () => answerTo(q, { id: (q.id + 1) % 65536 })), answerTo(q, { answers: [{ name: q.name, type: 'A', ttl: 5, data: '192.0.2.9' }] })];
    }
    if (q.name.startsWith('wrong-id')) return [answerTo(q, { id: (q.id + 1) % 65536 }), answerTo(q, { answers: [{ name: q.name, type: 'A', ttl: 5, data: '192.0.2.7' }] })];
    if (q.name.startsWith('wrong-question')) {
      return [answerTo(q, { name: 'other.test' }), answerTo(q, { answers: [{ name: q.name, type: 'A', ttl: 5, data: '192.0.2.8' }] })];
    }
    if (q.name.startsWith('garbage')) return [Buffer.concat([q.raw.subarray(0, 2), Buffer.from([0x81, 0x80, 0, 1, 0, 5, 0, 0, 0, 0, 1, 2, 3])])];
    if (q.name.startsWith('cut') && q.transport === 'TCP') return [{ raw: Buffer.from([0x01, 0x00, q.raw[0] ?? 0, q.raw[1] ?? 0, 0x81]) }];
    if (q.name.startsWith('formerr')) return [Buffer.from([q.raw[0] ?? 0, q.raw[1] ?? 0, 0x80, 0x01, 0, 0, 0, 0, 0, 0, 0, 0])];
    if (q.name.startsWith('trunc-no-tcp')) return q.transport === 'UDP' ? [answerTo(q, { flags: 0x0300 })] : [];
    return [];
  });
  deadPort = await freePort();

  const server = { nameServer: '127.0.0.1', port: named.port };
  const checks = [
    { id: 'a', request: { ...server, recordType: 'A', query: 'www.outpost.test' } },
    { id: 'aaaa', request: { ...server, recordType: 'AAAA', query: 'www.outpost.test.' } },
    {
      id: 'mx',
      request: { ...server, recordType: 'MX', query: 'outpost.test' },
      assertions: [{ source: 'TEXT_ANSWER', comparison: 'CONTAINS', target: 'outpost.test.\t300\tIN\tMX\t10 mail.outpost.test.' }],
    },
    { id: 'ns', request: { ...server, recordType: 'NS', query: 'outpost.test' } },
    { id: 'soa', request: { ...server, recordType: 'SOA', query: 'outpost.test' } },
    {
      id: 'txt-long',
      request: { ...server, recordType: 'TXT', query: 'long.outpost.test' },
      assertions: [{ source: 'JSON_ANSWER', property: '$.Answer[0].data', comparison: 'EQUALS', target: LONG_TXT.join('') }],
    },
    {
      id: 'cname-chain',
      request: { ...server, recordType: 'A', query: 'alias.outpost.test' },
      assertions: [
        { source: 'JSON_ANSWER', property: '$.Answer[?@.type == 5].data', comparison: 'CONTAINS', target: '.outpost.test.' },
        { source: 'JSON_ANSWER', property: '$.Answer[?@.type == 1].data', comparison: 'CONTAINS', target: '192.0.2.1' },
      ],
    },
    { id: 'cname', request: { ...server, recordType: 'CNAME', query: 'alias.outpost.test' } },
    { id: 'srv', request: { ...server, recordType: 'SRV', query: '_sip._tcp.outpost.test' } },
    { id: 'caa', request: { ...server, recordType: 'CAA', query: 'outpost.test' } },
    { id: 'ptr', request: { ...server, recordType: 'PTR', query: '192.0.2.10' } },
    { id: 'ptr6', request: { ...server, recordType: 'PTR', query: '2001:db8::10' } },
    { id: 'https', request: { ...server, recordType: 'HTTPS', query: 'svc.outpost.test' } },
    { id: 'tcp', request: { ...server, recordType: 'A', query: 'www.outpost.test', protocol: 'TCP' } },
    { id: 'truncated', request: { ...server, recordType: 'A', query: 'big.outpost.test' } },
    { id: 'nxdomain', request: { ...server, recordType: 'A', query: 'nope.outpost.test' } },
    {
      id: 'nxdomain-expected',
      request: { ...server, recordType: 'A', query: 'nope.outpost.test' },
      assertions: [
        { source: 'RESPONSE_CODE', comparison: 'EQUALS', target: 'NXDOMAIN' },
        { source: 'JSON_ANSWER', property: '$.Authority[0].type', comparison: 'EQUALS', target: '6' },
      ],
    },
    { id: 'servfail', request: { ...server, recordType: 'A', query: 'x.broken.test', protocol: 'TCP' } },
    {
      id: 'servfail-expected',
      request: { ...server, recordType: 'A', query: 'x.broken.test' },
      assertions: [{ source: 'RESPONSE_CODE', comparison: 'EQUALS', target: 'SERVFAIL' }],
    },
    {
      id: 'refused',
      request: { ...server, recordType: 'A', query: 'example.com' },
      assertions: [{ source: 'RESPONSE_CODE', comparison: 'EQUALS', target: '5' }],
    },
    { id: 'dead-udp', request: { nameServer: '127.0.0.1', port: deadPort, recordType: 'A', query: 'www.outpost.test' } },
    { id: 'dead-tcp', request: { nameServer: '127.0.0.1', port: deadPort, recordType: 'A', query: 'www.outpost.test', protocol: 'TCP' } },
    { id: 'silent', request: { nameServer: '127.0.0.1', port: silent.port, recordType: 'A', query: 'www.outpost.test' } },
    {
      id: 'variables',
      request: { nameServer: '{{DNS_HOST}}', port: named.port, recordType: 'A', query: '{{NAME}}.outpost.test' },
      environmentVariables: [{ key: 'NAME', value: 'www' }],
    },
    {
      id: 'failing-assertions',
      request: { ...server, recordType: 'A', query: 'www.outpost.test' },
      assertions: [
        { source: 'RESPONSE_CODE', comparison: 'EQUALS', target: 'NXDOMAIN' },
        { source: 'JSON_ANSWER', property: '$.Answer[*].data', comparison: 'EQUALS', target: '192.0.2.10' },
        { source: 'RESPONSE_TIME', comparison: 'LESS_THAN', target: '100000' },
      ],
    },
    { id: 'should-fail', shouldFail: true, request: { ...server, recordType: 'A', query: 'nope.outpost.test' } },
  ].map((c) => ({ checkType: 'DNS', ...c }));
  const dir = tempDir();
  const file = path.join(dir, 'checks.json');
  writeFileSync(file, JSON.stringify({ environmentVariables: [{ key: 'DNS_HOST', value: '127.0.0.1' }], checks }));
  const proc = startAgent(['once', file], cleanEnv({ JOB_CONCURRENCY: '8' }));
  exitCode = (await proc.exit).code;
  results = new Map(
    proc.stdoutLines.filter(Boolean).map((l) => {
      const r = JSON.parse(l) as CheckResultEntry;
      return [r.checkId as string, r];
    }),
  );
  expect(results.size, proc.stderr().slice(-3000)).toBe(checks.length);
});

afterAll(async () => {
  await named?.stop();
  await silent?.stop();
  await tricky?.stop();
});

describe('DNS monitor through the agent (once mode) against named', () => {
  it('exits 1 because some checks fail', () => {
    expect(exitCode).toBe(1);
  });

  it('answers A over UDP with rcode, flags, sections and timings', () => {
    expect(results.get('a')).toMatchObject({ checkType: 'DNS', hasFailures: false, hasErrors: false });
    const d = dns('a');
    expect(d.request).toMatchObject({ recordType: 'A', query: 'www.outpost.test', queryName: 'www.outpost.test.', nameServer: '127.0.0.1', protocol: 'UDP' });
    expect(d.response).toMatchObject({ rcode: 'NOERROR', rcodeValue: 0, flagsText: 'qr aa rd', transport: 'UDP', truncatedOverUdp: false });
    expect(d.response?.flags).toEqual({ AA: true, TC: false, RD: true, RA: false, AD: false, CD: false });
    expect(d.response?.question).toEqual([{ name: 'www.outpost.test.', type: 'A', typeCode: 1, class: 'IN' }]);
    expect(d.response?.answer.map((r) => r.data).sort()).toEqual(['192.0.2.10', '192.0.2.11']);
    expect(d.response?.answer[0]).toMatchObject({ name: 'www.outpost.test.', type: 'A', class: 'IN', ttl: 300 });
    expect(d.response?.edns?.udpPayloadSize).toBe(1232);
    expect(d.timings.udp).toBeGreaterThan(0);
    expect(d.timings.tcp).toBeNull();
    expect(d.timings.total).toBeGreaterThanOrEqual(d.timings.udp ?? Number.POSITIVE_INFINITY);
    expect(results.get('a')?.responseTime).toBe(Math.round(d.timings.total ?? -1));
  });

  it('serves every record type', () => {
    const data = (id: string) => dns(id).response?.answer.map((r) => `${r.type} ${r.data}`).sort();
    expect(data('aaaa')).toEqual(['AAAA 2001:db8::10']);
    expect(data('mx')).toEqual(['MX 10 mail.outpost.test.', 'MX 20 mail2.outpost.test.']);
    expect(data('ns')).toEqual(['NS ns1.outpost.test.']);
    expect(data('soa')).toEqual(['SOA ns1.outpost.test. hostmaster.outpost.test. 2024010101 3600 900 604800 60']);
    expect(data('txt-long')).toEqual([`TXT "${LONG_TXT[0]}" "${LONG_TXT[1]}"`]);
    expect(data('cname')).toEqual(['CNAME alias2.outpost.test.']);
    expect(data('srv')).toEqual(['SRV 10 60 5060 sip.outpost.test.']);
    expect(data('caa')).toEqual(['CAA 0 issue "ca.example.net"', 'CAA 128 iodef "mailto:security@outpost.test"']);
    expect(data('ptr')).toEqual(['PTR www.outpost.test.']);
    expect(dns('ptr').request.queryName).toBe('10.2.0.192.in-addr.arpa.');
    expect(data('ptr6')).toEqual(['PTR www.outpost.test.']);
    expect(dns('ptr6').request.queryName).toMatch(/^0\.1\.0\.0\.(0\.){20}8\.b\.d\.0\.1\.0\.0\.2\.ip6\.arpa\.$/);
    expect(data('https')).toEqual(['HTTPS 1 . alpn="h2,h3" port=8443 ipv4hint=192.0.2.10 ipv6hint=2001:db8::10']);
    for (const id of ['aaaa', 'mx', 'ns', 'soa', 'txt-long', 'cname', 'srv', 'caa', 'ptr', 'ptr6', 'https']) {
      expect(results.get(id), id).toMatchObject({ hasFailures: false, hasErrors: false });
    }
  });

  it('follows a CNAME chain in the answer and asserts on it with JSON_ANSWER', () => {
    expect(dns('cname-chain').response?.answer.map((r) => r.type)).toEqual(['CNAME', 'CNAME', 'A', 'A']);
    expect(dns('cname-chain').response?.textAnswer.split('\n').slice(0, 2)).toEqual([
      'alias.outpost.test.\t300\tIN\tCNAME\talias2.outpost.test.',
      'alias2.outpost.test.\t300\tIN\tCNAME\twww.outpost.test.',
    ]);
    expect(dns('cname-chain').assertions.map((a) => a.passed)).toEqual([true, true]);
    expect(results.get('cname-chain')).toMatchObject({ hasFailures: false });
    expect(results.get('mx')).toMatchObject({ hasFailures: false });
    expect(dns('txt-long').assertions[0]).toMatchObject({ passed: true });
  });

  it('queries over TCP when asked', () => {
    expect(results.get('tcp')).toMatchObject({ hasFailures: false, hasErrors: false });
    expect(dns('tcp').response).toMatchObject({ transport: 'TCP', rcode: 'NOERROR', truncatedOverUdp: false });
    expect(dns('tcp').timings.udp).toBeNull();
    expect(dns('tcp').timings.tcpConnect).toBeGreaterThan(0);
  });

  it('retries a truncated UDP answer over TCP and reports the full answer', () => {
    const d = dns('truncated');
    expect(results.get('truncated')).toMatchObject({ hasFailures: false, hasErrors: false });
    expect(d.response).toMatchObject({ transport: 'TCP', truncatedOverUdp: true, rcode: 'NOERROR' });
    expect(d.response?.flags.TC).toBe(false);
    expect(d.response?.answer).toHaveLength(BIG_RRSET);
    expect(d.jobLog.some((l) => /truncated \(TC.*retrying over TCP/.test(l))).toBe(true);
    expect(d.timings.udp).toBeGreaterThan(0);
    expect(d.timings.tcp).toBeGreaterThan(0);
  });

  it('fails NXDOMAIN and SERVFAIL without assertions, but not as errors; passes them when asserted', () => {
    expect(results.get('nxdomain')).toMatchObject({ hasFailures: true, hasErrors: false });
    expect(dns('nxdomain').response).toMatchObject({ rcode: 'NXDOMAIN', rcodeValue: 3 });
    expect(dns('nxdomain').response?.authority.map((r) => r.type)).toEqual(['SOA']);
    expect(dns('nxdomain').jobLog.at(-1)).toMatch(/NXDOMAIN fails the check: without assertions only NOERROR passes/);
    expect(results.get('nxdomain-expected')).toMatchObject({ hasFailures: false, hasErrors: false });
    expect(results.get('servfail')).toMatchObject({ hasFailures: true, hasErrors: false });
    expect(dns('servfail').response).toMatchObject({ rcode: 'SERVFAIL', transport: 'TCP' });
    expect(results.get('servfail-expected')).toMatchObject({ hasFailures: false });
    expect(results.get('refused')).toMatchObject({ hasFailures: false });
    expect(dns('refused').response?.rcode).toBe('REFUSED');
    expect(dns('refused').assertions[0]).toMatchObject({ actual: 5, passed: true });
    expect(results.get('should-fail')).toMatchObject({ hasFailures: false, hasErrors: false });
  });

  it('reports a dead server as an error: refused over UDP (ICMP) and TCP', () => {
    expect(results.get('dead-udp')).toMatchObject({ hasFailures: true, hasErrors: true });
    expect(dns('dead-udp').requestError).toBe(
      `refused: 127.0.0.1:${deadPort} answered with ICMP port unreachable (nothing listens there over UDP; ECONNREFUSED)`,
    );
    expect(dns('dead-udp').response).toBeNull();
    expect(results.get('dead-tcp')).toMatchObject({ hasFailures: true, hasErrors: true });
    expect(dns('dead-tcp').requestError).toBe(`connection refused (ECONNREFUSED) at 127.0.0.1:${deadPort} over TCP`);
  });

  it('times out at the cap when a server never answers, after re-sending the query', () => {
    const r = results.get('silent');
    expect(r).toMatchObject({ hasFailures: true, hasErrors: true, overMaxResponseTime: true });
    expect(dns('silent').requestError).toMatch(
      new RegExp(`^no answer from 127\\.0\\.0\\.1:${silent.port} over UDP within \\d+ ms \\(${UDP_MAX_SENDS} queries sent\\)$`),
    );
    const sent = silent.queries.filter((q) => q.name === 'www.outpost.test');
    expect(sent.length).toBe(UDP_MAX_SENDS);
    expect(new Set(sent.map((q) => q.id)).size).toBe(1);
  });

  it('fills in variables from the check and the file', () => {
    expect(results.get('variables')).toMatchObject({ hasFailures: false, hasErrors: false });
    expect(dns('variables').request).toMatchObject({ query: 'www.outpost.test', nameServer: '127.0.0.1' });
  });

  it('fails on failing assertions and shows what each saw', () => {
    expect(results.get('failing-assertions')).toMatchObject({ hasFailures: true, hasErrors: false });
    const [code, each, time] = dns('failing-assertions').assertions;
    expect(code).toMatchObject({ actual: 'NOERROR', passed: false });
    expect(each?.passed).toBe(false);
    expect([...((each?.actual as string[]) ?? [])].sort()).toEqual(['192.0.2.10', '192.0.2.11']);
    expect(time).toMatchObject({ passed: true });
  });
});

describe('DNS executor against scripted servers', () => {
  const at = () => ({ nameServer: '127.0.0.1', port: tricky.port });

  it('ignores datagrams with another id, then takes the real answer', async () => {
    const o = await direct({ ...at(), query: 'wrong-id.test' });
    expect(o.error).toBeUndefined();
    expect(o.detail.response?.answer.map((r) => r.data)).toEqual(['192.0.2.7']);
    expect(o.detail.jobLog.some((l) => /^Ignored a datagram from 127\.0\.0\.1:\d+: id \d+ is not the query's id \d+$/.test(l))).toBe(true);
  });

  it('names the first ignored datagrams in the jobLog and counts the rest: a flood cannot grow it without bound', async () => {
    const o = await direct({ ...at(), query: 'flood.test' });
    expect(o.error).toBeUndefined();
    expect(o.detail.response?.answer.map((r) => r.data)).toEqual(['192.0.2.9']);
    const ignored = o.detail.jobLog.filter((l) => l.startsWith('Ignored a datagram'));
    expect(ignored).toHaveLength(10);
    // UDP on loopback may drop some of a burst of 60: the count says how many came.
    const summary = o.detail.jobLog.find((l) => l.startsWith('Ignored ') && l.includes('more datagrams'));
    expect(summary).toMatch(/^Ignored (\d+) more datagrams from 127\.0\.0\.1:\d+ \((\d+) in all\)$/);
    const [, more, all] = /^Ignored (\d+) more datagrams .* \((\d+) in all\)$/.exec(summary ?? '') ?? [];
    expect(Number(all) - Number(more)).toBe(10);
    expect(o.detail.jobLog.length).toBeLessThan(30);
  });

  it('ignores answers to another question', async () => {
    const o = await direct({ ...at(), query: 'wrong-question.test' });
    expect(o.error).toBeUndefined();
    expect(o.detail.response?.answer.map((r) => r.data)).toEqual(['192.0.2.8']);
    expect(o.detail.jobLog.some((l) => l.includes('its question (other.test. IN A) is not wrong-question.test. IN A'))).toBe(true);
  });

  it('reports a malformed answer as an error', async () => {
    const o = await direct({ ...at(), query: 'garbage.test' });
    expect(o.error).toMatch(new RegExp(`^malformed answer from 127\\.0\\.0\\.1:${tricky.port} over UDP: `));
    expect(o.errorCode).toBe('EBADRESP');
  });

  it('reports a TCP connection cut in the middle of an answer', async () => {
    const o = await direct({ ...at(), query: 'cut.test', protocol: 'TCP' });
    expect(o.error).toBe(`127.0.0.1:${tricky.port} closed the TCP connection before a complete answer (received 5 of 258 bytes)`);
  });

  it('accepts an error answer without a question section (FORMERR)', async () => {
    const o = await direct({ ...at(), query: 'formerr.test' });
    expect(o.error).toBeUndefined();
    expect(o.detail.response).toMatchObject({ rcode: 'FORMERR', question: [] });
    expect(o.assertionsFailed).toBe(true);
  });

  it('reports a failed TCP retry after a truncated UDP answer, keeping the UDP answer', async () => {
    const signal = AbortSignal.timeout(1_500);
    const o = await direct({ ...at(), query: 'trunc-no-tcp.test' }, { signal });
    expect(o.error).toMatch(/^no answer from 127\.0\.0\.1:\d+ over TCP within \d+ ms \(connected after \d+ ms, received 0 bytes\)$/);
    expect(o.detail.jobLog.some((l) => l.startsWith('The answer over UDP is truncated (TC'))).toBe(true);
    expect(o.detail.response).toMatchObject({ transport: 'UDP', truncatedOverUdp: true });
    expect(o.detail.response?.flags.TC).toBe(true);
  });

  it('re-sends an unanswered UDP query with the same id, and stops at its abort signal', async () => {
    const before = silent.queries.length;
    const controller = new AbortController();
    // Re-sends every 100 ms here (resendMs), at most 3 sends: all are out well before the abort.
    setTimeout(() => controller.abort(new JobAbortedError('timeout', 'Timed out after 5000 ms (the DNS check limit)')), 1_000);
    const o = await direct({ nameServer: '127.0.0.1', port: silent.port, query: 'resend.test' }, { signal: controller.signal });
    expect(o.error).toMatch(/^no answer from 127\.0\.0\.1:\d+ over UDP within \d+ ms \(3 queries sent\)$/);
    expect(o.errorCode).toBe('ETIMEDOUT');
    const mine = silent.queries.slice(before).filter((q) => q.name === 'resend.test');
    expect(mine).toHaveLength(3);
    expect(new Set(mine.map((q) => q.id)).size).toBe(1);
    expect(o.detail.jobLog.filter((l) => l.startsWith('No answer after'))).toHaveLength(2);
  });

  it('says why it stopped when the lease is lost or the agent shuts down', async () => {
    const controller = new AbortController();
    setTimeout(() => controller.abort(new JobAbortedError('shutdown', 'Aborted: the agent is shutting down')), 100);
    const o = await direct({ nameServer: '127.0.0.1', port: silent.port, query: 'shutdown.test', protocol: 'TCP' }, { signal: controller.signal });
    expect(o.error).toBe('Aborted: the agent is shutting down');
  });
});

describe('DNS executor: the default name server and run-time input', () => {
  it('uses the first nameserver of resolv.conf when none is given', async () => {
    const dir = tempDir();
    const file = path.join(dir, 'resolv.conf');
    writeFileSync(file, '# test\nsearch example\nnameserver 127.0.0.1\nnameserver 192.0.2.53\n');
    const exec = createDnsExecutor({ resolvConf: file });
    const o = await direct({ nameServer: undefined }, { exec });
    expect(o.error).toBeUndefined();
    expect(o.detail.request).toMatchObject({ nameServer: '127.0.0.1', nameServerSource: 'resolv.conf' });
    expect(o.detail.jobLog[0]).toBe(`Using name server 127.0.0.1 from ${file}`);
    const missing = await direct({ nameServer: undefined }, { exec: createDnsExecutor({ resolvConf: path.join(dir, 'nope') }) });
    expect(missing.error).toBe(`request.nameServer is not set and ${path.join(dir, 'nope')} cannot be read (ENOENT); set request.nameServer`);
  });

  it('resolves a name server given as a host name', async () => {
    const o = await direct({ nameServer: 'localhost' });
    expect(o.error).toBeUndefined();
    expect(o.detail.jobLog).toContain('Resolved name server localhost to 127.0.0.1');
    expect(o.detail.timings.lookup).toBeGreaterThanOrEqual(0);
  });

  it('reports bad input after variables, and unknown variables, without sending anything', async () => {
    const bad = await direct({ query: '{{X}}' });
    expect(bad.error).toMatch(/^Unknown variable \{\{X\}\} in request\.query/);
    const ctx = context(undefined, new Variables([{ key: 'X', value: 'not a name', secret: false }]));
    const o = (await executor.run(definition({ query: '{{X}}' }), ctx)) as Outcome & { detail: DnsDetail };
    expect(o.error).toMatch(/^request\.query must be a domain name/);
  });
});

// ---------------------------------------------------------------------------
// Agreement with dig.

interface DigAnswer {
  status: string;
  flags: string;
  answer: string[];
  /** What dig printed, for a failure's message. */
  printed: string;
}

/** Every NOERROR answer in these zones has records, but for a CNAME that points nowhere. */
const digLooksRight = (name: string, a: DigAnswer) =>
  a.status !== '' && a.flags.split(' ').includes('qr') && (a.status !== 'NOERROR' || a.answer.length > 0 || name.startsWith('dangling'));

/**
 * dig's answer, asked again (three tries in all) while it is not named's: dig's own timeout on a
 * busy machine, or a reply that is not one. dig binds its client socket with SO_REUSEPORT, so the
 * kernel may even give it named's own port, and then named's reply never reaches it. The oracle's
 * hiccups are not the agent's; a wrong answer from named three times over still fails the test.
 */
async function dig(name: string, type: string, tcp: boolean): Promise<DigAnswer> {
  let answer = await digOnce(name, type, tcp);
  for (let attempt = 1; attempt < 3 && !digLooksRight(name, answer); attempt++) answer = await digOnce(name, type, tcp);
  return answer;
}

async function digOnce(name: string, type: string, tcp: boolean): Promise<DigAnswer> {
  const args = [`@127.0.0.1`, '-p', String(named.port), '+noall', '+answer', '+comments', '+time=2', '+tries=1', name, type];
  if (tcp) args.push('+tcp');
  // dig exits 9 when no server answered; what it printed says so.
  const stdout = await run('dig', args).then(
    (r) => r.stdout,
    (error: { stdout?: string; message: string }) => error.stdout || error.message,
  );
  // After "Truncated, retrying in TCP mode" dig prints the TCP answer: take the last header.
  const status = [...stdout.matchAll(/->>HEADER<<- opcode: QUERY, status: (\w+)/g)].at(-1)?.[1] ?? '';
  const flags = [...stdout.matchAll(/^;; flags: ([^;]*);/gm)].at(-1)?.[1]?.trim() ?? '';
  const answer = stdout
    .split('\n')
    .filter((l) => l.trim() !== '' && !l.startsWith(';'))
    .map((l) => {
      const m = /^(\S+)\s+(\d+)\s+(\S+)\s+(\S+)\s+(.*)$/.exec(l);
      return m ? `${m[1]} ${m[2]} ${m[3]} ${m[4]} ${m[5]}` : `unparsed: ${l}`;
    });
  return { status, flags, answer: answer.sort(), printed: stdout };
}

describe('DNS executor agrees with dig', () => {
  const cases: Array<[string, DnsRequest['recordType'], 'UDP' | 'TCP']> = [
    ['www.outpost.test', 'A', 'UDP'],
    ['www.outpost.test', 'A', 'TCP'],
    ['www.outpost.test', 'AAAA', 'UDP'],
    ['mapped.outpost.test', 'AAAA', 'UDP'],
    ['outpost.test', 'MX', 'UDP'],
    ['outpost.test', 'NS', 'TCP'],
    ['outpost.test', 'SOA', 'UDP'],
    ['outpost.test', 'TXT', 'UDP'],
    ['long.outpost.test', 'TXT', 'UDP'],
    ['long.outpost.test', 'TXT', 'TCP'],
    ['quote.outpost.test', 'TXT', 'UDP'],
    ['alias.outpost.test', 'A', 'UDP'],
    ['alias.outpost.test', 'CNAME', 'UDP'],
    ['dangling.outpost.test', 'A', 'UDP'],
    ['_sip._tcp.outpost.test', 'SRV', 'UDP'],
    ['outpost.test', 'CAA', 'UDP'],
    ['10.2.0.192.in-addr.arpa', 'PTR', 'UDP'],
    ['0.1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa', 'PTR', 'UDP'],
    ['svc.outpost.test', 'HTTPS', 'UDP'],
    ['alias-svc.outpost.test', 'HTTPS', 'TCP'],
    ['odd.outpost.test', 'MX', 'UDP'],
    ['big.outpost.test', 'A', 'UDP'],
    ['nope.outpost.test', 'A', 'UDP'],
    ['nope.outpost.test', 'A', 'TCP'],
    ['x.broken.test', 'A', 'UDP'],
    ['example.com', 'A', 'UDP'],
    ['example.com', 'A', 'TCP'],
  ];

  it('has dig installed', () => {
    expect(findExecutable('dig'), 'dig is missing: apt-get install -y bind9-dnsutils').toBeDefined();
  });

  it.each(cases)('%s %s over %s: same rcode, flags and answer records', async (name, type, protocol) => {
    const [expected, o] = await Promise.all([dig(name, type, protocol === 'TCP'), direct({ query: name, recordType: type, protocol })]);
    expect(o.error).toBeUndefined();
    // Not two empty answers agreeing by accident: every NOERROR case here has records.
    expect(digLooksRight(name, expected), expected.printed).toBe(true);
    expect(expected.answer.length > 0, expected.printed).toBe(expected.status === 'NOERROR' || name.startsWith('dangling'));
    expect(expected.answer.filter((l) => l.startsWith('unparsed'))).toEqual([]);
    const response = o.detail.response;
    expect(response?.rcode).toBe(expected.status);
    expect(response?.flagsText).toBe(expected.flags);
    const mine = (response?.textAnswer ?? '')
      .split('\n')
      .filter(Boolean)
      .map((l) => l.split('\t').join(' '))
      .sort();
    expect(mine).toEqual(expected.answer);
  });

  it('matches dig for SVCB parameters it knows, and names key 7 dohpath (RFC 9461) where dig 9.18 says key7', async () => {
    const [expected, o] = await Promise.all([dig('svc2.outpost.test', 'HTTPS', false), direct({ query: 'svc2.outpost.test', recordType: 'HTTPS' })]);
    expect(expected.answer).toHaveLength(1);
    expect(o.detail.response?.answer[0]?.data).toBe(
      (expected.answer[0] ?? '').replace(/^\S+ \d+ IN HTTPS /, '').replace('key7="/q{?dns}"', 'dohpath="/q{?dns}"'),
    );
  });
});
