// Client certificates (mutual TLS) end to end: `outpost once` (the real
// process) and agent mode (a job from the real server) against nginx with
// `ssl_verify_client on` and a throwaway CA.

import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CheckResultEntry } from '../../src/core/result-entry.js';
import { cleanEnv, startAgent, tempDir } from '../support/agent-process.js';
import { useHarness } from '../support/harness.js';
import { type Nginx, startNginx } from '../support/nginx.js';
import { type ClientCertificateFiles, createTestPki, issueClientCertificate, type TestPki } from '../support/tls.js';

const h = useHarness();
let pki: TestPki;
let client: ClientCertificateFiles;
let nginx: Nginx;
let results: Map<string, CheckResultEntry>;
let output: string;
let key: string;
let encryptedKey: string;

const api = (id: string) => results.get(id)?.apiCheckResult as {
  response: { status: number } | null;
  requestError: string | null;
  jobLog: string[];
};

beforeAll(async () => {
  pki = createTestPki();
  client = issueClientCertificate(pki);
  nginx = await startNginx({
    tls: pki.valid,
    serverConfig: `
    ssl_client_certificate ${pki.caCert};
    ssl_verify_client on;
    ssl_verify_depth 2;
    location = /to-ip { return 302 https://127.0.0.1:$server_port/health; }`,
  });
  const read = (file: string) => readFileSync(file, 'utf8');
  const cert = read(client.cert);
  key = read(client.key);
  encryptedKey = read(client.encryptedKey);
  const ca = read(pki.caCert);
  const url = `${nginx.url}/health`;
  const named = `https://localhost:${nginx.port}`;
  const checks = [
    // The passphrase and a line of the key also land where a result shows them (the URL, a header): scrubbed there too.
    { id: 'right', checkType: 'URL', request: { url: `${url}?echo=${client.passphrase}` }, clientCertificates: [{ host: '127.0.0.1', cert, key: encryptedKey, passphrase: client.passphrase, ca }] },
    {
      id: 'api-right',
      checkType: 'API',
      request: { url, headers: [{ key: 'x-echo', value: key.split('\n')[1] }] },
      clientCertificates: [
        { host: '*.internal.example', cert: read(pki.wrongName.cert), key: read(pki.wrongName.key) },
        { host: '127.0.0.1', cert, key, ca },
      ],
      assertions: [{ source: 'STATUS_CODE', comparison: 'EQUALS', target: '200' }],
    },
    // Each redirect hop presents the entry for its own host.
    { id: 'hop-both', checkType: 'URL', request: { url: `${named}/to-ip` }, clientCertificates: [{ host: 'localhost', cert, key, ca }, { host: '127.0.0.1', cert, key, ca }] },
    // skipSSL: without an entry the second hop has no CA that trusts the server either.
    { id: 'hop-first-only', checkType: 'URL', request: { url: `${named}/to-ip`, skipSSL: true }, clientCertificates: [{ host: 'localhost', cert, key, ca }] },
    { id: 'none', checkType: 'URL', request: { url, skipSSL: true } },
    { id: 'other-host', checkType: 'URL', request: { url, skipSSL: true }, clientCertificates: [{ host: '*.internal.example', cert, key }] },
    { id: 'wrong-passphrase', checkType: 'URL', request: { url }, clientCertificates: [{ host: '127.0.0.1', cert, key: encryptedKey, passphrase: 'not-the-passphrase-9', ca }] },
    { id: 'mismatch', checkType: 'URL', request: { url }, clientCertificates: [{ host: '127.0.0.1', cert, key: read(pki.valid.key), ca }] },
    { id: 'untrusted', checkType: 'URL', request: { url, skipSSL: true }, clientCertificates: [{ host: '127.0.0.1', cert: read(client.selfSigned.cert), key: read(client.selfSigned.key), ca: null }] },
  ];
  const dir = tempDir();
  const file = path.join(dir, 'checks.json');
  writeFileSync(file, JSON.stringify({ checks }));
  const out = path.join(dir, 'out.jsonl');
  const proc = startAgent(['once', file, '--results', out], cleanEnv({ JOB_CONCURRENCY: '4', LOG_LEVEL: 'debug' }));
  await proc.exit;
  results = new Map(proc.stdoutLines.filter(Boolean).map((l) => {
    const r = JSON.parse(l) as CheckResultEntry;
    return [r.checkId as string, r];
  }));
  output = `${proc.stdoutLines.join('\n')}\n${proc.stderr()}\n${readFileSync(out, 'utf8')}`;
}, 60_000);

