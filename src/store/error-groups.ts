// Error groups: a failing result's error message, cleaned of what changes
// from run to run (numbers, ids, times, addresses), hashed, and grouped per
// check, so that the same failure seen a thousand times is one group. The
// rules are docs/server.md "Error groups"; the SQLite side is
// sqlite/error-groups-store.ts, called inside acceptResults' transaction.

import { createHash } from 'node:crypto';
import { isIPv4, isIPv6 } from 'node:net';
import { withoutNul } from '../core/nul.js';
import type { CheckResultEntry } from '../core/result-entry.js';

/** The service's error group record, plus `archivedForEver` (docs/server.md). */
export interface ErrorGroupRecord {
  id: string;
  checkId: string;
  errorHash: string;
  rawErrorMessage: string | null;
  cleanedErrorMessage: string;
  firstSeen: string;
  lastSeen: string;
  /** True while the group is archived, until its next occurrence or (archivedForEver) for good. */
  archivedUntilNextEvent: boolean;
  archivedForEver: boolean;
}

export interface ErrorGroupPatch {
  archiveForEver?: boolean;
  archivedUntilNextEvent?: boolean;
}

export interface ErrorGroupStore {
  group(id: string): Promise<ErrorGroupRecord | undefined>;
  /** Applies the archive flags (docs/server.md); undefined when the group does not exist. */
  patch(id: string, patch: ErrorGroupPatch, now: Date): Promise<ErrorGroupRecord | undefined>;
  /** Groups of a check, most recently seen first. */
  groupsOf(checkId: string): Promise<ErrorGroupRecord[]>;
  /** Deletes at most `batch` groups last seen before `before`; returns how many. */
  prune(before: Date, batch: number): Promise<number>;
}

/** Longest raw message kept and cleaned: a message is a line or a few, never a log. */
export const MAX_ERROR_MESSAGE_LENGTH = 2_000;
/** Groups one result may belong to (one per distinct failed assertion, at most). */
export const MAX_GROUPS_PER_RESULT = 10;
/**
 * Distinct messages of one result that are cleaned, at most: a result may list thousands of failed
 * assertions (one upload of 7,000 identical 2,000-character ones held the server for ~38 s), and each
 * clean costs up to a few tenths of a millisecond. Beyond this, a result's messages join no more groups.
 */
export const MAX_MESSAGES_CLEANED_PER_RESULT = 2 * MAX_GROUPS_PER_RESULT;
/** Failed assertions read from one result, at most (errorMessagesOf). */
export const MAX_ASSERTIONS_READ = 1_000;

const MONTHS = 'Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec';
const DAYS = 'Mon|Tue|Wed|Thu|Fri|Sat|Sun';

/**
 * The rules, in the order they apply; each placeholder has no digit, so a
 * later rule never rewrites an earlier one's output.
 */
const RULES: ReadonlyArray<readonly [RegExp, string | ((match: string, ...groups: string[]) => string)]> = [
  // ISO 8601 date-times and dates (2026-11-24T01:18:11.123Z, 2026-11-24 01:18:11+01:00, 2026-11-24).
  [/\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?(?![\d])/g, '<timestamp>'],
  // HTTP dates (Tue, 24 Nov 2026 01:18:11 GMT).
  [new RegExp(`\\b(?:${DAYS}), \\d{1,2} (?:${MONTHS}) \\d{4} \\d{2}:\\d{2}:\\d{2}(?: GMT)?`, 'g'), '<timestamp>'],
  // Times of day (01:18:11, 01:18:11.123).
  [/(?<![\d:])\d{2}:\d{2}:\d{2}(?:\.\d+)?(?![\d:])/g, '<timestamp>'],
  // UUIDs.
  [/\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b/g, '<uuid>'],
  // IPv6 addresses (validated: 12:30:45 or Error::x are not), bracketed or not, with a zone.
  [
    /(?<![0-9A-Za-z:.])(?:[0-9A-Fa-f]{0,4}:){2,7}(?:[0-9A-Fa-f]{0,4}|\d{1,3}(?:\.\d{1,3}){3})(?:%[0-9A-Za-z.]+)?(?![0-9A-Za-z:])/g,
    (match) => (isIPv6(match.replace(/%.*$/, '')) ? '<ip>' : match),
  ],
  // IPv4 addresses (validated: 1.2.3.4 but not 999.1.1.1 or a version 1.2.3.4.5).
  [/(?<![\d.])\d{1,3}(?:\.\d{1,3}){3}(?![\d.]*\d)/g, (match) => (isIPv4(match) ? '<ip>' : match)],
  // Ports: after an address, a host name with a dot, localhost, or a URL's host.
  // A host name starts where a run of host characters does, not at each word boundary inside one: from every
  // boundary of `a-a-a-…` the run was scanned to its end again, quadratic (2,000 characters took ~5 ms).
  // The one difference: a host whose first label is only dashes (`-.c:80`) now has its port replaced too.
  [/(<ip>|\]|\blocalhost|(?<![A-Za-z0-9-]|[A-Za-z0-9-]\.)[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+|\/\/[A-Za-z0-9.-]+):\d{1,5}(?!\d)/g, '$1:<port>'],
  // Hex: 0x-prefixed, and runs of 8 or more hex digits holding both a digit and a letter (hashes, object ids).
  [/\b0x[0-9a-fA-F]+\b/g, '<hex>'],
  [/\b(?=[0-9a-fA-F]*[a-fA-F])(?=[0-9a-fA-F]*\d)[0-9a-fA-F]{8,}\b/g, '<hex>'],
  // Ids: words of 8 or more letters, digits, _ and - holding at least 3 digits and a letter (req_8f3k2l9x, a1b2c3d4e5).
  [/(?<![\w<-])(?=[\w-]*[A-Za-z])(?=(?:[\w-]*\d){3})[\w-]{8,}(?![\w>-])/g, '<id>'],
  // Numbers, not part of a word (IPv4, sha256 stay); a unit may follow (500ms → <number>ms).
  [/(?<![A-Za-z0-9_.<])[-+]?\d+(?:\.\d+)*/g, '<number>'],
];

