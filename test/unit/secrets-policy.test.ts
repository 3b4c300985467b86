// Which values are secrets and where each scrubber applies (src/secrets/policy.ts),
// the always-redacted headers, and the queue's use of both (every result of a
// job scrubbed, ctx.secrets and ctx.serviceEnv, executor exceptions reported).

import { Writable } from 'node:stream';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import type { CheckDefinition } from '../../src/checks/definition.js';
import type { ExecutionContext, Executor } from '../../src/checks/executor.js';
import type { Outcome } from '../../src/core/outcome.js';
import { NO_RETRIES } from '../../src/checks/retry.js';
import type { PreparedJob } from '../../src/jobs/prepare.js';
import { createMetrics } from '../../src/observability/metrics.js';
import { type ExecutorErrorInfo, JobQueue } from '../../src/jobs/queue.js';
import type { CheckResultEntry } from '../../src/core/result-entry.js';
import { secretsInAgentEnv, SecretPolicy, scrubResult, urlCredentials } from '../../src/secrets/policy.js';
import { REDACTED, Scrubber } from '../../src/secrets/scrubber.js';
import { redactSensitiveHeaders } from '../../src/secrets/sensitive-headers.js';

function capture(policy?: SecretPolicy) {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(chunk.toString('utf8'));
      done();
    },
  });
  const logger = pino({ level: 'debug', ...(policy ? { hooks: { streamWrite: policy.scrubLogLine } } : {}) }, stream);
  return { logger, lines, text: () => lines.join('') };
}

describe('agent-wide secrets', () => {
  it('are API_KEY, every OUTPOST_SECRET_* and the credentials of the proxy variables', () => {
    const secrets = secretsInAgentEnv({
      API_KEY: ' pl_live_key_123 ',
      OUTPOST_SECRET_DB: 'db-password',
      OUTPOST_SECRET_EMPTY: '',
      OTHER: 'not-a-secret',
      HTTPS_PROXY: 'http://proxyuser:pr%40xy-pass@proxy.corp:3128',
      http_proxy: 'http://only-a-token@proxy.corp:3128',
      CHECK_PROXY: 'http://c:check-proxy-pass@127.0.0.1:1',
    });
    const values = secrets.map((s) => s.value);
    expect(values).toEqual(
      expect.arrayContaining(['pl_live_key_123', 'db-password', 'pr@xy-pass', 'pr%40xy-pass', 'proxyuser:pr@xy-pass', 'only-a-token', 'check-proxy-pass']),
    );
    expect(values).not.toContain('not-a-secret');
    expect(values).not.toContain('');
    expect(secrets.find((s) => s.value === 'db-password')?.name).toBe('OUTPOST_SECRET_DB');
  });

  it('url credentials: password decoded and as written, user:password; a bare user name when there is no password', () => {
    expect(urlCredentials('http://u:p%20w@h/')).toEqual(['p w', 'p%20w', 'u:p w']);
    expect(urlCredentials('https://tok3n@h/')).toEqual(['tok3n', 'tok3n']);
    expect(urlCredentials('http://h/')).toEqual([]);
    expect(urlCredentials('not a url')).toEqual([]);
    expect(urlCredentials(undefined)).toEqual([]);
  });

  it('warns once per short secret, naming the variable and never the value', () => {
    const policy = new SecretPolicy([
      { name: 'OUTPOST_SECRET_PIN', value: 'x9z' },
      { name: 'API_KEY', value: 'long-enough-key' },
    ]);
    const { logger, lines } = capture();
    policy.attachLogger(logger);
    policy.forJob([{ key: 'SHORT', value: 'q7w', secret: true }]);
    policy.forJob([{ key: 'SHORT', value: 'q7w', secret: true }]);
    policy.forJob([{ key: 'EMPTY', value: '', secret: true }]);
    const warnings = lines.map((l) => JSON.parse(l) as { variable: string; msg: string });
    expect(warnings.map((w) => w.variable)).toEqual(['OUTPOST_SECRET_PIN', 'SHORT']);
    expect(lines.join('')).not.toContain('x9z');
    expect(lines.join('')).not.toContain('q7w');
  });
});

