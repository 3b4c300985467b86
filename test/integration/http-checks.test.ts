// URL and API checks end to end (the real agent in once mode) against real
// nginx (plain and TLS with a test CA), a real proxy (tinyproxy) and a small
// node target for behaviour nginx cannot script (echo, stalls, redirects by status).

import { chmodSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer as createTcpServer, type Server as TcpServer } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CheckResultEntry } from '../../src/core/result-entry.js';
import { cleanEnv, startAgent, tempDir } from '../support/agent-process.js';
import { type Nginx, startNginx } from '../support/nginx.js';
import { startTargetServer, type TargetServer } from '../support/target-server.js';
import { startTinyproxy, type Tinyproxy } from '../support/tinyproxy.js';
import { createTestPki, type TestPki } from '../support/tls.js';
import { BOOKSTORE } from '../support/bookstore.js';

interface ApiDetail {
  request: { url: string; headers: Array<{ key: string; value: string }>; body: string };
  response: {
    status: number;
    headers: Record<string, string>;
    body: string;
    bodySize: number;
    bodyTruncated: boolean;
    redirects: number;
    timingPhases: Record<string, number>;
    tls: { subject: string | null; issuer: string | null; daysToExpiry: number | null; authorized: boolean } | null;
  } | null;
  requestError: string | null;
  assertions: Array<{ source: string; actual: unknown; passed: boolean; error?: string }>;
  jobLog: string[];
}

const BIG_BYTES = 50 * 1024 * 1024;

let plain: Nginx;
let valid: Nginx;
let expired: Nginx;
let wrongName: Nginx;
let proxy: Tinyproxy;
let target: TargetServer;
/** Answers every request with `100 Continue` before its 200, unasked (RFC 9110 says a client must read it; undici refuses). */
let continuing: TcpServer;
let pki: TestPki;
const results = new Map<string, CheckResultEntry[]>();
let stderr = '';
let checkCount = 0;

const final = (id: string) => {
  const list = results.get(id) ?? [];
  const entry = list.find((r) => r.resultType === 'FINAL');
  if (!entry) throw new Error(`no FINAL result for ${id}; stderr: ${stderr.slice(-1500)}`);
  return entry;
};
const api = (id: string) => final(id).apiCheckResult as unknown as ApiDetail;

