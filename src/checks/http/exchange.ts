// One HTTP exchange as a check sees it: a fresh connection, redirects followed
// by hand (counted, capped, with browser method rules), every phase measured,
// the body kept up to a limit and the rest counted. Shared by URL and API.

import { STATUS_CODES } from 'node:http';
import { performance } from 'node:perf_hooks';
import { Client, type Dispatcher, ProxyAgent, request } from 'undici';
import { type ConnectionMarks, type IpFamily, timedConnector, type TimedConnectorOptions, type TlsSummary } from '../../net/timed-connector.js';
import { MIB, type MemoryLease } from '../../core/memory-budget.js';
import type { TimingPhases } from '../../core/result-entry.js';
import { describeError, errorCode, JobAbortedError } from '../../core/errors.js';
import type { ExecutionContext } from '../executor.js';
import { type ClientTls, tlsOptionsFor } from './client-certificates.js';
import { resolvePermitted } from '../../net/network-policy.js';

export const HTTP_METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'HEAD', 'DELETE', 'OPTIONS'] as const;
export type HttpMethod = (typeof HTTP_METHODS)[number];

export const MAX_URL_LENGTH = 2048;
export const MAX_REDIRECTS = 10;
const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308]);
/** Headers that must not follow a redirect to another origin. */
const CREDENTIAL_HEADERS = new Set(['authorization', 'cookie', 'proxy-authorization']);

export interface ExchangeSpec {
  method: HttpMethod;
  url: string;
  headers: Array<[string, string]>;
  body?: string;
  followRedirects: boolean;
  skipSSL: boolean;
  ipFamily: IpFamily;
  proxyUrl?: string;
  /** Bytes of the body kept for assertions and the result; the rest is read and counted. */
  bodyLimitBytes: number;
  /** Client certificates (mutual TLS); each hop presents the one for its host, if any. */
  clientCertificates?: ClientTls[];
}

/** Marks of the final hop, in ms since the exchange began. */
export interface Timings {
  socket: number | null;
  lookup: number | null;
  connect: number | null;
  response: number | null;
  end: number | null;
}

export interface Exchange {
  status?: number;
  statusText?: string;
  headers: Record<string, string | string[]>;
  body: Buffer;
  bodySize: number;
  bodyTruncated: boolean;
  redirects: number;
  finalUrl: string;
  timings: Timings;
  timingPhases: TimingPhases;
  tls?: TlsSummary;
  remoteAddress?: string;
  error?: string;
  /** The errno-style code behind `error` (ECONNREFUSED, CERT_HAS_EXPIRED…), for retry rules. */
  errorCode?: string;
  startedAt: Date;
  stoppedAt: Date;
}

interface Hop {
  start: number;
  connection?: ConnectionMarks;
  headers?: number;
  end?: number;
}

/** One shared reason for tearing down what a finished or failed run left open (no stack per run). */
const RUN_OVER = Object.assign(new Error('check run over'), { stack: '' });

const round = (ms: number) => Math.round(ms * 100) / 100;

/** Sums each phase over all hops; `wait` is what no phase accounts for, so the phases add up to total. */
function phases(hops: Hop[], start: number, end: number): TimingPhases {
  let dns = 0;
  let tcp = 0;
  let tlsTime = 0;
  let firstByte = 0;
  let download = 0;
  for (const hop of hops) {
    const c = hop.connection;
    if (c) {
      dns += c.lookupEnd - c.lookupStart;
      tcp += c.connectEnd - c.lookupEnd;
      tlsTime += c.tlsEnd - c.connectEnd;
    }
    const ready = c ? c.tlsEnd : hop.start;
    if (hop.headers !== undefined) firstByte += hop.headers - ready;
    if (hop.headers !== undefined && hop.end !== undefined) download += hop.end - hop.headers;
  }
  const total = round(end - start);
  const d = round(dns);
  const t = round(tcp);
  const s = round(tlsTime);
  const f = round(firstByte);
  const w = round(download);
  return { wait: round(Math.max(0, total - d - t - s - f - w)), dns: d, tcp: t, tls: s, firstByte: f, download: w, total };
}

/** What an exchange holds until its end replaces them (always, see performExchange): one shared pair, not two objects per run. */
const NO_TIMINGS: Timings = Object.freeze({ socket: null, lookup: null, connect: null, response: null, end: null });
const NO_PHASES: TimingPhases = Object.freeze({ wait: 0, dns: 0, tcp: 0, tls: 0, firstByte: 0, download: 0, total: 0 });

