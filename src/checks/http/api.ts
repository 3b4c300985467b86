// API check: any method, headers, query, typed bodies, basic auth; assertions
// on status, JSON body (RFC 9535 JSONPath), headers, text and response time.

import type { IpFamily } from '../../net/ip-family.js';
import type { CheckDefinition } from '../definition.js';
import type { ExecutionContext, Executor } from '../executor.js';
import type { Outcome } from '../../core/outcome.js';
import type { Fields } from '../fields.js';
import { HTTP_ASSERTION_SOURCES } from './assertions.js';
import { headerProblem } from '../../core/http-header.js';
import { diagnoseExchange } from './diagnosis.js';
import { displayUrl, type ExchangeSpec, HTTP_METHODS, type HttpMethod, performExchange } from './exchange.js';
import {
  BODY_TYPES,
  type BodyType,
  buildBody,
  type KeyValue,
  parseHeaders,
  parseHttpUrl,
  parseKeyValues,
  parseMethod,
  proxyFor,
  RequestBuildError,
  withQuery,
} from './request.js';
import { exchangeOutcome, notSentOutcome } from './url.js';
import { urlCredentials } from '../../secrets/policy.js';
import { type ClientCertificate, ClientCertificateError, type ClientTls, literalSecrets, parseClientCertificates, prepareClientCertificates } from './client-certificates.js';
import { UnknownVariableError, Variables } from '../variables.js';
import { resolveRuntime, type Runtime, RuntimeError, runtimesDir } from '../scripted/runtimes.js';
import { MAX_SCRIPT_LENGTH } from '../scripted/executors.js';
import { runScript } from '../scripted/runner.js';

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
  /** Runs before the request, in a child process on the runtime. */
  setupScript?: string;
  /** Runs after the response, in a child process on the runtime. */
  tearDownScript?: string;
  /** The check's runtimeId (for its scripts); the CURRENT runtime when absent. */
  runtimeId?: string;
  /** From the check's `clientCertificates` (beside `request`). */
  clientCertificates?: ClientCertificate[];
}

function parseApiRequest(fields: Fields, check: Fields): ApiRequest {
  const proxyUrl = fields.string('proxyUrl');
  const auth = fields.object('basicAuth');
  const basicAuth = fields.has('basicAuth')
    ? { username: auth.string('username', { default: '' }) ?? '', password: auth.string('password', { default: '' }) ?? '' }
    : undefined;
  // In `request`, or at check level like a scripted check's `script`.
  const setupScript = (check.has('setupScript') ? check : fields).string('setupScript', { maxLength: MAX_SCRIPT_LENGTH });
  const tearDownScript = (check.has('tearDownScript') ? check : fields).string('tearDownScript', { maxLength: MAX_SCRIPT_LENGTH });
  const runtimeId = check.string('runtimeId', { minLength: 1, maxLength: 100 });
  const clientCertificates = parseClientCertificates(check);
  return {
    ...(clientCertificates.length > 0 ? { clientCertificates } : {}),
    method: parseMethod(fields),
    url: parseHttpUrl(fields, 'url'),
    headers: parseHeaders(fields),
    queryParameters: parseKeyValues(fields, 'queryParameters'),
    body: fields.string('body', { default: '' }) ?? '',
    bodyType: fields.oneOf('bodyType', BODY_TYPES, { default: 'NONE' }),
    ...(basicAuth && (basicAuth.username || basicAuth.password) ? { basicAuth } : {}),
    followRedirects: fields.boolean('followRedirects', true),
    skipSSL: fields.boolean('skipSSL', false),
    ipFamily: fields.oneOf('ipFamily', ['IPv4', 'IPv6'] as const, { default: 'IPv4' }),
    ...(proxyUrl !== undefined ? { proxyUrl } : {}),
    ...(setupScript?.trim() ? { setupScript } : {}),
    ...(tearDownScript?.trim() ? { tearDownScript } : {}),
    ...(runtimeId !== undefined ? { runtimeId } : {}),
  };
}

