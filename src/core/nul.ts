// U+0000 in text the server keeps. PostgreSQL's TEXT cannot hold it (`invalid
// byte sequence for encoding "UTF8": 0x00`) where SQLite can, so the server
// never lets it reach a column: identifiers carrying it are refused where
// they arrive (src/server/agent-api.ts, src/server/http/router.ts), and text
// the store derives from a result has it replaced (src/store/error-groups.ts),
// the same on both stores. A result's body is stored as JSON text, where
// U+0000 is the escape `\u0000`; PostgreSQL takes that as TEXT but fails to
// read it as json (`unsupported Unicode escape sequence`, in the triggers and
// queries that read a body's fields), so the stored body has U+FFFD there too
// (storableJson), on both stores.
//
// A lone UTF-16 surrogate (a high one not followed by a low one, a low one not
// preceded by a high one: what an agent reads from a target answering
// `"caf\ud800"`) is the same case: JSON.stringify writes it as the escape
// `\ud800`, which PostgreSQL's json refuses (`Unicode low surrogate must
// follow a high surrogate`), so the stored body has U+FFFD there too. In TEXT
// columns both drivers already write it as U+FFFD when they encode UTF-8.

/** U+FFFD, the replacement character: what stands for a U+0000 in derived text. */
export const NUL_REPLACEMENT = '\uFFFD';

export function hasNul(text: string): boolean {
  return text.includes('\u0000');
}

/** `text` with every U+0000 replaced by U+FFFD. */
export function withoutNul(text: string): string {
  return hasNul(text) ? text.replaceAll('\u0000', NUL_REPLACEMENT) : text;
}

/** Whether JSON text may hold `\u0000` or a surrogate escape: one pass, and the only one for a text without. */
const MAY_NEED_REPLACING = /\\u(?:0000|d[89a-f])/i;
/**
 * An escaped backslash (taken as one pair, so `\\u0000` stays as it is), an escaped surrogate pair (kept:
 * PostgreSQL reads it), `\u0000`, or a lone surrogate escape.
 */
const ESCAPES = /\\\\|\\ud[89ab][0-9a-f]{2}\\ud[c-f][0-9a-f]{2}|\\u0000|\\ud[89a-f][0-9a-f]{2}/gi;

/**
 * JSON text (as JSON.stringify writes it) with every U+0000 and every lone surrogate in its strings and keys
 * as U+FFFD, so PostgreSQL can read it as json. A text without either is answered as it is after one pass.
 */
export function storableJson(json: string): string {
  if (!MAY_NEED_REPLACING.test(json)) return json;
  return json.replace(ESCAPES, (found) => (found.length === 6 ? '\\ufffd' : found));
}
