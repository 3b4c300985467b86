// ICMP: request validation, ping output parsing, statistics, assertions and
// the explanations of ping failures. Real pings (as an unprivileged user in a
// network namespace) are in test/integration/icmp-check.test.ts.

import pino from 'pino';
import { describe, expect, it } from 'vitest';
import type { Assertion } from '../../src/checks/assertions/assertions.js';
import { parseCheck } from '../../src/checks/parse-definition.js';
import type { CheckDefinition } from '../../src/checks/definition.js';
import type { Executor } from '../../src/checks/executor.js';
import { ExecutorRegistry } from '../../src/checks/executor-registry.js';
import { DefinitionError } from '../../src/checks/fields.js';
import { Variables } from '../../src/checks/variables.js';
import { evaluateJsonPath } from '../../src/checks/assertions/jsonpath.js';
import { evaluateLatency, type IcmpOutcome, type IcmpRequest, icmpExecutor } from '../../src/checks/icmp/icmp.js';
import {
  explainPingFailure,
  type FailureContext,
  groupsAllowed,
  latencyStats,
  locatePing,
  type PingRun,
  parsePingOutput,
  pingArgs,
  readPingGroupRange,
} from '../../src/net/ping.js';
import { tempDir } from '../support/agent-process.js';

const registry = new ExecutorRegistry([icmpExecutor as Executor]);

const IPUTILS = `PING 10.0.0.2 (10.0.0.2) 56(84) bytes of data.
64 bytes from 10.0.0.2: icmp_seq=1 ttl=64 time=0.259 ms
64 bytes from 10.0.0.2: icmp_seq=2 ttl=64 time=0.016 ms
64 bytes from 10.0.0.2: icmp_seq=2 ttl=64 time=0.019 ms (DUP!)
From 10.0.0.1 icmp_seq=3 Destination Host Unreachable
64 bytes from 10.0.0.2: icmp_seq=4 ttl=63 time=1.5 ms

--- 10.0.0.2 ping statistics ---
4 packets transmitted, 3 received, +1 duplicates, +1 errors, 25% packet loss, time 606ms
rtt min/avg/max/mdev = 0.016/0.591/1.500/0.650 ms
`;

const IPV6 = `PING ::1(::1) 56 data bytes
64 bytes from ::1: icmp_seq=1 ttl=64 time=0.024 ms
64 bytes from ::1: icmp_seq=2 ttl=64 time=0.043 ms

--- ::1 ping statistics ---
2 packets transmitted, 2 received, 0% packet loss, time 405ms
`;

const BUSYBOX = `PING 127.0.0.1 (127.0.0.1): 56 data bytes
64 bytes from 127.0.0.1: seq=0 ttl=64 time=0.047 ms
64 bytes from 127.0.0.1: seq=1 ttl=64 time=0.081 ms

--- 127.0.0.1 ping statistics ---
2 packets transmitted, 2 packets received, 0% packet loss
round-trip min/avg/max = 0.047/0.064/0.081 ms
`;

const ALL_LOST = `PING 10.0.0.9 (10.0.0.9) 56(84) bytes of data.

--- 10.0.0.9 ping statistics ---
3 packets transmitted, 0 received, 100% packet loss, time 406ms

`;

describe('parsePingOutput', () => {
  it('reads iputils replies, skips duplicates, collects ICMP errors and the summary', () => {
    expect(parsePingOutput(IPUTILS)).toEqual({
      transmitted: 4,
      received: 3,
      replies: [
        { seq: 1, ttl: 64, rtt: 0.259 },
        { seq: 2, ttl: 64, rtt: 0.016 },
        { seq: 4, ttl: 63, rtt: 1.5 },
      ],
      duplicates: 1,
      icmpErrors: ['From 10.0.0.1 icmp_seq=3 Destination Host Unreachable'],
    });
  });

  it('reads IPv6 and BusyBox output', () => {
    expect(parsePingOutput(IPV6).replies).toEqual([
      { seq: 1, ttl: 64, rtt: 0.024 },
      { seq: 2, ttl: 64, rtt: 0.043 },
    ]);
    const busybox = parsePingOutput(BUSYBOX);
    expect(busybox).toMatchObject({ transmitted: 2, received: 2, duplicates: 0 });
    expect(busybox.replies.map((r) => r.seq)).toEqual([0, 1]);
  });

  it('reads total loss, and nothing from garbage', () => {
    expect(parsePingOutput(ALL_LOST)).toEqual({ transmitted: 3, received: 0, replies: [], duplicates: 0, icmpErrors: [] });
    expect(parsePingOutput('')).toEqual({ transmitted: null, received: null, replies: [], duplicates: 0, icmpErrors: [] });
    expect(parsePingOutput('64 bytes from x: icmp_seq=1 ttl=64 (truncated)\nnonsense').replies).toEqual([]);
  });
});

