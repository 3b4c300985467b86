// Assertions as a check definition holds them, and the validation messages a list of them gets.

import { type Assertion, parseAssertions } from '../../src/checks/assertions/assertions.js';
import { DefinitionError, Fields } from '../../src/checks/fields.js';

/** A TEXT_BODY EQUALS "x" assertion with `extra` over it. */
export function assertion(extra: Partial<Assertion>): Assertion {
  return { source: 'TEXT_BODY', property: '', comparison: 'EQUALS', target: 'x', regex: null, ...extra };
}

/** What validating `assertions` (raw, as in a checks file) under `check` says; '' when they are valid. */
export function assertionProblems(assertions: unknown[], sources = ['TEXT_BODY', 'JSON_BODY']): string {
  const fields = Fields.root({ assertions }, 'check');
  parseAssertions(fields, sources);
  try {
    fields.assertValid();
  } catch (error) {
    if (error instanceof DefinitionError) return error.message;
    throw error;
  }
  return '';
}
