// Bounds the size of a result as JSON (MAX_RESULT_BYTES). A result is one
// line of the spool and part of one results call, and a large response body
// can be far larger as JSON than as bytes (a NUL byte is `\u0000`, six
// characters), so the size is measured as serialized, without ever building
// the long strings' JSON. Over the bound, the longest parts are cut: the
// response body first, then the jobLog, then other long strings; the result
// says what was cut and how large it was.

import type { MemoryLease } from '../core/memory-budget.js';
import type { CheckResultEntry, SerializedResult } from '../core/result-entry.js';

export const DEFAULT_MAX_RESULT_BYTES = 4 * 1024 * 1024;

/** Strings at least this long are measured apart and may be cut; shorter ones are counted in the rest. */
const LONG_STRING = 256;

/** Room kept for the note that says what was cut (and the `resultTruncated` flag). */
const NOTE_ROOM = 2048;

/** Long strings up to this much per result are not charged to the memory budget: a small result is never cut for memory. */
const UNCHARGED_BYTES = 64 * 1024;

/** Cuts named in the note; the rest are counted. */
const NOTED_CUTS = 5;

const MEMBERS = ['apiCheckResult', 'tcpCheckResult', 'dnsCheckResult', 'icmpCheckResult', 'multiStepCheckResult', 'browserCheckResult'] as const;

/**
 * UTF-8 bytes that JSON.stringify writes for the code unit at `i` (and the
 * one after, for a surrogate pair: the pair's 4 bytes are counted on its high
 * half, 0 on its low half). Plain arithmetic, no allocation: it runs once per
 * character of bodies of megabytes.
 */
function unitBytes(text: string, i: number): number {
  const code = text.charCodeAt(i);
  if (code >= 0x20 && code < 0x80) return code === 0x22 || code === 0x5c ? 2 : 1;
  if (code < 0x20) return code === 8 || code === 9 || code === 10 || code === 12 || code === 13 ? 2 : 6;
  if (code < 0x800) return 2;
  if (code < 0xd800 || code > 0xdfff) return 3;
  if (code <= 0xdbff) {
    const next = text.charCodeAt(i + 1);
    return next >= 0xdc00 && next <= 0xdfff ? 4 : 6;
  }
  // A low surrogate: the second half of a pair (counted with its first), or alone (written as \udxxx).
  const previous = text.charCodeAt(i - 1);
  return i > 0 && previous >= 0xd800 && previous <= 0xdbff ? 0 : 6;
}

/** UTF-8 bytes of JSON.stringify(text), quotes included, computed without building it. */
export function jsonStringBytes(text: string): number {
  let bytes = 2;
  for (let i = 0; i < text.length; i++) bytes += unitBytes(text, i);
  return bytes;
}

/** The longest start of `text` whose JSON (quotes included) fits in `bytes`; a surrogate pair is never split. */
export function jsonPrefix(text: string, bytes: number): string {
  let used = 2;
  let i = 0;
  while (i < text.length) {
    const unit = unitBytes(text, i);
    if (used + unit > bytes) break;
    used += unit;
    // A pair goes whole or not at all.
    i += unit === 4 ? 2 : 1;
  }
  // A slice would keep the whole original alive (V8 slices share their parent): copy it.
  return i === text.length ? text : Buffer.from(text.slice(0, i), 'utf16le').toString('utf16le');
}

type Holder = Record<string, unknown> | unknown[];

interface LongString {
  holder: Holder;
  key: string;
  text: string;
  bytes: number;
  /** Where it is in the result, for the note. */
  what: string;
}

function set(holder: Holder, key: string, value: unknown): void {
  (holder as Record<string, unknown>)[key] = value;
}

/** The result's size as JSON, and its long strings, measured without serializing them. */
function measure(entry: CheckResultEntry): { total: number; long: LongString[] } {
  const long: LongString[] = [];
  const paths = new Map<object, string>();
  const rest = JSON.stringify(entry, function (this: Holder, key: string, value: unknown) {
    const where = key === '' ? '' : `${paths.get(this) ?? ''}${Array.isArray(this) ? `[${key}]` : `${paths.get(this) ? '.' : ''}${key}`}`;
    if (value !== null && typeof value === 'object') paths.set(value, where);
    if (typeof value === 'string' && value.length >= LONG_STRING) {
      long.push({ holder: this, key, text: value, bytes: jsonStringBytes(value), what: where });
      return '';
    }
    return value;
  });
  const restBytes = Buffer.byteLength(rest);
  return { total: long.reduce((sum, s) => sum + s.bytes - 2, restBytes), long };
}

/**
 * The size (JSON bytes, quotes included) to cut every longer string to, so that
 * together they shrink by at least `excess`: the largest first, to one level.
 */
function commonCap(sizes: number[], excess: number): number {
  if (excess <= 0) return Number.POSITIVE_INFINITY;
  const sorted = [...sizes].sort((a, b) => b - a);
  let sum = 0;
  for (let k = 1; k <= sorted.length; k++) {
    sum += sorted[k - 1] as number;
    const level = Math.floor((sum - excess) / k);
    if (level >= (sorted[k] ?? 2)) return Math.max(2, level);
  }
  return 2;
}

