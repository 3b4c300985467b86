// Leak hunt: secrets never leave the agent.
//
// A table of secrets with every awkward character is put everywhere a check
// can carry it — headers, URL paths, query strings, bodies, basic auth, a
// redirect's Location, error messages (an unknown host, a refused connection),
// check names and ids (so they sit in every log line about the job), proxy
// URLs — and echoed back by the target. The real agent runs them in agent mode
// against the real server (test/support/control-plane.ts) (with agent-wide secrets in its environment:
// API_KEY, OUTPOST_SECRET_*, credentials in HTTP_PROXY, which carries its
// control-plane traffic through a real proxy), once while the control plane
// refuses results (so they stay in the spool, and the agent is killed -9),
// then again to deliver them; and in once mode with --results. Afterwards no
// secret may appear, in any encoded form, in: the results the control plane
// received, the spool files, the agents' stdout and stderr, the events the
// control plane received, the local results file. A leak fails the test
// naming the secret's index, the form and where it was found.
//
// Positive controls: a variable that is NOT secret goes through the very same
// placements and must be found in every one of those places, so a hunt that
// finds nothing proves something.

import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Job } from '../../src/core/protocol.js';
import type { CheckResultEntry } from '../../src/core/result-entry.js';
import { type AgentProcess, cleanEnv, startAgent, tempDir } from '../support/agent-process.js';
import { ControlPlane } from '../support/control-plane.js';
import { freePort } from '../support/nginx.js';
import { startTargetServer, type TargetServer } from '../support/target-server.js';
import { startTinyproxy, type Tinyproxy } from '../support/tinyproxy.js';

/** Job-level secrets (variables marked secret). */
const SECRETS: string[] = [
  'hunter2-plain-secret-0',
  'p@ss w0rd+plus/slash=eq',
  'quote"double\'single`tick',
  'back\\slash\\\\double-bs',
  "dollar$&$1$`$'$$-amp",
  '100%encoded%20not%zz',
  // biome-ignore lint/suspicious/noTemplateCurlyInString: a secret with "${}" in it, on purpose
  'regex.*+?^${}()|[]-chars',
  'ünïcödé-sécret-ß-Ω',
  '秘密のパスワード-9876',
  'emoji🔑secret🚀value',
  'AAAA/BBBB+CCCC==',
  'dGhpcyBpcyBiYXNlNjQ=',
  `L0ng-${'a1B2c3D4e5'.repeat(30)}`,
  '<script>alert(1)</script>&amp;',
  'semi;colon,comma&amp=eq?q#hash',
  'tab\there-and-ctl\u0001-bell',
  'json{"k":"v"}[1,2]',
  'colon:pass:word',
  'at@sign@host',
  'plus+plus+plus',
  'space separated secret phrase',
  'percent%25already%2Fencoded',
  'UPPER-lower-MiXeD-42',
  'eq==pad==',
  'slash/path/like/secret',
  'tilde~star*bang!paren()',
  "apostrophe's-secret",
  `long-ascii-${'x'.repeat(100)}-end`,
  'ÄÖÜäöüß€-latin1ish',
  'mixed-🔒-é-"q"-\\-/',
  'hostsecretlabel42',
  'Host-Secret-Label-Mixed',
];
/** Secrets usable as a DNS label (an unknown host whose name is the secret). */
const HOST_SECRETS = new Set(['hostsecretlabel42', 'Host-Secret-Label-Mixed']);

// Agent-wide secrets (the agent's environment) and secrets only discovered at run time.
const API_KEY = 'pl_agent-KEY_9f8e7d6c5b4a$+/=';
const OUTPOST_SECRET_ALPHA = 'outpost-secret-!@#$%^&*()_+';
const OUTPOST_SECRET_UNICODE = 'outpost-sécret-ünï-🔑';
const CP_PROXY_PASS = 'cp-pr0xy pass@!';
const BASIC_LITERAL = 'literal-basic-pass-77';
const CHECK_PROXY_PASS = 'check-proxy-pass-88';
const URL_CRED_PASS = 'url-cred-pass-99';