afterAll(async () => {
  await nginx?.stop();
});

describe('client certificates against nginx with ssl_verify_client on', () => {
  it('passes with the right certificate (encrypted key and passphrase, the CA trusted for the server)', () => {
    expect(api('right').requestError).toBeNull();
    expect(api('right').response?.status).toBe(200);
    expect(results.get('right')?.hasFailures).toBe(false);
    expect(api('right').jobLog.join('\n')).toContain('Presenting the client certificate for 127.0.0.1');
  });

  it('an API check picks the entry for its host among several', () => {
    expect(api('api-right').requestError).toBeNull();
    expect(api('api-right').response?.status).toBe(200);
    expect(results.get('api-right')?.hasFailures).toBe(false);
  });

  it('presents on each redirect hop the certificate for that hop\'s host', () => {
    expect(api('hop-both').requestError).toBeNull();
    expect(results.get('hop-both')?.hasFailures).toBe(false);
    expect(api('hop-both').jobLog.filter((line) => line.startsWith('Presenting'))).toEqual([
      'Presenting the client certificate for localhost',
      'Presenting the client certificate for 127.0.0.1',
    ]);
    expect(api('hop-first-only').requestError).toMatch(/none was presented .* at 127\.0\.0\.1:/);
  });

  it('without a certificate, or with none for the host, fails with a clear error', () => {
    for (const id of ['none', 'other-host']) {
      expect(results.get(id)?.hasFailures).toBe(true);
      expect(api(id).requestError).toMatch(/the server requires a client certificate and none was presented/);
    }
  });

  it('a wrong passphrase and a key of another certificate are clear errors, nothing sent', () => {
    expect(api('wrong-passphrase').requestError).toMatch(/clientCertificates\[0\] \(host 127\.0\.0\.1\): the key cannot be read: wrong passphrase/);
    expect(api('mismatch').requestError).toMatch(/clientCertificates\[0\] \(host 127\.0\.0\.1\): the key does not belong to the certificate/);
    expect(api('wrong-passphrase').response).toBeNull();
  });

  it('a certificate the server does not trust is a clear error', () => {
    expect(results.get('untrusted')?.hasFailures).toBe(true);
    expect(api('untrusted').requestError).toMatch(/the server rejected the client certificate/);
  });

  it('no key or passphrase appears in stdout, stderr or the results file', () => {
    expect(output.length).toBeGreaterThan(1000);
    expect(JSON.stringify(results.get('right'))).toContain('echo=');
    expect(JSON.stringify(results.get('api-right'))).toContain('x-echo');
    expect(output).not.toContain(client.passphrase);
    expect(output).not.toContain('not-the-passphrase-9');
    for (const pem of [key, encryptedKey, readFileSync(pki.valid.key, 'utf8'), readFileSync(client.selfSigned.key, 'utf8')]) {
      for (const line of pem.split('\n')) {
        if (line && !line.startsWith('-----')) expect(output).not.toContain(line);
      }
    }
  });
});

describe('client certificates in a job (agent mode)', () => {
  it('takes check.clientCertificates, the passphrase from a secret job variable, and scrubs key and passphrase', async () => {
    const cp = await h.server();
    const agent = h.agent(cp, { LOG_LEVEL: 'debug' });
    const cert = readFileSync(client.cert, 'utf8');
    const ca = readFileSync(pki.caCert, 'utf8');
    const definition = {
      id: 'mtls-job',
      checkType: 'API',
      request: { url: `${nginx.url}/health`, headers: [{ key: 'x-echo', value: `{{MTLS_PASS}} ${encryptedKey.split('\n')[1]}` }] },
      clientCertificates: [{ host: '127.0.0.1', cert, key: encryptedKey, passphrase: '{{MTLS_PASS}}', ca }],
    };
    const job = await cp.addJob(definition, { environmentVariables: [{ key: 'MTLS_PASS', value: client.passphrase, secret: true }] });
    await cp.waitFor(() => cp.resultsFor(job).length === 1, 30_000, 'the mTLS result');
    const [stored] = cp.resultsFor(job);
    expect(stored?.result.hasFailures).toBe(false);
    expect(stored?.result.apiCheckResult?.response).toMatchObject({ status: 200 });
    const seen = `${JSON.stringify(stored)}\n${agent.stdoutLines.join('\n')}\n${agent.stderr()}`;
    expect(seen).toContain('x-echo');
    expect(seen).not.toContain(client.passphrase);
    for (const line of encryptedKey.split('\n')) if (line && !line.startsWith('-----')) expect(seen).not.toContain(line);
  });
});
