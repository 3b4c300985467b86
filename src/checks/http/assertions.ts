// Assertion sources of HTTP checks: which value each source yields from an
// exchange. Comparison rules live in assertions.ts.

import { type Assertion, type AssertionOutcome, evaluate } from '../assertions/assertions.js';
import type { Exchange } from './exchange.js';
import { withMatchBudget } from '../assertions/bounded-match.js';
import { evaluateJsonPath } from '../assertions/jsonpath.js';

export const HTTP_ASSERTION_SOURCES = ['STATUS_CODE', 'JSON_BODY', 'HEADERS', 'TEXT_BODY', 'RESPONSE_TIME'] as const;

function headerValue(headers: Exchange['headers'], name: string): string | null {
  const key = name.toLowerCase();
  // Own headers only: `constructor` or `__proto__` must not find Object.prototype's members.
  if (!Object.hasOwn(headers, key)) return null;
  const value = headers[key];
  if (value === undefined) return null;
  return Array.isArray(value) ? value.join(', ') : value;
}

export function evaluateHttpAssertions(assertions: Assertion[], exchange: Exchange, responseTime: number): AssertionOutcome[] {
  let text: string | undefined;
  const bodyText = () => {
    text ??= exchange.body.toString('utf8');
    return text;
  };
  let parsed: { value?: unknown; error?: string } | undefined;
  const json = () => {
    if (!parsed) {
      try {
        parsed = exchange.bodyTruncated
          ? { error: `body was truncated at ${exchange.body.length} bytes; JSON_BODY needs the whole body` }
          : { value: JSON.parse(bodyText()) };
      } catch (error) {
        parsed = { error: `body is not JSON (${(error as Error).message})` };
      }
    }
    return parsed;
  };
  return withMatchBudget(() => assertions.map((assertion) => {
    switch (assertion.source) {
      case 'STATUS_CODE':
        return evaluate(assertion, exchange.status ?? null);
      case 'RESPONSE_TIME':
        return evaluate(assertion, Math.round(responseTime));
      case 'TEXT_BODY':
        return evaluate(assertion, bodyText());
      case 'HEADERS':
        // With a property: that header's value (case-insensitive name); without: all headers, for HAS_KEY and friends.
        return evaluate(assertion, assertion.property ? headerValue(exchange.headers, assertion.property) : exchange.headers);
      case 'JSON_BODY':
        return json().error ? { ...assertion, actual: null, passed: false, error: json().error } : evaluateJsonPath(assertion, json().value);
      default:
        return { ...assertion, actual: null, passed: false, error: `source ${assertion.source} does not apply to HTTP checks` };
    }
  }));
}