describe('latencyStats', () => {
  it('computes min/avg/max and the population standard deviation', () => {
    expect(latencyStats([1, 2, 3, 4])).toEqual({ min: 1, avg: 2.5, max: 4, stdDev: 1.118 });
    expect(latencyStats([0.5])).toEqual({ min: 0.5, avg: 0.5, max: 0.5, stdDev: 0 });
    expect(latencyStats([])).toBeNull();
  });
});

describe('ping binary and arguments', () => {
  it('uses PING_PATH when set, else the first ping on PATH, else says what to install', () => {
    expect(locatePing({ ping: '/opt/ping', searchPath: '/usr/bin' })).toEqual({ path: '/opt/ping', from: 'PING_PATH' });
    const empty = tempDir('outpost-noping-');
    const missing = locatePing({ searchPath: empty });
    expect(missing).toEqual({ error: expect.stringMatching(/^ping is not installed: no executable "ping" on PATH .*apt-get install iputils-ping/) });
  });

  it('builds a numeric, counted, family-pinned command line', () => {
    expect(pingArgs({ address: '::1', family: 6, count: 3, intervalSeconds: 0.2, lingerSeconds: 2 })).toEqual([
      '-n', '-c', '3', '-i', '0.2', '-W', '2', '-6', '::1',
    ]);
    expect(pingArgs({ address: '10.0.0.1', family: 4, count: 1, intervalSeconds: 0.2, lingerSeconds: 2 }).at(-2)).toBe('-4');
  });

  it('reads ping_group_range and decides whether a group may open ICMP sockets', async () => {
    const range = await readPingGroupRange();
    expect(range === null || (Array.isArray(range) && range.length === 2)).toBe(true);
    expect(await readPingGroupRange('/nonexistent/ping_group_range')).toBeNull();
    expect(groupsAllowed([1, 0], [0, 65534])).toBe(false);
    expect(groupsAllowed([0, 2147483647], [65534])).toBe(true);
    expect(groupsAllowed(null, [0])).toBeNull();
  });
});

describe('explainPingFailure', () => {
  const ctx: FailureContext = { binary: { path: '/usr/bin/ping', from: 'PATH' }, groupRange: [1, 0], gids: [65534], uid: 65534 };
  const ran = (extra: Partial<PingRun>): PingRun => ({ code: 0, signal: null, stdout: '', stderr: '', aborted: false, ...extra });
  const spawnError = (code: string) => Object.assign(new Error(code), { code });

  it('says how to allow ICMP sockets when they are forbidden', () => {
    const failure = explainPingFailure(
      ran({ code: 2, stderr: 'ping: socktype: SOCK_RAW\nping: socket: Operation not permitted\nping: => missing cap_net_raw+p capability or setuid?\n' }),
      ctx,
    );
    expect(failure?.code).toBe('EPERM');
    const text = failure?.message;
    expect(text).toMatch(/^ICMP sockets are not permitted for this process \(uid 65534, groups 65534; net\.ipv4\.ping_group_range is "1 0"\)/);
    expect(text).toContain('sysctl -w net.ipv4.ping_group_range="0 2147483647"');
    expect(text).toContain('--sysctl net.ipv4.ping_group_range="0 2147483647"');
    expect(text).toContain('--cap-add NET_RAW');
  });

  it('says when ping is missing, not executable, or carries file capabilities the process cannot gain', () => {
    expect(explainPingFailure(ran({ spawnError: spawnError('ENOENT') }), ctx)?.message).toMatch(/^ping is not installed .*apt-get install iputils-ping/);
    expect(explainPingFailure(ran({ spawnError: spawnError('ENOENT') }), { ...ctx, binary: { path: '/x/ping', from: 'PING_PATH' } })?.message).toMatch(
      /^ping is not installed at PING_PATH=\/x\/ping \(ENOENT\)/,
    );
    expect(explainPingFailure(ran({ spawnError: spawnError('EACCES') }), ctx)?.message).toMatch(/cannot be executed by this process \(EACCES\)/);
    const eperm = explainPingFailure(ran({ spawnError: spawnError('EPERM') }), ctx)?.message;
    expect(eperm).toMatch(/^\/usr\/bin\/ping cannot be executed \(EPERM\): the file carries capabilities/);
    expect(eperm).toContain('ping_group_range');
  });

  it('names local network errors, and leaves loss to the verdict', () => {
    expect(explainPingFailure(ran({ code: 2, stderr: 'ping: connect: Network is unreachable\n' }), ctx)).toEqual({
      code: 'ENETUNREACH',
      message: 'network unreachable (ENETUNREACH) (ping said: ping: connect: Network is unreachable)',
    });
    expect(explainPingFailure(ran({ code: 1, stderr: 'ping: sendmsg: Operation not permitted\n' }), ctx)?.message).toMatch(/local firewall/);
    expect(explainPingFailure(ran({ code: 1, stdout: ALL_LOST }), ctx)).toBeUndefined();
    expect(explainPingFailure(ran({ code: 0, stdout: IPV6 }), ctx)).toBeUndefined();
    // A complaint on the way does not void the replies that came.
    expect(explainPingFailure(ran({ code: 1, stdout: IPUTILS, stderr: 'ping: sendmsg: Network is unreachable\n' }), ctx)).toBeUndefined();
    expect(explainPingFailure(ran({ code: 2, stderr: 'ping: something odd\n' }), ctx)).toEqual({ code: 'EPING', message: 'ping failed (exit code 2) (ping said: ping: something odd)' });
  });
});