describe('job secrets', () => {
  it('a job scrubber holds the agent-wide secrets, the job variables marked secret, and what the executor adds', () => {
    const policy = new SecretPolicy([{ name: 'API_KEY', value: 'agent-api-key' }], 0);
    const job = policy.forJob([
      { key: 'TOKEN', value: 'job-token-value', secret: true },
      { key: 'PLAIN', value: 'plain-value', secret: false },
    ]);
    job.add('runtime-password', 'request.basicAuth.password');
    expect(job.scrubber.scrubText('agent-api-key job-token-value plain-value runtime-password')).toBe(`${REDACTED} ${REDACTED} plain-value ${REDACTED}`);
    // The agent-wide scrubber is not changed by a job.
    expect(policy.agentScrubber.scrubText('job-token-value')).toBe('job-token-value');
  });

  it('shares the agent-wide scrubber until a job has a secret of its own', () => {
    const policy = new SecretPolicy([{ name: 'API_KEY', value: 'agent-api-key' }]);
    expect(policy.forJob([{ key: 'PLAIN', value: 'x', secret: false }]).scrubber).toBe(policy.agentScrubber);
  });

  it('log lines from any child logger are scrubbed of the secrets of running jobs, until released', async () => {
    const policy = new SecretPolicy([{ name: 'API_KEY', value: 'agent-api-key' }], 20);
    const { logger, text, lines } = capture(policy);
    const job = policy.forJob([{ key: 'TOKEN', value: 'job-token-value', secret: true }]);
    const child = logger.child({ jobId: 'j1', note: 'bound job-token-value' });
    child.info({ target: 'http://x/?t=job-token-value', key: 'agent-api-key' }, 'message with "job-token-value"');
    expect(text()).not.toContain('job-token-value');
    expect(text()).not.toContain('agent-api-key');
    expect(JSON.parse(lines[0] as string)).toMatchObject({ jobId: 'j1', note: `bound ${REDACTED}`, target: `http://x/?t=${REDACTED}`, msg: `message with "${REDACTED}"` });
    job.release();
    child.info('still within the release delay: job-token-value');
    expect(lines[1]).not.toContain('job-token-value');
    await new Promise((r) => setTimeout(r, 50));
    logger.info('released: job-token-value');
    expect(lines[2]).toContain('job-token-value');
  });
});

describe('results', () => {
  it('redacts Authorization, Proxy-Authorization, x-api-key, Cookie and Set-Cookie values in every headers member, whatever the case', () => {
    const result = {
      apiCheckResult: {
        request: {
          headers: [
            { key: 'AUTHORIZATION', value: 'Bearer not-a-variable' },
            { key: 'Proxy-Authorization', value: 'Basic abc' },
            { key: 'X-Api-Key', value: 'k' },
            { key: 'Cookie', value: 'a=b' },
            { key: 'Accept', value: '*/*' },
          ],
        },
        response: { headers: { 'set-cookie': ['a=1', 'b=2'], 'content-type': 'text/plain', 'x-api-key': 'k2' } },
        other: { Headers: [['cookie', 'tuple'], ['x-ok', 'fine']] },
      },
    };
    expect(redactSensitiveHeaders(result)).toEqual({
      apiCheckResult: {
        request: {
          headers: [
            { key: 'AUTHORIZATION', value: REDACTED },
            { key: 'Proxy-Authorization', value: REDACTED },
            { key: 'X-Api-Key', value: REDACTED },
            { key: 'Cookie', value: REDACTED },
            { key: 'Accept', value: '*/*' },
          ],
        },
        response: { headers: { 'set-cookie': [REDACTED, REDACTED], 'content-type': 'text/plain', 'x-api-key': REDACTED } },
        other: { Headers: [['cookie', REDACTED], ['x-ok', 'fine']] },
      },
    });
  });

  it('scrubResult scrubs every string of the whole result and redacts headers, even with no secrets at all', () => {
    const entry = {
      name: 'check secret-in-name',
      apiCheckResult: { jobLog: ['GET http://h/secret-in-name'], request: { headers: [{ key: 'authorization', value: 'x' }] } },
    } as unknown as CheckResultEntry;
    expect(scrubResult(entry, Scrubber.of(['secret-in-name']))).toMatchObject({
      name: `check ${REDACTED}`,
      apiCheckResult: { jobLog: [`GET http://h/${REDACTED}`], request: { headers: [{ key: 'authorization', value: REDACTED }] } },
    });
    expect(scrubResult(entry, new Scrubber()).apiCheckResult).toMatchObject({ request: { headers: [{ value: REDACTED }] } });
  });
});

