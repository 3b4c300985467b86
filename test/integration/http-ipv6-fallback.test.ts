// ipFamily IPv6 on a host where IPv6 is disabled: the HTTP checks fall back to
// IPv4 and say so in the jobLog (a network namespace with IPv6 switched off).

import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { CheckResultEntry } from '../../src/core/result-entry.js';
import { MAIN, tempDir } from '../support/agent-process.js';
import { NetLab, type Netns } from '../support/netns.js';

let lab: NetLab;
let ns: Netns;
let stopServer: () => void = () => undefined;

const SERVER = `require('node:http').createServer((q, s) => s.end('ok')).listen(8080, '127.0.0.1', () => console.log('ready'));`;

beforeAll(async () => {
  lab = new NetLab();
  ns = lab.namespace({ disableIPv6: true, hosts: '127.0.0.1 localhost\n::1 localhost ip6-localhost\n' });
  const [bin, ...args] = ns.argv([process.execPath, '-e', SERVER]);
  const server = spawn(bin as string, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  lab.track(server);
  stopServer = () => server.kill('SIGKILL');
  await new Promise<void>((resolve, reject) => {
    server.stdout?.once('data', () => resolve());
    server.once('exit', (code) => reject(new Error(`target server exited (${code})`)));
  });
});
afterAll(() => {
  stopServer();
  lab?.destroy();
});

it('falls back to IPv4 for URL and API checks and logs why', async () => {
  const file = path.join(tempDir(), 'checks.json');
  writeFileSync(
    file,
    JSON.stringify({
      checks: [
        { id: 'url-v6', checkType: 'URL', request: { url: 'http://localhost:8080/', ipFamily: 'IPv6' } },
        { id: 'api-v6', checkType: 'API', request: { url: 'http://localhost:8080/', ipFamily: 'IPv6' } },
        { id: 'literal-v6', checkType: 'URL', request: { url: 'http://[::1]:8080/', ipFamily: 'IPv6' } },
      ],
    }),
  );
  const run = await ns.run([process.execPath, MAIN, 'once', file], { env: { PATH: process.env.PATH ?? '' }, timeoutMs: 30_000 });
  const results = new Map(
    run.stdout
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as CheckResultEntry)
      .map((r) => [r.checkId, r.apiCheckResult as unknown as { jobLog: string[]; requestError: string | null; response: { remoteAddress: string } | null }]),
  );
  for (const id of ['url-v6', 'api-v6']) {
    const detail = results.get(id);
    expect(detail?.requestError, run.stderr).toBeNull();
    expect(detail?.response?.remoteAddress).toBe('127.0.0.1:8080');
    expect(detail?.jobLog[0]).toBe('IPv6 is not usable on this host (EADDRNOTAVAIL): falling back to IPv4');
  }
  // An IPv6 literal cannot fall back: the error says why.
  expect(results.get('literal-v6')?.requestError).toMatch(/IPv6 address ::1 is not reachable from this host/);
});