/** What a result's long strings cost the memory budget. */
function chargedBytes(long: LongString[]): number {
  return Math.max(0, long.reduce((sum, s) => sum + s.bytes, 0) - UNCHARGED_BYTES);
}

function memberOf(entry: CheckResultEntry): Record<string, unknown> | undefined {
  for (const name of MEMBERS) {
    const detail = entry[name];
    if (detail && typeof detail === 'object') return detail;
  }
  return undefined;
}

/**
 * Cuts `entry` (in place) until its JSON fits `maxBytes`; with a lease, also
 * until its long strings fit what the lease holds or can still take from the
 * memory budget, and leaves the lease holding just what the result keeps.
 * Returns the same entry.
 */
export function capResultSize(entry: CheckResultEntry, maxBytes: number, lease?: MemoryLease): CheckResultEntry {
  cap(entry, maxBytes, lease);
  return entry;
}

/**
 * Whether `value` as JSON is surely at most `limit` bytes, judged without
 * serializing it: a string counted at six bytes a unit (a `\u0000` escape,
 * the most a unit can take) or, when that is too many, exactly
 * (jsonStringBytes); every number at 24, each key and separator generously.
 * Stops as soon as the count passes `limit`, so it reads little of a large
 * result. A result that passes can be serialized whole with no risk; one
 * that does not is measured and cut first (capResultSize), never serialized
 * at full size.
 */
export function jsonBytesAtMost(value: unknown, limit: number): boolean {
  return boundedJsonBytes(value, limit, 0) <= limit;
}

/** The largest result that leaves the queue with its JSON line made (UNCHARGED_BYTES): such lines are small to hold. */
export const SMALL_RESULT_BYTES = UNCHARGED_BYTES;

function boundedJsonBytes(value: unknown, limit: number, depth: number): number {
  if (typeof value === 'string') {
    const quick = 6 * value.length + 2;
    if (quick <= limit || value.length + 2 > limit) return quick;
    return jsonStringBytes(value);
  }
  if (value === null || typeof value !== 'object') return 24;
  if (depth > 64) return Number.POSITIVE_INFINITY;
  let total = 2;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length && total <= limit; i++) total += boundedJsonBytes(value[i], limit - total, depth + 1) + 1;
    return total;
  }
  for (const key in value) {
    total += 6 * key.length + 4 + boundedJsonBytes((value as Record<string, unknown>)[key], limit - total, depth + 1);
    if (total > limit) return total;
  }
  return total;
}

/**
 * capResultSize for a serialized result: a line within both MAX_RESULT_BYTES
 * and the uncharged allowance is kept as it is, without measuring its parts
 * (its long strings cannot add up to more than the line); only a larger one
 * is measured, cut, and serialized again if it was cut.
 */
export function capSerializedResult(result: SerializedResult, maxBytes: number, lease?: MemoryLease): SerializedResult {
  // UTF-16 units never undercount UTF-8 bytes by more than 3×: most lines are decided without counting.
  const bytes = result.line.length * 3 <= maxBytes && result.line.length * 3 <= UNCHARGED_BYTES ? 0 : Buffer.byteLength(result.line);
  if (bytes <= maxBytes && bytes <= UNCHARGED_BYTES) {
    lease?.give(lease.bytes);
    return result;
  }
  return cap(result.entry, maxBytes, lease) ? { entry: result.entry, line: JSON.stringify(result.entry) } : result;
}

/**
 * JSON bytes of `value` with every long string and `cuttable` (the jobLog) counted as empty (cutting can make them so), counted only
 * up to `limit`: a result whose parts share big subtrees (a JSONPath's nested `actual` values) may be
 * hundreds of MB as JSON, and is not serialized to learn that no cut can make it fit.
 */
export function structureBytes(value: unknown, limit: number, cuttable: unknown = undefined, depth = 0): number {
  if (typeof value === 'string') return value.length >= LONG_STRING ? 2 : jsonStringBytes(value);
  if (value === null) return 4;
  if (typeof value === 'number') return Number.isFinite(value) ? String(value).length : 4;
  if (typeof value === 'boolean') return value ? 4 : 5;
  // Only as an array's item (an object's such keys are skipped below): JSON writes null.
  if (typeof value !== 'object') return 4;
  if (value instanceof Date) return 26;
  if (value === cuttable) return 2;
  if (depth > MAX_STRUCTURE_DEPTH) return Number.POSITIVE_INFINITY;
  // Brackets, and a comma between two items (none after the last): exactly what JSON.stringify writes.
  let total = 2;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length && total <= limit; i++) total += (i > 0 ? 1 : 0) + structureBytes(value[i], limit - total, cuttable, depth + 1);
    return total;
  }
  let first = true;
  for (const key in value) {
    const item = (value as Record<string, unknown>)[key];
    if (item === undefined || typeof item === 'function' || typeof item === 'symbol') continue;
    total += (first ? 0 : 1) + jsonStringBytes(key) + 1 + structureBytes(item, limit - total, cuttable, depth + 1);
    first = false;
    if (total > limit) return total;
  }
  return total;
}