describe('ICMP request validation', () => {
  const problems = (request: unknown): string[] => {
    try {
      parseCheck({ id: 'v', checkType: 'ICMP', request }, '$', registry);
      return [];
    } catch (error) {
      expect(error).toBeInstanceOf(DefinitionError);
      return (error as DefinitionError).issues.map((i) => `${i.path}: ${i.problem}`);
    }
  };

  it('fills the defaults: IPv4, 10 pings, 10 % / 20 % loss thresholds, no latency thresholds below the cap', () => {
    const { check } = parseCheck({ id: 'i', checkType: 'ICMP', request: { hostname: 'h' } }, '$', registry);
    expect(check.request).toEqual({
      hostname: 'h',
      ipFamily: 'IPv4',
      pingCount: 10,
      degradedPacketLossThreshold: 10,
      maxPacketLossThreshold: 20,
    });
    expect([check.degradedResponseTime, check.maxResponseTime]).toEqual([20_000, 20_000]);
  });

  it('names each bad field', () => {
    expect(problems({})).toEqual(['$.request.hostname: is required']);
    expect(problems({ hostname: 'h', pingCount: 0 })).toEqual(['$.request.pingCount: must be between 1 and 50 (got 0)']);
    expect(problems({ hostname: 'h', pingCount: 51 })).toEqual(['$.request.pingCount: must be between 1 and 50 (got 51)']);
    expect(problems({ hostname: '-f', pingCount: 1 })[0]).toMatch(/^\$\.request\.hostname: must be a host name or an IP address/);
    expect(problems({ hostname: 'h', maxPacketLossThreshold: 101 })).toEqual([
      '$.request.maxPacketLossThreshold: must be a number of percent between 0 and 100 (got 101)',
    ]);
    expect(problems({ hostname: 'h', degradedPacketLossThreshold: 30, maxPacketLossThreshold: 20 })).toEqual([
      '$.request.degradedPacketLossThreshold: must not exceed maxPacketLossThreshold (30 > 20)',
    ]);
    expect(problems({ hostname: 'h', degradedPacketLossThreshold: 12.5 })).toEqual([]);
  });
});

