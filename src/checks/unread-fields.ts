// Which fields of a checks file nobody read (fields.ts FieldReads) are
// mistakes and which are merely ignored. A key that is a field of its object
// misspelled (a letter or two off, or another case: `frequncy`, `assertion`,
// `Frequency`) was meant as that field, and the check would silently run
// without it: an error. Any other key is ignored with a warning: checks files
// written for the monitoring service carry its fields Outpost does not
// implement (`muted`, `tags`, `doubleCheck`…), and they must keep running.
// The rule is documented in docs/checks/README.md ("Fields Outpost does not read").

import type { FieldIssue, UnreadField } from './fields.js';

/** Names longer than this are not compared: no field is that long, and the comparison costs length squared. */
const MAX_COMPARED_LENGTH = 64;

/** Edits allowed between a key and the field it is taken for: none for names of 3 letters or fewer (only case), 1 up to 7, then 2. */
function allowedEdits(length: number): number {
  if (length <= 3) return 0;
  return length <= 7 ? 1 : 2;
}

/**
 * Edit distance with adjacent transpositions (optimal string alignment),
 * or `bound + 1` as soon as it must exceed `bound`.
 */
function editDistance(a: string, b: string, bound: number): number {
  if (Math.abs(a.length - b.length) > bound) return bound + 1;
  let before: number[] = [];
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    let rowMin = i;
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let value = Math.min((previous[j] as number) + 1, (current[j - 1] as number) + 1, (previous[j - 1] as number) + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) value = Math.min(value, (before[j - 2] as number) + 1);
      current.push(value);
      if (value < rowMin) rowMin = value;
    }
    if (rowMin > bound) return bound + 1;
    before = previous;
    previous = current;
  }
  return previous[b.length] as number;
}

/** The field `key` is most likely a misspelling of, among the names its object was asked for. */
export function meantField(key: string, asked: readonly string[]): string | undefined {
  if (key.length > MAX_COMPARED_LENGTH) return undefined;
  const lower = key.toLowerCase();
  let best: { name: string; distance: number } | undefined;
  for (const name of asked) {
    if (name.toLowerCase() === lower) return name;
    const bound = allowedEdits(Math.max(key.length, name.length));
    if (bound === 0) continue;
    const distance = editDistance(lower, name.toLowerCase(), bound);
    if (distance <= bound && (best === undefined || distance < best.distance)) best = { name, distance };
  }
  return best?.name;
}

/** What a problem says of a key taken for a misspelling of `meant`. */
export function misspelledProblem(meant: string): string {
  return `is not a field Outpost reads; did you mean "${meant}"?`;
}

/**
 * Every unread field as a problem, for a reader that takes no field it does
 * not know (the server's write routes, src/server/http/record-body.ts): a
 * misspelling names the field meant, as in a checks file.
 */
export function unreadProblems(unread: readonly UnreadField[]): FieldIssue[] {
  return unread.map((field) => {
    const meant = meantField(field.key, field.asked);
    return { path: field.path, problem: meant === undefined ? 'is not a field of this record' : misspelledProblem(meant) };
  });
}

/** Fields a job's jobLog line names; the rest are counted. */
export const MAX_NAMED_UNREAD = 10;
/** A named field's path is cut to this many characters: its keys come from untrusted JSON. */
export const MAX_UNREAD_PATH_CHARS = 100;

const shortPath = (path: string): string => (path.length > MAX_UNREAD_PATH_CHARS ? `${path.slice(0, MAX_UNREAD_PATH_CHARS - 1)}…` : path);

/**
 * The one jobLog line of a job whose check has fields nobody read, or nothing. A job is never refused for them
 * (a newer control plane may send fields an older agent does not know); a misspelling names the field meant.
 */
export function unreadJobLogLine(unread: readonly UnreadField[]): string | undefined {
  if (unread.length === 0) return undefined;
  const sorted = unread.map((field) => ({ path: field.path, meant: meantField(field.key, field.asked) }));
  // Likely misspellings first: the check runs without what they were meant to set.
  sorted.sort((a, b) => Number(a.meant === undefined) - Number(b.meant === undefined));
  const named = sorted.slice(0, MAX_NAMED_UNREAD).map(({ path, meant }) => `${shortPath(path)}${meant === undefined ? '' : ` (did you mean "${meant}"?)`}`);
  const more = unread.length - named.length;
  return `The check has ${unread.length} field${unread.length === 1 ? '' : 's'} this agent does not read, ignored: ${named.join(', ')}${more > 0 ? ` and ${more} more` : ''}`;
}

/** Unread fields split into misspellings (errors, with the field meant) and the others (ignored, by path). */
export function sortUnread(unread: readonly UnreadField[]): { misspelled: Array<{ path: string; meant: string }>; ignored: string[] } {
  const misspelled: Array<{ path: string; meant: string }> = [];
  const ignored: string[] = [];
  for (const field of unread) {
    const meant = meantField(field.key, field.asked);
    if (meant === undefined) ignored.push(field.path);
    else misspelled.push({ path: field.path, meant });
  }
  return { misspelled, ignored };
}
