// JSONPath (RFC 9535) through jsonpath-rfc9535, which parses expressions
// itself and never evaluates code from a check definition. Its match() and
// search() run in linear time (./jsonpath-regex.ts).

import { query } from 'jsonpath-rfc9535';
import { type Assertion, type AssertionOutcome, asText, compare, evaluate, extractWithOrigin, recordCaptureOrigins, unevaluable } from './assertions.js';
import { matchesWithin } from './bounded-match.js';
import { withPatternBudget } from './jsonpath-regex.js';
import { countedView, QueryTooLarge } from './jsonpath-steps.js';
import { CheckRegexError, compileCheckRegex, tooSlow, workLength } from './regex.js';

export type JsonPathResult = { ok: true; values: unknown[] } | { ok: false; error: string };

/** Every node the expression selects, in document order; a bad expression is an error, not an exception. */
export function queryJsonPath(document: unknown, expression: string): JsonPathResult {
  // The query recurses through the document: one nested past the bound is refused, not a stack overflow.
  const problem = unevaluable(document, 'the document');
  if (problem) return { ok: false, error: `cannot evaluate JSONPath ${JSON.stringify(expression)}: ${problem}` };
  try {
    // Without a descendant segment or a list of selectors no node can be selected twice: the result is at most
    // the document. Other queries read it through a counting view that stops them (./jsonpath-steps.ts).
    if (!mayRepeat(expression)) {
      return { ok: true, values: withPatternBudget(expression, () => query(document as Parameters<typeof query>[0], expression) as unknown[]) };
    }
    const { view, unwrap } = countedView(document);
    const selected = withPatternBudget(expression, () => query(view as Parameters<typeof query>[0], expression) as unknown[]);
    return { ok: true, values: selected.map(unwrap) };
  } catch (error) {
    if (error instanceof CheckRegexError) return { ok: false, error: `cannot evaluate JSONPath ${JSON.stringify(expression)}: ${error.message}` };
    if (error instanceof QueryTooLarge) {
      return { ok: false, error: `JSONPath ${JSON.stringify(expression)} ${error.message}: select less (fewer descendant segments \`..\`, or no repeated selectors)` };
    }
    return { ok: false, error: `invalid JSONPath ${JSON.stringify(expression)}: ${(error as Error).message}` };
  }
}

/**
 * Whether a query may select a node more than once, or read the whole document once per node: a second
 * descendant segment `..` (each node once per ancestor), a `,` (a selector list), or a second `$` (a
 * filter's query from the root). One `..` selects each node at most once, reading each a few times.
 * Also inside a string: that only costs the count.
 */
function mayRepeat(expression: string): boolean {
  const descendant = expression.indexOf('..');
  return (descendant >= 0 && expression.indexOf('..', descendant + 2) >= 0) || expression.includes(',') || expression.indexOf('$') !== expression.lastIndexOf('$');
}

/**
 * A JSONPath assertion (JSON_BODY, JSON_ANSWER, JSON_RESPONSE): `property` is
 * the expression (`$` when empty). When it selects several nodes the
 * comparison must hold for each; when it selects none the value is null, so
 * IS_NULL holds and EQUALS does not. An invalid expression fails with the reason.
 */
export function evaluateJsonPath(assertion: Assertion, document: unknown): AssertionOutcome {
  const found = queryJsonPath(document, assertion.property || '$');
  if (!found.ok) return { ...assertion, actual: null, passed: false, error: found.error };
  if (found.values.length <= 1) return evaluate(assertion, found.values[0] ?? null);
  let extracted: Array<ReturnType<typeof extractWithOrigin>>;
  try {
    extracted = extractEach(assertion.regex, found.values);
  } catch (error) {
    if (!(error instanceof CheckRegexError)) throw error;
    return { ...assertion, actual: null, passed: false, error: error.message };
  }
  const actual = extracted.map((e) => e.value);
  return recordCaptureOrigins(
    { ...assertion, actual, passed: actual.every((value) => compare(assertion.comparison, value, assertion.target)) },
    extracted.map((e) => e.origin),
  );
}

/** The regex applied to each selected node; one time limit covers them all (./bounded-match.ts). */
function extractEach(regex: string | null, values: unknown[]): Array<ReturnType<typeof extractWithOrigin>> {
  if (!regex) return values.map((value) => ({ value }));
  // An object node's text is its JSON, as long as the node is deep: measuring it first would hold
  // the text of every level at once (a nested document's size × its depth). Such nodes are bounded.
  let length = 0;
  for (const value of values) length += typeof value === 'object' && value !== null ? Number.POSITIVE_INFINITY : asText(value).length;
  return matchesWithin(
    length,
    workLength(regex, compileCheckRegex(regex)),
    () => values.map((value) => extractWithOrigin(regex, value)),
    () => tooSlow(regex, `the ${values.length} values selected`),
  );
}
