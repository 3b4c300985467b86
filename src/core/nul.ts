// U+0000 in text the server keeps. PostgreSQL's TEXT cannot hold it (`invalid
// byte sequence for encoding "UTF8": 0x00`) where SQLite can, so the server
// never lets it reach a column: identifiers carrying it are refused where
// they arrive (src/server/agent-api.ts, src/server/http/router.ts), and text
// the store derives from a result has it replaced (src/store/error-groups.ts),
// the same on both stores. A result's body is stored as JSON text, where
// U+0000 is the escape `\u0000`; PostgreSQL takes that as TEXT but fails to
// read it as json (`unsupported Unicode escape sequence`, in the triggers and
// queries that read a body's fields), so the stored body has U+FFFD there too
// (jsonWithoutNul), on both stores.

/** U+FFFD, the replacement character: what stands for a U+0000 in derived text. */
export const NUL_REPLACEMENT = '\uFFFD';

export function hasNul(text: string): boolean {
  return text.includes('\u0000');
}

/** `text` with every U+0000 replaced by U+FFFD. */
export function withoutNul(text: string): string {
  return hasNul(text) ? text.replaceAll('\u0000', NUL_REPLACEMENT) : text;
}

/**
 * JSON text (as JSON.stringify writes it) with every U+0000 in its strings and keys as U+FFFD. An escaped
 * backslash is taken as one pair, so a literal `\\u0000` (backslash, then `u0000`) stays as it is.
 */
export function jsonWithoutNul(json: string): string {
  return json.includes('\\u0000') ? json.replace(/\\\\|\\u0000/g, (pair) => (pair === '\\u0000' ? '\\ufffd' : pair)) : json;
}