describe('the queue', () => {
  const metrics = createMetrics();
  const settings = { responseBodyLimitBytes: 1024, userAgent: 'test' };

  function prepared(executor: Executor, variables: PreparedJob['variables'], triggerSource: string | null): PreparedJob {
    const check: CheckDefinition = {
      id: 'c1',
      name: 'queue check',
      checkType: 'URL',
      frequency: 60,
      degradedResponseTime: 1000,
      maxResponseTime: 2000,
      shouldFail: false,
      assertions: [],
      retryStrategy: NO_RETRIES,
      request: { url: 'http://target.example/path' },
      environmentVariables: [],
    };
    return {
      jobId: 'job-1',
      identity: { checkRunId: 1, sequenceId: 's', runLocation: 'here' },
      checkIdentity: { id: 'c1', name: 'queue check', checkType: 'URL' },
      runnable: { check, executor, target: 'http://target.example/path' },
      variables,
      triggerSource,
      logger: pino({ level: 'silent' }),
    };
  }

  function executor(run: (ctx: ExecutionContext) => Promise<Outcome>): Executor {
    return {
      checkType: 'URL',
      member: 'apiCheckResult',
      limits: { degradedMs: 1000, maxMs: 2000, capMs: 5000 },
      assertionSources: [],
      parseRequest: () => ({}),
      target: () => 'target',
      run: (_check, ctx) => run(ctx),
    };
  }

  const outcome = (detail: Record<string, unknown>): Outcome => ({
    startedAt: new Date(),
    stoppedAt: new Date(),
    responseTime: 1,
    assertionsFailed: false,
    member: 'apiCheckResult',
    detail,
  });

  it('gives executors ctx.secrets and ctx.serviceEnv, and scrubs every result with the job scrubber', async () => {
    const seen: ExecutionContext[] = [];
    const queue = new JobQueue(2, metrics, settings, { secrets: new SecretPolicy([{ name: 'OUTPOST_SECRET_X', value: 'agent-wide-x' }], 0) });
    const run = executor(async (ctx) => {
      seen.push(ctx);
      ctx.secrets?.add('found-at-run-time', 'request.basicAuth.password');
      return outcome({
        requestError: null,
        jobLog: ['agent-wide-x job-secret-y found-at-run-time'],
        request: { headers: [{ key: 'Cookie', value: 'session=1' }] },
      });
    });
    const scheduled = await queue.submit(prepared(run, [{ key: 'Y', value: 'job-secret-y', secret: true }], 'SCHEDULER'));
    const tested = await queue.submit(prepared(run, [], 'TEST_RECORD'));
    expect(seen[0]?.serviceEnv).toEqual({ OUTPOST: 'true' });
    expect(seen[1]?.serviceEnv).toEqual({ OUTPOST: 'true', CI: 'true' });
    expect(scheduled.result?.apiCheckResult).toMatchObject({
      jobLog: [`${REDACTED} ${REDACTED} ${REDACTED}`],
      request: { headers: [{ key: 'Cookie', value: REDACTED }] },
    });
    // The second job did not have Y: its own run-time secret and the agent-wide one are scrubbed, Y is just text.
    expect(tested.result?.apiCheckResult?.jobLog).toEqual([`${REDACTED} job-secret-y ${REDACTED}`]);
  });

  it('reports an executor exception with the job scrubber, and turns it into a scrubbed error result', async () => {
    const reported: Array<{ error: unknown; info: ExecutorErrorInfo }> = [];
    const queue = new JobQueue(1, metrics, settings, {
      secrets: new SecretPolicy([], 0),
      onExecutorError: (error, info) => reported.push({ error, info }),
    });
    const boom = executor(async () => {
      throw new Error('bug while handling thrown-job-secret');
    });
    const completion = await queue.submit(prepared(boom, [{ key: 'Z', value: 'thrown-job-secret', secret: true }], null));
    expect(reported).toHaveLength(1);
    expect(reported[0]?.info.checkType).toBe('URL');
    expect(reported[0]?.info.scrubber.scrubText('thrown-job-secret')).toBe(REDACTED);
    expect(completion.result).toMatchObject({ hasErrors: true });
    expect(JSON.stringify(completion.result)).not.toContain('thrown-job-secret');
  });

  it('the test hook executor-throw fails every run with the request in the message, scrubbed from the result', async () => {
    const reported: unknown[] = [];
    const queue = new JobQueue(1, metrics, settings, { secrets: new SecretPolicy([], 0), testFault: 'executor-throw', onExecutorError: (e) => reported.push(e) });
    const never = executor(async () => {
      throw new Error('the real executor must not run');
    });
    const completion = await queue.submit(prepared(never, [{ key: 'Z', value: 'hooked-secret', secret: true }], null));
    expect(String((reported[0] as Error).message)).toMatch(/^OUTPOST_TEST_FAULT=executor-throw: .*target\.example.*hooked-secret/);
    expect(String(completion.result?.apiCheckResult?.requestError)).toContain(REDACTED);
    expect(JSON.stringify(completion.result)).not.toContain('hooked-secret');
  });
});
