// HAR files (a BROWSER run's network log, or one a script saved) leave the
// agent like results do: sensitive headers (Authorization, Cookie, …) and
// every cookie's value redacted. The job's secrets are scrubbed from the text
// afterwards, as for every text artifact.

import { REDACTED } from './scrubber.js';
import { redactSensitiveHeaders } from './sensitive-headers.js';

/** The HAR with sensitive headers and cookie values redacted, or null when `text` is not JSON. */
export function redactHar(text: string): string | null {
  let har: unknown;
  try {
    har = JSON.parse(text);
  } catch {
    return null;
  }
  redactSensitiveHeaders(har);
  const entries = (har as { log?: { entries?: unknown } } | null)?.log?.entries;
  if (Array.isArray(entries)) {
    for (const entry of entries) {
      const e = entry as { request?: { cookies?: unknown }; response?: { cookies?: unknown } } | null;
      redactCookies(e?.request?.cookies);
      redactCookies(e?.response?.cookies);
    }
  }
  return JSON.stringify(har, null, 2);
}

function redactCookies(cookies: unknown): void {
  if (!Array.isArray(cookies)) return;
  for (const cookie of cookies) {
    if (cookie && typeof cookie === 'object' && 'value' in cookie) (cookie as { value: unknown }).value = REDACTED;
  }
}
