// The TCP executor, called directly, against real peers on loopback (node:net
// servers in this process, and nginx): request validation, connect-only,
// send/read, banners, the idle gap, the byte limit, errors, aborts.

import net, { type AddressInfo } from 'node:net';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseCheck } from '../../src/checks/parse-definition.js';
import type { CheckDefinition } from '../../src/checks/definition.js';
import { JobAbortedError } from '../../src/core/errors.js';
import type { Executor } from '../../src/checks/executor.js';
import { ExecutorRegistry } from '../../src/checks/executor-registry.js';
import type { Outcome } from '../../src/core/outcome.js';
import { DefinitionError } from '../../src/checks/fields.js';
import { type TcpRequest, tcpExecutor } from '../../src/checks/tcp/tcp.js';
import { Variables } from '../../src/checks/variables.js';
import { freePort, type Nginx, startNginx } from '../support/nginx.js';
import type { TcpDetail } from '../support/tcp-detail.js';

const registry = new ExecutorRegistry([tcpExecutor as Executor]);
const logger = pino({ level: 'silent' });

interface Peer {
  port: number;
  server: net.Server;
}

function listen(onConnection: (socket: net.Socket) => void, host = '127.0.0.1'): Promise<Peer> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    onConnection(socket);
  });
  server.on('close', () => {
    for (const s of sockets) s.destroy();
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host, () => resolve({ port: (server.address() as AddressInfo).port, server }));
  });
}

const BANNER = '220 outpost-test ESMTP ready\r\n';
const BIG = Buffer.alloc(200_000, 'x');
let echo: Peer;
let replyAndClose: Peer;
let banner: Peer;
let silent: Peer;
let big: Peer;
let resetter: Peer;
let replyThenReset: Peer;
let trickle: Peer;
let echo6: Peer | undefined;
let nginx: Nginx;
let closedPort: number;

beforeAll(async () => {
  echo = await listen((s) => s.on('data', (chunk) => s.write(chunk)));
  replyAndClose = await listen((s) => s.once('data', () => s.end('pong\n')));
  banner = await listen((s) => s.write(BANNER));
  silent = await listen(() => undefined);
  big = await listen((s) => s.write(BIG));
  resetter = await listen((s) => s.once('data', () => s.resetAndDestroy()));
  replyThenReset = await listen((s) =>
    s.once('data', () => s.write('partial reply\n', () => setTimeout(() => s.resetAndDestroy(), 50))),
  );
  trickle = await listen((s) => {
    // One byte every 50 ms, bounded (200 bytes, 10 s): never idle for the default 500 ms gap.
    let sent = 0;
    const timer = setInterval(() => {
      if (sent++ >= 200 || s.destroyed) return clearInterval(timer);
      s.write('.');
    }, 50);
    s.on('close', () => clearInterval(timer));
  });
  try {
    echo6 = await listen((s) => s.on('data', (chunk) => s.write(chunk)), '::1');
  } catch {
    echo6 = undefined;
  }
  nginx = await startNginx();
  closedPort = await freePort();
});

afterAll(async () => {
  for (const peer of [echo, replyAndClose, banner, silent, big, resetter, replyThenReset, trickle, echo6]) peer?.server.close();
  await nginx?.stop();
});

function check(request: Record<string, unknown>, assertions: unknown[] = [], extra: Record<string, unknown> = {}) {
  const { check } = parseCheck({ id: 't', checkType: 'TCP', request, assertions, ...extra }, '$', registry);
  return check as CheckDefinition<TcpRequest>;
}

const settings = { responseBodyLimitBytes: 0, userAgent: 'outpost-test' };

async function run(
  request: Record<string, unknown>,
  assertions: unknown[] = [],
  signal: AbortSignal = new AbortController().signal,
  variables = new Variables([]),
): Promise<{ outcome: Outcome; detail: TcpDetail }> {
  const outcome = await tcpExecutor.run(check(request, assertions), { signal, logger, jobLog: [], variables, settings });
  return { outcome, detail: outcome.detail as unknown as TcpDetail };
}