beforeAll(async () => {
  pki = createTestPki();
  const files = tempDir('outpost-files-');
  writeFileSync(path.join(files, 'big.bin'), Buffer.alloc(BIG_BYTES, 'a'));
  writeFileSync(path.join(files, 'dribble.txt'), Buffer.alloc(64 * 1024, 'd'));
  writeFileSync(path.join(files, 'store.json'), JSON.stringify(BOOKSTORE));
  // nginx's workers run as nobody.
  chmodSync(files, 0o755);
  for (const name of ['big.bin', 'dribble.txt', 'store.json']) chmodSync(path.join(files, name), 0o644);
  const serverConfig = `
    location = /server-error { return 500 "boom"; }
    location = /moved { return 301 /store.json; }
    location = /token { return 200 "token=$http_x_token"; }
    location /files/ { alias ${files}/; }
    location = /store.json { alias ${files}/store.json; default_type application/json; add_header X-Shop "books"; }
    location = /dribble { alias ${files}/dribble.txt; limit_rate 32k; limit_rate_after 0; }
`;
  [plain, valid, expired, wrongName, proxy, target] = await Promise.all([
    startNginx({ serverConfig }),
    startNginx({ serverConfig, tls: pki.valid }),
    startNginx({ serverConfig, tls: pki.expired }),
    startNginx({ serverConfig, tls: pki.wrongName }),
    startTinyproxy(),
    startTargetServer(),
  ]);
  continuing = createTcpServer((socket) => {
    socket.on('error', () => undefined);
    socket.once('data', () => socket.end('HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok'));
  });
  await new Promise<void>((resolve) => continuing.listen(0, '127.0.0.1', resolve));
  const continuingUrl = `http://127.0.0.1:${(continuing.address() as { port: number }).port}/`;
  const tlsHost = (n: Nginx) => `https://localhost:${n.port}`;
  const echo = `${target.url}/echo`;
  const otherOrigin = `http://localhost:${new URL(target.url).port}/echo`;
  const checks = [
    // Requests: methods, headers, query, body types, basic auth, variables.
    ...(['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'HEAD'] as const).map((method) => ({
      id: `method-${method}`,
      checkType: 'API',
      request: { method, url: echo, body: method === 'GET' || method === 'HEAD' ? '' : 'x', bodyType: 'RAW' },
    })),
    {
      id: 'json-body',
      checkType: 'API',
      request: { method: 'POST', url: `{{BASE}}/echo`, bodyType: 'JSON', body: '{"user":"{{USER}}"}', headers: [{ key: 'X-Token', value: '{{OUTPOST_SECRET_TOKEN}}' }], queryParameters: [{ key: 'q', value: 'a b&c' }] },
      environmentVariables: [{ key: 'USER', value: 'ada' }],
      assertions: [
        { source: 'JSON_BODY', property: '$.headers["content-type"]', comparison: 'EQUALS', target: 'application/json' },
        { source: 'JSON_BODY', property: '$.body', comparison: 'EQUALS', target: '{"user":"ada"}' },
        { source: 'JSON_BODY', property: '$.headers["x-token"]', comparison: 'EQUALS', target: 'from-the-agent' },
        { source: 'JSON_BODY', property: '$.url', comparison: 'EQUALS', target: '/echo?q=a+b%26c' },
        { source: 'HEADERS', property: 'X-ECHO', comparison: 'EQUALS', target: 'yes' },
      ],
    },
    { id: 'form-body', checkType: 'API', request: { method: 'POST', url: echo, bodyType: 'FORM', body: '{"a":"1 2","b":"&"}' } },
    { id: 'graphql-body', checkType: 'API', request: { method: 'POST', url: echo, bodyType: 'GRAPHQL', body: '{ shop { name } }' } },
    { id: 'bad-json-body', checkType: 'API', request: { method: 'POST', url: echo, bodyType: 'JSON', body: '{nope' } },
    {
      id: 'basic-auth',
      checkType: 'API',
      request: { url: echo, basicAuth: { username: 'ada', password: 'p@ss:word' } },
      assertions: [{ source: 'JSON_BODY', property: '$.headers.authorization', comparison: 'EQUALS', target: `Basic ${Buffer.from('ada:p@ss:word').toString('base64')}` }],
    },
    { id: 'unknown-variable', checkType: 'API', request: { url: `${echo}?k={{MISSING_ONE}}` } },
    { id: 'invalid-url-api', checkType: 'API', environmentVariables: [{ key: 'HOST', value: 'a b' }], request: { url: 'http://{{HOST}}/' } },
    { id: 'bad-header-variable', checkType: 'API', environmentVariables: [{ key: 'HK', value: 'bad key' }], request: { url: echo, headers: [{ key: '{{HK}}', value: 'x' }] } },
    { id: 'unsolicited-100', checkType: 'URL', request: { url: continuingUrl } },
    { id: 'invalid-url-url', checkType: 'URL', environmentVariables: [{ key: 'HOST', value: 'a b' }], request: { url: 'http://{{HOST}}/' } },
    // Redirects: method rules and credentials across origins.
    { id: 'redirect-303', checkType: 'API', request: { method: 'POST', url: `${target.url}/redirect-to?status=303&url=/echo`, bodyType: 'RAW', body: 'payload' } },
    { id: 'redirect-307', checkType: 'API', request: { method: 'POST', url: `${target.url}/redirect-to?status=307&url=/echo`, bodyType: 'RAW', body: 'payload' } },
    { id: 'redirect-cross-origin', checkType: 'API', request: { url: `${target.url}/redirect-to?status=302&url=${encodeURIComponent(otherOrigin)}`, headers: [{ key: 'Authorization', value: 'Bearer keep-it-here' }] } },
    // Responses.
    {
      id: 'bookstore',
      checkType: 'API',
      request: { url: `${plain.url}/moved` },
      assertions: [
        { source: 'STATUS_CODE', comparison: 'EQUALS', target: '200' },
        { source: 'JSON_BODY', property: '$.store.book[*].author', comparison: 'NOT_EMPTY', target: '' },
        { source: 'JSON_BODY', property: '$..price', comparison: 'GREATER_THAN', target: '8' },
        { source: 'JSON_BODY', property: '$.store.book[?@.price < 10].title', comparison: 'CONTAINS', target: 'i' },
        { source: 'JSON_BODY', property: '$.store.book[-1].author', comparison: 'EQUALS', target: 'J. R. R. Tolkien' },
        { source: 'JSON_BODY', property: '$.store.bicycle', comparison: 'HAS_KEY', target: 'color' },
        { source: 'HEADERS', property: 'x-shop', comparison: 'EQUALS', target: 'books' },
        { source: 'HEADERS', property: '', comparison: 'HAS_KEY', target: 'content-type' },
        { source: 'TEXT_BODY', property: '', comparison: 'CONTAINS', target: 'Moby Dick' },
        { source: 'TEXT_BODY', property: '', comparison: 'EQUALS', target: '0-553-21311-3', regex: '"isbn":"([^"]+)"' },
        { source: 'RESPONSE_TIME', property: '', comparison: 'LESS_THAN', target: '30000' },
      ],
    },
    { id: 'bookstore-failing', checkType: 'API', request: { url: `${plain.url}/store.json` }, assertions: [{ source: 'JSON_BODY', property: '$..price', comparison: 'LESS_THAN', target: '100' }, { source: 'JSON_BODY', property: '$.nothing', comparison: 'IS_NULL', target: '' }] },
    {
      id: 'inherited-header-names',
      checkType: 'API',
      request: { url: `${plain.url}/store.json` },
      assertions: [
        { source: 'HEADERS', property: 'constructor', comparison: 'IS_NULL', target: '' },
        { source: 'HEADERS', property: '__proto__', comparison: 'IS_NULL', target: '' },
        { source: 'HEADERS', property: 'toString', comparison: 'IS_NULL', target: '' },
        { source: 'HEADERS', property: 'x-shop', comparison: 'EQUALS', target: 'books' },
      ],
    },
    { id: 'token-variable', checkType: 'URL', request: { url: `${plain.url}/health` }, assertions: [{ source: 'STATUS_CODE', comparison: 'EQUALS', target: '200' }] },
    { id: 'server-error', checkType: 'API', request: { url: `${plain.url}/server-error` } },
    { id: 'big-body', checkType: 'API', request: { url: `${plain.url}/files/big.bin` }, assertions: [{ source: 'TEXT_BODY', comparison: 'CONTAINS', target: 'aaaa' }] },
    { id: 'dribble', checkType: 'API', request: { url: `${plain.url}/dribble` } },
    { id: 'first-byte-200', checkType: 'API', request: { url: `${target.url}/slow/200` } },
    { id: 'stall', checkType: 'API', request: { url: `${target.url}/slow/120000` } },
    { id: 'degraded', checkType: 'API', degradedResponseTime: 100, maxResponseTime: 5000, request: { url: `${target.url}/slow/300` } },
    { id: 'over-max', checkType: 'API', degradedResponseTime: 100, maxResponseTime: 200, request: { url: `${target.url}/slow/400` } },
    // TLS.
    { id: 'tls-valid', checkType: 'API', request: { url: `${tlsHost(valid)}/store.json` } },
    { id: 'tls-ip-valid', checkType: 'URL', request: { url: `https://127.0.0.1:${valid.port}/health` } },
    { id: 'tls-expired', checkType: 'API', request: { url: `${tlsHost(expired)}/store.json` } },
    { id: 'tls-expired-skip', checkType: 'API', request: { url: `${tlsHost(expired)}/store.json`, skipSSL: true } },
    { id: 'tls-wrong-name', checkType: 'URL', request: { url: `${tlsHost(wrongName)}/health` } },
    { id: 'tls-wrong-name-skip', checkType: 'URL', request: { url: `${tlsHost(wrongName)}/health`, skipSSL: true } },
    // Proxies.
    { id: 'proxy-http', checkType: 'API', request: { url: `${plain.url}/token`, proxyUrl: proxy.url, headers: [{ key: 'x-token', value: 'via-proxy' }] }, assertions: [{ source: 'TEXT_BODY', comparison: 'EQUALS', target: 'token=via-proxy' }] },
    { id: 'proxy-https', checkType: 'URL', request: { url: `${tlsHost(valid)}/health`, proxyUrl: proxy.url } },
    // Retries.
    { id: 'retry-network', checkType: 'API', request: { url: 'http://127.0.0.1:9/' }, retryStrategy: { type: 'FIXED', baseBackoffSeconds: 0, maxRetries: 2, onlyOn: 'NETWORK_ERROR' } },
    { id: 'retry-not-on-500', checkType: 'API', request: { url: `${plain.url}/server-error` }, retryStrategy: { type: 'LINEAR', baseBackoffSeconds: 0, maxRetries: 3, onlyOn: 'NETWORK_ERROR' } },
    { id: 'retry-linear', checkType: 'API', request: { url: `${plain.url}/server-error` }, retryStrategy: { type: 'LINEAR', baseBackoffSeconds: 1, maxRetries: 2 } },
    { id: 'retry-then-pass', checkType: 'API', request: { url: `${plain.url}/health` }, retryStrategy: { type: 'EXPONENTIAL', baseBackoffSeconds: 0, maxRetries: 2 } },
  ];
  checkCount = checks.length;
  const dir = tempDir();
  const file = path.join(dir, 'checks.json');
  writeFileSync(file, JSON.stringify({ environmentVariables: [{ key: 'BASE', value: target.url }, { key: 'USER', value: 'global' }], checks }));
  const proc = startAgent(['once', file], cleanEnv({ JOB_CONCURRENCY: '64', NODE_EXTRA_CA_CERTS: pki.caCert, OUTPOST_SECRET_TOKEN: 'from-the-agent' }));
  await proc.exit;
  stderr = proc.stderr();
  for (const line of proc.stdoutLines.filter(Boolean)) {
    const r = JSON.parse(line) as CheckResultEntry;
    results.set(r.checkId as string, [...(results.get(r.checkId as string) ?? []), r]);
  }
}, 120_000);