const ALL: Array<{ label: string; value: string }> = [
  ...SECRETS.map((value, i) => ({ label: `#${i}`, value })),
  { label: 'API_KEY', value: API_KEY },
  { label: 'OUTPOST_SECRET_ALPHA', value: OUTPOST_SECRET_ALPHA },
  { label: 'OUTPOST_SECRET_UNICODE', value: OUTPOST_SECRET_UNICODE },
  { label: 'HTTP_PROXY password', value: CP_PROXY_PASS },
  { label: 'literal basic-auth password', value: BASIC_LITERAL },
  { label: 'check proxyUrl password', value: CHECK_PROXY_PASS },
  { label: 'URL credentials password', value: URL_CRED_PASS },
];

/** Not a secret: goes through the same placements and must be found (the positive control). */
const CONTROL = 'plain-control-marker';

const headerSafe = (s: string) => /^[\x20-\x7e]+$/.test(s);
/** No URL delimiters and no control characters (the URL parser drops tabs and newlines). */
const pathSafe = (s: string) => ![...s].some((c) => '/?#\\'.includes(c) || c.charCodeAt(0) < 0x20) && s !== '.' && s !== '..';

// --- the forms looked for ------------------------------------------------------

const b64 = (bytes: Buffer) => bytes.toString('base64');

