// Assertions shared by every check type: parsing, and comparing one actual
// value with a target. Which values a source yields is the executor's job.

import type { Fields } from '../fields.js';
import { MAX_DOCUMENT_DEPTH, nestedDeeperThan } from '../../core/json-depth.js';
import { jsonPathRegexProblems } from './jsonpath-regex.js';
import { matchesWithin } from './bounded-match.js';
import { CheckRegexError, compileCheckRegex, execCheckRegex, MAX_REGEX_WORK, regexProblem, tooMuchWork, tooSlow, workLength } from './regex.js';

export const COMPARISONS = [
  'EQUALS',
  'NOT_EQUALS',
  'HAS_KEY',
  'NOT_HAS_KEY',
  'HAS_VALUE',
  'NOT_HAS_VALUE',
  'IS_EMPTY',
  'NOT_EMPTY',
  'GREATER_THAN',
  'LESS_THAN',
  'CONTAINS',
  'NOT_CONTAINS',
  'IS_NULL',
  'NOT_NULL',
] as const;
export type Comparison = (typeof COMPARISONS)[number];

export interface Assertion {
  source: string;
  property: string;
  comparison: Comparison;
  target: string;
  regex: string | null;
}

export interface AssertionOutcome extends Assertion {
  actual: unknown;
  passed: boolean;
  error?: string;
}

/** Longest `regex` and `property` accepted: compiling or parsing them is work for every assertion. */
const MAX_REGEX_LENGTH = 10_000;
const MAX_PROPERTY_LENGTH = 10_000;

/** Sources whose `property` is a JSONPath expression. */
const JSON_PATH_SOURCES = new Set(['JSON_BODY', 'JSON_ANSWER', 'JSON_RESPONSE']);

export function parseAssertions(fields: Fields, sources: readonly string[]): Assertion[] {
  return fields.list('assertions').map((item) => {
    const regex = item.string('regex', { maxLength: MAX_REGEX_LENGTH }) ?? null;
    const regexIssue = regex && regex.length <= MAX_REGEX_LENGTH ? regexProblem(regex) : null;
    if (regexIssue) item.fail(item.at('regex'), regexIssue);
    const target = item.raw('target');
    const source = item.oneOf('source', sources, { required: true }) ?? '';
    const property = item.string('property', { default: '', maxLength: MAX_PROPERTY_LENGTH }) ?? '';
    if (JSON_PATH_SOURCES.has(source) && property.length <= MAX_PROPERTY_LENGTH) {
      for (const problem of jsonPathRegexProblems(property)) item.fail(item.at('property'), problem);
    }
    return {
      source,
      property,
      comparison: item.oneOf('comparison', COMPARISONS, { required: true }) ?? 'EQUALS',
      target: typeof target === 'number' || typeof target === 'boolean' ? String(target) : (item.string('target', { default: '' }) ?? ''),
      regex,
    };
  });
}

/**
 * A check's assertions: its own `assertions`, or its `request.assertions`
 * when it has none of its own (where the service's API puts them). Read from
 * neither, a definition written the service's way would run without its
 * assertions and a failing target would look healthy. Given in both, which
 * list is meant cannot be told: a problem naming both.
 */
export function parseCheckAssertions(check: Fields, request: Fields, sources: readonly string[]): Assertion[] {
  if (!request.has('assertions')) return parseAssertions(check, sources);
  if (check.has('assertions')) {
    request.fail(request.at('assertions'), `is given as well as ${check.at('assertions')}: give the check's assertions in one of them`);
    return [];
  }
  return parseAssertions(request, sources);
}

function asNumber(value: unknown): number | null {
  if (typeof value === 'number') return Number.isFinite(value) ? value : null;
  if (typeof value === 'string' && value.trim() !== '') {
    const n = Number(value);
    return Number.isFinite(n) ? n : null;
  }
  return null;
}

/** The text a comparison or a regex sees for `value`: a string as is, anything else as JSON. */
export function asText(value: unknown): string {
  if (value === null || value === undefined) return '';
  // evaluate() refuses values nested past MAX_DOCUMENT_DEPTH; JSON.stringify copes with those.
  return typeof value === 'string' ? value : JSON.stringify(value);
}

function isEmpty(value: unknown): boolean {
  if (value === null || value === undefined) return true;
  if (typeof value === 'string' || Array.isArray(value)) return value.length === 0;
  if (typeof value === 'object') return Object.keys(value).length === 0;
  return false;
}

/**
 * Compares one actual value with the assertion's target.
 * Numbers compare as numbers when both sides parse as finite numbers
 * ("200" EQUALS 200.0 holds); otherwise as strings, case-sensitively.
 */
