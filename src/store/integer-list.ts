// The analytics stores' transfer format (sqlite/analytics-store.ts,
// postgres/analytics-store.ts): a column of a window arrives as one string
// of comma-separated integers, parsed here straight into a typed array.

/**
 * Parses `count` comma-separated integers (optionally negative) into `into`,
 * adding `offset` to each. Text that is not such a list is a bug in the query:
 * it throws rather than answering wrong figures.
 */
export function parseIntegerList<T extends Float64Array | Uint8Array | Uint16Array>(text: unknown, count: number, into: T, offset = 0): T {
  if (count === 0) return into;
  if (typeof text !== 'string') throw new Error(`expected a list of ${count} integers, got ${text === null ? 'null' : typeof text}`);
  let k = 0;
  let value = 0;
  let negative = false;
  let digits = 0;
  for (let i = 0; i <= text.length; i++) {
    const c = i < text.length ? text.charCodeAt(i) : 44;
    if (c === 44) {
      if (digits === 0 || k >= count) throw new Error(`malformed integer list at character ${i}`);
      into[k++] = (negative ? -value : value) + offset;
      value = 0;
      negative = false;
      digits = 0;
    } else if (c >= 48 && c <= 57) {
      value = value * 10 + (c - 48);
      digits++;
    } else if (c === 45 && digits === 0 && !negative) {
      negative = true;
    } else {
      throw new Error(`malformed integer list at character ${i}`);
    }
  }
  if (k !== count) throw new Error(`expected ${count} integers, got ${k}`);
  return into;
}