/** base64 characters that depend only on the secret's bytes, at each byte alignment (≥ 8 characters). */
function embeddedBase64(secret: string): string[] {
  const bytes = Buffer.from(secret, 'utf8');
  const out: string[] = [];
  for (let align = 1; align < 3; align++) {
    const encoded = b64(Buffer.concat([Buffer.alloc(align), bytes]));
    const start = Math.ceil((8 * align) / 6);
    const end = Math.floor((8 * align + 8 * bytes.length) / 6);
    for (const alphabet of [encoded, encoded.replace(/\+/g, '-').replace(/\//g, '_')]) {
      const piece = alphabet.slice(start, end);
      if (piece.length >= 8) out.push(piece);
    }
  }
  return out;
}

function forms(secret: string): Array<[string, string]> {
  const url = new URL('http://h/');
  url.pathname = `/${secret}`;
  const urlPath = url.pathname.slice(1);
  url.search = `?${secret}`;
  const urlQuery = url.search.slice(1);
  const json = JSON.stringify(secret).slice(1, -1);
  const list: Array<[string, string]> = [
    ['raw', secret],
    ['lower-case', secret.toLowerCase()],
    ['encodeURIComponent', encodeURIComponent(secret)],
    ['form-encoded (+)', new URLSearchParams({ a: secret }).toString().slice(2)],
    ['encodeURIComponent with + for space', encodeURIComponent(secret).replace(/%20/g, '+')],
    ['URL path encoding', urlPath],
    ['URL query encoding', urlQuery],
    ['base64', b64(Buffer.from(secret, 'utf8'))],
    ['base64 unpadded', b64(Buffer.from(secret, 'utf8')).replace(/=+$/, '')],
    ['base64url', Buffer.from(secret, 'utf8').toString('base64url')],
    ['JSON-escaped', json],
    ['JSON-escaped, ASCII', json.replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`)],
    ['JSON inside JSON', JSON.stringify(json).slice(1, -1)],
    ['HTML-escaped', secret.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;').replace(/'/g, '&#39;')],
    ['HTML-escaped (&#x27;)', secret.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;').replace(/'/g, '&#x27;')],
  ];
  for (const [k, piece] of embeddedBase64(secret).entries()) list.push([`base64 embedded at another alignment (${k})`, piece]);
  return list;
}

/** Every string (keys too) in a parsed JSON value, joined: raw forms in it show what the serialized text escapes. */
function leaves(value: unknown, out: string[] = []): string[] {
  if (typeof value === 'string') out.push(value);
  else if (Array.isArray(value)) for (const v of value) leaves(v, out);
  else if (value && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) {
      out.push(k);
      leaves(v, out);
    }
  }
  return out;
}

/** Text as written plus the strings of every JSON line in it. */
function haystack(text: string): string {
  const parsed: string[] = [];
  for (const line of text.split('\n')) {
    if (!line.startsWith('{') && !line.startsWith('[')) continue;
    try {
      parsed.push(...leaves(JSON.parse(line)));
    } catch {
      // Not JSON: the raw text is searched anyway.
    }
  }
  return `${text}\n${parsed.join('\n')}`;
}

interface Place {
  where: string;
  text: string;
}

function hunt(places: Place[], secrets = ALL): string[] {
  const findings: string[] = [];
  for (const { label, value } of secrets) {
    for (const [form, encoded] of forms(value)) {
      for (const { where, text } of places) {
        const at = text.indexOf(encoded);
        if (at === -1) continue;
        const context = text.slice(Math.max(0, at - 60), at + encoded.length + 60).replace(/\n/g, '⏎');
        findings.push(`secret ${label} ${JSON.stringify(value).slice(0, 50)}: ${form} form ${JSON.stringify(encoded).slice(0, 60)} found in ${where}: …${context}…`);
      }
    }
  }
  return findings;
}

function expectNoLeaks(places: Place[]): void {
  const findings = hunt(places);
  expect(findings, `SECRETS LEAKED (${findings.length}):\n${findings.slice(0, 60).join('\n')}`).toEqual([]);
}

function expectControlFound(places: Place[]): void {
  for (const place of places) expect(place.text.includes(CONTROL), `the control value is missing from ${place.where}: the hunt there proves nothing`).toBe(true);
}

// --- the checks ----------------------------------------------------------------

let target: TargetServer;
let proxy: Tinyproxy;

type Check = Record<string, unknown>;

/** The checks carrying variable `S` (and `PLAIN`) for one secret; ids name the secret's index and, when short enough, the secret itself. */
function checksFor(index: number | 'control', value: string, variable: string): Check[] {
  const ref = `{{${variable}}}`;
  const tag = index === 'control' ? 'control' : `s${index}`;
  // The literal value in ids and names: it sits in every log line of the job and in the result.
  const idValue = value.length <= 150 ? `-${value}` : '';
  const checks: Check[] = [
    {
      id: `${tag}-echo${idValue}`,
      name: `echo ${value}`,
      checkType: 'API',
      request: {
        method: 'POST',
        url: `${target.url}/echo/p/${pathSafe(value) ? ref : 'x'}?lit=${encodeURIComponent(value)}`,
        headers: headerSafe(value)
          ? [
              { key: 'X-Secret', value: ref },
              // Always-redacted headers (Authorization itself carries the basic auth below).
              { key: 'X-Api-Key', value: ref },
              { key: 'Cookie', value: `session=${ref}` },
            ]
          : [],
        queryParameters: [{ key: 'q', value: ref }],
        bodyType: 'RAW',
        body: `raw:${ref}`,
        // A basic-auth password is always a secret, so the control value (not secret) cannot go here.
        ...(index === 'control' ? {} : { basicAuth: { username: 'user', password: ref } }),
      },
      // The actual value of a failing assertion carries the body back into the result.
      assertions: [{ source: 'JSON_BODY', property: '$.body', comparison: 'EQUALS', target: 'not-the-body' }],
    },
  ];
  if (headerSafe(value)) {
    for (const follow of [false, true]) {
      checks.push({
        id: `${tag}-redirect-${follow ? 'followed' : 'kept'}`,
        checkType: 'API',
        request: {
          url: `${target.url}/redirect-to`,
          queryParameters: [
            { key: 'status', value: '302' },
            { key: 'url', value: `/echo/r?t=${ref}` },
          ],
          followRedirects: follow,
        },
      });
    }
  }
  if (pathSafe(value)) checks.push({ id: `${tag}-refused`, checkType: 'URL', request: { url: `http://127.0.0.1:1/${ref}` } });
  if (HOST_SECRETS.has(value)) checks.push({ id: `${tag}-unknown-host`, checkType: 'URL', request: { url: `http://${ref}.invalid/` } });
  return checks;
}

/** Checks with the agent-wide secrets and the run-time ones. */
function agentWideChecks(): Check[] {
  const proxyPort = new URL(proxy.url).port;
  return [
    {
      id: 'agent-wide',
      checkType: 'API',
      request: {
        method: 'POST',
        url: `${target.url}/echo/agent`,
        headers: [
          { key: 'X-Alpha', value: '{{OUTPOST_SECRET_ALPHA}}' },
          { key: 'X-Key', value: API_KEY },
        ],
        queryParameters: [{ key: 'u', value: '{{OUTPOST_SECRET_UNICODE}}' }],
        bodyType: 'RAW',
        body: `api=${API_KEY} proxy=${CP_PROXY_PASS} alpha={{OUTPOST_SECRET_ALPHA}}`,
      },
    },
    { id: 'runtime-basic', checkType: 'API', request: { url: `${target.url}/echo/basic`, basicAuth: { username: 'someone', password: BASIC_LITERAL } } },
    {
      id: 'runtime-proxy',
      checkType: 'API',
      request: { url: `${target.url}/echo/proxied`, proxyUrl: `http://chkuser:{{PROXYPASS}}@127.0.0.1:${proxyPort}` },
    },
    { id: 'runtime-url-credentials', checkType: 'API', request: { url: `http://urluser:${URL_CRED_PASS}@${new URL(target.url).host}/echo/creds` } },
  ];
}

/** Not secret: PROXYPASS is a plain variable, its value a secret only because it is a proxy URL's password. */
const PLAIN_VARIABLES = [
  { key: 'PLAIN', value: CONTROL, secret: false },
  { key: 'PROXYPASS', value: CHECK_PROXY_PASS, secret: false },
];

function agentEnv(stateDir: string, cp: ControlPlane): NodeJS.ProcessEnv {
  const proxyPort = new URL(proxy.url).port;
  return cleanEnv({
    API_URL: cp.url,
    API_KEY,
    STATE_DIR: stateDir,
    CLAIM_WAIT_SECONDS: '1',
    JOB_CONCURRENCY: '16',
    LOG_LEVEL: 'debug',
    OUTPOST_SECRET_ALPHA,
    OUTPOST_SECRET_UNICODE,
    // Control-plane traffic through a real proxy, with credentials in the URL.
    HTTP_PROXY: `http://cpuser:${encodeURIComponent(CP_PROXY_PASS)}@127.0.0.1:${proxyPort}`,
  });
}

function spoolText(stateDir: string): string {
  const dir = path.join(stateDir, 'spool');
  return readdirSync(dir)
    .filter((n) => n.endsWith('.jsonl'))
    .map((n) => readFileSync(path.join(dir, n), 'utf8'))
    .join('');
}

const spooledCount = (stateDir: string) => {
  try {
    return spoolText(stateDir).split('\n').filter(Boolean).length;
  } catch {
    return 0;
  }
};

async function stop(proc: AgentProcess, signal: NodeJS.Signals): Promise<void> {
  proc.kill(signal);
  await proc.exit;
}

beforeAll(async () => {
  [target, proxy] = await Promise.all([startTargetServer(), startTinyproxy()]);
});
afterAll(async () => {
  await Promise.all([target?.close(), proxy?.stop()]);
});

describe('secrets never leave the agent', () => {
  it('agent mode: results, spool (after kill -9), stdout/stderr and events hold no secret in any form', async () => {
    const cp = await ControlPlane.start({ apiKey: API_KEY, leaseMs: 120_000 });
    const agents: AgentProcess[] = [];
    try {
      const jobs: string[] = [];
      const queued: Array<Promise<string>> = [];
      const add = (check: Check, variables: Job['environmentVariables']) => queued.push(cp.addJob(check, { environmentVariables: variables }));
      SECRETS.forEach((value, i) => {
        for (const check of checksFor(i, value, 'S')) add(check, [{ key: 'S', value, secret: true }, ...PLAIN_VARIABLES]);
      });
      for (const check of checksFor('control', CONTROL, 'PLAIN')) add(check, PLAIN_VARIABLES);
      for (const check of agentWideChecks()) add(check, PLAIN_VARIABLES);
      // A short secret: not scrubbed, warned about by name.
      add({ id: 'short-secret', checkType: 'URL', request: { url: `${target.url}/ok` } }, [{ key: 'TOO_SHORT', value: 'q7z', secret: true }]);

      jobs.push(...(await Promise.all(queued)));

      // 1. The control plane refuses results: everything stays in the spool; then kill -9.
      cp.inject({ route: 'results', status: 503, count: 100_000 });
      const stateDir = tempDir();
      const first = startAgent(['agent'], agentEnv(stateDir, cp));
      agents.push(first);
      await cp.waitFor(() => spooledCount(stateDir) >= jobs.length, 90_000, `all ${jobs.length} results spooled`);
      await stop(first, 'SIGKILL');
      const spooled = spoolText(stateDir);
      expect(cp.results.size).toBe(0);
      expect(cp.requests.some((r) => r.route === '/v1/agent/results' && r.status === 503)).toBe(true);
      // Control-plane traffic really went through the proxy whose credentials are a secret.
      expect(proxy.log()).toContain(`CONNECT 127.0.0.1:${cp.port}`);

      // 2. The control plane accepts again: a second agent delivers the spool.
      cp.clearFaults();
      const second = startAgent(['agent'], agentEnv(stateDir, cp));
      agents.push(second);
      await cp.waitFor(() => jobs.every((id) => cp.resultsFor(id).length === 1), 60_000, 'every result delivered');
      await stop(second, 'SIGTERM');

      expect(cp.violations).toEqual([]);
      const results = [...cp.results.values()].map((r) => r.result);
      const byId = new Map(results.map((r) => [r.checkId, r]));
      // The placements really happened: echoes answered, redirects kept, errors raised.
      // (Check ids carried the secret: they arrive scrubbed too.)
      expect(byId.get('s0-echo-*****')?.apiCheckResult).toMatchObject({ response: { status: 200 } });
      expect(byId.get('s0-redirect-kept')?.apiCheckResult).toMatchObject({ response: { status: 302 } });
      expect(String((byId.get('s30-unknown-host')?.apiCheckResult as { requestError?: string })?.requestError)).toMatch(/ENOTFOUND/);
      expect(String((byId.get('s0-refused')?.apiCheckResult as { requestError?: string })?.requestError)).toMatch(/ECONNREFUSED/);
      // The short secret was warned about by name.
      expect(first.logs.some((l) => l.variable === 'TOO_SHORT' && /shorter than 4/.test(l.msg))).toBe(true);

      const resultsText = haystack(JSON.stringify(results));
      const places: Place[] = [
        { where: 'results received by the control plane', text: resultsText },
        { where: 'spool files under STATE_DIR', text: haystack(spooled) },
        { where: 'stdout of the first agent', text: haystack(first.stdout()) },
        { where: 'stderr of the first agent', text: haystack(first.stderr()) },
        { where: 'stdout of the second agent', text: haystack(second.stdout()) },
        { where: 'events received by the control plane', text: haystack(JSON.stringify(cp.events)) },
      ];
      expectControlFound([places[0] as Place, places[1] as Place, places[2] as Place]);
      // Basic auth was echoed back (scrubbed): the hunt for its base64 forms is not vacuous.
      const echoedBody = String((byId.get('s0-echo-*****')?.apiCheckResult as { response?: { body?: string } })?.response?.body);
      expect(echoedBody).toMatch(/"authorization":"Basic [A-Za-z0-9+/]*\*{5}"/);
      expect(echoedBody).toMatch(/"x-api-key":"\*{5}"/);
      expectNoLeaks(places);
    } finally {
      for (const agent of agents) await stop(agent, 'SIGKILL');
      await cp.close();
    }
  }, 240_000);

  it('once mode with --results: stdout, stderr and the results file hold no secret in any form', async () => {
    const dir = tempDir();
    const checks: Check[] = [];
    SECRETS.forEach((value, i) => {
      for (const check of checksFor(i, value, 'S')) checks.push({ ...check, environmentVariables: [{ key: 'S', value, secret: true }] });
    });
    for (const check of checksFor('control', CONTROL, 'PLAIN')) checks.push(check);
    checks.push(...agentWideChecks());
    const file = path.join(dir, 'checks.json');
    writeFileSync(file, JSON.stringify({ environmentVariables: PLAIN_VARIABLES, checks }));
    const resultsFile = path.join(dir, 'results.jsonl');
    const proc = startAgent(
      ['once', file, '--results', resultsFile],
      cleanEnv({ STATE_DIR: tempDir(), JOB_CONCURRENCY: '16', LOG_LEVEL: 'debug', API_KEY, OUTPOST_SECRET_ALPHA, OUTPOST_SECRET_UNICODE }),
    );
    const { code } = await proc.exit;
    expect(code, proc.stderr().slice(-2000)).toBe(1);
    const written = readFileSync(resultsFile, 'utf8');
    const results = written
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as CheckResultEntry);
    expect(results).toHaveLength(checks.length);
    // CP_PROXY_PASS only reaches once mode literally (in a body): it is not a secret there (no HTTP_PROXY), so leave it out.
    const places: Place[] = [
      { where: 'stdout (results as JSON lines)', text: haystack(proc.stdout()) },
      { where: 'stderr (logs, debug level)', text: haystack(proc.stderr()) },
      { where: 'the --results file', text: haystack(written) },
    ];
    expectControlFound(places);
    const findings = hunt(
      places,
      ALL.filter((s) => s.value !== CP_PROXY_PASS),
    );
    expect(findings, `SECRETS LEAKED (${findings.length}):\n${findings.slice(0, 60).join('\n')}`).toEqual([]);
  }, 120_000);
});

describe('regex captures cannot read a secret back in pieces', () => {
  /** 21 characters, nothing the URL path encodes: read three at a time by seven assertions. */
  const PIECED = 'K9zqVb7Lp2Xc4Nw8Rt0Hy';
  /** Not a secret, same shape: its pieces must come through (the positive control). */
  const PLAIN_PIECED = 'ctl-ctl-ctl-ctl-ctl-c';


  /** Seven TEXT_BODY assertions, each capturing the next three characters after `x-tok:`. */
  const pieceAssertions = () =>
    Array.from({ length: 7 }, (_, i) => ({ source: 'TEXT_BODY', comparison: 'EQUALS', target: 'zzz', regex: `[xX]-[tT]ok:${".{3}".repeat(i)}(.{1,3})` }));

  it('local mode: a secret in a check id or name is scrubbed from the /metrics labels, as from the result', async () => {
    const secret = 's3cr3tTOKENvalue';
    const file = path.join(tempDir(), 'checks.json');
    writeFileSync(
      file,
      JSON.stringify({
        environmentVariables: [{ key: 'TOK', value: secret, secret: true }],
        checks: [{ id: `echo-${secret}`, name: `echo ${secret}`, checkType: 'API', frequency: 60, request: { url: `${target.url}/echo/x` } }],
      }),
    );
    const proc = startAgent(['local', file], cleanEnv({ STATE_DIR: tempDir() }));
    try {
      const port = await proc.healthPort();
      const deadline = Date.now() + 30_000;
      while (proc.stdoutLines.length < 1) {
        if (Date.now() > deadline) throw new Error(`no result; stderr: ${proc.stderr().slice(-2000)}`);
        await new Promise((r) => setTimeout(r, 25));
      }
      expect(JSON.parse(proc.stdoutLines[0] as string)).toMatchObject({ checkId: 'echo-*****', name: 'echo *****' });
      const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      expect(metrics).toMatch(/^probe_success\{check_id="echo-\*\*\*\*\*",check_name="echo \*\*\*\*\*",/m);
      expect(metrics).not.toContain(secret);
      // A reload keeps the series: it is kept by the check's own id, which the file still names.
      proc.kill('SIGHUP');
      await proc.waitForLog((l) => l.msg === 'checks file reloaded', 30_000, 'the reload');
      expect(await (await fetch(`http://127.0.0.1:${port}/metrics`)).text()).toMatch(/^probe_success\{check_id="echo-\*\*\*\*\*",/m);
    } finally {
      proc.kill('SIGKILL');
      await proc.exit;
    }
  }, 60_000);

  it('local mode: the agent’s own health port does not echo the path, and captures overlapping a secret are withheld', async () => {
    const healthPort = await freePort();
    const dir = tempDir();
    const file = path.join(dir, 'checks.json');
    const api = (id: string, url: string) => ({ id, name: id, checkType: 'API', frequency: 60, request: { method: 'GET', url }, assertions: pieceAssertions() });
    writeFileSync(
      file,
      JSON.stringify({
        checks: [
          api('via-health-port', `http://127.0.0.1:${healthPort}/x-tok:{{OUTPOST_SECRET_PIECED}}`),
          api('via-echo', `${target.url}/echo/x-tok:{{OUTPOST_SECRET_PIECED}}`),
          api('control', `${target.url}/echo/x-tok:${PLAIN_PIECED}`),
        ],
      }),
    );
    const proc = startAgent(['local', file], cleanEnv({ STATE_DIR: tempDir(), AGENT_HEALTH_PORT: String(healthPort), OUTPOST_SECRET_PIECED: PIECED }));
    try {
      const deadline = Date.now() + 30_000;
      while (proc.stdoutLines.length < 3) {
        if (Date.now() > deadline) throw new Error(`no results; stderr: ${proc.stderr().slice(-2000)}`);
        await new Promise((r) => setTimeout(r, 25));
      }
      const byId = new Map(proc.stdoutLines.map((line) => JSON.parse(line) as CheckResultEntry).map((r) => [r.checkId, r]));
      const assertionsOf = (id: string) => (byId.get(id)?.apiCheckResult?.assertions ?? []) as Array<{ actual: unknown; passed: boolean; error?: string }>;
      const actuals = (id: string) => assertionsOf(id).map((a) => a.actual);
      // The control: the very same assertions read a plain value back whole.
      expect(actuals('control').join('')).toBe(PLAIN_PIECED);
      // The health port's 404 no longer repeats the path: nothing to capture.
      expect(actuals('via-health-port')).toEqual(Array(7).fill(null));
      // The echo does repeat it: every piece is withheld, and each assertion fails saying why.
      expect(actuals('via-echo')).toEqual(Array(7).fill('[REDACTED]'));
      for (const a of assertionsOf('via-echo')) {
        expect(a.passed).toBe(false);
        expect(a.error).toMatch(/capture is withheld/);
      }
      // No piece of three characters or more reaches stdout or stderr.
      const out = proc.stdout() + proc.stderr();
      for (let i = 0; i + 3 <= PIECED.length; i++) expect(out, `piece ${i}`).not.toContain(PIECED.slice(i, i + 3));
    } finally {
      proc.kill('SIGKILL');
      await proc.exit;
    }
  }, 60_000);
});