/** The message with every run-to-run detail replaced by its placeholder, whitespace collapsed. */
export function cleanErrorMessage(message: string): string {
  let text = message.slice(0, MAX_ERROR_MESSAGE_LENGTH);
  for (const [pattern, replacement] of RULES) {
    text = typeof replacement === 'string' ? text.replace(pattern, replacement) : text.replace(pattern, replacement);
  }
  return text.replace(/\s+/g, ' ').trim();
}

/** SHA-256 (hex) of the cleaned message: the group's identity within its check. */
export function errorHash(cleaned: string): string {
  return createHash('sha256').update(cleaned, 'utf8').digest('hex');
}

export function isFailing(result: Pick<CheckResultEntry, 'hasFailures' | 'hasErrors'>): boolean {
  return result.hasFailures === true || result.hasErrors === true;
}

const DETAIL_MEMBERS = ['apiCheckResult', 'tcpCheckResult', 'dnsCheckResult', 'icmpCheckResult', 'multiStepCheckResult', 'browserCheckResult'] as const;

function text(value: unknown): string {
  if (value === null || value === undefined) return '';
  return typeof value === 'string' ? value : JSON.stringify(value);
}

/** One failed assertion as a sentence: its own error, or what it compared and what it got. */
function assertionMessage(assertion: Record<string, unknown>): string {
  if (typeof assertion.error === 'string' && assertion.error !== '') return assertion.error;
  const property = text(assertion.property);
  const what = [text(assertion.source), property, text(assertion.comparison), text(assertion.target)].filter((part) => part !== '').join(' ');
  return `Assertion failed: ${what} (actual: ${text(assertion.actual).slice(0, 200)})`;
}

/**
 * The error messages of a failing result, one per group it joins:
 * its `requestError` when it has one (the request or the script failed);
 * else each failed assertion's; else "Response time over maxResponseTime"
 * when that is why; else a fixed message (a failure no message explains,
 * such as shouldFail inverting a pass). A passing result has none.
 */
export function errorMessagesOf(result: CheckResultEntry): string[] {
  if (!isFailing(result)) return [];
  const details = DETAIL_MEMBERS.map((member) => result[member]).filter((d): d is Record<string, unknown> => d !== null && typeof d === 'object');
  for (const detail of details) {
    if (typeof detail.requestError === 'string' && detail.requestError.trim() !== '') return [detail.requestError];
  }
  const failed: string[] = [];
  let read = 0;
  for (const detail of details) {
    if (!Array.isArray(detail.assertions)) continue;
    for (const assertion of detail.assertions) {
      if (++read > MAX_ASSERTIONS_READ) return failed;
      if (assertion && typeof assertion === 'object' && (assertion as { passed?: unknown }).passed === false) {
        failed.push(assertionMessage(assertion as Record<string, unknown>));
      }
    }
  }
  if (failed.length > 0) return failed;
  if (result.overMaxResponseTime) return ['Response time over maxResponseTime'];
  return ['The run failed without an error message'];
}

/** One group a failing result joins: the message as kept, its cleaned text and its hash. */
export interface FailureGroup {
  raw: string;
  cleaned: string;
  hash: string;
}

/**
 * The groups a result joins, for both stores' recordFailures: at most
 * MAX_GROUPS_PER_RESULT, each hash once. The work is bounded per result
 * whatever it holds: a message is cut to MAX_ERROR_MESSAGE_LENGTH and a
 * repeat of one already seen is dropped before any cleaning, and at most
 * MAX_MESSAGES_CLEANED_PER_RESULT distinct ones are cleaned. U+0000 becomes
 * U+FFFD in the kept and cleaned text (src/core/nul.ts: PostgreSQL's TEXT
 * cannot hold it), so the same message is one group on either store.
 */
export function failureGroups(result: CheckResultEntry): FailureGroup[] {
  const groups: FailureGroup[] = [];
  const seenRaw = new Set<string>();
  const hashes = new Set<string>();
  for (const message of errorMessagesOf(result)) {
    if (groups.length >= MAX_GROUPS_PER_RESULT || seenRaw.size >= MAX_MESSAGES_CLEANED_PER_RESULT) break;
    const raw = withoutNul(message.slice(0, MAX_ERROR_MESSAGE_LENGTH));
    if (seenRaw.has(raw)) continue;
    seenRaw.add(raw);
    const cleaned = cleanErrorMessage(raw);
    const hash = errorHash(cleaned);
    if (hashes.has(hash)) continue;
    hashes.add(hash);
    groups.push({ raw, cleaned, hash });
  }
  return groups;
}