function timingsOf(hop: Hop | undefined, start: number): Timings {
  const since = (mark: number | undefined) => (mark === undefined ? null : round(mark - start));
  const c = hop?.connection;
  return {
    socket: since(c?.lookupStart),
    lookup: since(c?.lookupEnd),
    connect: since(c?.tlsEnd),
    response: since(hop?.headers),
    end: since(hop?.end),
  };
}

/** Drops credentials from a URL before it is logged or reported. */
export function displayUrl(raw: string): string {
  // Credentials need an '@'; most URLs have none, and parsing each would be garbage for nothing.
  if (!raw.includes('@')) return raw;
  try {
    const url = new URL(raw);
    if (url.username || url.password) {
      url.username = url.username ? '*****' : '';
      url.password = url.password ? '*****' : '';
    }
    return url.toString();
  } catch {
    return raw;
  }
}

function redirectMethod(status: number, method: HttpMethod): { method: HttpMethod; keepBody: boolean } {
  if (status === 307 || status === 308) return { method, keepBody: true };
  // 303 always becomes GET; 301/302 turn POST into GET, as browsers and curl -L do.
  if (status === 303 && method !== 'HEAD') return { method: 'GET', keepBody: false };
  if ((status === 301 || status === 302) && method === 'POST') return { method: 'GET', keepBody: false };
  return { method, keepBody: true };
}

function memoryCutLine(keptBytes: number, lease: MemoryLease): string {
  const budgetMb = Math.round(lease.budget.capacityBytes / MIB);
  const why = lease.othersBytes() > 0 ? 'was in use by other checks' : 'is smaller than this body';
  return `response body cut at ${keptBytes} bytes: the agent's memory budget for response bodies (${budgetMb} MB) ${why}`;
}

/** The TLS options of an entry, without the host it was chosen by. */
function withoutHost({ host: _host, ...options }: ClientTls): Omit<ClientTls, 'host'> {
  return options;
}

/** What nginx's 400 page says about the client certificate, if anything. */
function clientCertificateRefusal(page: string, presented: boolean): string | undefined {
  if (/No required SSL certificate was sent/i.test(page)) {
    return presented
      ? 'the server requires a client certificate and did not receive one'
      : 'the server requires a client certificate and none was presented (no clientCertificates entry matches this host)';
  }
  if (/The SSL certificate error/i.test(page)) return 'the server rejected the client certificate (not issued by a CA it trusts, or expired)';
  return undefined;
}

const defaultPort = (url: URL) => Number(url.port) || (url.protocol === 'https:' ? 443 : 80);

/**
 * Through a proxy undici connects by name: the proxy's address and the
 * target's are judged here, resolved by the agent. The proxy resolves the
 * target again on its own (docs/network-policy.md says what that leaves open).
 */
async function proxiedHopPermitted(proxyUrl: string, target: string, ipFamily: IpFamily, ctx: ExecutionContext): Promise<void> {
  const policy = ctx.settings.networkPolicy;
  if (!policy) return;
  const proxy = new URL(proxyUrl);
  await resolvePermitted(proxy.hostname, ipFamily, policy, defaultPort(proxy), ctx.signal);
  const next = new URL(target);
  try {
    await resolvePermitted(next.hostname, ipFamily, policy, defaultPort(next), ctx.signal);
  } catch (caught) {
    const code = errorCode(caught);
    // A name only the proxy can resolve is the proxy's to police: refusing it would break every check behind such a proxy.
    if (code !== 'ENOTFOUND' && code !== 'EAI_AGAIN' && code !== 'ENODATA') throw caught;
    ctx.jobLog.push(`Network policy: ${next.hostname} does not resolve here (${code}); the proxy resolves it and its own rules apply`);
  }
}

