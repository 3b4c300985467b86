// Which client certificate a request presents, how the check definition's
// `clientCertificates` is validated, and that key and passphrase become secrets.

import { describe, expect, it } from 'vitest';
import type { ExecutionContext } from '../../src/checks/executor.js';
import { DefinitionError } from '../../src/checks/fields.js';
import { type ClientCertificate, certificateFor, ClientCertificateError, hostMatches, literalSecrets, prepareClientCertificates } from '../../src/checks/http/client-certificates.js';
import { parseCheck } from '../../src/checks/parse-definition.js';
import { defaultRegistry } from '../../src/checks/registry.js';
import { Variables } from '../../src/checks/variables.js';
import { processSecrets } from '../../src/core/process-secrets.js';

const entry = (host: string): ClientCertificate => ({ host, cert: `cert for ${host}`, key: 'k' });

describe('choosing a client certificate by host', () => {
  it('matches exact names, case and a trailing dot aside', () => {
    expect(hostMatches('api.internal.example', 'API.internal.example.')).toBe(true);
    expect(hostMatches('api.internal.example', 'internal.example')).toBe(false);
    expect(hostMatches('127.0.0.1', '127.0.0.1')).toBe(true);
    expect(hostMatches('::1', '[::1]')).toBe(true);
  });

  it('lets `*.` stand for exactly one label', () => {
    expect(hostMatches('*.internal.example', 'a.internal.example')).toBe(true);
    expect(hostMatches('*.internal.example', 'a.b.internal.example')).toBe(false);
    expect(hostMatches('*.internal.example', 'internal.example')).toBe(false);
    expect(hostMatches('*.internal.example', 'ainternal.example')).toBe(false);
  });

  it('prefers an exact entry to a wildcard, then the first listed', () => {
    const entries = [entry('*.internal.example'), entry('api.internal.example'), entry('*.internal.example')];
    expect(certificateFor(entries, 'api.internal.example')).toBe(entries[1]);
    expect(certificateFor(entries, 'web.internal.example')).toBe(entries[0]);
    expect(certificateFor(entries, 'elsewhere.example')).toBeUndefined();
  });
});

describe('clientCertificates in a check definition', () => {
  const registry = defaultRegistry();
  const parse = (clientCertificates: unknown) =>
    parseCheck({ id: 'c', checkType: 'URL', request: { url: 'https://a.internal.example/' }, clientCertificates }, 'check', registry);

  it('is read beside `request` for URL and API checks', () => {
    const { check } = parse([{ host: '*.Internal.example', cert: 'C', key: 'K', passphrase: '{{P}}', ca: null }]);
    expect((check.request as { clientCertificates: unknown }).clientCertificates).toEqual([{ host: '*.internal.example', cert: 'C', key: 'K', passphrase: '{{P}}' }]);
    const api = parseCheck({ id: 'a', checkType: 'API', request: { url: 'https://x/' }, clientCertificates: [{ host: 'x', cert: 'C', key: 'K' }] }, 'check', registry);
    expect((api.check.request as { clientCertificates: unknown }).clientCertificates).toHaveLength(1);
  });

  it('refuses a missing cert or key and a host with a scheme, a port or an inner wildcard', () => {
    for (const bad of [[{ host: 'x', key: 'K' }], [{ host: 'x', cert: 'C' }], [{ host: 'https://x', cert: 'C', key: 'K' }], [{ host: 'x:443', cert: 'C', key: 'K' }], [{ host: 'a.*.x', cert: 'C', key: 'K' }]]) {
      expect(() => parse(bad)).toThrow(DefinitionError);
    }
  });
});

describe('preparing client certificates', () => {
  it('registers the key, each line of its body and the passphrase as secrets, and says what is wrong with a bad PEM', () => {
    const added: Array<[string, string | undefined]> = [];
    const ctx = { secrets: { add: (value: string, name?: string) => added.push([value, name]) } } as unknown as ExecutionContext;
    const variables = new Variables([{ key: 'PASS', value: 'pass-phrase-from-variable', secret: true }], processSecrets({}));
    const key = '-----BEGIN PRIVATE KEY-----\nAAAABBBBCCCCDDDD\nEEEEFFFF\n-----END PRIVATE KEY-----\n';
    expect(() => prepareClientCertificates([{ host: 'x', cert: 'not a pem', key, passphrase: '{{PASS}}' }], variables, ctx)).toThrow(ClientCertificateError);
    expect(added.map(([value]) => value)).toEqual([key, 'AAAABBBBCCCCDDDD', 'EEEEFFFF', 'pass-phrase-from-variable']);
    expect(added.every(([, name]) => name?.startsWith('clientCertificates[0].'))).toBe(true);
  });
});

describe('secrets known from the definition', () => {
  it('are the key, its body lines and the passphrase as written; values with variables wait for the run', () => {
    const key = '-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAABBBBCCCCDDDD\n-----END ENCRYPTED PRIVATE KEY-----';
    expect(literalSecrets([{ host: 'x', cert: 'C', key, passphrase: 'literal-passphrase' }, { host: 'y', cert: 'C', key: '{{KEY}}', passphrase: '{{PASS}}' }])).toEqual([
      { name: 'clientCertificates[0].key', value: key },
      { name: 'clientCertificates[0].key', value: 'AAAABBBBCCCCDDDD' },
      { name: 'clientCertificates[0].passphrase', value: 'literal-passphrase' },
    ]);
    expect(literalSecrets(undefined)).toEqual([]);
  });
});
