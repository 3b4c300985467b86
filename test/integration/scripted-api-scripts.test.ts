// API checks with a setupScript and a tearDownScript end to end (the real
// agent in once mode, runtime 2026-04, test/support/scripted-run.ts): a setup
// script that signs the request, teardown assertions, scripts at check level.

import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { RUNTIME, SIGNING_KEY, useScriptedRun } from '../support/scripted-run.js';

const run = useScriptedRun(({ target }) => {
  const echo = `${target.url}/echo`;
  return [
    {
      id: 'setup-signs',
      checkType: 'API',
      runtimeId: RUNTIME,
      request: {
        method: 'POST',
        url: echo,
        bodyType: 'JSON',
        body: '{"order":42}',
        setupScript: `const crypto = require('node:crypto');
const jwt = require('jsonwebtoken');
request.headers['X-Signature'] = crypto.createHmac('sha256', environment.SIGNING_KEY).update(request.body).digest('hex');
request.headers['X-Jwt'] = jwt.sign({ sub: 'ada' }, environment.SIGNING_KEY, { noTimestamp: true });
request.queryParameters.signed = 'yes';`,
        tearDownScript: `const body = JSON.parse(response.body);
expect(response.status).toBe(200);
expect(body.headers['x-signature']).toBe(request.headers['X-Signature']);`,
      },
      environmentVariables: [{ key: 'SIGNING_KEY', value: SIGNING_KEY }],
      assertions: [
        { source: 'JSON_BODY', property: '$.headers["x-signature"]', comparison: 'EQUALS', target: createHmac('sha256', SIGNING_KEY).update('{"order":42}').digest('hex') },
        { source: 'JSON_BODY', property: '$.url', comparison: 'EQUALS', target: '/echo?signed=yes' },
      ],
    },
    {
      id: 'teardown-fails',
      checkType: 'API',
      request: { url: echo, tearDownScript: `\nconst body = JSON.parse(response.body);\nexpect(body.method).toBe('DELETE');` },
    },
    { id: 'setup-throws', checkType: 'API', request: { url: echo, setupScript: `\n\nthrow new Error('no token today');` } },
    // Scripts at check level, beside `request`, are taken too.
    {
      id: 'scripts-at-check-level',
      checkType: 'API',
      request: { url: echo },
      setupScript: `request.headers['X-From-Setup'] = 'yes';`,
      tearDownScript: `expect(JSON.parse(response.body).headers['x-from-setup']).toBe('no');`,
    },
  ];
});
const { final, api } = run;

describe('API setup and teardown scripts', () => {
  it('a setup script signs the request (node:crypto, jsonwebtoken) and changes its query; the teardown asserts on the body', () => {
    const entry = final('setup-signs');
    expect(entry, JSON.stringify(entry)).toMatchObject({ hasFailures: false, hasErrors: false });
    expect(api('setup-signs').assertions.map((a) => a.passed)).toEqual([true, true]);
    const echoed = JSON.parse(api('setup-signs').response?.body ?? '{}') as { headers: Record<string, string> };
    expect(echoed.headers['x-jwt']?.split('.')).toHaveLength(3);
  });

  it('a failing teardown assertion fails the check, naming the line', () => {
    expect(final('teardown-fails')).toMatchObject({ hasFailures: true, hasErrors: false });
    expect(api('teardown-fails').assertions.at(-1)).toMatchObject({
      source: 'TEARDOWN_SCRIPT',
      passed: false,
      error: 'tearDownScript failed at line 3: expected "GET" to be "DELETE"',
    });
  });

  it('takes setupScript and tearDownScript at check level too', () => {
    expect(final('scripts-at-check-level')).toMatchObject({ hasFailures: true, hasErrors: false });
    expect(api('scripts-at-check-level').assertions.at(-1)).toMatchObject({
      source: 'TEARDOWN_SCRIPT',
      passed: false,
      error: 'tearDownScript failed at line 1: expected "yes" to be "no"',
    });
  });

  it('a setup script that throws sends nothing and reports its error and line', () => {
    expect(final('setup-throws')).toMatchObject({ hasErrors: true });
    expect(api('setup-throws').requestError).toBe('setupScript failed at line 3: no token today');
    expect(api('setup-throws').response).toBeNull();
  });
});
