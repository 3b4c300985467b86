// Regex captures that are pieces of a secret are withheld (docs/secrets.md).
//
// An assertion's `actual` is scrubbed like the rest of a result, but a regex
// capture can be a short fragment (`.{3}(.{3})`) that no scrubber pattern
// matches: a check echoing a secret back could then read it a few characters
// per assertion. So, when a job has secrets, a capture whose match overlaps a
// place where a secret (in any form the scrubber knows) occurs in the text the
// regex ran on is replaced by CAPTURE_WITHHELD, and its assertion fails.
// A capture is not withheld merely for being a few characters that also occur
// in a secret: in agent mode API_KEY is one, and nearly every one- or
// two-character capture (a digit, a version) would fail for nothing.

import type { AssertionOutcome, CaptureOrigin } from '../checks/assertions/assertions.js';
import { asText, captureOriginsOf } from '../checks/assertions/assertions.js';
import type { Outcome } from '../core/outcome.js';
import type { Scrubber } from '../secrets/scrubber.js';

/** What a withheld capture reads as in the result. */
export const CAPTURE_WITHHELD = '[REDACTED]';

export const CAPTURE_WITHHELD_ERROR =
  'the regex capture is withheld: it overlaps a secret of this job, so it is neither shown nor compared; capture text that holds no secret';

/**
 * Where secrets occur in each node's text, by node: the text of an object node is made again here,
 * one node at a time, and dropped once scanned, so that no copy of it outlives the scan.
 */
type RunsByNode = Map<unknown, { starts: readonly number[]; ends: readonly number[] }>;

function overlapsSecret(origin: CaptureOrigin, scrubber: Scrubber, runsByNode: RunsByNode): boolean {
  let runs = runsByNode.get(origin.node);
  if (runs === undefined) {
    runs = scrubber.findRuns(asText(origin.node));
    runsByNode.set(origin.node, runs);
  }
  const { starts, ends } = runs;
  for (let i = 0; i < starts.length; i++) {
    // An empty capture overlaps a run it sits strictly inside.
    if ((starts[i] as number) < Math.max(origin.end, origin.start + 1) && origin.start < (ends[i] as number)) return true;
  }
  return false;
}

function withheld(origin: CaptureOrigin | undefined, scrubber: Scrubber, runsByNode: RunsByNode): boolean {
  if (origin === undefined) return false;
  return overlapsSecret(origin, scrubber, runsByNode);
}

/** Withholds, in place, the captures of `outcome`'s assertions that overlap a secret, failing those assertions. */
export function guardCaptures(outcome: Outcome, scrubber: Scrubber): void {
  const assertions = outcome.detail.assertions;
  if (scrubber.secretCount === 0 || !Array.isArray(assertions)) return;
  const runsByNode: RunsByNode = new Map();
  for (const item of assertions as unknown[]) {
    if (item === null || typeof item !== 'object') continue;
    const origins = captureOriginsOf(item);
    if (origins === undefined) continue;
    const assertion = item as AssertionOutcome;
    let hit = false;
    if (Array.isArray(assertion.actual)) {
      assertion.actual = assertion.actual.map((value: unknown, i) => {
        if (!withheld(origins[i], scrubber, runsByNode)) return value;
        hit = true;
        return CAPTURE_WITHHELD;
      });
    } else if (withheld(origins[0], scrubber, runsByNode)) {
      hit = true;
      assertion.actual = CAPTURE_WITHHELD;
    }
    if (hit) {
      assertion.passed = false;
      assertion.error = CAPTURE_WITHHELD_ERROR;
      outcome.assertionsFailed = true;
    }
  }
}
