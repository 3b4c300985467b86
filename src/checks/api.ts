// API check: any method, headers, query, typed bodies, basic auth; assertions
// on status, JSON body (RFC 9535 JSONPath), headers, text and response time.

import type { IpFamily } from '../net/ip-family.js';
import type { CheckDefinition } from './definition.js';
import type { ExecutionContext, Executor, Outcome } from './executor.js';
import type { Fields } from './fields.js';
import { HTTP_ASSERTION_SOURCES } from './http-assertions.js';
import { diagnoseExchange } from '../diagnostics/http.js';
import { displayUrl, type ExchangeSpec, type HttpMethod, performExchange } from './http-exchange.js';
import {
  BODY_TYPES,
  type BodyType,
  buildBody,
  type KeyValue,
  parseHttpUrl,
  parseKeyValues,
  parseMethod,
  proxyFor,
  RequestBuildError,
  withQuery,
} from './http-request.js';
import { exchangeOutcome, notSentOutcome } from './url.js';
import { urlCredentials } from '../secrets/policy.js';
import { UnknownVariableError } from './variables.js';

export interface ApiRequest {
  method: HttpMethod;
  url: string;
  headers: KeyValue[];
  queryParameters: KeyValue[];
  body: string;
  bodyType: BodyType;
  basicAuth?: { username: string; password: string };
  followRedirects: boolean;
  skipSSL: boolean;
  ipFamily: IpFamily;
  proxyUrl?: string;
}

function parseApiRequest(fields: Fields): ApiRequest {
  const proxyUrl = fields.string('proxyUrl');
  const auth = fields.object('basicAuth');
  const basicAuth = fields.has('basicAuth')
    ? { username: auth.string('username', { default: '' }) ?? '', password: auth.string('password', { default: '' }) ?? '' }
    : undefined;
  for (const script of ['setupScript', 'tearDownScript']) {
    const text = fields.raw(script);
    if (typeof text === 'string' && text.trim() !== '') {
      fields.fail(fields.at(script), 'scripts need a runtime, which this agent does not run yet (issue #8)');
    }
  }
  return {
    method: parseMethod(fields),
    url: parseHttpUrl(fields, 'url'),
    headers: parseKeyValues(fields, 'headers'),
    queryParameters: parseKeyValues(fields, 'queryParameters'),
    body: fields.string('body', { default: '' }) ?? '',
    bodyType: fields.oneOf('bodyType', BODY_TYPES, { default: 'NONE' }),
    ...(basicAuth && (basicAuth.username || basicAuth.password) ? { basicAuth } : {}),
    followRedirects: fields.boolean('followRedirects', true),
    skipSSL: fields.boolean('skipSSL', false),
    ipFamily: fields.oneOf('ipFamily', ['IPv4', 'IPv6'] as const, { default: 'IPv4' }),
    ...(proxyUrl !== undefined ? { proxyUrl } : {}),
  };
}

function hasHeader(headers: Array<[string, string]>, name: string): boolean {
  return headers.some(([key]) => key.toLowerCase() === name);
}

async function runApi(check: CheckDefinition<ApiRequest>, ctx: ExecutionContext): Promise<Outcome> {
  const spec = check.request;
  const { variables } = ctx;
  const reported: Record<string, unknown> = {
    method: spec.method,
    url: displayUrl(spec.url),
    headers: spec.headers,
    queryParameters: spec.queryParameters,
    bodyType: spec.bodyType,
    body: spec.body,
    followRedirects: spec.followRedirects,
    skipSSL: spec.skipSSL,
    ipFamily: spec.ipFamily,
  };
  let url: string;
  let headers: Array<[string, string]>;
  let built: { body?: string; contentType?: string };
  let proxyUrl: string | undefined;
  try {
    url = withQuery(variables.interpolate(spec.url, 'request.url'), spec.queryParameters, variables);
    for (const credential of urlCredentials(url)) ctx.secrets?.add(credential, 'request.url credentials');
    headers = spec.headers.map((h, i) => [
      variables.interpolate(h.key, `request.headers[${i}].key`),
      variables.interpolate(h.value, `request.headers[${i}].value`),
    ]);
    built = buildBody(spec.bodyType, variables.interpolate(spec.body, 'request.body'), 'request.body');
    if (spec.basicAuth) {
      const user = variables.interpolate(spec.basicAuth.username, 'request.basicAuth.username');
      const password = variables.interpolate(spec.basicAuth.password, 'request.basicAuth.password');
      // The password is a secret whatever the variables say (README "Secrets").
      ctx.secrets?.add(password, 'request.basicAuth.password');
      headers.push(['authorization', `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`]);
    }
    proxyUrl = proxyFor(url, spec.proxyUrl, ctx);
  } catch (error) {
    if (error instanceof UnknownVariableError || error instanceof RequestBuildError) return notSentOutcome(error.message, reported, ctx);
    if (error instanceof TypeError) return notSentOutcome('request.url is not a valid URL after variables were filled in', reported, ctx);
    throw error;
  }
  if (built.contentType && !hasHeader(headers, 'content-type')) headers.push(['content-type', built.contentType]);
  if (!hasHeader(headers, 'user-agent')) headers.push(['user-agent', ctx.settings.userAgent]);
  if (!hasHeader(headers, 'accept')) headers.push(['accept', '*/*']);
  reported.url = displayUrl(url);
  reported.headers = headers.map(([key, value]) => ({ key, value }));
  reported.body = built.body ?? '';

  const request: ExchangeSpec = {
    method: spec.method,
    url,
    headers,
    ...(built.body !== undefined ? { body: built.body } : {}),
    followRedirects: spec.followRedirects,
    skipSSL: spec.skipSSL,
    ipFamily: spec.ipFamily,
    ...(proxyUrl ? { proxyUrl } : {}),
    bodyLimitBytes: ctx.settings.responseBodyLimitBytes,
  };
  const exchange = await performExchange(request, ctx);
  await diagnoseExchange(check, request, exchange, ctx);
  return exchangeOutcome(check, exchange, reported, ctx, exchange.body.toString('utf8'));
}

export const apiExecutor: Executor<ApiRequest> = {
  checkType: 'API',
  member: 'apiCheckResult',
  limits: { degradedMs: 10_000, maxMs: 20_000, capMs: 30_000 },
  assertionSources: HTTP_ASSERTION_SOURCES,
  parseRequest: parseApiRequest,
  target: (request) => `${request.method} ${displayUrl(request.url)}`,
  run: runApi,
};