afterAll(async () => {
  await Promise.all([plain?.stop(), valid?.stop(), expired?.stop(), wrongName?.stop(), proxy?.stop(), target?.close()]);
  await new Promise((resolve) => (continuing ? continuing.close(resolve) : resolve(undefined)));
});

const echoed = (id: string) => JSON.parse(api(id).response?.body ?? '{}') as { method: string; url: string; headers: Record<string, string>; body: string };

describe('API requests', () => {
  it('sends every method, HEAD without a body', () => {
    for (const method of ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']) {
      expect(final(`method-${method}`).hasFailures).toBe(false);
      expect(echoed(`method-${method}`).method).toBe(method);
    }
    expect(final('method-HEAD')).toMatchObject({ hasFailures: false });
    expect(api('method-HEAD').response).toMatchObject({ status: 200, bodySize: 0 });
  });

  it('fills in variables (check over global, OUTPOST_SECRET_* from the agent) in url, headers, query and body', () => {
    expect(api('json-body').assertions.map((a) => [a.actual, a.passed])).toEqual([
      ['application/json', true],
      ['{"user":"ada"}', true],
      // An OUTPOST_SECRET_* value is a secret: sent, asserted on, and scrubbed from the result.
      ['*****', true],
      ['/echo?q=a+b%26c', true],
      ['yes', true],
    ]);
  });

  it('sets the Content-Type of each body type', () => {
    expect(echoed('form-body').headers['content-type']).toBe('application/x-www-form-urlencoded');
    expect(echoed('form-body').body).toBe('a=1+2&b=%26');
    expect(echoed('graphql-body').headers['content-type']).toBe('application/json');
    expect(JSON.parse(echoed('graphql-body').body)).toEqual({ query: '{ shop { name } }' });
    expect(echoed('method-POST').headers['content-type']).toBe('text/plain; charset=utf-8');
    expect(api('bad-json-body').requestError).toMatch(/^request\.body is not valid JSON/);
  });

  it('sends basic auth (the password is a secret: the echo of it is scrubbed from the result)', () => {
    expect(api('basic-auth').assertions.map((a) => a.passed)).toEqual([true]);
    const echoedAuth = echoed('basic-auth').headers.authorization;
    expect(echoedAuth).toMatch(/^Basic .*\*{5}/);
    expect(echoedAuth).not.toContain(Buffer.from('ada:p@ss:word').toString('base64'));
  });

  it('names request.url when it is no URL once variables are filled in, API as URL, and sends nothing', () => {
    for (const id of ['invalid-url-api', 'invalid-url-url']) {
      expect(final(id), id).toMatchObject({ hasErrors: true, hasFailures: true });
      const detail = id === 'invalid-url-api' ? api(id) : (final(id) as unknown as { apiCheckResult: { requestError: string } }).apiCheckResult;
      expect(detail.requestError, id).toBe('request.url is not a valid URL after variables were filled in');
    }
  });

  it('names a header that cannot be sent once variables are filled in, and sends nothing', () => {
    expect(final('bad-header-variable')).toMatchObject({ hasErrors: true, hasFailures: true });
    expect(api('bad-header-variable').requestError).toBe(
      `request.headers[0].key: must be a header name: letters, digits and !#$%&'*+-.^_\`|~, no spaces (got "bad key") (after variables were filled in)`,
    );
  });

  it("says what an unsolicited 100 Continue is, not 'connection closed by peer'", () => {
    expect(final('unsolicited-100')).toMatchObject({ hasErrors: true });
    const detail = (final('unsolicited-100') as unknown as { apiCheckResult: { requestError: string } }).apiCheckResult;
    expect(detail.requestError).toMatch(
      /^the server sent a response that cannot be read before its final one: an unsolicited 100 Continue, or bytes before the request was sent \(UND_ERR_BAD_RESPONSE\) at 127\.0\.0\.1:\d+$/,
    );
  });

  it('names an unknown variable and sends nothing', () => {
    expect(final('unknown-variable')).toMatchObject({ hasErrors: true, hasFailures: true });
    expect(api('unknown-variable').requestError).toBe(
      "Unknown variable {{MISSING_ONE}} in request.url: define it in the check's, group's or global environment variables",
    );
    expect(api('unknown-variable').response).toBeNull();
  });

  it('turns POST into GET on 303 but keeps it on 307, and drops credentials across origins', () => {
    expect(echoed('redirect-303')).toMatchObject({ method: 'GET', body: '' });
    expect(echoed('redirect-307')).toMatchObject({ method: 'POST', body: 'payload' });
    expect(api('redirect-307').response?.redirects).toBe(1);
    expect(echoed('redirect-cross-origin').headers.authorization).toBeUndefined();
  });
});

