// Scans of text an outsider may choose (a job's fields, an environment
// variable) written as single passes: the regular expressions they replace
// backtracked quadratically on long runs (`/\/+$/` on a run of slashes,
// `[a-z][a-z0-9+.-]*:\/\/` on a long word).

/** `text` without the slashes it ends with. */
export function withoutTrailingSlashes(text: string): string {
  let end = text.length;
  while (end > 0 && text.charCodeAt(end - 1) === 0x2f) end--;
  return text.slice(0, end);
}

const SCHEME_CHAR = /^[a-z0-9+.-]$/i;
const LETTER = /^[a-z]$/i;
const AUTHORITY_END = new Set(['/', '?', '#']);

/**
 * The authority (`user@host:port`) of each URL in `text`, in order: what
 * follows `scheme://` up to `/`, `?`, `#` or white space, where the scheme is
 * a letter then letters, digits, `+`, `.` or `-`. The same matches as
 * `/[a-z][a-z0-9+.-]*:\/\/([^/?#\s]*)/gi`, in linear time.
 */
export function urlAuthorities(text: string): string[] {
  const found: string[] = [];
  let from = 0;
  for (;;) {
    const separator = text.indexOf('://', from);
    if (separator < 0) return found;
    // Back over the scheme, never into what an earlier match took: each character is walked once.
    let start = separator;
    while (start > from && SCHEME_CHAR.test(text[start - 1] as string)) start--;
    while (start < separator && !LETTER.test(text[start] as string)) start++;
    if (start === separator) {
      from = separator + 1;
      continue;
    }
    let end = separator + 3;
    while (end < text.length && !AUTHORITY_END.has(text[end] as string) && !/\s/.test(text[end] as string)) end++;
    found.push(text.slice(separator + 3, end));
    from = end;
  }
}
