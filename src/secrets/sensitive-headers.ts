// Headers whose values never leave the agent, whatever the variables say
// (docs/secrets.md): in every `headers` member of a result — a request's
// `[{key, value}]` list, `[[name, value]]` pairs, or a response's
// `{name: value | value[]}` record — their values become `*****`.

import { REDACTED } from './scrubber.js';

export const SENSITIVE_HEADERS: ReadonlySet<string> = new Set(['authorization', 'proxy-authorization', 'x-api-key', 'cookie', 'set-cookie']);

export function isSensitiveHeader(name: unknown): boolean {
  return typeof name === 'string' && SENSITIVE_HEADERS.has(name.trim().toLowerCase());
}

function redactValue(value: unknown): unknown {
  return Array.isArray(value) ? value.map(() => REDACTED) : REDACTED;
}

function redactHeaders(headers: unknown): unknown {
  if (Array.isArray(headers)) {
    return headers.map((entry) => {
      if (Array.isArray(entry) && entry.length === 2 && isSensitiveHeader(entry[0])) return [entry[0], REDACTED];
      if (entry && typeof entry === 'object' && !Array.isArray(entry)) {
        const kv = entry as Record<string, unknown>;
        const name = kv.key ?? kv.name;
        if (isSensitiveHeader(name) && 'value' in kv) return { ...kv, value: redactValue(kv.value) };
      }
      return entry;
    });
  }
  if (headers && typeof headers === 'object') {
    const out: Record<string, unknown> = {};
    for (const [name, value] of Object.entries(headers)) out[name] = isSensitiveHeader(name) ? redactValue(value) : value;
    return out;
  }
  return headers;
}

/** Redacts sensitive header values in every `headers` member (any case) anywhere in a JSON-like value, in place. */
export function redactSensitiveHeaders<T>(value: T): T {
  walk(value, 0);
  return value;
}

function walk(value: unknown, depth: number): void {
  if (value === null || typeof value !== 'object' || depth > 100) return;
  if (Array.isArray(value)) {
    for (const item of value) walk(item, depth + 1);
    return;
  }
  const record = value as Record<string, unknown>;
  for (const key of Object.keys(record)) {
    if (key.toLowerCase() === 'headers') record[key] = redactHeaders(record[key]);
    walk(record[key], depth + 1);
  }
}