describe('API responses and assertions', () => {
  it('evaluates JSONPath (each selected value must hold), headers, text with regex and response time', () => {
    const r = api('bookstore');
    expect(final('bookstore').hasFailures, JSON.stringify(r.assertions)).toBe(false);
    expect(r.response?.redirects).toBe(1);
    expect(r.assertions[1]?.actual).toEqual(['Nigel Rees', 'Evelyn Waugh', 'Herman Melville', 'J. R. R. Tolkien']);
    // RFC 9535 leaves the order of descendant results open, so compare as a set.
    expect([...((r.assertions[2]?.actual ?? []) as number[])].sort((a, b) => a - b)).toEqual([8.95, 8.99, 12.99, 22.99, 399]);
    expect(r.assertions[3]?.actual).toEqual(['Sayings of the Century', 'Moby Dick']);
    expect(r.assertions[9]?.actual).toBe('0-553-21311-3');
  });

  it("reads a header's own value only: `constructor`, `__proto__`, `toString` are absent headers, not Object.prototype's members", () => {
    const r = api('inherited-header-names');
    expect(final('inherited-header-names').hasFailures, JSON.stringify(r.assertions)).toBe(false);
    expect(r.assertions.map((a) => a.actual)).toEqual([null, null, null, 'books']);
  });

  it('fails when one of several selected values does not hold', () => {
    const r = api('bookstore-failing');
    expect(final('bookstore-failing').hasFailures).toBe(true);
    expect(r.assertions.map((a) => a.passed)).toEqual([false, true]);
  });

  it('fails a 500 without assertions', () => {
    expect(final('server-error')).toMatchObject({ hasFailures: true, hasErrors: false });
  });

  it('keeps 10 MB of a 50 MB body, reports the truncation, and still asserts on the kept part', () => {
    const r = api('big-body');
    expect(final('big-body').hasFailures).toBe(false);
    expect(r.response).toMatchObject({ bodySize: BIG_BYTES, bodyTruncated: true });
    expect(r.jobLog).toContain(`Received 200 OK (${BIG_BYTES} bytes, kept the first ${10 * 1024 * 1024})`);
    // The result itself stays within MAX_RESULT_BYTES (4 MiB): the body and its copy as the assertion's actual value share it.
    expect(Buffer.byteLength(JSON.stringify(final('big-body')))).toBeLessThanOrEqual(4 * 1024 * 1024);
    expect(r.response?.body.length).toBeGreaterThan(1024 * 1024);
    expect(r.jobLog.at(-1)).toMatch(/^result truncated to fit MAX_RESULT_BYTES \(4194304 bytes\): it was \d+ bytes as JSON; apiCheckResult\.response\.body cut to/);
  });

  it('measures a dribbled body as download time and a delayed answer as time to first byte', () => {
    const dribble = api('dribble').response?.timingPhases ?? {};
    expect(dribble.download).toBeGreaterThan(dribble.firstByte ?? Infinity);
    const delayed = api('first-byte-200').response?.timingPhases ?? {};
    expect(delayed.firstByte).toBeGreaterThanOrEqual(200);
  });

  it('keeps every run\'s phases non-negative and adding up to the total within 1 ms', () => {
    let checked = 0;
    for (const list of results.values()) {
      for (const r of list) {
        const phases = (r.apiCheckResult as unknown as ApiDetail | undefined)?.response?.timingPhases;
        if (!phases) continue;
        const { total = 0, ...parts } = phases;
        for (const value of Object.values(parts)) expect(value).toBeGreaterThanOrEqual(0);
        expect(Math.abs(Object.values(parts).reduce((a, b) => a + b, 0) - total)).toBeLessThanOrEqual(1);
        checked++;
      }
    }
    expect(checked).toBeGreaterThan(30);
  });

  it('reports a request stalled before headers as a timeout at the 30 s cap', () => {
    expect(final('stall')).toMatchObject({ hasErrors: true, hasFailures: true });
    expect(api('stall').requestError).toBe('Timed out after 30000 ms (the API check limit)');
  });

  it('marks degraded and over-max runs', () => {
    expect(final('degraded')).toMatchObject({ isDegraded: true, overMaxResponseTime: false, hasFailures: false });
    expect(final('over-max')).toMatchObject({ isDegraded: false, overMaxResponseTime: true, hasFailures: true });
  });
});

