// What an executor is given to diagnose a network failure: the
// attempt's artifact directory, and a diagnostics window with its own time
// budget, which the queue honours even past the check's hard cap.

import type { ArtifactWriter } from '../artifacts/writer.js';

/**
 * The most time diagnostics may take after a failed request
 * (docs/diagnostics.md): start the capture ≤ 3 s, repeat the request
 * ≤ 5 s, stop the capture ≤ 2 s, traceroute ≤ 8 s, and some slack.
 */
export const DIAGNOSTICS_BUDGET_MS = 20_000;

export interface DiagnosticsHooks {
  /** This attempt's artifact directory. */
  readonly artifacts: ArtifactWriter;
  /**
   * Opens the diagnostics window: a signal aborted when the job is (lease
   * lost, shutdown) or when the budget (DIAGNOSTICS_BUDGET_MS) is spent.
   * Undefined when the job was aborted already.
   */
  begin(): AbortSignal | undefined;
}
