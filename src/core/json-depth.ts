// How deeply a value from untrusted JSON is nested, found without recursion.
// JSON.parse builds any depth, but JSON.stringify, JSONPath and most walks
// recurse and throw RangeError past a few thousand levels; a value is checked
// here before any of them sees it.

/** Deepest nesting a check definition's value is described at (an error message quotes it). */
export const MAX_DEFINITION_DEPTH = 64;
/** Deepest nesting of a document an assertion evaluates (a response body, a DNS answer) and of the value it reports. */
export const MAX_DOCUMENT_DEPTH = 256;

const withinLimit = new WeakMap<object, number>();

/** One step of a JSON path for an object's key: `.name`, or `["odd key"]` when it is not a plain name. */
export function keyStep(key: string): string {
  return /^[A-Za-z_$][\w$]*$/.test(key) ? `.${key}` : `[${JSON.stringify(key)}]`;
}

/**
 * True when `value` holds arrays or objects nested more than `limit` deep (a
 * scalar is depth 0, `[]` depth 1). Iterative; stops at the first level past
 * the limit, so a cycle counts as too deep rather than looping. Objects found
 * within a limit are remembered, so asking again about the same document is cheap.
 */
export function nestedDeeperThan(value: unknown, limit: number): boolean {
  if (value === null || typeof value !== 'object') return false;
  const known = withinLimit.get(value);
  if (known !== undefined && known <= limit) return false;
  const stack: Array<{ node: object; depth: number }> = [{ node: value, depth: 1 }];
  let deepest = 1;
  while (stack.length > 0) {
    const { node, depth } = stack.pop() as { node: object; depth: number };
    if (depth > limit) return true;
    if (depth > deepest) deepest = depth;
    const children: unknown[] = Array.isArray(node) ? node : Object.values(node);
    for (const child of children) {
      if (child !== null && typeof child === 'object') stack.push({ node: child, depth: depth + 1 });
    }
  }
  withinLimit.set(value, deepest);
  return false;
}

/**
 * Where `value` first nests deeper than `limit`, as a path from `root`
 * (`$.checks[0].extra[0][0]…`, its first `shown` steps and an ellipsis), or
 * null when it does not. Iterative, like nestedDeeperThan: for a message
 * that names the field instead of a stack overflow later.
 */
export function pathPastDepth(value: unknown, limit: number, root = '$', shown = 4): string | null {
  if (!nestedDeeperThan(value, limit)) return null;
  const stack: Array<{ node: unknown; depth: number; path: string[] }> = [{ node: value, depth: 0, path: [] }];
  while (stack.length > 0) {
    const { node, depth, path } = stack.pop() as { node: unknown; depth: number; path: string[] };
    if (node === null || typeof node !== 'object') continue;
    if (depth >= limit) return `${root}${path.join('')}${depth > shown ? '…' : ''}`;
    const entries: Array<[string, unknown]> = Array.isArray(node) ? node.map((child, i) => [`[${i}]`, child]) : Object.entries(node).map(([key, child]) => [keyStep(key), child]);
    for (let i = entries.length - 1; i >= 0; i--) {
      const [step, child] = entries[i] as [string, unknown];
      if (child !== null && typeof child === 'object') stack.push({ node: child, depth: depth + 1, path: path.length < shown ? [...path, step] : path });
    }
  }
  return null;
}

/** What a byte is to the scan below: 0 for all but `"`, `\`, and the brackets (ASCII, never inside a UTF-8 sequence). */
const QUOTE = 1;
const BACKSLASH = 2;
const OPEN = 3;
const CLOSE = 4;
const BYTE_CLASS = new Uint8Array(256);
BYTE_CLASS[0x22] = QUOTE;
BYTE_CLASS[0x5c] = BACKSLASH;
BYTE_CLASS[0x5b] = OPEN;
BYTE_CLASS[0x7b] = OPEN;
BYTE_CLASS[0x5d] = CLOSE;
BYTE_CLASS[0x7d] = CLOSE;

/**
 * True when the JSON text `bytes` (UTF-8) opens arrays or objects more than `limit` deep, read in one pass
 * over the bytes before JSON.parse sees them: parsing `[` × 8M took the server ~2 s and 1.2 GB to build a
 * value nestedDeeperThan then refused. Brackets inside strings do not count, nor does an escaped quote end
 * one. Exact for valid JSON; for text that is not, the answer does not matter, as JSON.parse refuses it.
 * A table lookup per byte: measured faster than indexOf to each string's end on bodies full of `\"`.
 */
export function textNestedDeeperThan(bytes: Uint8Array, limit: number): boolean {
  let depth = 0;
  let inString = false;
  const end = bytes.length;
  for (let i = 0; i < end; i++) {
    const kind = BYTE_CLASS[bytes[i] as number];
    if (kind === 0) continue;
    if (inString) {
      if (kind === BACKSLASH) i++;
      else if (kind === QUOTE) inString = false;
    } else if (kind === QUOTE) {
      inString = true;
    } else if (kind === OPEN) {
      if (++depth > limit) return true;
    } else if (kind === CLOSE) {
      depth--;
    }
  }
  return false;
}