describe('TLS', () => {
  it('trusts the test CA through NODE_EXTRA_CA_CERTS and reports the certificate', () => {
    expect(final('tls-valid').hasFailures).toBe(false);
    const r = api('tls-valid');
    expect(r.response?.tls).toMatchObject({ subject: 'localhost', issuer: 'Outpost Test CA', authorized: true });
    expect(r.response?.tls?.daysToExpiry).toBeGreaterThanOrEqual(28);
    expect(r.response?.timingPhases.tls).toBeGreaterThan(0);
    expect(final('tls-ip-valid').hasFailures).toBe(false);
  });

  it('fails an expired or mismatched certificate unless skipSSL', () => {
    expect(final('tls-expired')).toMatchObject({ hasErrors: true });
    expect(api('tls-expired').requestError).toMatch(/^TLS certificate has expired \(CERT_HAS_EXPIRED\)/);
    expect(final('tls-wrong-name')).toMatchObject({ hasErrors: true });
    expect(api('tls-wrong-name').requestError).toMatch(/does not match the host name \(ERR_TLS_CERT_ALTNAME_INVALID\)/);
    expect(final('tls-expired-skip').hasFailures).toBe(false);
    expect(api('tls-expired-skip').response?.tls).toMatchObject({ authorized: false });
    expect(api('tls-expired-skip').response?.tls?.daysToExpiry).toBeLessThan(0);
    expect(final('tls-wrong-name-skip').hasFailures).toBe(false);
  });
});