export function compare(comparison: Comparison, actual: unknown, target: string): boolean {
  const a = asNumber(actual);
  const t = asNumber(target);
  const numeric = a !== null && t !== null;
  switch (comparison) {
    case 'EQUALS':
      return numeric ? a === t : asText(actual) === target;
    case 'NOT_EQUALS':
      return numeric ? a !== t : asText(actual) !== target;
    case 'GREATER_THAN':
      return numeric ? a > t : false;
    case 'LESS_THAN':
      return numeric ? a < t : false;
    case 'CONTAINS':
      return asText(actual).includes(target);
    case 'NOT_CONTAINS':
      return !asText(actual).includes(target);
    case 'IS_EMPTY':
      return isEmpty(actual);
    case 'NOT_EMPTY':
      return !isEmpty(actual);
    case 'IS_NULL':
      return actual === null || actual === undefined;
    case 'NOT_NULL':
      return actual !== null && actual !== undefined;
    case 'HAS_KEY':
      return actual !== null && typeof actual === 'object' && Object.hasOwn(actual, target);
    case 'NOT_HAS_KEY':
      return !(actual !== null && typeof actual === 'object' && Object.hasOwn(actual, target));
    case 'HAS_VALUE':
      return hasValue(actual, target);
    case 'NOT_HAS_VALUE':
      return !hasValue(actual, target);
  }
}

function hasValue(actual: unknown, target: string): boolean {
  if (actual === null || typeof actual !== 'object') return false;
  return Object.values(actual).some((v) => compare('EQUALS', v, target));
}

/**
 * Where a regex capture came from: the value the regex ran on (the node itself, not its text: a
 * JSONPath selects every level of a nested document, and a JSON copy of each would hold the document
 * once per level), and the range, in asText(node), of the whole match the capture was taken from
 * (the capture lies within it).
 */
export interface CaptureOrigin {
  node: unknown;
  start: number;
  end: number;
}

/**
 * The origin of each regex capture in an outcome (one entry per value of
 * `actual`: one, or one per JSONPath node), kept beside the outcome rather
 * than in it so that it never reaches a result. The job queue reads it to
 * withhold captures that are pieces of a secret (src/jobs/captures.ts).
 */
const captureOrigins = new WeakMap<object, ReadonlyArray<CaptureOrigin | undefined>>();

export function captureOriginsOf(outcome: object): ReadonlyArray<CaptureOrigin | undefined> | undefined {
  return captureOrigins.get(outcome);
}

/**
 * Applies `regex` to the value's text (first capture group, else the whole match; no match → null),
 * with where the match lies in that text. Throws
 * CheckRegexError for a pattern that could take more than linear time, more than MAX_REGEX_WORK on
 * this text, or more than the matches' time limit (./bounded-match.ts).
 */
export function extractWithOrigin(regex: string | null, value: unknown): { value: unknown; origin?: CaptureOrigin } {
  if (!regex) return { value };
  const compiled = compileCheckRegex(regex);
  const source = asText(value);
  const patternLength = workLength(regex, compiled);
  if (patternLength * source.length > MAX_REGEX_WORK) throw tooMuchWork(regex, patternLength, source.length, MAX_REGEX_WORK);
  // Not the `d` flag for the capture's own range: V8 runs `d` patterns on the backtracking engine only,
  // without the linear fallback that bounds a hostile pattern (src/checks/assertions/regex.ts).
  const match = matchesWithin(
    source.length,
    patternLength,
    () => execCheckRegex(compiled, source),
    () => tooSlow(regex, `${source.length} characters of text`),
  );
  if (!match) return { value: null };
  return { value: match[1] ?? match[0], origin: { node: value, start: match.index, end: match.index + match[0].length } };
}

/** Records where an outcome's captures came from (see captureOriginsOf). */
export function recordCaptureOrigins(outcome: AssertionOutcome, origins: ReadonlyArray<CaptureOrigin | undefined>): AssertionOutcome {
  if (origins.some((o) => o !== undefined)) captureOrigins.set(outcome, origins);
  return outcome;
}

/** Why `actual` cannot be evaluated (and reported in a result), or null; `what` names it in the reason. */
export function unevaluable(actual: unknown, what = 'the value'): string | null {
  return nestedDeeperThan(actual, MAX_DOCUMENT_DEPTH) ? `${what} is nested deeper than ${MAX_DOCUMENT_DEPTH} levels` : null;
}

export function evaluate(assertion: Assertion, actual: unknown): AssertionOutcome {
  const problem = unevaluable(actual);
  if (problem) return { ...assertion, actual: null, passed: false, error: problem };
  let extracted: ReturnType<typeof extractWithOrigin>;
  try {
    extracted = extractWithOrigin(assertion.regex, actual);
  } catch (error) {
    if (!(error instanceof CheckRegexError)) throw error;
    return { ...assertion, actual: null, passed: false, error: error.message };
  }
  const { value, origin } = extracted;
  return recordCaptureOrigins({ ...assertion, actual: value, passed: compare(assertion.comparison, value, assertion.target) }, [origin]);
}
