// MULTI_STEP check (issue #8): a script on a runtime, using playwright-core's
// API request contexts (no browser), with `step(name, fn)` and `expect` from
// the harness. Each request made through a context is recorded with its step.

import { resolveRuntime, RuntimeError, runtimesDir } from '../runtimes/runtimes.js';
import type { CheckDefinition } from './definition.js';
import type { ExecutionContext, Executor, Outcome } from './executor.js';
import type { Fields } from './fields.js';
import { runScript, SCRIPT_CAP_MS } from './script.js';
import { BROWSER_TIMEOUT_GRACE_MS, MULTI_STEP_TIMEOUT_GRACE_MS } from './script-harness.js';

export interface ScriptedRequest {
  script: string;
  runtimeId?: string;
}

export const MAX_SCRIPT_LENGTH = 1_000_000;
/** Starting the child process and handing over its files, beyond the script's own time. */
const PROCESS_START_MS = 2_000;

/** `script` sits on the check (as the service has it) or, also accepted, in `request`. */
export function parseScriptedRequest(fields: Fields, check: Fields): ScriptedRequest {
  const source = check.has('script') ? check : fields;
  const script = source.string('script', { required: true, minLength: 1, maxLength: MAX_SCRIPT_LENGTH }) ?? '';
  const runtimeId = check.string('runtimeId', { minLength: 1, maxLength: 100 }) ?? fields.string('runtimeId', { minLength: 1, maxLength: 100 });
  return { script, ...(runtimeId !== undefined ? { runtimeId } : {}) };
}

function detail(ctx: ExecutionContext, extra: Record<string, unknown>): Record<string, unknown> {
  return { assertions: [], request: null, response: null, requestError: null, failingStep: null, steps: [], requests: [], jobLog: ctx.jobLog, jobAssets: [], ...extra };
}

type ScriptedType = 'MULTI_STEP' | 'BROWSER';
type ScriptedMember = 'multiStepCheckResult' | 'browserCheckResult';

const runMultiStep = (check: CheckDefinition<ScriptedRequest>, ctx: ExecutionContext) => runScripted('MULTI_STEP', 'multiStepCheckResult', check, ctx);

async function runScripted(checkType: ScriptedType, member: ScriptedMember, check: CheckDefinition<ScriptedRequest>, ctx: ExecutionContext): Promise<Outcome> {
  const startedAt = new Date();
  let runtime: ReturnType<typeof resolveRuntime>;
  try {
    runtime = resolveRuntime(check.request.runtimeId, ctx.settings.runtimesDir ?? runtimesDir());
  } catch (error) {
    if (!(error instanceof RuntimeError)) throw error;
    ctx.jobLog.push(error.message);
    return { startedAt, stoppedAt: new Date(), responseTime: 0, error: error.message, assertionsFailed: false, member, detail: detail(ctx, { requestError: error.message }) };
  }
  if (runtime.stage === 'DEPRECATED') ctx.jobLog.push(`Runtime ${runtime.name} is DEPRECATED (end of life ${runtime.runtimeEndOfLife})`);
  const run = await runScript(
    { kind: checkType, code: check.request.script, runtime, timeoutMs: check.maxResponseTime, environment: ctx.variables.entries() },
    ctx,
  );
  const failure = run.ok ? undefined : run.error;
  if (failure) ctx.jobLog.push(failure);
  return {
    startedAt: run.startedAt,
    stoppedAt: run.stoppedAt,
    responseTime: run.durationMs,
    // An assertion that failed is a failure of the target; anything else the script threw is an error.
    ...(failure !== undefined && !run.assertion ? { error: failure } : {}),
    assertionsFailed: failure !== undefined && run.assertion,
    member,
    detail: detail(ctx, {
      runtimeId: runtime.name,
      requestError: failure ?? null,
      failingStep: run.step ?? null,
      steps: run.steps,
      requests: run.requests,
      ...(checkType === 'BROWSER' ? { pageErrors: run.pageErrors ?? [], consoleMessages: run.consoleMessages ?? [] } : {}),
    }),
  };
}

export const multiStepExecutor: Executor<ScriptedRequest> = {
  checkType: 'MULTI_STEP',
  member: 'multiStepCheckResult',
  // The script's wall-clock limit is maxResponseTime (4 min cap); the queue's cap allows for the run's
  // own stop at its limit, process start and teardown.
  limits: { degradedMs: 60_000, maxMs: SCRIPT_CAP_MS, capMs: SCRIPT_CAP_MS + MULTI_STEP_TIMEOUT_GRACE_MS + 10_000 },
  assertionSources: [],
  expectedMs: (check) => Math.min(check.maxResponseTime, SCRIPT_CAP_MS) + MULTI_STEP_TIMEOUT_GRACE_MS + PROCESS_START_MS,
  parseRequest: parseScriptedRequest,
  target: (request) => `script on runtime ${request.runtimeId ?? 'CURRENT'}`,
  run: runMultiStep,
};

/**
 * BROWSER check: the same script runner, with playwright-core's `chromium.launch()`
 * defaulting to the agent's Chromium (headless, no sandbox: the agent runs unprivileged
 * in a container). Registered only when a Chromium is found (src/checks/registry.ts).
 */
export const browserExecutor: Executor<ScriptedRequest> = {
  checkType: 'BROWSER',
  member: 'browserCheckResult',
  limits: { degradedMs: 60_000, maxMs: SCRIPT_CAP_MS, capMs: SCRIPT_CAP_MS + BROWSER_TIMEOUT_GRACE_MS + 10_000 },
  assertionSources: [],
  expectedMs: (check) => Math.min(check.maxResponseTime, SCRIPT_CAP_MS) + BROWSER_TIMEOUT_GRACE_MS + PROCESS_START_MS,
  parseRequest: parseScriptedRequest,
  target: (request) => `browser script on runtime ${request.runtimeId ?? 'CURRENT'}`,
  run: (check, ctx) => runScripted('BROWSER', 'browserCheckResult', check, ctx),
};