const timeoutAfter = (ms: number) => {
  const controller = new AbortController();
  setTimeout(() => controller.abort(new JobAbortedError('timeout', `Timed out after ${ms} ms (the TCP check limit)`)), ms);
  return controller.signal;
};

describe('TCP request validation', () => {
  const problems = (request: unknown): string[] => {
    try {
      parseCheck({ id: 'v', checkType: 'TCP', request }, '$.checks[0]', registry);
      return [];
    } catch (error) {
      expect(error).toBeInstanceOf(DefinitionError);
      return (error as DefinitionError).issues.map((i) => `${i.path}: ${i.problem}`);
    }
  };

  it('accepts a minimal request and fills the defaults', () => {
    expect(check({ hostname: 'example.test', port: 25 }).request).toEqual({
      hostname: 'example.test',
      port: 25,
      ipFamily: 'IPv4',
      readLimitBytes: 65_536,
      idleTimeoutMs: 500,
    });
    expect(check({ hostname: 'h', port: 1, data: '' }).request.data).toBeUndefined();
  });

  it('uses the TCP limits: 4000/5000 ms, cap 5000', () => {
    const c = check({ hostname: 'h', port: 1 });
    expect([c.degradedResponseTime, c.maxResponseTime]).toEqual([4000, 5000]);
    expect(() => check({ hostname: 'h', port: 1 }, [], { maxResponseTime: 5001 })).toThrow(/maxResponseTime: must be between 0 and 5000 ms/);
  });

  it('names each bad field by its path', () => {
    expect(problems({})).toEqual(['$.checks[0].request.hostname: is required', '$.checks[0].request.port: is required (1-65535)']);
    expect(problems({ hostname: '', port: 0 })).toEqual([
      '$.checks[0].request.hostname: must not be empty',
      '$.checks[0].request.port: must be between 1 and 65535 (got 0)',
    ]);
    expect(problems({ hostname: 'h', port: 65_536 })).toEqual(['$.checks[0].request.port: must be between 1 and 65535 (got 65536)']);
    expect(problems({ hostname: 'h', port: '80' })).toEqual(['$.checks[0].request.port: must be an integer (got "80")']);
    expect(problems({ hostname: 'a'.repeat(254), port: 1 })).toEqual(['$.checks[0].request.hostname: must be at most 253 characters (got 254)']);
    expect(problems({ hostname: 'http://x/', port: 1 })[0]).toMatch(/^\$\.checks\[0\]\.request\.hostname: must be a host name or an IP address/);
    // A port belongs in port, where DNS and TCP checks read it; a bare IPv6 address is a host.
    for (const hostname of ['127.0.0.1:8080', 'db.internal:5432', '[::1]:25']) {
      expect(problems({ hostname, port: 1 })).toEqual([`$.checks[0].request.hostname: must be a host name or an IP address without a port; put the port in request.port (got ${JSON.stringify(hostname)})`]);
    }
    expect(problems({ hostname: '::1', port: 1 })).toEqual([]);
    expect(problems({ hostname: 'h', port: 1, data: 5 })).toEqual(['$.checks[0].request.data: must be a string (got 5)']);
    expect(problems({ hostname: 'h', port: 1, ipFamily: 'IPv5' })).toEqual(['$.checks[0].request.ipFamily: must be one of IPv4, IPv6 (got "IPv5")']);
    expect(problems({ hostname: 'h', port: 1, readLimitBytes: 2_000_000 })).toEqual([
      '$.checks[0].request.readLimitBytes: must be between 1 and 1048576 bytes (got 2000000)',
    ]);
    expect(problems({ hostname: 'h', port: 1, idleTimeoutMs: 0 })).toEqual(['$.checks[0].request.idleTimeoutMs: must be between 10 and 5000 ms (got 0)']);
  });

  it('accepts only RESPONSE_DATA and RESPONSE_TIME assertions', () => {
    expect(() => check({ hostname: 'h', port: 1 }, [{ source: 'STATUS_CODE', comparison: 'EQUALS', target: '200' }])).toThrow(
      /assertions\[0\]\.source: must be one of RESPONSE_DATA, RESPONSE_TIME/,
    );
  });
});

