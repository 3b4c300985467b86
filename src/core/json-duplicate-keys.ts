// Keys given twice in one object of a JSON text. JSON.parse keeps the last
// value of such a key without a word, so `"id": "a", "id": "b"` would read as
// `"id": "b"`; a checks file (src/checks/checks-file.ts) refuses it instead.
// The text is scanned once, without recursion: only the keys of the objects
// still open are held, and a path is built only for a key that is repeated.

import { keyStep } from './json-depth.js';

interface Open {
  /** null for an array. */
  keys: Set<string> | null;
  /** The key whose value is being read (objects), or the index of the element (arrays). */
  key: string;
  index: number;
  expectKey: boolean;
}

function pathTo(stack: readonly Open[], key: string): string {
  let path = '$';
  // Every open container but the innermost leads to the next one by its current key or index.
  for (let i = 0; i < stack.length - 1; i++) {
    const open = stack[i] as Open;
    path += open.keys === null ? `[${open.index}]` : keyStep(open.key);
  }
  return path + keyStep(key);
}

/** The end (exclusive) of the string literal whose opening quote is at `start`. */
function stringEnd(text: string, start: number): number {
  let i = start + 1;
  while (i < text.length) {
    const c = text.charCodeAt(i);
    if (c === 0x5c /* \ */) i += 2;
    else if (c === 0x22 /* " */) return i + 1;
    else i++;
  }
  return text.length;
}

/**
 * The JSON paths of repeated keys in `text`, which JSON.parse accepted (the
 * scan relies on it being valid JSON): at most `limit` of them, and how many
 * there are in all.
 */
export function duplicateKeys(text: string, limit: number): { paths: string[]; count: number } {
  const paths: string[] = [];
  let count = 0;
  const stack: Open[] = [];
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    const top = stack[stack.length - 1];
    if (c === '"') {
      const end = stringEnd(text, i);
      if (top?.keys && top.expectKey) {
        const literal = text.slice(i, end);
        // Escapes spell the same key another way ("\u0069d" is "id").
        const key = literal.includes('\\') ? (JSON.parse(literal) as string) : literal.slice(1, -1);
        if (top.keys.has(key)) {
          count++;
          if (paths.length < limit) paths.push(pathTo(stack, key));
        } else {
          top.keys.add(key);
        }
        top.key = key;
        top.expectKey = false;
      }
      i = end;
      continue;
    }
    if (c === '{') stack.push({ keys: new Set(), key: '', index: 0, expectKey: true });
    else if (c === '[') stack.push({ keys: null, key: '', index: 0, expectKey: false });
    else if (c === '}' || c === ']') stack.pop();
    else if (c === ',' && top) {
      if (top.keys) top.expectKey = true;
      else top.index++;
    }
    i++;
  }
  return { paths, count };
}