describe('ICMP assertions', () => {
  const a = (source: string, property: string, comparison: Assertion['comparison'], target: string, regex: string | null = null): Assertion => ({
    source,
    property,
    comparison,
    target,
    regex,
  });
  const latency = { min: 0.1, avg: 0.5, max: 2, stdDev: 0.3 };
  const response = {
    packetLoss: 0,
    latency,
    packets: [
      { seq: 1, ttl: 64, rtt: 0.1 },
      { seq: 2, ttl: 64, rtt: 2 },
    ],
  };

  it('LATENCY compares one statistic; avg when the property is empty', () => {
    expect(evaluateLatency(a('LATENCY', 'max', 'LESS_THAN', '5'), latency)).toMatchObject({ actual: 2, passed: true });
    expect(evaluateLatency(a('LATENCY', 'stdDev', 'GREATER_THAN', '1'), latency)).toMatchObject({ actual: 0.3, passed: false });
    expect(evaluateLatency(a('LATENCY', '', 'EQUALS', '0.5'), latency)).toMatchObject({ actual: 0.5, passed: true });
    expect(evaluateLatency(a('LATENCY', 'median', 'EQUALS', '1'), latency)).toMatchObject({
      passed: false,
      error: 'LATENCY property must be one of avg, min, max, stdDev (got "median")',
    });
  });

  it('JSON_RESPONSE must hold for every selected value', () => {
    expect(evaluateJsonPath(a('JSON_RESPONSE', '$.packets[*].ttl', 'EQUALS', '64'), response)).toMatchObject({ actual: [64, 64], passed: true });
    expect(evaluateJsonPath(a('JSON_RESPONSE', '$.packets[*].rtt', 'LESS_THAN', '1'), response)).toMatchObject({ actual: [0.1, 2], passed: false });
    expect(evaluateJsonPath(a('JSON_RESPONSE', '$.packetLoss', 'EQUALS', '0'), response)).toMatchObject({ actual: 0, passed: true });
    expect(evaluateJsonPath(a('JSON_RESPONSE', '$.nothing', 'IS_NULL', ''), response)).toMatchObject({ actual: null, passed: true });
    expect(evaluateJsonPath(a('JSON_RESPONSE', '$.nothing', 'EQUALS', '1'), response)).toMatchObject({ passed: false });
    expect(evaluateJsonPath(a('JSON_RESPONSE', '$.packets[', 'EQUALS', '1'), response)).toMatchObject({
      passed: false,
      error: expect.stringMatching(/^invalid JSONPath "\$\.packets\["/),
    });
    expect(evaluateJsonPath(a('JSON_RESPONSE', '$.packets[*].seq', 'EQUALS', '1', '^(\\d)'), response)).toMatchObject({
      actual: ['1', '2'],
      passed: false,
    });
  });
});

describe('ICMP executor before ping', () => {
  it('an unknown {{NAME}} in hostname is an error naming it', async () => {
    const { check } = parseCheck({ id: 'i', checkType: 'ICMP', request: { hostname: '{{TARGET}}', pingCount: 1 } }, '$', registry);
    const outcome = await icmpExecutor.run(check as CheckDefinition<IcmpRequest>, {
      signal: new AbortController().signal,
      logger: pino({ level: 'silent' }),
      jobLog: [],
      variables: new Variables([]),
      settings: { responseBodyLimitBytes: 0, userAgent: 'outpost-test' },
    });
    expect(outcome.error).toMatch(/^Unknown variable \{\{TARGET\}\} in request\.hostname/);
    expect(outcome.errorCode).toBeUndefined();
    expect(outcome.detail).toMatchObject({ response: null, request: { hostname: '{{TARGET}}' } });
  });
});

describe('ICMP executor without ping', () => {
  it('says ping is missing instead of failing cryptically', async () => {
    const { check } = parseCheck({ id: 'i', checkType: 'ICMP', request: { hostname: '127.0.0.1', pingCount: 1 } }, '$', registry);
    const outcome = (await icmpExecutor.run(check as CheckDefinition<IcmpRequest>, {
      signal: new AbortController().signal,
      logger: pino({ level: 'silent' }),
      jobLog: [],
      variables: new Variables([]),
      settings: { responseBodyLimitBytes: 0, userAgent: 'outpost-test', tools: { ping: '/nonexistent/outpost/ping' } },
    })) as IcmpOutcome;
    expect(outcome.error).toMatch(/^ping is not installed at PING_PATH=\/nonexistent\/outpost\/ping \(ENOENT\)/);
    expect(outcome.errorCode).toBe('ENOENT');
    expect(outcome.member).toBe('icmpCheckResult');
    expect(outcome.responseTime).toBe(0);
    expect(outcome.degraded).toBe(false);
    expect(outcome.detail).toMatchObject({ response: null, requestError: outcome.error });
  });
});
