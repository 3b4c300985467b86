// URL monitor: one GET over a fresh connection, status-code assertions,
// measured timings.

import type { IpFamily } from '../../net/ip-family.js';
import { evaluateHttpAssertions } from './assertions.js';
import { diagnoseExchange } from './diagnosis.js';
import { displayUrl, type Exchange, type ExchangeSpec, MAX_URL_LENGTH, performExchange } from './exchange.js';
import { parseHttpUrl, proxyFor } from './request.js';
import type { CheckDefinition } from '../definition.js';
import type { ExecutionContext, Executor } from '../executor.js';
import type { Outcome } from '../../core/outcome.js';
import type { Fields } from '../fields.js';
import { urlCredentials } from '../../secrets/policy.js';
import { UnknownVariableError } from '../variables.js';
import { type ClientCertificate, ClientCertificateError, type ClientTls, literalSecrets, parseClientCertificates, prepareClientCertificates } from './client-certificates.js';

export interface UrlRequest {
  url: string;
  followRedirects: boolean;
  skipSSL: boolean;
  ipFamily: IpFamily;
  proxyUrl?: string;
  /** From the check's `clientCertificates` (beside `request`). */
  clientCertificates?: ClientCertificate[];
}

function parseUrlRequest(fields: Fields, check: Fields): UrlRequest {
  const proxyUrl = fields.string('proxyUrl');
  const clientCertificates = parseClientCertificates(check);
  return {
    ...(clientCertificates.length > 0 ? { clientCertificates } : {}),
    url: parseHttpUrl(fields, 'url', MAX_URL_LENGTH),
    followRedirects: fields.boolean('followRedirects', true),
    skipSSL: fields.boolean('skipSSL', false),
    ipFamily: fields.oneOf('ipFamily', ['IPv4', 'IPv6'] as const, { default: 'IPv4' }),
    ...(proxyUrl !== undefined ? { proxyUrl } : {}),
  };
}

/** The apiCheckResult both HTTP executors report. */
export function apiCheckDetail(
  exchange: Exchange | undefined,
  request: Record<string, unknown>,
  assertions: unknown[],
  ctx: ExecutionContext,
  body: string,
  error: string | undefined,
): Record<string, unknown> {
  return {
    assertions,
    request,
    response:
      exchange?.status === undefined
        ? null
        : {
            status: exchange.status,
            statusText: exchange.statusText,
            headers: exchange.headers,
            body,
            bodySize: exchange.bodySize,
            bodyTruncated: exchange.bodyTruncated,
            redirects: exchange.redirects,
            url: displayUrl(exchange.finalUrl),
            remoteAddress: exchange.remoteAddress ?? null,
            timings: exchange.timings,
            timingPhases: exchange.timingPhases,
            tls: exchange.tls ?? null,
          },
    requestError: error ?? null,
    jobLog: ctx.jobLog,
    jobAssets: [],
    pcapDataUrl: null,
  };
}

/**
 * The outcome of an HTTP exchange: assertions evaluated on the answer; with
 * none, any 2xx or 3xx passes. `body` is what the result shows of the body.
 */
export function exchangeOutcome(
  check: CheckDefinition<unknown>,
  exchange: Exchange,
  reported: Record<string, unknown>,
  ctx: ExecutionContext,
  body: string,
): Outcome {
  const responseTime = exchange.timingPhases.total;
  const error = exchange.error;
  const assertions = error === undefined ? evaluateHttpAssertions(check.assertions, exchange, responseTime) : [];
  const assertionsFailed =
    error === undefined &&
    (check.assertions.length > 0 ? assertions.some((a) => !a.passed) : exchange.status === undefined || exchange.status >= 400);
  return {
    startedAt: exchange.startedAt,
    stoppedAt: exchange.stoppedAt,
    responseTime,
    ...(error !== undefined ? { error } : {}),
    ...(exchange.errorCode ? { errorCode: exchange.errorCode } : {}),
    assertionsFailed,
    member: 'apiCheckResult',
    detail: apiCheckDetail(exchange, reported, assertions, ctx, body, error),
  };
}

/** An outcome for a run that never sent a request (an unknown variable, say). */
export function notSentOutcome(message: string, request: Record<string, unknown>, ctx: ExecutionContext): Outcome {
  const now = new Date();
  ctx.jobLog.push(message);
  return {
    startedAt: now,
    stoppedAt: now,
    responseTime: 0,
    error: message,
    assertionsFailed: false,
    member: 'apiCheckResult',
    detail: apiCheckDetail(undefined, request, [], ctx, '', message),
  };
}

async function runUrl(check: CheckDefinition<UrlRequest>, ctx: ExecutionContext): Promise<Outcome> {
  const spec = check.request;
  const reported = {
    method: 'GET',
    url: displayUrl(spec.url),
    followRedirects: spec.followRedirects,
    skipSSL: spec.skipSSL,
    ipFamily: spec.ipFamily,
  };
  let url: string;
  let clientCertificates: ClientTls[] | undefined;
  try {
    if (spec.clientCertificates) clientCertificates = prepareClientCertificates(spec.clientCertificates, ctx.variables, ctx);
    url = ctx.variables.interpolateUrl(spec.url, 'request.url');
    new URL(url);
    for (const credential of urlCredentials(url)) ctx.secrets?.add(credential, 'request.url credentials');
  } catch (error) {
    if (error instanceof UnknownVariableError || error instanceof ClientCertificateError) return notSentOutcome(error.message, reported, ctx);
    return notSentOutcome(`request.url is not a valid URL after variables were filled in`, reported, ctx);
  }
  reported.url = displayUrl(url);
  const proxyUrl = proxyFor(url, spec.proxyUrl, ctx);
  const request: ExchangeSpec = {
    method: 'GET',
    url,
    headers: [
      ['user-agent', ctx.settings.userAgent],
      ['accept', '*/*'],
    ],
    followRedirects: spec.followRedirects,
    skipSSL: spec.skipSSL,
    ipFamily: spec.ipFamily,
    ...(proxyUrl ? { proxyUrl } : {}),
    ...(clientCertificates ? { clientCertificates } : {}),
    // A URL monitor asserts on the status only; the body is read and counted, not kept.
    bodyLimitBytes: 0,
  };
  const exchange = await performExchange(request, ctx);
  await diagnoseExchange(check, request, exchange, ctx);
  return exchangeOutcome(check, exchange, reported, ctx, '');
}

export const urlExecutor: Executor<UrlRequest> = {
  checkType: 'URL',
  member: 'apiCheckResult',
  limits: { degradedMs: 3000, maxMs: 5000, capMs: 30_000 },
  assertionSources: ['STATUS_CODE'],
  parseRequest: parseUrlRequest,
  definitionSecrets: (request) => literalSecrets(request.clientCertificates),
  target: (request) => displayUrl(request.url),
  run: runUrl,
};

