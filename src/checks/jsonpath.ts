// JSONPath (RFC 9535) through jsonpath-rfc9535, which parses expressions
// itself and never evaluates code from a check definition.

import { query } from 'jsonpath-rfc9535';

export type JsonPathResult = { ok: true; values: unknown[] } | { ok: false; error: string };

/** Every node the expression selects, in document order; a bad expression is an error, not an exception. */
export function queryJsonPath(document: unknown, expression: string): JsonPathResult {
  try {
    return { ok: true, values: query(document as Parameters<typeof query>[0], expression) as unknown[] };
  } catch (error) {
    return { ok: false, error: `invalid JSONPath ${JSON.stringify(expression)}: ${(error as Error).message}` };
  }
}