/** Levels structureBytes follows: far past any document an assertion may report (MAX_DOCUMENT_DEPTH). */
const MAX_STRUCTURE_DEPTH = 1_000;

/** Replaces the check's detail by what says what happened: the error, and why the rest went. */
function dropDetails(entry: CheckResultEntry, detail: Record<string, unknown> | undefined, maxBytes: number, was: string): void {
  const member = MEMBERS.find((name) => entry[name] === detail) ?? 'apiCheckResult';
  const error = typeof detail?.requestError === 'string' ? jsonPrefix(detail.requestError, 1024) : null;
  entry[member] = {
    requestError: error,
    jobLog: [`result truncated to fit MAX_RESULT_BYTES (${maxBytes} bytes): it was ${was} as JSON; its details were dropped`],
    resultTruncated: true,
  };
}

/** Cuts `entry` in place as capResultSize says; true when anything was cut. */
function cap(entry: CheckResultEntry, maxBytes: number, lease?: MemoryLease): boolean {
  // The jobLog's lines may be dropped, long strings cut; if the rest does not fit, nothing can make it: its
  // details go before anything serializes it whole.
  const detailFirst = memberOf(entry);
  if (structureBytes(entry, maxBytes, detailFirst?.jobLog) > maxBytes) {
    dropDetails(entry, detailFirst, maxBytes, `more than ${maxBytes} bytes without its long strings`);
    lease?.give(lease.bytes - chargedBytes(measure(entry).long));
    return true;
  }
  const { total, long } = measure(entry);
  let limit = maxBytes;
  let budgetShort = false;
  if (lease) {
    // The result's long strings replace the body bytes the lease holds: it takes what more they need, if it can.
    const charged = chargedBytes(long);
    if (charged > lease.bytes) lease.take(Math.min(charged, maxBytes) - lease.bytes);
    if (lease.bytes < charged && total - (charged - lease.bytes) < limit) {
      limit = total - (charged - lease.bytes);
      budgetShort = true;
    }
  }
  if (total <= limit) {
    lease?.give(lease.bytes - chargedBytes(long));
    return false;
  }
  const detail = memberOf(entry);
  const response = detail?.response;
  const jobLog = Array.isArray(detail?.jobLog) ? (detail.jobLog as unknown[]) : undefined;
  const isBody = (s: LongString) => s.holder === response && s.key === 'body';
  const target = Math.max(0, limit - NOTE_ROOM);
  let size = total;
  const cuts: string[] = [];
  // The biggest strings are cut first, all to one common size, so that a copy of the body (an
  // assertion's actual value) does not keep its all while the body itself is cut to nothing.
  const cap = commonCap(long.map((s) => s.bytes), size - target);
  const order = [...long].sort((a, b) => Number(isBody(b)) - Number(isBody(a)) || b.bytes - a.bytes);
  for (const s of order) {
    if (size <= target) break;
    if (s.bytes <= cap) continue;
    const cut = jsonPrefix(s.text, cap);
    const cutBytes = jsonStringBytes(cut);
    set(s.holder, s.key, cut);
    size -= s.bytes - cutBytes;
    cuts.push(`${s.what || 'a string'} cut to ${cut.length} of ${s.text.length} characters`);
    s.text = cut;
    s.bytes = cutBytes;
    if (isBody(s) && response && typeof response === 'object') set(response as Holder, 'bodyTruncated', true);
  }
  if (size > target && jobLog) {
    // Many short lines: keep the first ones that fit, and say how many went.
    let kept = 0;
    let keptBytes = 0;
    const lineBytes = jobLog.map((line) => Buffer.byteLength(JSON.stringify(line) ?? 'null') + 1);
    const allBytes = lineBytes.reduce((a, b) => a + b, 0);
    while (kept < jobLog.length && size - allBytes + keptBytes + (lineBytes[kept] as number) <= target) keptBytes += lineBytes[kept++] as number;
    const dropped = jobLog.length - kept;
    if (dropped > 0) {
      jobLog.splice(kept);
      size -= allBytes - keptBytes;
      cuts.push(`the last ${dropped} jobLog lines dropped`);
    }
  }
  const noted = cuts.slice(0, NOTED_CUTS).join('; ') + (cuts.length > NOTED_CUTS ? `; and ${cuts.length - NOTED_CUTS} more` : '');
  const reason = budgetShort ? " and the agent's memory budget for response bodies, which other checks were using" : '';
  const note = `result truncated to fit MAX_RESULT_BYTES (${maxBytes} bytes)${reason}: it was ${total} bytes as JSON; ${noted}`;
  if (detail) {
    detail.resultTruncated = true;
    if (jobLog) jobLog.push(note);
  }
  // What is left is still too large (a huge number of small parts): keep only what says what happened.
  if (!detail || Buffer.byteLength(JSON.stringify(entry)) > maxBytes) dropDetails(entry, detail, maxBytes, `${total} bytes`);
  lease?.give(lease.bytes - chargedBytes(measure(entry).long));
  return true;
}
