// Client certificates (mutual TLS) for URL and API checks: the check's
// `clientCertificates` list, the entry that applies to a request's host, and
// the TLS options it becomes. The key and the passphrase are secrets.

import tls from 'node:tls';
import type { ExecutionContext } from '../executor.js';
import type { Fields } from '../fields.js';
import type { Variables } from '../variables.js';

const MAX_PEM_LENGTH = 65_536;

export interface ClientCertificate {
  /** A host name, or `*.` followed by a domain: one more label of any name. */
  host: string;
  cert: string;
  key: string;
  passphrase?: string;
  /** PEM CA certificate(s) trusted for the server's certificate, instead of the system's. */
  ca?: string;
}

/** TLS options for one connection, the key and passphrase already filled in. */
export interface ClientTls {
  host: string;
  cert: string;
  key: string;
  passphrase?: string;
  ca?: string;
}

/** `clientCertificates` at check level (a sibling of `request`), as in the checks file and in jobs. */
export function parseClientCertificates(check: Fields): ClientCertificate[] {
  return check.list('clientCertificates').map((item) => {
    const host = (item.string('host', { required: true, minLength: 1, maxLength: 253 }) ?? '').trim().toLowerCase().replace(/\.$/, '');
    if (/[/:\s]/.test(host) || (host.includes('*') && !/^\*\.[^*]+$/.test(host))) {
      item.fail(item.at('host'), `must be a host name without scheme or port, optionally starting with "*." (got ${JSON.stringify(host.slice(0, 80))})`);
    }
    const passphrase = item.string('passphrase', { maxLength: 1024 });
    const ca = item.string('ca', { maxLength: MAX_PEM_LENGTH });
    return {
      host,
      cert: item.string('cert', { required: true, minLength: 1, maxLength: MAX_PEM_LENGTH }) ?? '',
      key: item.string('key', { required: true, minLength: 1, maxLength: MAX_PEM_LENGTH }) ?? '',
      ...(passphrase ? { passphrase } : {}),
      ...(ca ? { ca } : {}),
    };
  });
}

/** The key (whole and line by line) and the passphrase as written, when no variable is left to fill in. */
export function literalSecrets(entries: readonly ClientCertificate[] | undefined): Array<{ name: string; value: string }> {
  const found: Array<{ name: string; value: string }> = [];
  (entries ?? []).forEach((entry, i) => {
    const at = `clientCertificates[${i}]`;
    if (!entry.key.includes('{{')) {
      found.push({ name: `${at}.key`, value: entry.key });
      for (const line of keyLines(entry.key)) found.push({ name: `${at}.key`, value: line });
    }
    if (entry.passphrase && !entry.passphrase.includes('{{')) found.push({ name: `${at}.passphrase`, value: entry.passphrase });
  });
  return found;
}

/** The lines of a PEM key's body: each is as secret as the whole. */
function keyLines(key: string): string[] {
  return key
    .split(/\r?\n/)
    .map((line) => line.trim())
    .filter((line) => line && !line.startsWith('-----') && !/^[A-Za-z-]+:/.test(line));
}

/** Whether `pattern` (an entry's host) covers `hostname`: equal, or `*.` standing for exactly one label. */
export function hostMatches(pattern: string, hostname: string): boolean {
  const host = hostname.replace(/^\[(.*)\]$/, '$1').toLowerCase().replace(/\.$/, '');
  if (!pattern.startsWith('*.')) return pattern === host;
  const suffix = pattern.slice(1);
  if (!host.endsWith(suffix)) return false;
  const label = host.slice(0, -suffix.length);
  return label.length > 0 && !label.includes('.');
}

/** The entry for `hostname`: an exact host before a wildcard, the first listed among equals. */
export function certificateFor(entries: readonly ClientCertificate[], hostname: string): ClientCertificate | undefined {
  return entries.find((e) => !e.host.startsWith('*.') && hostMatches(e.host, hostname)) ?? entries.find((e) => hostMatches(e.host, hostname));
}

export class ClientCertificateError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ClientCertificateError';
  }
}

/** What OpenSSL said, in words a person on call understands. */
function explain(error: unknown): string {
  const text = error instanceof Error ? error.message : String(error);
  if (/bad decrypt|bad password|interrupted or cancelled|DECODER routines::unsupported|maybe wrong password/i.test(text)) {
    return 'the key cannot be read: wrong passphrase, or the key is encrypted and no passphrase was given';
  }
  if (/key values mismatch/i.test(text)) return 'the key does not belong to the certificate';
  if (/no start line|PEM|ASN1|bad base64|no certificate/i.test(text)) return `not a PEM certificate and key (${text})`;
  return text;
}

/**
 * The TLS options of every entry, variables filled in, key and passphrase
 * registered as secrets, each checked by building a TLS context so that a
 * wrong passphrase or a mismatched key is one clear error before anything is sent.
 */
export function prepareClientCertificates(entries: readonly ClientCertificate[], variables: Variables, ctx: ExecutionContext): ClientTls[] {
  return entries.map((entry, i) => {
    const at = `clientCertificates[${i}]`;
    const key = variables.interpolate(entry.key, `${at}.key`);
    // Key and passphrase are secrets whatever the variables say (docs/checks/http.md).
    ctx.secrets?.add(key, `${at}.key`);
    for (const line of keyLines(key)) ctx.secrets?.add(line, `${at}.key`);
    const passphrase = entry.passphrase === undefined ? undefined : variables.interpolate(entry.passphrase, `${at}.passphrase`);
    if (passphrase) ctx.secrets?.add(passphrase, `${at}.passphrase`);
    const prepared: ClientTls = {
      host: entry.host,
      cert: variables.interpolate(entry.cert, `${at}.cert`),
      key,
      ...(passphrase ? { passphrase } : {}),
      ...(entry.ca ? { ca: variables.interpolate(entry.ca, `${at}.ca`) } : {}),
    };
    try {
      tls.createSecureContext({ cert: prepared.cert, key, ...(passphrase ? { passphrase } : {}), ...(prepared.ca ? { ca: prepared.ca } : {}) });
    } catch (error) {
      throw new ClientCertificateError(`${at} (host ${entry.host}): ${explain(error)}`);
    }
    return prepared;
  });
}

/** The connection options of the entry for `hostname`, if any. */
export function tlsOptionsFor(prepared: readonly ClientTls[], hostname: string): ClientTls | undefined {
  return certificateFor(prepared as ClientCertificate[], hostname);
}
