// A secret interpolated into a URL's path and query arrives whole at a real
// target (a `&`, `/`, `#`, `+`, `%` or space in it is data, not URL syntax),
// and no form of it — nor of the piece a raw `&` used to cut off — is left in
// the results or logs of a once run of the built agent.

import http from 'node:http';
import type net from 'node:net';
import path from 'node:path';
import { readFileSync, writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CheckResultEntry } from '../../src/core/result-entry.js';
import { secretForms } from '../../src/secrets/scrubber.js';
import { cleanEnv, startAgent, tempDir } from '../support/agent-process.js';

const SECRET = 'p@ss w/rd+&x=1#frag%41?y';
/** What a target received before values were encoded: the query value cut at the `&`. */
const CUT = 'p@ss w/rd+';

let target: http.Server;
let base: string;
const arrived: string[] = [];

beforeAll(async () => {
  target = http.createServer((req, res) => {
    arrived.push(req.url ?? '');
    // The target echoes what arrived, so the result's body holds it too and must be scrubbed.
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ url: req.url }));
  });
  await new Promise<void>((resolve) => target.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(target.address() as net.AddressInfo).port}`;
});

afterAll(async () => {
  await new Promise((resolve) => target.close(resolve));
});

describe('{{NAME}} in a URL', () => {
  it('arrives whole and decoded in the path and the query, and no form of it is left in the output', async () => {
    const dir = tempDir();
    const secret = [{ key: 'S', value: SECRET, secret: true }];
    const checks = [
      { id: 'api', checkType: 'API', request: { url: `${base}/items/{{S}}/detail?token={{S}}&after=1`, queryParameters: [{ key: 'q', value: '{{S}}' }] }, environmentVariables: secret },
      { id: 'url', checkType: 'URL', request: { url: `${base}/url/{{S}}?token={{S}}&after=1` }, environmentVariables: secret },
      { id: 'raw', checkType: 'API', request: { url: `${base}/{{raw P}}` }, environmentVariables: [{ key: 'P', value: 'raw/path?a=1&b=2' }] },
    ];
    const file = path.join(dir, 'checks.json');
    writeFileSync(file, JSON.stringify({ checks }));
    const resultsFile = path.join(dir, 'results.jsonl');
    const proc = startAgent(['once', file, '--results', resultsFile], cleanEnv({ STATE_DIR: tempDir(), LOG_LEVEL: 'debug' }));
    const { code } = await proc.exit;
    expect(code, proc.stderr().slice(-2000)).toBe(0);

    expect(arrived).toHaveLength(3);
    const api = new URL(arrived.find((u) => u.startsWith('/items/')) as string, base);
    expect(api.pathname.split('/').map(decodeURIComponent)).toEqual(['', 'items', SECRET, 'detail']);
    expect(api.searchParams.get('token')).toBe(SECRET);
    expect(api.searchParams.get('after')).toBe('1');
    expect(api.searchParams.get('q')).toBe(SECRET);
    const url = new URL(arrived.find((u) => u.startsWith('/url/')) as string, base);
    expect(url.pathname.split('/').map(decodeURIComponent)).toEqual(['', 'url', SECRET]);
    expect(url.searchParams.get('token')).toBe(SECRET);
    expect(url.searchParams.get('after')).toBe('1');
    // The opt-out inserts URL syntax as written.
    expect(arrived).toContain('/raw/path?a=1&b=2');

    const written = readFileSync(resultsFile, 'utf8');
    const results = written
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as CheckResultEntry);
    expect(results.map((r) => [r.checkId, r.hasFailures, r.hasErrors]).sort()).toEqual([
      ['api', false, false],
      ['raw', false, false],
      ['url', false, false],
    ]);
    // Positive control: the results do carry the request's URL and the echoed body, scrubbed.
    expect(written).toContain('/items/*****/detail');
    const places = { stdout: proc.stdout(), stderr: proc.stderr(), 'results file': written };
    const leaks: string[] = [];
    for (const [where, text] of Object.entries(places)) {
      for (const form of [...secretForms(SECRET), ...secretForms(CUT)]) if (text.includes(form)) leaks.push(`${JSON.stringify(form)} in ${where}`);
    }
    expect(leaks).toEqual([]);
  }, 60_000);
});
