// An undici connector that resolves, connects and handshakes itself so that
// every phase is measured, not estimated, and the address family is ours to
// choose. One instance serves one check run.

import net from 'node:net';
import { performance } from 'node:perf_hooks';
import tls from 'node:tls';
import type { buildConnector } from 'undici';

import type { IpFamily } from './ip-family.js';
import { type NetworkPolicy, resolvePermitted } from './network-policy.js';

export type { IpFamily };

/** Marks of one connection, in performance.now() milliseconds. */
export interface ConnectionMarks {
  lookupStart: number;
  lookupEnd: number;
  connectEnd: number;
  /** Equal to connectEnd for plain HTTP. */
  tlsEnd: number;
  address: string;
  port: number;
  family: 4 | 6;
  tls?: TlsSummary;
  /** Set when IPv6 was asked for and IPv4 used instead, saying why. */
  fallback?: string;
}

export interface TlsSummary {
  protocol: string | null;
  cipher: string | null;
  authorized: boolean;
  authorizationError: string | null;
  subject: string | null;
  issuer: string | null;
  validFrom: string | null;
  validTo: string | null;
  daysToExpiry: number | null;
  /** Every certificate the server sent, leaf first. */
  chain: { subject: string | null; issuer: string | null; validTo: string | null }[];
  /** The earliest expiry in the served chain (ISO 8601): an intermediate may expire before the leaf. */
  chainEarliestExpiry: string | null;
}

export interface TimedConnectorOptions {
  ipFamily: IpFamily;
  rejectUnauthorized: boolean;
  signal: AbortSignal;
  onConnection: (marks: ConnectionMarks) => void;
  /** A client certificate to present (mutual TLS), and the CA that replaces the system's for the server. */
  clientTls?: { cert: string; key: string; passphrase?: string; ca?: string };
  /** BLOCKED_NETWORKS / ALLOWED_NETWORKS: judged on the resolved address, which is then the one connected to. */
  policy?: NetworkPolicy;
}

function firstValue(value: string | string[] | undefined): string | null {
  return (Array.isArray(value) ? value[0] : value) ?? null;
}

/** The served chain, leaf first; a self-signed root names itself as issuer and ends the walk. */
function servedChain(socket: tls.TLSSocket): TlsSummary['chain'] {
  const chain: TlsSummary['chain'] = [];
  const seen = new Set<string>();
  let cert: tls.DetailedPeerCertificate | undefined = socket.getPeerCertificate(true);
  while (cert && Object.keys(cert).length > 0 && !seen.has(cert.fingerprint256) && chain.length < 16) {
    seen.add(cert.fingerprint256);
    chain.push({
      subject: cert.subject ? firstValue(cert.subject.CN) : null,
      issuer: cert.issuer ? (firstValue(cert.issuer.CN) ?? firstValue(cert.issuer.O)) : null,
      validTo: cert.valid_to ?? null,
    });
    cert = cert.issuerCertificate;
  }
  return chain;
}

function earliestExpiry(chain: TlsSummary['chain']): string | null {
  const times = chain.map((c) => (c.validTo ? Date.parse(c.validTo) : Number.NaN)).filter((t) => !Number.isNaN(t));
  return times.length > 0 ? new Date(Math.min(...times)).toISOString() : null;
}

function summarizeTls(socket: tls.TLSSocket): TlsSummary {
  const cert = socket.getPeerCertificate();
  const chain = servedChain(socket);
  const has = cert && Object.keys(cert).length > 0;
  const validTo = has ? cert.valid_to : null;
  const expires = validTo ? Date.parse(validTo) : Number.NaN;
  const authorizationError = socket.authorizationError;
  return {
    protocol: socket.getProtocol(),
    cipher: socket.getCipher()?.name ?? null,
    authorized: socket.authorized,
    authorizationError: authorizationError ? String(authorizationError) : null,
    subject: has && cert.subject ? firstValue(cert.subject.CN) : null,
    issuer: has && cert.issuer ? (firstValue(cert.issuer.CN) ?? firstValue(cert.issuer.O)) : null,
    validFrom: has ? cert.valid_from : null,
    validTo,
    daysToExpiry: Number.isNaN(expires) ? null : Math.floor((expires - Date.now()) / 86_400_000),
    chain,
    chainEarliestExpiry: earliestExpiry(chain),
  };
}

/** Listener options shared by every connection (one object, not one per connect). */
const ONCE = Object.freeze({ once: true });

export function timedConnector(options: TimedConnectorOptions): buildConnector.connector {
  return (opts, callback) => {
    const marks: Partial<ConnectionMarks> = { lookupStart: performance.now() };
    const port = Number(opts.port) || (opts.protocol === 'https:' ? 443 : 80);
    // WHATWG URLs keep IPv6 literals in brackets; the socket API wants them bare.
    const host = opts.hostname.replace(/^\[(.*)\]$/, '$1');
    let settled = false;
    const finish = (error: Error | null, socket?: net.Socket) => {
      if (settled) {
        socket?.destroy();
        return;
      }
      settled = true;
      options.signal.removeEventListener('abort', onAbort);
      if (error || !socket) callback(error ?? new Error('no socket'), null);
      else callback(null, socket);
    };
    let pending: net.Socket | undefined;
    const onAbort = () => {
      pending?.destroy();
      finish(options.signal.reason instanceof Error ? options.signal.reason : new Error('aborted'));
    };
    if (options.signal.aborted) return onAbort();
    options.signal.addEventListener('abort', onAbort, ONCE);

    resolvePermitted(host, options.ipFamily, options.policy, port).then(
      ({ address, family: resolvedFamily, fallback }) => {
        if (settled) return;
        marks.lookupEnd = performance.now();
        marks.address = address;
        marks.port = port;
        marks.family = resolvedFamily;
        if (fallback) marks.fallback = fallback;
        const socket = net.connect({ host: address, port, noDelay: true });
        pending = socket;
        socket.once('error', (error) => finish(error));
        socket.once('connect', () => {
          marks.connectEnd = performance.now();
          if (opts.protocol !== 'https:') {
            marks.tlsEnd = marks.connectEnd;
            socket.removeAllListeners('error');
            options.onConnection(marks as ConnectionMarks);
            return finish(null, socket);
          }
          const servername = opts.servername || (net.isIP(host) ? undefined : host);
          const secure = tls.connect({
            socket,
            servername,
            rejectUnauthorized: options.rejectUnauthorized,
            ALPNProtocols: ['http/1.1'],
            ...options.clientTls,
          });
          pending = secure;
          secure.once('error', (error) => finish(error));
          secure.once('secureConnect', () => {
            marks.tlsEnd = performance.now();
            marks.tls = summarizeTls(secure);
            secure.removeAllListeners('error');
            socket.removeAllListeners('error');
            options.onConnection(marks as ConnectionMarks);
            finish(null, secure);
          });
        });
      },
      (error: Error) => finish(error),
    );
  };
}
