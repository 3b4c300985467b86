// Reads a claim answer that is not valid JSON as far as it can, so that one
// bad job (a bare NaN, a stray byte) costs that job and not all of them. A
// small scanner splits the top-level `jobs` array into its elements (strings
// and escapes, nesting of [] and {}); each element is then parsed alone. It
// never recurses and stops at MAX_NESTING or MAX_TEXT_CHARS.

/** Deepest nesting of brackets the scanner follows. */
export const MAX_NESTING = 100_000;
/** Longest answer it scans (characters); a longer one is malformed as a whole. */
export const MAX_TEXT_CHARS = 64 * 1024 * 1024;

/** A job element that is not valid JSON, but whose `id` could be read. */
export interface UnreadableJob {
  id: string;
  /** The lease expiry when it could be read too. */
  leaseExpiresAt?: string;
  problem: string;
}

export interface LenientClaimAnswer {
  /** The elements that parsed, as parsed (still unvalidated jobs). */
  jobs: unknown[];
  unreadable: UnreadableJob[];
  /** Elements that are not JSON and have no readable id: no result can be reported for them. */
  lost: number;
}

interface Span {
  start: number;
  end: number;
}

const WHITESPACE = new Set([' ', '\t', '\n', '\r']);

/** The end (exclusive) of the JSON string starting at `i` (a `"`), or -1. */
function stringEnd(text: string, i: number): number {
  for (let j = i + 1; j < text.length; j++) {
    const ch = text[j];
    if (ch === '\\') j++;
    else if (ch === '"') return j + 1;
  }
  return -1;
}

function skipWhitespace(text: string, i: number): number {
  while (i < text.length && WHITESPACE.has(text[i] as string)) i++;
  return i;
}

/**
 * The end (exclusive) of the value starting at `i`, or -1 when brackets do not
 * match. A bare token (a number, true, NaN, garbage) runs to the next `,`, `]`,
 * `}` or whitespace at its own level.
 */
function valueEnd(text: string, i: number): number {
  const open: string[] = [];
  let j = i;
  while (j < text.length) {
    const ch = text[j] as string;
    if (ch === '"') {
      j = stringEnd(text, j);
      if (j === -1) return -1;
      if (open.length === 0) return j;
      continue;
    }
    if (ch === '[' || ch === '{') {
      if (open.length >= MAX_NESTING) return -1;
      open.push(ch === '[' ? ']' : '}');
    } else if (ch === ']' || ch === '}') {
      if (open.length === 0) return j;
      if (open.pop() !== ch) return -1;
      if (open.length === 0) return j + 1;
    } else if (open.length === 0 && (ch === ',' || WHITESPACE.has(ch))) {
      return j;
    }
    j++;
  }
  return open.length === 0 ? j : -1;
}

/** The members of the object whose text starts at `i` (a `{`): key → value span; null when it is not one. */
function members(text: string, i: number, wanted: ReadonlySet<string>): Map<string, Span> | null {
  const found = new Map<string, Span>();
  let j = skipWhitespace(text, i + 1);
  if (text[j] === '}') return found;
  for (;;) {
    if (text[j] !== '"') return null;
    const keyEnd = stringEnd(text, j);
    if (keyEnd === -1) return null;
    let key: unknown;
    try {
      key = JSON.parse(text.slice(j, keyEnd));
    } catch {
      return null;
    }
    j = skipWhitespace(text, keyEnd);
    if (text[j] !== ':') return null;
    j = skipWhitespace(text, j + 1);
    const end = valueEnd(text, j);
    if (end === -1 || end === j) return null;
    if (typeof key === 'string' && wanted.has(key)) found.set(key, { start: j, end });
    j = skipWhitespace(text, end);
    if (text[j] === '}') return found;
    if (text[j] !== ',') return null;
    j = skipWhitespace(text, j + 1);
  }
}

/** The element spans of the array whose text starts at `i` (a `[`), or null. */
function elements(text: string, i: number): Span[] | null {
  const spans: Span[] = [];
  let j = skipWhitespace(text, i + 1);
  if (text[j] === ']') return spans;
  for (;;) {
    const end = valueEnd(text, j);
    if (end === -1 || end === j) return null;
    spans.push({ start: j, end });
    j = skipWhitespace(text, end);
    if (text[j] === ']') return spans;
    if (text[j] !== ',') return null;
    j = skipWhitespace(text, j + 1);
  }
}

function stringAt(text: string, span: Span | undefined): string | undefined {
  if (!span) return undefined;
  try {
    const value: unknown = JSON.parse(text.slice(span.start, span.end));
    return typeof value === 'string' ? value : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The jobs of a claim answer that JSON.parse refused: each element of its
 * `jobs` array parsed alone. Null when not even the array can be found (the
 * answer is malformed as a whole).
 */
export function parseClaimAnswerLeniently(text: string): LenientClaimAnswer | null {
  if (text.length > MAX_TEXT_CHARS) return null;
  const start = skipWhitespace(text, 0);
  if (text[start] !== '{') return null;
  const top = members(text, start, new Set(['jobs']));
  const jobsSpan = top?.get('jobs');
  if (!jobsSpan || text[jobsSpan.start] !== '[') return null;
  const spans = elements(text, jobsSpan.start);
  if (!spans) return null;
  const answer: LenientClaimAnswer = { jobs: [], unreadable: [], lost: 0 };
  for (const span of spans) {
    const element = text.slice(span.start, span.end);
    try {
      answer.jobs.push(JSON.parse(element));
    } catch (error) {
      const fields = text[span.start] === '{' ? members(text, span.start, new Set(['id', 'leaseExpiresAt'])) : null;
      const id = stringAt(text, fields?.get('id'));
      if (!id) {
        answer.lost++;
        continue;
      }
      const leaseExpiresAt = stringAt(text, fields?.get('leaseExpiresAt'));
      answer.unreadable.push({
        id,
        ...(leaseExpiresAt ? { leaseExpiresAt } : {}),
        problem: `job is not valid JSON: ${(error as Error).message}`,
      });
    }
  }
  return answer;
}