describe('proxies', () => {
  it('sends plain HTTP and HTTPS (CONNECT) through the check\'s proxy, as its log shows', async () => {
    expect(final('proxy-http').hasFailures, JSON.stringify(api('proxy-http'))).toBe(false);
    expect(final('proxy-https').hasFailures, JSON.stringify(api('proxy-https'))).toBe(false);
    const log = proxy.log();
    expect(log).toContain(`GET http://127.0.0.1:${plain.port}/token`);
    expect(log).toMatch(new RegExp(`CONNECT localhost:${valid.port}`));
    expect(api('proxy-http').jobLog.some((l) => l.startsWith(`Using proxy ${proxy.url}`))).toBe(true);
  });
});

describe('retries', () => {
  it('reports each retried attempt as ATTEMPT and the last as FINAL with attempts', () => {
    const list = results.get('retry-network') ?? [];
    expect(list.map((r) => r.resultType)).toEqual(['ATTEMPT', 'ATTEMPT', 'FINAL']);
    expect(list.map((r) => r.attempts)).toEqual([1, 2, 3]);
    expect(new Set(list.map((r) => r.sequenceId)).size).toBe(1);
  });

  it('does not retry a 500 when only network errors are retried', () => {
    expect((results.get('retry-not-on-500') ?? []).map((r) => r.resultType)).toEqual(['FINAL']);
  });

  it('waits base × n between LINEAR retries', () => {
    const list = results.get('retry-linear') ?? [];
    expect(list.map((r) => r.resultType)).toEqual(['ATTEMPT', 'ATTEMPT', 'FINAL']);
    const starts = list.map((r) => Date.parse(r.startedAt));
    expect((starts[1] ?? 0) - (starts[0] ?? 0)).toBeGreaterThanOrEqual(1_000);
    expect((starts[2] ?? 0) - (starts[1] ?? 0)).toBeGreaterThanOrEqual(2_000);
  });

  it('does not retry a passing run', () => {
    expect((results.get('retry-then-pass') ?? []).map((r) => r.resultType)).toEqual(['FINAL']);
    expect(final('retry-then-pass').attempts).toBe(1);
  });
});

it('ran every check of the file', () => {
  expect(results.size).toBe(checkCount);
  expect(readFileSync(path.join(pki.dir, 'ca.crt'), 'utf8')).toContain('BEGIN CERTIFICATE');
});
