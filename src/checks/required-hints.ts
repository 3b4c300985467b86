// A required field that is missing is often there all the same, in the wrong
// place or under another name: "url" at the check's top level instead of in
// its request, TCP's "host" for "hostname", DNS's "hostname" for "query".
// Such a field is not read, and its "ignored field" warning is not given
// when the file has problems, so the problem itself points at it.

import type { FieldIssue, FieldReads } from './fields.js';

const REQUIRED = 'is required';

function asRecord(value: unknown): Record<string, unknown> | undefined {
  return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
}

/** Keys of `record` nobody asked for: what a reader did not take. */
function unreadKeys(record: Record<string, unknown> | undefined, reads: FieldReads): string[] {
  if (!record) return [];
  return Object.keys(record).filter((key) => !reads.wasAsked(record, key));
}

/** Names other tools and habits give a required request field: what a file written that way holds instead. */
const OTHER_NAMES: Readonly<Record<string, readonly string[]>> = {
  url: ['uri', 'link', 'endpoint', 'address'],
  hostname: ['address', 'ip', 'server', 'target'],
  query: ['hostname', 'host', 'name', 'domain', 'record'],
};

/** A key that may be meant as the field: it names it by part of it (`host` for `hostname`), or by another usual name. */
function meantAs(key: string, field: string): boolean {
  const a = key.toLowerCase();
  const b = field.toLowerCase();
  // A name of two letters or fewer is part of too many others to say anything.
  if (a === b || Math.min(a.length, b.length) < 3) return OTHER_NAMES[field]?.includes(a) ?? false;
  return a.includes(b) || b.includes(a) || (OTHER_NAMES[field]?.includes(a) ?? false);
}

/**
 * `issue` with a pointer to an unread field of the same check that is likely the missing one, when the issue is a
 * required field missing from the check (`checkPath`) or its request; otherwise `issue` as it is. `item`: the check's
 * JSON; `reads`: what the readers asked each object for.
 */
export function withRequiredHint(issue: FieldIssue, checkPath: string, item: unknown, reads: FieldReads): FieldIssue {
  if (!issue.problem.startsWith(REQUIRED)) return issue;
  const check = asRecord(item);
  if (!check) return issue;
  const requestPrefix = `${checkPath}.request.`;
  const inRequest = issue.path.startsWith(requestPrefix);
  const field = inRequest ? issue.path.slice(requestPrefix.length) : issue.path.startsWith(`${checkPath}.`) ? issue.path.slice(checkPath.length + 1) : '';
  if (field === '' || field.includes('.') || field.includes('[')) return issue;
  const atTop = unreadKeys(check, reads);
  const hint = (text: string) => ({ path: issue.path, problem: `${issue.problem} (${text})` });
  if (inRequest) {
    if (atTop.includes(field)) return hint(`found "${field}" at the check's top level: move it into request`);
    const instead = unreadKeys(asRecord(check.request), reads).find((key) => meantAs(key, field));
    if (instead !== undefined) return hint(`found "${instead}" in request, which this check type does not read: did you mean "${field}"?`);
    const above = atTop.find((key) => meantAs(key, field));
    if (above !== undefined) return hint(`found "${above}" at the check's top level: move it into request as "${field}"`);
    return issue;
  }
  const meant = atTop.find((key) => meantAs(key, field));
  return meant === undefined ? issue : hint(`found "${meant}", which Outpost does not read: did you mean "${field}"?`);
}
