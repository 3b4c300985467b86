// URL monitor: one GET over a fresh connection, status-code assertions,
// measured timings. API checks (issue 3) build on the same request path.

import { STATUS_CODES } from 'node:http';
import { performance } from 'node:perf_hooks';
import { Agent, request } from 'undici';
import type { TimingPhases } from '../results/result.js';
import { type ConnectionMarks, type IpFamily, timedConnector, type TlsSummary } from '../net/timed-connector.js';
import { type AssertionOutcome, evaluate } from './assertions.js';
import type { CheckDefinition } from './definition.js';
import { describeError } from './errors.js';
import type { ExecutionContext, Executor, Outcome } from './executor.js';
import type { Fields } from './fields.js';

export interface UrlRequest {
  url: string;
  followRedirects: boolean;
  skipSSL: boolean;
  ipFamily: IpFamily;
}

export const MAX_URL_LENGTH = 2048;
export const MAX_REDIRECTS = 10;
const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308]);

/** Timings of the final hop, in ms since the run started. */
export interface Timings {
  socket: number | null;
  lookup: number | null;
  connect: number | null;
  response: number | null;
  end: number | null;
}

interface Hop {
  url: string;
  status?: number;
  start: number;
  connection?: ConnectionMarks;
  headers?: number;
  end?: number;
}

const round = (ms: number) => Math.round(ms * 100) / 100;

/** Sums each phase over all hops; `wait` is what no phase accounts for, so phases add up to total. */
function phases(hops: Hop[], start: number, end: number): TimingPhases {
  let dns = 0;
  let tcp = 0;
  let tlsTime = 0;
  let firstByte = 0;
  let download = 0;
  for (const hop of hops) {
    const c = hop.connection;
    const ready = c ? c.tlsEnd : hop.start;
    if (c) {
      dns += c.lookupEnd - c.lookupStart;
      tcp += c.connectEnd - c.lookupEnd;
      tlsTime += c.tlsEnd - c.connectEnd;
    }
    if (hop.headers !== undefined) firstByte += hop.headers - ready;
    if (hop.headers !== undefined && hop.end !== undefined) download += hop.end - hop.headers;
  }
  const total = round(end - start);
  const parts = { dns: round(dns), tcp: round(tcp), tls: round(tlsTime), firstByte: round(firstByte), download: round(download) };
  const wait = round(Math.max(0, total - parts.dns - parts.tcp - parts.tls - parts.firstByte - parts.download));
  return { wait, ...parts, total };
}

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

function parseUrl(fields: Fields): UrlRequest {
  const url = fields.string('url', { required: true, minLength: 1, maxLength: MAX_URL_LENGTH }) ?? '';
  if (url) {
    let parsed: URL | undefined;
    try {
      parsed = new URL(url);
    } catch {
      fields.fail(fields.at('url'), `is not a valid URL (got ${JSON.stringify(url.slice(0, 80))})`);
    }
    if (parsed && parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
      fields.fail(fields.at('url'), `must use http or https (got ${parsed.protocol.replace(':', '')})`);
    }
  }
  return {
    url,
    followRedirects: fields.boolean('followRedirects', true),
    skipSSL: fields.boolean('skipSSL', false),
    ipFamily: fields.oneOf('ipFamily', ['IPv4', 'IPv6'] as const, { default: 'IPv4' }),
  };
}

