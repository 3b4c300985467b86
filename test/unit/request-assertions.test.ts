// A check's assertions given under `request.assertions`, where the service's
// API puts them (src/checks/assertions/assertions.ts parseCheckAssertions):
// read as the check's assertions when it has none of its own, refused when it
// has both, in a checks file and in a job alike.

import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseCheck } from '../../src/checks/parse-definition.js';
import { DefinitionError } from '../../src/checks/fields.js';
import { defaultRegistry } from '../../src/checks/registry.js';
import { Variables } from '../../src/checks/variables.js';
import { prepareJob } from '../../src/jobs/prepare.js';
import type { Job } from '../../src/core/protocol.js';

const registry = defaultRegistry();
const logger = pino({ level: 'silent' });
const EXPECT_500 = { source: 'STATUS_CODE', comparison: 'EQUALS', target: '500' };

function problems(definition: unknown, path = '$.checks[0]'): string[] {
  try {
    parseCheck(definition, path, registry);
    return [];
  } catch (error) {
    expect(error).toBeInstanceOf(DefinitionError);
    return (error as DefinitionError).issues.map((i) => `${i.path}: ${i.problem}`);
  }
}

let target: Server;
let targetUrl: string;

beforeAll(async () => {
  target = createServer((_req, res) => res.end('ok'));
  await new Promise<void>((resolve) => target.listen(0, '127.0.0.1', resolve));
  targetUrl = `http://127.0.0.1:${(target.address() as AddressInfo).port}/`;
});

afterAll(async () => {
  await new Promise((resolve) => target.close(resolve));
});

describe('request.assertions', () => {
  it("are the check's assertions when it has none of its own, for every type with a request", () => {
    const definitions = [
      { checkType: 'URL', request: { url: 'http://127.0.0.1:9/', assertions: [EXPECT_500] } },
      { checkType: 'API', request: { method: 'GET', url: 'http://127.0.0.1:9/', assertions: [{ ...EXPECT_500, source: 'STATUS_CODE' }] } },
      { checkType: 'TCP', request: { hostname: '127.0.0.1', port: 9, assertions: [{ source: 'RESPONSE_TIME', comparison: 'LESS_THAN', target: '100' }] } },
      { checkType: 'DNS', request: { query: 'example.com', recordType: 'A', assertions: [{ source: 'RESPONSE_CODE', comparison: 'EQUALS', target: 'NOERROR' }] } },
      { checkType: 'ICMP', request: { hostname: '127.0.0.1', assertions: [{ source: 'LATENCY', property: 'avg', comparison: 'LESS_THAN', target: '50' }] } },
    ];
    for (const definition of definitions) {
      const { check } = parseCheck({ id: 'a', ...definition }, '$.checks[0]', registry);
      expect(check.assertions, definition.checkType).toEqual([{ property: '', regex: null, ...definition.request.assertions[0] }]);
    }
  });

  it('name their own paths in problems', () => {
    expect(problems({ id: 'a', checkType: 'URL', request: { url: 'http://127.0.0.1:9/', assertions: [{ source: 'TEXT_BODY', comparison: 'EQUALS' }] } })).toEqual([
      '$.checks[0].request.assertions[0].source: must be one of STATUS_CODE (got "TEXT_BODY")',
    ]);
  });

  it('given as well as the check\'s own assertions: refused, naming both paths (a file\'s check and a job\'s)', () => {
    const both = { id: 'a', checkType: 'URL', request: { url: 'http://127.0.0.1:9/', assertions: [EXPECT_500] }, assertions: [] };
    expect(problems(both)).toEqual([
      "$.checks[0].request.assertions: is given as well as $.checks[0].assertions: give the check's assertions in one of them",
    ]);
    const job = { id: 'job-1', leaseExpiresAt: '2030-01-01T00:00:00.000Z', checkRunId: 1, sequenceId: 's', runLocation: 'lab', check: both } as unknown as Job;
    expect(prepareJob(job, registry, logger).invalid).toBe(
      "Invalid check definition: check.request.assertions: is given as well as check.assertions: give the check's assertions in one of them",
    );
  });

  it('decide the run: a check whose request.assertions fail fails, in a job as from a file', async () => {
    for (const checkType of ['URL', 'API']) {
      const { check, executor } = parseCheck({ id: 'a', checkType, request: { url: targetUrl, assertions: [EXPECT_500] } }, '$.checks[0]', registry);
      const outcome = await executor.run(check, {
        signal: new AbortController().signal,
        logger,
        jobLog: [],
        variables: new Variables([]),
        settings: { responseBodyLimitBytes: 1024, userAgent: 'outpost-test' },
      });
      expect(outcome.assertionsFailed, checkType).toBe(true);
      expect(outcome.detail.assertions, checkType).toMatchObject([{ source: 'STATUS_CODE', target: '500', actual: 200, passed: false }]);
    }
  });
});
