// Error events (src/control-plane/events.ts): what is kept and removed, batching,
// the rate limit, fire-and-forget sending and the shutdown flush.

import pino from 'pino';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { EventsRequest } from '../../src/core/protocol.js';
import { EventReporter, jobTargetStrings, sanitizeEventText } from '../../src/control-plane/events.js';
import { Scrubber } from '../../src/secrets/scrubber.js';

const silent = pino({ level: 'silent' });

function fakeSender(behaviour: 'ok' | 'fail' | 'hang' = 'ok') {
  const calls: EventsRequest[] = [];
  return {
    calls,
    sendEvents: (body: EventsRequest) => {
      calls.push(body);
      if (behaviour === 'fail') return Promise.reject(new Error('events: HTTP 503'));
      if (behaviour === 'hang') return new Promise<never>(() => undefined);
      return Promise.resolve();
    },
  };
}

afterEach(() => {
  vi.useRealTimers();
});

describe('sanitizeEventText', () => {
  const secrets = Scrubber.of(['s3cr3t-token-value']);

  it('removes secrets, URLs, IP addresses, host names, header values, quoted text and long tokens', () => {
    const text = [
      'request to https://user:pw@api.internal.example:8443/v1/items?key=abc failed',
      'connect ECONNREFUSED 10.1.2.3:5432 and [fe80::1]:80 and 2001:db8::42',
      'getaddrinfo ENOTFOUND db01.corp.acme.com',
      'token s3cr3t-token-value leaked',
      'Authorization: Bearer abc.def.ghi',
      'sent Bearer xyz.uvw as the token',
      'x-api-key=123456 cookie: a=b',
      'Unexpected token \'<\', "<html><body>secret page</body>" is not valid JSON',
      'blob ABCDEFGHIJKLMNOPQRSTUVWXYZabcdef0123456789+/== end',
    ].join('\n');
    const out = sanitizeEventText(text, [secrets]);
    for (const gone of ['user:pw', 'api.internal.example', '10.1.2.3', 'fe80::1', '2001:db8::42', 'db01.corp.acme.com', 's3cr3t-token-value', 'abc.def.ghi', 'xyz.uvw', '123456', 'a=b', '<html>', 'secret page', 'ABCDEFGHIJKLMNOP']) {
      expect(out, gone).not.toContain(gone);
    }
    expect(out).toContain('<url> failed');
    expect(out).toContain('ECONNREFUSED <ip>');
    expect(out).toContain('ENOTFOUND <host>');
    expect(out).toContain('Authorization: <redacted>');
    expect(out).toContain('sent Bearer <redacted> as the token');
    expect(out).toContain('is not valid JSON');
  });

  it('keeps stack frames useful: function names, file names and positions, the install path shortened', () => {
    const root = new URL('../..', import.meta.url);
    const stack = [
      'TypeError: Cannot read properties of undefined',
      `    at JobQueue.attempt (${new URL('dist/jobs/job-queue.js', root).href}:215:43)`,
      `    at run (${new URL('node_modules/undici/lib/core/request.js', root).pathname}:10:5)`,
      '    at process.processTicksAndRejections (node:internal/process/task_queues:95:5)',
    ].join('\n');
    const out = sanitizeEventText(stack, []);
    expect(out).toBe(
      [
        'TypeError: Cannot read properties of undefined',
        '    at JobQueue.attempt (<outpost>/dist/jobs/job-queue.js:215:43)',
        '    at run (<outpost>/node_modules/undici/lib/core/request.js:10:5)',
        '    at process.processTicksAndRejections (node:internal/process/task_queues:95:5)',
      ].join('\n'),
    );
  });
});

describe('sanitizeEventText on long input', () => {
  /** Milliseconds one call takes. */
  const timed = (text: string): number => {
    const start = performance.now();
    sanitizeEventText(text, [Scrubber.of(['s3cr3t-token-value'])]);
    return performance.now() - start;
  };

  it('cleans 100,000-character lines in time comparable to ordinary text of the same size (no quadratic pattern)', () => {
    const size = 100_000;
    // Ordinary text: short words and spaces, nothing the patterns backtrack over.
    const baseline = Math.min(timed('ab cd '.repeat(size / 6)), timed('ab cd '.repeat(size / 6)));
    const worst: Record<string, string> = {
      'a long token': 'a1'.repeat(size / 2),
      'a long run without digits (token pattern)': 'a'.repeat(size),
      'dotted digits (host name pattern)': '1.'.repeat(size / 2),
      'dotted letters (URL scheme pattern)': 'a.'.repeat(size / 2),
      'an unterminated quote of escapes': '"\\'.repeat(size / 2),
    };
    for (const [what, text] of Object.entries(worst)) {
      // A ratio, not an absolute time: the quadratic patterns took over 10,000 times the baseline here.
      expect(timed(text), what).toBeLessThan(baseline * 20 + 250);
    }
  });

  it('still removes a long token, and drops a token that the length cut splits rather than keep a short piece of it', () => {
    const token = 'Zm9vYmFy0123456789abcdefghijklmnopqrstuvwxyz';
    const out = sanitizeEventText(`key ${'a1'.repeat(50_000)} end`, []);
    expect(out).not.toMatch(/a1a1/);
    expect(out.length).toBeLessThan(1_100);
    const split = sanitizeEventText(`${'x '.repeat(490)}${token}${token}`, []);
    expect(split).not.toContain(token.slice(0, 10));
    expect(split.endsWith('…')).toBe(true);
  });
});