function hasHeader(headers: Array<[string, string]>, name: string): boolean {
  return headers.some(([key]) => key.toLowerCase() === name);
}

/** What a setup script sees as `request` (and may change). */
interface ScriptRequest {
  method: string;
  url: string;
  headers: Record<string, string>;
  queryParameters: Record<string, string>;
  body: string;
  bodyType: BodyType;
}

const toRecord = (pairs: Array<[string, string]>): Record<string, string> => Object.fromEntries(pairs);
const fromRecord = (value: unknown): Array<[string, string]> | undefined =>
  value !== null && typeof value === 'object' && !Array.isArray(value)
    ? Object.entries(value as Record<string, unknown>).map(([k, v]) => [k, typeof v === 'string' ? v : JSON.stringify(v)])
    : undefined;

async function runApi(check: CheckDefinition<ApiRequest>, ctx: ExecutionContext): Promise<Outcome> {
  const spec = check.request;
  let { variables } = ctx;
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
  let runtime: Runtime | undefined;
  if (spec.setupScript || spec.tearDownScript) {
    try {
      runtime = resolveRuntime(spec.runtimeId, ctx.settings.runtimesDir ?? runtimesDir());
    } catch (error) {
      if (error instanceof RuntimeError) return notSentOutcome(error.message, reported, ctx);
      throw error;
    }
  }
  let method = spec.method;
  let url: string;
  let headers: Array<[string, string]>;
  let built: { body?: string; contentType?: string };
  let proxyUrl: string | undefined;
  let clientCertificates: ClientTls[] | undefined;
  try {
    let baseUrl = variables.interpolateUrl(spec.url, 'request.url');
    headers = spec.headers.map((h, i) => {
      const header: [string, string] = [variables.interpolate(h.key, `request.headers[${i}].key`), variables.interpolate(h.value, `request.headers[${i}].value`)];
      const found = headerProblem(...header);
      if (found) throw new RequestBuildError(`request.headers[${i}].${found.part}: ${found.problem} (after variables were filled in)`);
      return header;
    });
    let query: KeyValue[] = spec.queryParameters.map((q, i) => ({
      key: variables.interpolate(q.key, `request.queryParameters[${i}].key`),
      value: variables.interpolate(q.value, `request.queryParameters[${i}].value`),
    }));
    let body = variables.interpolate(spec.body, 'request.body');
    if (spec.setupScript && runtime) {
      const request: ScriptRequest = {
        method,
        url: baseUrl,
        headers: toRecord(headers),
        queryParameters: toRecord(query.map((q) => [q.key, q.value])),
        body,
        bodyType: spec.bodyType,
      };
      const run = await runScript(
        { kind: 'setupScript', code: spec.setupScript, runtime, timeoutMs: check.maxResponseTime, request, environment: variables.entries() },
        ctx,
      );
      if (!run.ok) return notSentOutcome(run.error ?? 'setupScript failed', reported, ctx);
      if (run.environment) {
        variables = new Variables(
          Object.entries(run.environment).map(([key, value]) => ({ key, value: String(value), secret: false })),
          ctx.settings.processSecrets,
        );
      }
      const changed = (run.request ?? {}) as Partial<Record<keyof ScriptRequest, unknown>>;
      if (typeof changed.url === 'string') baseUrl = changed.url;
      if (typeof changed.method === 'string' && (HTTP_METHODS as readonly string[]).includes(changed.method.toUpperCase())) {
        method = changed.method.toUpperCase() as HttpMethod;
      }
      headers = fromRecord(changed.headers) ?? headers;
      for (const [key, value] of headers) {
        const found = headerProblem(key, value);
        if (found) throw new RequestBuildError(`the setupScript's request.headers[${JSON.stringify(key.slice(0, 80))}]: the ${found.part} ${found.problem}`);
      }
      query = (fromRecord(changed.queryParameters) ?? query.map((q) => [q.key, q.value])).map(([key, value]) => ({ key, value }));
      if (typeof changed.body === 'string') body = changed.body;
      else if (changed.body !== undefined && changed.body !== null) body = JSON.stringify(changed.body);
    }
    url = withQuery(baseUrl, query, variables);
    // withQuery parses the URL only when there are parameters to add: checked here whatever it did (TypeError below).
    new URL(url);
    for (const credential of urlCredentials(url)) ctx.secrets?.add(credential, 'request.url credentials');
    built = buildBody(spec.bodyType, body, 'request.body');
    if (spec.basicAuth) {
      const user = variables.interpolate(spec.basicAuth.username, 'request.basicAuth.username');
      const password = variables.interpolate(spec.basicAuth.password, 'request.basicAuth.password');
      // The password is a secret whatever the variables say (docs/secrets.md).
      ctx.secrets?.add(password, 'request.basicAuth.password');
      headers.push(['authorization', `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`]);
    }
    proxyUrl = proxyFor(url, spec.proxyUrl, ctx);
    // With the variables a setup script may have set.
    if (spec.clientCertificates) clientCertificates = prepareClientCertificates(spec.clientCertificates, variables, ctx);
  } catch (error) {
    if (error instanceof UnknownVariableError || error instanceof RequestBuildError || error instanceof ClientCertificateError) return notSentOutcome(error.message, reported, ctx);
    if (error instanceof TypeError) return notSentOutcome('request.url is not a valid URL after variables were filled in', reported, ctx);
    throw error;
  }
  if (built.contentType && !hasHeader(headers, 'content-type')) headers.push(['content-type', built.contentType]);
  if (!hasHeader(headers, 'user-agent')) headers.push(['user-agent', ctx.settings.userAgent]);
  if (!hasHeader(headers, 'accept')) headers.push(['accept', '*/*']);
  reported.method = method;
  reported.url = displayUrl(url);
  reported.headers = headers.map(([key, value]) => ({ key, value }));
  reported.body = built.body ?? '';

  const request: ExchangeSpec = {
    method,
    url,
    headers,
    ...(built.body !== undefined ? { body: built.body } : {}),
    followRedirects: spec.followRedirects,
    skipSSL: spec.skipSSL,
    ipFamily: spec.ipFamily,
    ...(proxyUrl ? { proxyUrl } : {}),
    ...(clientCertificates ? { clientCertificates } : {}),
    bodyLimitBytes: ctx.settings.responseBodyLimitBytes,
  };
  const exchange = await performExchange(request, ctx);
  await diagnoseExchange(check, request, exchange, ctx);
  const text = exchange.body.toString('utf8');
  const outcome = exchangeOutcome(check, exchange, reported, ctx, text);
  if (spec.tearDownScript && runtime && exchange.status !== undefined && outcome.error === undefined) {
    const response = {
      status: exchange.status,
      statusText: exchange.statusText,
      headers: exchange.headers,
      body: text,
      timings: exchange.timingPhases,
    };
    const scriptRequest = { method, url, headers: toRecord(headers), body: built.body ?? '' };
    const run = await runScript(
      { kind: 'tearDownScript', code: spec.tearDownScript, runtime, timeoutMs: check.maxResponseTime, request: scriptRequest, response, environment: variables.entries() },
      ctx,
    );
    if (!run.ok) {
      const message = run.error ?? 'tearDownScript failed';
      ctx.jobLog.push(message);
      if (run.assertion) {
        outcome.assertionsFailed = true;
        (outcome.detail.assertions as unknown[]).push({ source: 'TEARDOWN_SCRIPT', property: '', comparison: '', target: '', actual: null, passed: false, error: message });
      } else {
        outcome.error = message;
        outcome.detail.requestError = message;
      }
    }
  }
  return outcome;
}

export const apiExecutor: Executor<ApiRequest> = {
  checkType: 'API',
  member: 'apiCheckResult',
  limits: { degradedMs: 10_000, maxMs: 20_000, capMs: 30_000 },
  assertionSources: HTTP_ASSERTION_SOURCES,
  parseRequest: parseApiRequest,
  definitionSecrets: (request) => literalSecrets(request.clientCertificates),
  target: (request) => `${request.method} ${displayUrl(request.url)}`,
  run: runApi,
};
