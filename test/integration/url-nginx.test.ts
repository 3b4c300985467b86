// The URL executor end to end (once mode, the real process) against a real nginx.

import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CheckResultEntry } from '../../src/core/result-entry.js';
import { cleanEnv, startAgent, tempDir } from '../support/agent-process.js';
import { type Nginx, startNginx } from '../support/nginx.js';

let nginx: Nginx;
let results: Map<string, CheckResultEntry>;
let exitCode: number | null;

const SERVER = `
    location = /server-error { return 500 "boom"; }
    location = /r1 { return 302 /r2; }
    location = /r2 { return 301 /health; }
    location = /loop { return 302 /loop; }
`;

beforeAll(async () => {
  nginx = await startNginx({ serverConfig: SERVER });
  const checks = [
    { id: 'ok', checkType: 'URL', request: { url: `${nginx.url}/health` } },
    { id: 'server-error', checkType: 'URL', request: { url: `${nginx.url}/server-error` } },
    { id: 'expect-500', checkType: 'URL', request: { url: `${nginx.url}/server-error` }, assertions: [{ source: 'STATUS_CODE', comparison: 'EQUALS', target: '500' }] },
    { id: 'should-fail-500', checkType: 'URL', shouldFail: true, request: { url: `${nginx.url}/server-error` } },
    { id: 'redirects', checkType: 'URL', request: { url: `${nginx.url}/r1` } },
    { id: 'no-follow', checkType: 'URL', request: { url: `${nginx.url}/r1`, followRedirects: false }, assertions: [{ source: 'STATUS_CODE', comparison: 'EQUALS', target: '302' }] },
    { id: 'loop', checkType: 'URL', request: { url: `${nginx.url}/loop` } },
    { id: 'regex', checkType: 'URL', request: { url: `${nginx.url}/health` }, assertions: [{ source: 'STATUS_CODE', comparison: 'EQUALS', target: '2', regex: '^(\\d)\\d\\d$' }] },
  ];
  const dir = tempDir();
  const file = path.join(dir, 'checks.json');
  writeFileSync(file, JSON.stringify({ checks }));
  const proc = startAgent(['once', file, '--results', path.join(dir, 'out.jsonl')], cleanEnv({ JOB_CONCURRENCY: '4' }));
  exitCode = (await proc.exit).code;
  results = new Map(proc.stdoutLines.filter(Boolean).map((l) => {
    const r = JSON.parse(l) as CheckResultEntry;
    return [r.checkId as string, r];
  }));
  expect(readFileSync(path.join(dir, 'out.jsonl'), 'utf8').trim().split('\n')).toHaveLength(checks.length);
});
afterAll(async () => {
  await nginx?.stop();
});

const api = (id: string) => results.get(id)?.apiCheckResult as {
  response: { status: number; redirects: number; timingPhases: Record<string, number>; timings: Record<string, number | null> } | null;
  requestError: string | null;
  assertions: Array<{ actual: unknown; passed: boolean }>;
  jobLog: string[];
};

describe('URL monitor against nginx', () => {
  it('exits 1 because some checks fail, with one result per check', () => {
    expect(exitCode).toBe(1);
    expect(results.size).toBe(8);
  });

  it('passes a 200 and measures phases that add up to the total', () => {
    const r = results.get('ok');
    expect(r).toMatchObject({ hasFailures: false, hasErrors: false, resultType: 'FINAL', attempts: 1 });
    const response = api('ok').response;
    const p: Record<string, number> = response?.timingPhases ?? {};
    const t: Record<string, number | null> = response?.timings ?? {};
    for (const key of ['wait', 'dns', 'tcp', 'tls', 'firstByte', 'download', 'total']) expect(p[key]).toBeGreaterThanOrEqual(0);
    const sum = (p.wait ?? 0) + (p.dns ?? 0) + (p.tcp ?? 0) + (p.tls ?? 0) + (p.firstByte ?? 0) + (p.download ?? 0);
    expect(Math.abs(sum - (p.total ?? 0))).toBeLessThanOrEqual(1);
    expect(p.tls).toBe(0);
    expect(t.socket ?? -1).toBeLessThanOrEqual(t.connect ?? -1);
    expect(t.connect ?? -1).toBeLessThanOrEqual(t.response ?? -1);
    expect(t.response ?? -1).toBeLessThanOrEqual(t.end ?? -1);
    expect(r?.responseTime).toBe(Math.round(p.total ?? -1));
  });

  it('fails a 500 without assertions, passes it with EQUALS 500 or shouldFail', () => {
    expect(results.get('server-error')).toMatchObject({ hasFailures: true, hasErrors: false });
    expect(api('server-error').response?.status).toBe(500);
    expect(results.get('expect-500')).toMatchObject({ hasFailures: false });
    expect(api('expect-500').assertions[0]).toMatchObject({ actual: 500, passed: true });
    expect(results.get('should-fail-500')).toMatchObject({ hasFailures: false, hasErrors: false });
  });

  it('follows redirects, counting them, or stops at the first when told to', () => {
    expect(results.get('redirects')).toMatchObject({ hasFailures: false });
    expect(api('redirects').response).toMatchObject({ status: 200, redirects: 2 });
    expect(api('redirects').jobLog.filter((l) => l.startsWith('Redirect'))).toHaveLength(2);
    expect(results.get('no-follow')).toMatchObject({ hasFailures: false });
    expect(api('no-follow').response).toMatchObject({ status: 302, redirects: 0 });
  });

  it('stops a redirect loop after 10 redirects with a clear error', () => {
    expect(results.get('loop')).toMatchObject({ hasFailures: true, hasErrors: true });
    expect(api('loop').requestError).toMatch(/^Too many redirects: stopped after 10 \(last Location: http:\/\/127\.0\.0\.1:\d+\/loop\)$/);
  });

  it('applies a regex before comparing', () => {
    expect(api('regex').assertions[0]).toMatchObject({ actual: '2', passed: true });
  });

  it('really reached nginx, once per run and per redirect hop', async () => {
    await new Promise((r) => setTimeout(r, 1_500));
    const log = readFileSync(nginx.accessLog, 'utf8').trim().split('\n');
    const agentLines = log.filter((l) => l.includes('Outpost/'));
    // ok, regex, 3×server-error, r1+r2+health, r1, and 11 for the loop.
    expect(agentLines.filter((l) => l.includes('GET /loop '))).toHaveLength(11);
    expect(agentLines.filter((l) => l.includes('GET /server-error '))).toHaveLength(3);
    expect(agentLines.filter((l) => l.includes('GET /r1 '))).toHaveLength(2);
  });
});