describe('TCP executor against real peers', () => {
  it('without data or RESPONSE_DATA assertions only connects', async () => {
    const { outcome, detail } = await run({ hostname: '127.0.0.1', port: banner.port });
    expect(outcome.error).toBeUndefined();
    expect(outcome.assertionsFailed).toBe(false);
    expect(outcome.member).toBe('tcpCheckResult');
    expect(detail.response).toMatchObject({ connected: true, end: 'connect-only', bytes: 0, data: '', address: '127.0.0.1', family: 'IPv4' });
    const t = detail.response?.timings;
    expect(t?.dns).toBe(0);
    expect(t?.connect).toBeGreaterThanOrEqual(0);
    expect(t?.firstByte).toBeNull();
    expect(outcome.responseTime).toBe(t?.total);
    expect(detail.requestError).toBeNull();
    expect(detail.jobLog).toContain(`Connected to 127.0.0.1:${banner.port}`);
  });

  it('sends data and reads the echo until the idle gap', async () => {
    const { outcome, detail } = await run({ hostname: 'localhost', port: echo.port, data: 'hello\n', idleTimeoutMs: 100 }, [
      { source: 'RESPONSE_DATA', comparison: 'EQUALS', target: 'hello\n' },
    ]);
    expect(outcome.error).toBeUndefined();
    expect(outcome.assertionsFailed).toBe(false);
    expect(detail.response).toMatchObject({ data: 'hello\n', bytes: 6, truncated: false, end: 'idle' });
    const t = detail.response?.timings;
    expect(t?.dns).toBeGreaterThanOrEqual(0);
    expect(t?.firstByte).toBeGreaterThanOrEqual(0);
    expect((t?.dns ?? 0) + (t?.connect ?? 0) + (t?.firstByte ?? 0)).toBeLessThanOrEqual((t?.total ?? 0) + 0.1);
    expect(detail.request).toMatchObject({ hostname: 'localhost', port: echo.port, ipFamily: 'IPv4', data: 'hello\n' });
    expect(detail.jobLog).toContain(`Resolved localhost to 127.0.0.1 (IPv4)`);
    expect(detail.jobLog).toContain('Sent 6 bytes');
  });

  it('does not count the idle gap it waits out in the total', async () => {
    const { detail } = await run({ hostname: '127.0.0.1', port: echo.port, data: 'hi', idleTimeoutMs: 2000 });
    const t = detail.response?.timings;
    const phases = (t?.dns ?? 0) + (t?.connect ?? 0) + (t?.firstByte ?? 0);
    expect(detail.response?.end).toBe('idle');
    expect((t?.total ?? 0) - phases).toBeLessThan(1000);
  });

  it('a reply still arriving when the time limit hits is judged, not an error', async () => {
    const { outcome, detail } = await run({ hostname: '127.0.0.1', port: trickle.port }, [
      { source: 'RESPONSE_DATA', comparison: 'CONTAINS', target: '.' },
    ], timeoutAfter(600));
    expect(outcome.error).toBeUndefined();
    expect(outcome.assertionsFailed).toBe(false);
    expect(detail.response?.end).toBe('time-limit');
    expect(detail.response?.bytes).toBeGreaterThan(0);
  });

  it('without data, a banner wait cut by the time limit is "no banner", not an error', async () => {
    const { outcome, detail } = await run({ hostname: '127.0.0.1', port: silent.port, idleTimeoutMs: 5000 }, [
      { source: 'RESPONSE_DATA', comparison: 'IS_EMPTY', target: '' },
    ], timeoutAfter(300));
    expect(outcome.error).toBeUndefined();
    expect(detail.response).toMatchObject({ end: 'no-banner', bytes: 0 });
  });

  it('reads until the peer closes, and passes without assertions', async () => {
    const { outcome, detail } = await run({ hostname: '127.0.0.1', port: replyAndClose.port, data: 'ping\n' });
    expect(outcome.error).toBeUndefined();
    expect(outcome.assertionsFailed).toBe(false);
    expect(detail.response).toMatchObject({ data: 'pong\n', end: 'closed' });
    expect(detail.jobLog.at(-1)).toBe('Received 5 bytes; the peer closed the connection');
  });

  it('reads a banner when RESPONSE_DATA is asserted, and applies a regex', async () => {
    const { outcome, detail } = await run({ hostname: '127.0.0.1', port: banner.port }, [
      { source: 'RESPONSE_DATA', comparison: 'CONTAINS', target: 'ESMTP' },
      { source: 'RESPONSE_DATA', comparison: 'EQUALS', target: '220', regex: '^(\\d{3}) ' },
      { source: 'RESPONSE_DATA', comparison: 'EQUALS', target: '250', regex: '^(\\d{3}) ' },
    ]);
    expect(outcome.error).toBeUndefined();
    expect(detail.response?.data).toBe(BANNER);
    expect(detail.assertions.map((a) => [a.actual, a.passed])).toEqual([
      [BANNER, true],
      ['220', true],
      ['220', false],
    ]);
    expect(outcome.assertionsFailed).toBe(true);
  });

  it('without data, a peer that sends no banner within the idle gap is judged on empty text, not an error', async () => {
    const { outcome, detail } = await run({ hostname: '127.0.0.1', port: silent.port, idleTimeoutMs: 100 }, [
      { source: 'RESPONSE_DATA', comparison: 'IS_EMPTY', target: '' },
    ]);
    expect(outcome.error).toBeUndefined();
    expect(outcome.assertionsFailed).toBe(false);
    expect(detail.response).toMatchObject({ end: 'no-banner', data: '', bytes: 0 });
  });

  it('with data, a peer that never answers is a "no reply" error when the signal aborts', async () => {
    const { outcome, detail } = await run({ hostname: '127.0.0.1', port: silent.port, data: 'hello' }, [], timeoutAfter(700));
    expect(outcome.error).toMatch(/^No reply from 127\.0\.0\.1:\d+ within \d+ ms after sending 5 bytes$/);
    expect(detail.response).toMatchObject({ connected: true, bytes: 0 });
    expect(detail.response?.timings.firstByte).toBeNull();
    expect(detail.assertions).toEqual([]);
  });

  it('stops at readLimitBytes and says the reply was truncated', async () => {
    const { outcome, detail } = await run({ hostname: '127.0.0.1', port: big.port, readLimitBytes: 1000 }, [
      { source: 'RESPONSE_DATA', comparison: 'CONTAINS', target: 'xxx' },
    ]);
    expect(outcome.error).toBeUndefined();
    expect(detail.response).toMatchObject({ bytes: 1000, truncated: true, end: 'limit' });
    expect(detail.response?.data).toBe('x'.repeat(1000));
    expect(detail.jobLog.some((l) => l.includes('truncated'))).toBe(true);
  });

  it('reports a refused port as an error, never an exception', async () => {
    const { outcome, detail } = await run({ hostname: '127.0.0.1', port: closedPort, data: 'x' });
    expect(outcome.error).toBe(`connection refused (ECONNREFUSED) at 127.0.0.1:${closedPort}`);
    expect(detail.response).toMatchObject({ connected: false, bytes: 0 });
    expect(detail.response?.timings.connect).toBeNull();
    expect(outcome.assertionsFailed).toBe(false);
  });

  it('a reset before any reply is an error; a reset after a reply ends it', async () => {
    const reset = await run({ hostname: '127.0.0.1', port: resetter.port, data: 'x' });
    expect(reset.outcome.error).toBe(`connection reset by peer (ECONNRESET) at 127.0.0.1:${resetter.port}`);
    const partial = await run({ hostname: '127.0.0.1', port: replyThenReset.port, data: 'x', idleTimeoutMs: 2000 });
    expect(partial.outcome.error).toBeUndefined();
    expect(partial.detail.response).toMatchObject({ data: 'partial reply\n', end: 'reset' });
  });

  it('RESPONSE_TIME compares the total', async () => {
    const { outcome, detail } = await run({ hostname: '127.0.0.1', port: echo.port }, [
      { source: 'RESPONSE_TIME', comparison: 'LESS_THAN', target: '60000' },
      { source: 'RESPONSE_TIME', comparison: 'GREATER_THAN', target: '60000' },
    ]);
    expect(detail.assertions.map((a) => a.passed)).toEqual([true, false]);
    expect(detail.assertions[0]?.actual).toBe(detail.response?.timings.total);
    expect(outcome.assertionsFailed).toBe(true);
  });

  it('sends an HTTP request to nginx and asserts on the status line', async () => {
    const { outcome, detail } = await run({ hostname: '127.0.0.1', port: nginx.port, data: 'GET /health HTTP/1.0\r\n\r\n' }, [
      { source: 'RESPONSE_DATA', comparison: 'CONTAINS', target: '200' },
      { source: 'RESPONSE_DATA', comparison: 'EQUALS', target: '200', regex: '^HTTP/1\\.\\d (\\d{3})' },
    ]);
    expect(outcome.error).toBeUndefined();
    expect(outcome.assertionsFailed).toBe(false);
    expect(detail.response?.data).toMatch(/^HTTP\/1\.1 200 OK\r\n[\s\S]*\r\n\r\nok$/);
    expect(detail.response?.end).toBe('closed');
  });

  it('connects over IPv6 when asked', async (ctx) => {
    if (!echo6) return ctx.skip();
    const { outcome, detail } = await run({ hostname: '::1', port: echo6.port, ipFamily: 'IPv6', data: 'six' });
    expect(outcome.error).toBeUndefined();
    expect(detail.response).toMatchObject({ address: '::1', family: 'IPv6', data: 'six' });
    expect(detail.jobLog).toContain(`Connected to [::1]:${echo6.port}`);
  });

  it('fills {{NAME}} in hostname and data from the variables; an unknown name is an error before connecting', async () => {
    const variables = new Variables([
      { key: 'HOST', value: '127.0.0.1', secret: false },
      { key: 'WORD', value: 'secret-word', secret: true },
    ]);
    const { outcome, detail } = await run({ hostname: '{{HOST}}', port: echo.port, data: 'say {{WORD}}', idleTimeoutMs: 100 }, [], undefined, variables);
    expect(outcome.error).toBeUndefined();
    expect(detail.response?.data).toBe('say secret-word');
    expect(detail.request).toMatchObject({ hostname: '127.0.0.1', data: 'say secret-word' });
    const unknown = await run({ hostname: '{{NOPE}}', port: echo.port });
    expect(unknown.outcome.error).toMatch(/^Unknown variable \{\{NOPE\}\} in request\.hostname/);
    expect(unknown.detail.response).toBeNull();
  });

  it('sets errorCode for retry rules (NETWORK_ERROR)', async () => {
    expect((await run({ hostname: '127.0.0.1', port: closedPort })).outcome.errorCode).toBe('ECONNREFUSED');
    expect((await run({ hostname: '127.0.0.1', port: silent.port, data: 'x' }, [], timeoutAfter(300))).outcome.errorCode).toBe('ETIMEDOUT');
    expect((await run({ hostname: '127.0.0.1', port: echo.port })).outcome.errorCode).toBeUndefined();
  });

  it('a lost lease stops the run with its own message', async () => {
    const controller = new AbortController();
    setTimeout(() => controller.abort(new JobAbortedError('lease-lost', 'Lease lost: the job was handed to another agent')), 200);
    const { outcome } = await run({ hostname: '127.0.0.1', port: silent.port, data: 'x' }, [], controller.signal);
    expect(outcome.error).toBe('Lease lost: the job was handed to another agent');
  });

  it('an already aborted signal returns at once with a timeout error', async () => {
    const controller = new AbortController();
    controller.abort(new JobAbortedError('timeout', 'Timed out'));
    const { outcome } = await run({ hostname: '127.0.0.1', port: echo.port }, [], controller.signal);
    expect(outcome.error).toMatch(/timed out/);
  });
});