describe('jobTargetStrings', () => {
  it('collects the request strings, host names, the check name and id and every variable value, not enum words', () => {
    const strings = jobTargetStrings(
      { id: 'home', name: 'Intranet home', request: { method: 'GET', url: 'http://user@intranet:8080/x', ipFamily: 'IPv4', headers: [{ key: 'x-h', value: 'v1' }] } },
      [{ value: 'var-value' }],
    );
    expect(strings).toEqual(expect.arrayContaining(['http://user@intranet:8080/x', 'intranet', 'Intranet home', 'home', 'x-h', 'v1', 'var-value']));
    expect(strings).not.toContain('GET');
    expect(strings).not.toContain('IPv4');
  });
});

describe('EventReporter', () => {
  const options = { agentVersion: '9.9.9', nodeVersion: 'v20.0.0', scrubber: Scrubber.of(['agent-api-key-1']) };

  it('sends one sanitized event per error with technical metadata only', async () => {
    const sender = fakeSender();
    const reporter = new EventReporter(sender, silent, options);
    const jobScrubber = Scrubber.of(['agent-api-key-1', 'job-secret-2']);
    reporter.report(new TypeError('failed for http://intranet:8080/x with job-secret-2 and agent-api-key-1 at 192.168.1.9'), {
      origin: 'executor',
      checkType: 'API',
      scrubber: jobScrubber,
      targetStrings: ['intranet'],
    });
    await reporter.close(1_000);
    expect(sender.calls).toHaveLength(1);
    const [event] = sender.calls[0]?.events ?? [];
    expect(event).toMatchObject({ level: 'error', name: 'TypeError', agentVersion: '9.9.9', nodeVersion: 'v20.0.0', checkType: 'API', origin: 'executor' });
    expect(event?.message).toBe('failed for <url> with ***** and ***** at <ip>');
    expect(event?.stack?.split('\n')[0]).toBe('TypeError: failed for <url> with ***** and ***** at <ip>');
    expect(Object.keys(event ?? {}).sort()).toEqual(['agentVersion', 'checkType', 'level', 'message', 'name', 'nodeVersion', 'origin', 'stack']);
  });

  it('batches: at 20 events at once, otherwise on the interval', async () => {
    vi.useFakeTimers();
    const sender = fakeSender();
    const reporter = new EventReporter(sender, silent, { ...options, maxPerMinute: 100 });
    for (let i = 0; i < 25; i++) reporter.report(new Error(`e${i}`), { origin: 'spool' });
    expect(sender.calls.map((c) => c.events.length)).toEqual([20]);
    await vi.advanceTimersByTimeAsync(5_000);
    expect(sender.calls.map((c) => c.events.length)).toEqual([20, 5]);
    await vi.advanceTimersByTimeAsync(5_000);
    expect(sender.calls).toHaveLength(2);
    await reporter.close(100);
  });

  it('rate-limits to 30 a minute, drops and counts the rest, and says so once the window reopens', async () => {
    vi.useFakeTimers();
    const sender = fakeSender();
    const reporter = new EventReporter(sender, silent, options);
    for (let i = 0; i < 45; i++) reporter.report(new Error(`e${i}`), { origin: 'results-batch' });
    await vi.advanceTimersByTimeAsync(5_000);
    expect(sender.calls.flatMap((c) => c.events)).toHaveLength(30);
    expect(reporter.dropped).toBe(15);
    await vi.advanceTimersByTimeAsync(60_000);
    const last = sender.calls.at(-1)?.events ?? [];
    expect(last).toEqual([expect.objectContaining({ name: 'EventsDropped', message: expect.stringContaining('15 error events were dropped') })]);
    await reporter.close(100);
  });

  it('never throws or retries: a failed send is dropped (and logged at debug)', async () => {
    const sender = fakeSender('fail');
    const debug: string[] = [];
    const logger = pino({ level: 'debug' }, { write: (line: string) => debug.push(line) });
    const reporter = new EventReporter(sender, logger, options);
    expect(() => reporter.report(new Error('x'), { origin: 'spool' })).not.toThrow();
    expect(() => reporter.report('a string, not an Error', { origin: 'unhandled-rejection' })).not.toThrow();
    await reporter.flush();
    await reporter.flush();
    expect(sender.calls).toHaveLength(1);
    expect(sender.calls[0]?.events.map((e) => e.name)).toEqual(['Error', 'NonError']);
    expect(debug.map((l) => JSON.parse(l) as { level: number; msg: string })).toEqual([
      expect.objectContaining({ level: 20, msg: 'could not send error events; dropped' }),
    ]);
    await reporter.close(100);
  });

  it('flushes at close within its deadline even when the control plane hangs, and accepts nothing after', async () => {
    const sender = fakeSender('hang');
    const reporter = new EventReporter(sender, silent, options);
    reporter.report(new Error('late'), { origin: 'uncaught-exception' });
    const started = Date.now();
    await reporter.close(200);
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(sender.calls).toHaveLength(1);
    reporter.report(new Error('after close'), { origin: 'spool' });
    await reporter.flush();
    expect(sender.calls).toHaveLength(1);
  });
});
