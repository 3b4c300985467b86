// `{{NAME}}` interpolation from a job's variables. An unknown
// name is an error naming the variable and the field, never a silent blank.
// In a URL a value is percent-encoded for the component it lands in, so that
// a `&`, `/`, `#` or `%` in it arrives as data rather than as URL syntax;
// `{{raw NAME}}` inserts the value as written (docs/checks/http.md).

import type { EnvironmentVariable } from '../core/protocol.js';

const REFERENCE = /\{\{\s*(?:(raw)\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*\}\}/g;

/** Where a reference lands in a URL template. */
export type UrlComponent = 'origin' | 'host' | 'userinfo' | 'path' | 'query' | 'fragment';

/**
 * RFC 3986 percent-encoding of everything but the unreserved characters
 * (letters, digits, `-._~`): valid as a path segment, a query key or value
 * (read back alike by form and RFC 3986 decoders: a space is `%20`, a `+` is
 * `%2B`), userinfo and fragment, and left as it is by WHATWG URL parsing, so
 * that the form the secret scrubber looks for is the form that is sent.
 */
export function encodeUrlValue(value: string): string {
  return encodeURIComponent(value).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

/**
 * The component of the URL template `template` that a reference at `start`
 * (ending at `end`) lands in, judged from the literal text around it: at the
 * very start it supplies the origin (`{{BASE_URL}}/path`), between `://` and
 * the first `/`, `?` or `#` it is the host (or userinfo before an `@`), then
 * the path up to `?`, the query up to `#`, and the fragment.
 */
export function urlComponentAt(template: string, start: number, end: number): UrlComponent {
  if (start === 0) return 'origin';
  const before = template.slice(0, start).replace(REFERENCE, '');
  let rest = before;
  const scheme = before.indexOf('://');
  if (scheme >= 0 && !/[/?#]/.test(before.slice(0, scheme))) {
    rest = before.slice(scheme + 3);
    if (!/[/?#]/.test(rest)) {
      const after = template.slice(end).replace(REFERENCE, '');
      const authorityEnd = after.search(/[/?#]/);
      return (authorityEnd < 0 ? after : after.slice(0, authorityEnd)).includes('@') ? 'userinfo' : 'host';
    }
  } else if (before.length === 0) {
    // Only references before it: together they supply the origin.
    return 'origin';
  }
  if (rest.includes('#')) return 'fragment';
  if (rest.includes('?')) return 'query';
  return 'path';
}


export class UnknownVariableError extends Error {
  constructor(
    readonly variable: string,
    readonly field: string,
  ) {
    super(`Unknown variable {{${variable}}} in ${field}: define it in the check's, group's or global environment variables`);
    this.name = 'UnknownVariableError';
  }
}

export class Variables {
  private readonly own = new Map<string, string>();
  private readonly agent: ReadonlyMap<string, string>;

  /** `processSecrets`: the agent's OUTPOST_SECRET_* variables (src/config.ts reads them once). */
  constructor(variables: EnvironmentVariable[], processSecrets: ReadonlyMap<string, string> = new Map()) {
    this.agent = processSecrets;
    for (const { key, value } of variables) this.own.set(key, value);
  }

  /** The job's own variables win over the agent's, as check over group over global. */
  get(name: string): string | undefined {
    return this.own.get(name) ?? this.agent.get(name);
  }

  /** Every variable by name (the agent's OUTPOST_SECRET_* ones, overridden by the job's): a script's environment. */
  entries(): Record<string, string> {
    return { ...Object.fromEntries(this.agent), ...Object.fromEntries(this.own) };
  }

  /** Replaces every `{{NAME}}` in `text`; throws UnknownVariableError naming `field`. */
  interpolate(text: string, field: string): string {
    if (!text.includes('{{')) return text;
    return text.replace(REFERENCE, (_match, _raw: string | undefined, name: string) => this.value(name, field));
  }

  /**
   * Replaces every `{{NAME}}` in the URL template `text`, percent-encoded
   * (encodeUrlValue) where it lands in userinfo, path, query or fragment;
   * as written in the origin and host, and wherever it is `{{raw NAME}}`.
   */
  interpolateUrl(text: string, field: string): string {
    if (!text.includes('{{')) return text;
    return text.replace(REFERENCE, (match: string, raw: string | undefined, name: string, offset: number) => {
      const value = this.value(name, field);
      if (raw) return value;
      const component = urlComponentAt(text, offset, offset + match.length);
      return component === 'origin' || component === 'host' ? value : encodeUrlValue(value);
    });
  }

  private value(name: string, field: string): string {
    const value = this.get(name);
    if (value === undefined) throw new UnknownVariableError(name, field);
    return value;
  }
}
