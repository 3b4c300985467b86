// The service environment of a run (`ctx.serviceEnv`): variables that tell a
// scripted check how it was started. Runtimes put them in the
// script's environment; uptime executors ignore them.
//
//   OUTPOST=true  on every run Outpost executes, in every mode: it marks "run
//                 by the agent" (as opposed to a developer running the script
//                 by hand), not "triggered by the service";
//   CI=true       only when the control plane triggered the run as a test
//                 (triggerSource TEST_NO_RECORD or TEST_RECORD); absent
//                 otherwise — scheduled, API, deployment and manual runs, and
//                 every local/once run (they have no trigger source).

/** Trigger sources of test runs (CI=true). */
export const TEST_TRIGGER_SOURCES: ReadonlySet<string> = new Set(['TEST_NO_RECORD', 'TEST_RECORD']);

export function serviceEnvironment(triggerSource: string | null | undefined): Record<string, string> {
  const env: Record<string, string> = { OUTPOST: 'true' };
  if (typeof triggerSource === 'string' && TEST_TRIGGER_SOURCES.has(triggerSource)) env.CI = 'true';
  return env;
}