/** Drops credentials from a URL before it is logged or reported. */
export function displayUrl(raw: string): string {
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

async function runUrl(check: CheckDefinition<UrlRequest>, ctx: ExecutionContext): Promise<Outcome> {
  const { request: spec } = check;
  const startedAt = new Date();
  const start = performance.now();
  const hops: Hop[] = [];
  let tlsSummary: TlsSummary | undefined;
  const dispatcher = new Agent({
    connect: timedConnector({
      ipFamily: spec.ipFamily,
      rejectUnauthorized: !spec.skipSSL,
      signal: ctx.signal,
      onConnection: (marks) => {
        const hop = hops.at(-1);
        if (hop) hop.connection = marks;
        tlsSummary = marks.tls ?? tlsSummary;
        ctx.jobLog.push(`Connected to ${marks.family === 6 ? `[${marks.address}]` : marks.address}:${marks.port}`);
      },
    }),
    // The check's own cap (the queue's abort signal) bounds the run; undici's
    // idle timers must not fire first.
    headersTimeout: 0,
    bodyTimeout: 0,
    keepAliveTimeout: 1,
    pipelining: 0,
  });

  let status: number | undefined;
  let headers: Record<string, string | string[]> = {};
  let error: string | undefined;
  let bodyBytes = 0;
  try {
    let url = spec.url;
    for (;;) {
      const hop: Hop = { url, start: performance.now() };
      hops.push(hop);
      const response = await request(url, {
        method: 'GET',
        dispatcher,
        signal: ctx.signal,
        headers: { 'user-agent': 'outpost-url-monitor', accept: '*/*' },
      });
      hop.headers = performance.now();
      hop.status = response.statusCode;
      status = response.statusCode;
      headers = response.headers as Record<string, string | string[]>;
      for await (const chunk of response.body) bodyBytes += (chunk as Buffer).length;
      hop.end = performance.now();
      const location = headers.location;
      if (!spec.followRedirects || !REDIRECT_STATUSES.has(status) || typeof location !== 'string') break;
      if (hops.length > MAX_REDIRECTS) {
        error = `Too many redirects: stopped after ${MAX_REDIRECTS} (last Location: ${displayUrl(new URL(location, url).toString())})`;
        break;
      }
      url = new URL(location, url).toString();
      ctx.jobLog.push(`Redirect ${status} → ${displayUrl(url)}`);
      bodyBytes = 0;
    }
  } catch (caught) {
    error = describeError(caught, ctx.signal, new URL(spec.url).host);
  } finally {
    dispatcher.destroy().catch(() => undefined);
  }
  const end = performance.now();
  const stoppedAt = new Date();

  const assertions: AssertionOutcome[] = [];
  if (status !== undefined && error === undefined) {
    for (const assertion of check.assertions) assertions.push(evaluate(assertion, status));
  }
  // With no assertions a URL monitor passes on any 2xx or 3xx answer.
  const assertionsFailed =
    error === undefined &&
    (check.assertions.length > 0 ? assertions.some((a) => !a.passed) : status === undefined || status >= 400);
  if (error) ctx.jobLog.push(`Request failed: ${error}`);
  else ctx.jobLog.push(`Received ${status} ${STATUS_CODES[status ?? 0] ?? ''} (${bodyBytes} bytes)`);

  const timingPhases = phases(hops, start, end);
  return {
    startedAt,
    stoppedAt,
    responseTime: timingPhases.total,
    ...(error !== undefined ? { error } : {}),
    assertionsFailed,
    member: 'apiCheckResult',
    detail: {
      assertions,
      request: {
        method: 'GET',
        url: displayUrl(spec.url),
        followRedirects: spec.followRedirects,
        skipSSL: spec.skipSSL,
        ipFamily: spec.ipFamily,
      },
      response:
        status === undefined
          ? null
          : {
              status,
              statusText: STATUS_CODES[status] ?? '',
              headers,
              body: '',
              bodySize: bodyBytes,
              redirects: hops.length - 1,
              timings: timingsOf(hops.at(-1), start),
              timingPhases,
              ...(tlsSummary ? { tls: tlsSummary } : {}),
            },
      requestError: error ?? null,
      jobLog: ctx.jobLog,
      jobAssets: [],
      pcapDataUrl: null,
    },
  };
}

export const urlExecutor: Executor<UrlRequest> = {
  checkType: 'URL',
  member: 'apiCheckResult',
  limits: { degradedMs: 3000, maxMs: 5000, capMs: 30_000 },
  assertionSources: ['STATUS_CODE'],
  parseRequest: parseUrl,
  target: (request) => displayUrl(request.url),
  run: runUrl,
};