export async function performExchange(spec: ExchangeSpec, ctx: ExecutionContext): Promise<Exchange> {
  const startedAt = new Date();
  const start = performance.now();
  const hops: Hop[] = [];
  let tls: TlsSummary | undefined;
  let remoteAddress: string | undefined;
  const certificates = spec.clientCertificates ?? [];
  const connectorFor = (hostname: string) => {
    const clientTls = tlsOptionsFor(certificates, hostname);
    if (clientTls) ctx.jobLog.push(`Presenting the client certificate for ${clientTls.host}`);
    return timedConnector({ ...connectorOptions, ...(clientTls ? { clientTls: withoutHost(clientTls) } : {}) });
  };
  const connectorOptions: TimedConnectorOptions = {
    ipFamily: spec.ipFamily,
    rejectUnauthorized: !spec.skipSSL,
    signal: ctx.signal,
    ...(ctx.settings.networkPolicy ? { policy: ctx.settings.networkPolicy } : {}),
    onConnection: (marks) => {
      const hop = hops.at(-1);
      if (hop) hop.connection = marks;
      tls = marks.tls ?? tls;
      remoteAddress = marks.family === 6 ? `[${marks.address}]:${marks.port}` : `${marks.address}:${marks.port}`;
      if (marks.fallback) ctx.jobLog.push(marks.fallback);
      ctx.jobLog.push(`Connected to ${remoteAddress}${marks.tls ? ` (${marks.tls.protocol ?? 'TLS'})` : ''}`);
    },
  };
  // Undici's own idle timers must not fire before the check's cap (the abort signal) does.
  const common = { headersTimeout: 0, bodyTimeout: 0, keepAliveTimeout: 1, pipelining: 0 } as const;
  // A hop's own connection is closed by the check once the body is read (below). With pipelining 0
  // undici would close it itself, building an InformationalError (its stack captured and formatted)
  // per request: a large share of a URL check's CPU (test/bench/http-client.bench.test.ts).
  const direct = { headersTimeout: 0, bodyTimeout: 0, keepAliveTimeout: 600_000, pipelining: 1 } as const;
  let proxy: ProxyAgent | undefined;
  if (spec.proxyUrl) {
    // Plain HTTP goes to the proxy as an absolute-form request (as curl does); HTTPS tunnels through CONNECT.
    // Through a proxy one agent serves every hop: it presents the certificate for the first host.
    const clientTls = tlsOptionsFor(certificates, new URL(spec.url).hostname);
    if (clientTls) ctx.jobLog.push(`Presenting the client certificate for ${clientTls.host}`);
    proxy = new ProxyAgent({
      ...common,
      uri: spec.proxyUrl,
      proxyTunnel: false,
      requestTls: { rejectUnauthorized: !spec.skipSSL, ...(clientTls ? withoutHost(clientTls) : {}) },
    });
    ctx.jobLog.push(`Using proxy ${displayUrl(spec.proxyUrl)} (connection phases are the proxy's and are not measured)`);
  }
  // Without a proxy, one undici Client (one connection) per hop: lighter than an Agent and its Pool, and
  // a fresh connection is what a check wants anyway.
  const clients: Client[] = [];
  const dispatcherFor = (target: string): Dispatcher => {
    if (proxy) return proxy;
    const { origin, hostname } = new URL(target);
    const client = new Client(origin, { ...direct, connect: connectorFor(hostname) });
    clients.push(client);
    return client;
  };

  const exchange: Exchange = {
    headers: {},
    body: Buffer.alloc(0),
    bodySize: 0,
    bodyTruncated: false,
    redirects: 0,
    finalUrl: spec.url,
    timings: NO_TIMINGS,
    timingPhases: NO_PHASES,
    startedAt,
    stoppedAt: startedAt,
  };
  let method = spec.method;
  let body = spec.body;
  let headers = spec.headers;
  let url = spec.url;
  try {
    for (;;) {
      const hop: Hop = { start: performance.now() };
      hops.push(hop);
      if (proxy && spec.proxyUrl) await proxiedHopPermitted(spec.proxyUrl, url, spec.ipFamily, ctx);
      const dispatcher = dispatcherFor(url);
      const response = await request(url, {
        method,
        dispatcher,
        signal: ctx.signal,
        headers: headers.flat(),
        ...(body !== undefined && method !== 'GET' && method !== 'HEAD' ? { body } : {}),
      });
      hop.headers = performance.now();
      exchange.status = response.statusCode;
      exchange.statusText = STATUS_CODES[response.statusCode] ?? '';
      exchange.headers = response.headers as Record<string, string | string[]>;
      const kept: Buffer[] = [];
      let keptBytes = 0;
      let size = 0;
      let cutForMemory = false;
      // A server demanding a client certificate may finish the handshake and answer 400 (nginx does): its page says why.
      const sniffing = response.statusCode === 400 && url.startsWith('https:');
      let sniff = '';
      for await (const chunk of response.body) {
        const buffer = chunk as Buffer;
        if (sniffing && sniff.length < 1024) sniff += buffer.subarray(0, 1024).toString('latin1');
        size += buffer.length;
        if (keptBytes < spec.bodyLimitBytes && !cutForMemory) {
          let part = buffer.subarray(0, spec.bodyLimitBytes - keptBytes);
          // Past what the memory budget grants, the body is still read and counted, never paused: timings stay true.
          const granted = ctx.bodyMemory ? ctx.bodyMemory.take(part.length) : part.length;
          if (granted < part.length) {
            part = part.subarray(0, granted);
            cutForMemory = true;
          }
          kept.push(part);
          keptBytes += part.length;
          if (cutForMemory && ctx.bodyMemory) ctx.jobLog.push(memoryCutLine(keptBytes, ctx.bodyMemory));
        }
      }
      hop.end = performance.now();
      // The answer is complete: the connection goes. close() would end in destroy() with a new
      // ClientDestroyedError (a stack captured per check); the shared reason costs nothing.
      if (dispatcher !== proxy) (dispatcher as Client).destroy(RUN_OVER).catch(() => undefined);
      // The previous hop's body is dropped here: its share of the budget goes back.
      ctx.bodyMemory?.give(exchange.body.length);
      exchange.body = Buffer.concat(kept);
      exchange.bodySize = size;
      exchange.bodyTruncated = size > keptBytes;
      exchange.finalUrl = url;
      const refused = sniffing ? clientCertificateRefusal(sniff, tlsOptionsFor(certificates, new URL(url).hostname) !== undefined) : undefined;
      if (refused) {
        exchange.error = `${refused} at ${new URL(url).host}`;
        break;
      }
      const location = exchange.headers.location;
      if (!spec.followRedirects || !REDIRECT_STATUSES.has(response.statusCode) || typeof location !== 'string') break;
      const next = new URL(location, url);
      if (exchange.redirects >= MAX_REDIRECTS) {
        exchange.error = `Too many redirects: stopped after ${MAX_REDIRECTS} (last Location: ${displayUrl(next.toString())})`;
        break;
      }
      exchange.redirects++;
      const rule = redirectMethod(response.statusCode, method);
      if (new URL(url).origin !== next.origin) headers = headers.filter(([key]) => !CREDENTIAL_HEADERS.has(key.toLowerCase()));
      if (!rule.keepBody) {
        body = undefined;
        headers = headers.filter(([key]) => key.toLowerCase() !== 'content-type' && key.toLowerCase() !== 'content-length');
      }
      ctx.jobLog.push(`Redirect ${response.statusCode} → ${method === rule.method ? '' : `${rule.method} `}${displayUrl(next.toString())}`);
      method = rule.method;
      url = next.toString();
    }
  } catch (caught) {
    // The failure's own message, whatever the URL: a throw here would turn a target's failure into an executor error.
    exchange.error = describeError(caught, ctx.signal, URL.canParse(url) ? new URL(url).host : url);
    const reason = ctx.signal.reason;
    const code = reason instanceof JobAbortedError && reason.reason === 'timeout' ? 'ETIMEDOUT' : errorCode(caught);
    if (code) exchange.errorCode = code;
  } finally {
    for (const client of clients) if (!client.closed && !client.destroyed) client.destroy(RUN_OVER).catch(() => undefined);
    proxy?.destroy(RUN_OVER).catch(() => undefined);
  }
  const end = performance.now();
  exchange.stoppedAt = new Date();
  exchange.timings = timingsOf(hops.at(-1), start);
  exchange.timingPhases = phases(hops, start, end);
  if (tls) exchange.tls = tls;
  if (remoteAddress) exchange.remoteAddress = remoteAddress;
  if (exchange.error) ctx.jobLog.push(`Request failed: ${exchange.error}`);
  else {
    const truncated = exchange.bodyTruncated && spec.bodyLimitBytes > 0 ? `, kept the first ${exchange.body.length}` : '';
    ctx.jobLog.push(`Received ${exchange.status} ${exchange.statusText} (${exchange.bodySize} bytes${truncated})`);
  }
  return exchange;
}
