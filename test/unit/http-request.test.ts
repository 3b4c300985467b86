import { describe, expect, it } from 'vitest';
import { Fields } from '../../src/checks/fields.js';
import { buildBody, bypassesProxy, RequestBuildError } from '../../src/checks/http/request.js';
import { backoffMs, NO_RETRIES, parseRetryStrategy, shouldRetry } from '../../src/checks/retry.js';
import { UnknownVariableError, Variables } from '../../src/checks/variables.js';
import { processSecrets } from '../../src/core/process-secrets.js';

describe('variables', () => {
  const vars = new Variables(
    [
      { key: 'HOST', value: 'api.test' },
      { key: 'OUTPOST_SECRET_OVERRIDDEN', value: 'from-job' },
    ],
    processSecrets({ OUTPOST_SECRET_DB: 'from-agent', OUTPOST_SECRET_OVERRIDDEN: 'from-agent', PATH: '/usr/bin' }),
  );

  it('fills in job variables and OUTPOST_SECRET_* process variables, the job winning', () => {
    expect(vars.interpolate('https://{{HOST}}/x?p={{ OUTPOST_SECRET_DB }}', 'request.url')).toBe('https://api.test/x?p=from-agent');
    expect(vars.interpolate('{{OUTPOST_SECRET_OVERRIDDEN}}', 'f')).toBe('from-job');
  });

  it('does not expose other process variables', () => {
    expect(() => vars.interpolate('{{PATH}}', 'request.headers[0].value')).toThrow(
      new UnknownVariableError('PATH', 'request.headers[0].value'),
    );
  });

  it('names the unknown variable and the field', () => {
    expect(() => vars.interpolate('a {{NOPE}} b', 'request.body')).toThrow(/Unknown variable \{\{NOPE\}\} in request\.body/);
  });

  it('leaves text without references alone, including a lone brace pair that is not a name', () => {
    expect(vars.interpolate('{"a": {"b": 1}}', 'request.body')).toBe('{"a": {"b": 1}}');
    expect(vars.interpolate('{{ not a name }}', 'f')).toBe('{{ not a name }}');
  });
});

describe('retry strategy', () => {
  const parse = (raw: unknown) => {
    const fields = Fields.root({ retryStrategy: raw }, 'check');
    const strategy = parseRetryStrategy(fields);
    return { strategy, issues: fields.issues };
  };

  it('defaults to no retries', () => {
    expect(parseRetryStrategy(Fields.root({}, 'check'))).toEqual(NO_RETRIES);
  });

  it('waits base, base·n or base·2^(n−1)', () => {
    const base = { baseBackoffSeconds: 10, maxRetries: 3, maxDurationSeconds: 600 };
    expect([1, 2, 3].map((n) => backoffMs(parse({ type: 'FIXED', ...base }).strategy, n))).toEqual([10_000, 10_000, 10_000]);
    expect([1, 2, 3].map((n) => backoffMs(parse({ type: 'LINEAR', ...base }).strategy, n))).toEqual([10_000, 20_000, 30_000]);
    expect([1, 2, 3].map((n) => backoffMs(parse({ type: 'EXPONENTIAL', ...base }).strategy, n))).toEqual([10_000, 20_000, 40_000]);
  });

  it('stops after maxRetries, outside maxDurationSeconds, and on non-network errors with onlyOn', () => {
    const { strategy } = parse({ type: 'FIXED', baseBackoffSeconds: 60, maxRetries: 2, maxDurationSeconds: 120, onlyOn: 'NETWORK_ERROR' });
    expect(shouldRetry(strategy, 1, 'ECONNREFUSED', 0)).toBe(true);
    expect(shouldRetry(strategy, 2, 'ETIMEDOUT', 0)).toBe(true);
    expect(shouldRetry(strategy, 3, 'ETIMEDOUT', 0)).toBe(false);
    expect(shouldRetry(strategy, 1, 'ECONNRESET', 61_000)).toBe(false);
    expect(shouldRetry(strategy, 1, undefined, 0)).toBe(false);
    expect(shouldRetry(strategy, 1, 'CERT_HAS_EXPIRED', 0)).toBe(false);
    const any = parse({ type: 'FIXED', baseBackoffSeconds: 0, maxRetries: 1 }).strategy;
    expect(shouldRetry(any, 1, undefined, 0)).toBe(true);
  });

  it('names bad fields', () => {
    const { issues } = parse({ type: 'SOMETIMES', maxRetries: 11, onlyOn: 'ALWAYS' });
    expect(issues.map((i) => i.path)).toEqual(['check.retryStrategy.type', 'check.retryStrategy.onlyOn', 'check.retryStrategy.maxRetries']);
  });
});

describe('bodies', () => {
  it('sets the content type of each body type', () => {
    expect(buildBody('JSON', '{"a":1}', 'request.body')).toEqual({ body: '{"a":1}', contentType: 'application/json' });
    expect(buildBody('FORM', '{"a":"1 2","b":3}', 'request.body')).toEqual({ body: 'a=1+2&b=3', contentType: 'application/x-www-form-urlencoded' });
    expect(buildBody('FORM', 'a=1', 'request.body')).toEqual({ body: 'a=1', contentType: 'application/x-www-form-urlencoded' });
    expect(buildBody('RAW', 'hello', 'request.body')).toEqual({ body: 'hello', contentType: 'text/plain; charset=utf-8' });
    expect(buildBody('GRAPHQL', '{ a }', 'request.body')).toEqual({ body: '{"query":"{ a }"}', contentType: 'application/json' });
    expect(buildBody('GRAPHQL', '{"query":"{ a }","variables":{}}', 'request.body').body).toBe('{"query":"{ a }","variables":{}}');
    expect(buildBody('NONE', 'ignored', 'request.body')).toEqual({});
  });

  it('refuses a JSON body that is not JSON, naming the field', () => {
    expect(() => buildBody('JSON', '{', 'request.body')).toThrow(RequestBuildError);
    expect(() => buildBody('JSON', '{', 'request.body')).toThrow(/^request\.body is not valid JSON/);
  });
});

describe('NO_PROXY', () => {
  const url = (u: string) => new URL(u);
  it.each([
    ['http://internal.example/', 'internal.example', true],
    ['http://a.internal.example/', '.internal.example', true],
    ['http://a.internal.example/', '*.internal.example', true],
    ['http://a.internal.example/', 'internal.example', true],
    ['http://notinternal.example/', 'internal.example', false],
    ['http://127.0.0.1:8080/', '127.0.0.1:8080', true],
    ['http://127.0.0.1:8081/', '127.0.0.1:8080', false],
    ['https://x.test/', 'x.test:443', true],
    ['http://[::1]/', '::1', true],
    ['http://[::1]:8080/', '[::1]:8080', true],
    ['http://[::1]:8081/', '[::1]:8080', false],
    ['http://anything/', '*', true],
    ['http://anything/', '', false],
  ])('%s with NO_PROXY=%s → %s', (u, noProxy, expected) => {
    expect(bypassesProxy(url(u), noProxy)).toBe(expected);
  });
});
