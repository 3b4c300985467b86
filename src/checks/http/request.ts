// Parsing and building the request of HTTP checks: URL, method, headers,
// query parameters, bodies by type, basic auth, and which proxy applies.

import { headerProblem } from '../../core/http-header.js';
import { urlCredentials } from '../../secrets/policy.js';
import type { ExecutionContext } from '../executor.js';
import type { Fields } from '../fields.js';
import { HTTP_METHODS, type HttpMethod, MAX_URL_LENGTH } from './exchange.js';
import type { Variables } from '../variables.js';

export const BODY_TYPES = ['JSON', 'FORM', 'RAW', 'GRAPHQL', 'NONE'] as const;
export type BodyType = (typeof BODY_TYPES)[number];

export interface KeyValue {
  key: string;
  value: string;
}

/** A URL field: required, ≤ maxLength, http(s). `{{VAR}}` parts are checked after interpolation. */
export function parseHttpUrl(fields: Fields, name: string, maxLength = MAX_URL_LENGTH): string {
  const url = fields.string(name, { required: true, minLength: 1, maxLength }) ?? '';
  if (url && !url.includes('{{')) {
    let parsed: URL | undefined;
    try {
      parsed = new URL(url);
    } catch {
      fields.fail(fields.at(name), `is not a valid URL (got ${JSON.stringify(url.slice(0, 80))})`);
    }
    if (parsed && parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
      fields.fail(fields.at(name), `must use http or https (got ${parsed.protocol.replace(':', '')})`);
    }
  }
  return url;
}

export function parseKeyValues(fields: Fields, name: string): KeyValue[] {
  return fields.list(name).map((item) => ({
    key: item.string('key', { required: true, minLength: 1, maxLength: 1024 }) ?? '',
    value: item.string('value', { default: '', maxLength: 65_536 }) ?? '',
  }));
}

/** Request headers: key/value pairs whose names and values can be sent (checked again once variables are filled in). */
export function parseHeaders(fields: Fields): KeyValue[] {
  const headers = parseKeyValues(fields, 'headers');
  headers.forEach(({ key, value }, i) => {
    // A {{NAME}} is checked once it is filled in.
    const found = headerProblem(key.includes('{{') ? 'x' : key, value.includes('{{') ? '' : value);
    if (found) fields.fail(fields.at(`headers[${i}].${found.part}`), found.problem);
  });
  return headers;
}

export function parseMethod(fields: Fields): HttpMethod {
  const raw = fields.raw('method');
  if (typeof raw === 'string' && (HTTP_METHODS as readonly string[]).includes(raw.toUpperCase())) return raw.toUpperCase() as HttpMethod;
  return fields.oneOf('method', HTTP_METHODS, { default: 'GET' });
}

/** `host`, `host:port`, `[v6]:port`, or a bare IPv6 address (several colons, no port). */
function splitHostPort(entry: string): { name: string; port?: string } {
  const bracketed = /^\[([^\]]+)\](?::(\d+))?$/.exec(entry);
  if (bracketed) return { name: bracketed[1] as string, ...(bracketed[2] ? { port: bracketed[2] } : {}) };
  if ((entry.match(/:/g) ?? []).length > 1) return { name: entry };
  const [name = '', port] = entry.split(':');
  return { name, ...(port ? { port } : {}) };
}

/** Whether `host` matches a NO_PROXY list (exact names, `.suffix` / `*.suffix`, `*`, with optional :port). */
export function bypassesProxy(url: URL, noProxy: string | undefined): boolean {
  if (!noProxy) return false;
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1').toLowerCase();
  const port = url.port || (url.protocol === 'https:' ? '443' : '80');
  return noProxy
    .split(/[\s,]+/)
    .filter(Boolean)
    .some((entry) => {
      if (entry === '*') return true;
      const { name, port: entryPort } = splitHostPort(entry.toLowerCase().replace(/^\*/, ''));
      if (entryPort && entryPort !== port) return false;
      if (name.startsWith('.')) return host.endsWith(name) || host === name.slice(1);
      return host === name || host.endsWith(`.${name}`);
    });
}

/** The proxy for one run: the check's own `proxyUrl`, else CHECK_PROXY unless NO_PROXY exempts the host. */
export function proxyFor(url: string, own: string | undefined, ctx: ExecutionContext): string | undefined {
  if (own) {
    const proxy = ctx.variables.interpolate(own, 'request.proxyUrl');
    // Proxy credentials are secrets whatever the variables say (docs/secrets.md).
    for (const credential of urlCredentials(proxy)) ctx.secrets?.add(credential, 'request.proxyUrl credentials');
    return proxy;
  }
  const agentWide = ctx.settings.checkProxy;
  if (!agentWide) return undefined;
  return bypassesProxy(new URL(url), ctx.settings.noProxy) ? undefined : agentWide;
}

export interface BuiltBody {
  body?: string;
  contentType?: string;
}

function tryParseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** The body as sent, and the Content-Type its type implies (a header given by the check wins). */
export function buildBody(bodyType: BodyType, raw: string, field: string): BuiltBody {
  if (bodyType === 'NONE' || raw === '') return {};
  switch (bodyType) {
    case 'JSON':
      try {
        JSON.parse(raw);
      } catch (error) {
        throw new RequestBuildError(`${field} is not valid JSON (${(error as Error).message}); use bodyType RAW to send it as is`);
      }
      return { body: raw, contentType: 'application/json' };
    case 'GRAPHQL': {
      // A GraphQL body is either the query document itself or an object with `query` (and `variables`).
      const parsed = tryParseJson(raw);
      const isEnvelope = parsed !== null && typeof parsed === 'object' && typeof (parsed as { query?: unknown }).query === 'string';
      return { body: isEnvelope ? raw : JSON.stringify({ query: raw }), contentType: 'application/json' };
    }
    case 'FORM': {
      // A JSON object is form-encoded; anything else is taken as already encoded.
      const parsed = tryParseJson(raw);
      if (parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed)) {
        const form = new URLSearchParams();
        for (const [key, value] of Object.entries(parsed)) form.append(key, typeof value === 'string' ? value : JSON.stringify(value));
        return { body: form.toString(), contentType: 'application/x-www-form-urlencoded' };
      }
      return { body: raw, contentType: 'application/x-www-form-urlencoded' };
    }
    case 'RAW':
      return { body: raw, contentType: 'text/plain; charset=utf-8' };
  }
}

export class RequestBuildError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RequestBuildError';
  }
}

/** URL with query parameters appended (after interpolation). */
export function withQuery(url: string, query: KeyValue[], variables: Variables): string {
  if (query.length === 0) return url;
  const parsed = new URL(url);
  query.forEach((q, i) => {
    parsed.searchParams.append(
      variables.interpolate(q.key, `request.queryParameters[${i}].key`),
      variables.interpolate(q.value, `request.queryParameters[${i}].value`),
    );
  });
  return parsed.toString();
}
