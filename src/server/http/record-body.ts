// A write route's JSON body read as one record (an alert channel, a
// dashboard). Every problem is a 400 naming its JSON path, and so is every
// field the record does not have: a route answers its caller at once, where a
// checks file can only warn in a log, and a dropped `sendFailrue` would do
// something else than asked without a word. A misspelling names the field
// meant, as in a checks file (src/checks/unread-fields.ts; docs/server.md).

import { FieldReads, Fields, MAX_LISTED_ISSUES } from '../../checks/fields.js';
import { unreadProblems } from '../../checks/unread-fields.js';
import { badRequest } from './api-error.js';

/** `read` applied to the body; throws a 400 listing the first MAX_LISTED_ISSUES problems (and counting the rest). */
export function readRecordBody<T>(body: unknown, read: (fields: Fields, value: unknown) => T): T {
  const value = body ?? {};
  const reads = new FieldReads();
  const fields = Fields.root(value, '$', reads);
  const record = read(fields, value);
  const issues = [...fields.issues, ...unreadProblems(reads.unread())];
  if (issues.length === 0) return record;
  const problems = issues.slice(0, MAX_LISTED_ISSUES).map((i) => `${i.path}: ${i.problem}`);
  const more = issues.length - problems.length;
  if (more > 0) problems.push(`and ${more} more problem${more === 1 ? '' : 's'}`);
  throw badRequest(problems.join('; '), { problems });
}
