// CHECK_PROXY sends check traffic through a real proxy, except hosts in NO_PROXY.

import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { CheckResultEntry } from '../../src/core/result-entry.js';
import { cleanEnv, startAgent, tempDir } from '../support/agent-process.js';
import { startTargetServer, type TargetServer } from '../support/target-server.js';
import { startTinyproxy, type Tinyproxy } from '../support/tinyproxy.js';

let proxy: Tinyproxy;
let target: TargetServer;

beforeAll(async () => {
  [proxy, target] = await Promise.all([startTinyproxy(), startTargetServer()]);
});
afterAll(async () => {
  await Promise.all([proxy?.stop(), target?.close()]);
});

it('proxies check traffic with CHECK_PROXY and bypasses NO_PROXY hosts', async () => {
  const port = new URL(target.url).port;
  const file = path.join(tempDir(), 'checks.json');
  writeFileSync(
    file,
    JSON.stringify({
      checks: [
        { id: 'proxied', checkType: 'URL', request: { url: `http://127.0.0.1:${port}/ok?via=proxy` } },
        { id: 'direct', checkType: 'URL', request: { url: `http://localhost:${port}/ok?via=direct` } },
      ],
    }),
  );
  const proc = startAgent(['once', file], cleanEnv({ CHECK_PROXY: proxy.url, NO_PROXY: 'localhost' }));
  const { code } = await proc.exit;
  expect(code, proc.stdout()).toBe(0);
  const results = proc.stdoutLines.filter(Boolean).map((l) => JSON.parse(l) as CheckResultEntry);
  expect(results.map((r) => [r.checkId, r.hasFailures])).toEqual(
    expect.arrayContaining([
      ['proxied', false],
      ['direct', false],
    ]),
  );
  const log = proxy.log();
  expect(log).toContain(`GET http://127.0.0.1:${port}/ok?via=proxy`);
  expect(log).not.toContain('via=direct');
});
