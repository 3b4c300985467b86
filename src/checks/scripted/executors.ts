// Scripted checks, each a script on a runtime run by the script
// runner (runner.ts): MULTI_STEP (playwright-core's API request contexts, no
// browser, with `step(name, fn)` and `expect` from the harness; each request
// made through a context is recorded with its step), BROWSER (the same, with
// the agent's Chromium) and PLAYWRIGHT (a @playwright/test suite: `script` is
// its spec, `files` the rest; one step per test).

import { hasSuiteRunner, isRemoved, listRuntimes, resolveRuntime, RuntimeError, runtimeNotices, runtimesDir, SUITE_RUNNER_PACKAGE } from './runtimes.js';
import type { CheckDefinition } from '../definition.js';
import type { ExecutionContext, Executor } from '../executor.js';
import type { Outcome } from '../../core/outcome.js';
import type { Fields } from '../fields.js';
import { runScript, SCRIPT_CAP_MS, type ScriptRun, SUITE_SPEC_FILE, type SuiteFile, timeoutGraceMs } from './runner.js';
import { suiteDependencies, type SuiteDependencies } from './dependencies/lockfile.js';
import { DEPENDENCY_INSTALL_TIMEOUT_MAX_MS, type DependencyReport, prepareDependencies } from './dependencies/prepare.js';

export interface ScriptedRequest {
  script: string;
  runtimeId?: string;
  /** PLAYWRIGHT only. */
  files?: SuiteFile[];
  /** The check's `secretDetection`: on or off for this check whatever SECRET_DETECTION says; absent, SECRET_DETECTION decides. */
  secretDetection?: boolean;
  /** PLAYWRIGHT only: the suite's package.json and lockfile, installed before it runs. */
  dependencies?: SuiteDependencies;
}

/** A PLAYWRIGHT suite's files: at most this many, this large each, this large together. */
export const SUITE_FILES_MAX = 50;
export const SUITE_FILE_MAX_LENGTH = 1_000_000;
export const SUITE_FILES_TOTAL_LENGTH = 5_000_000;
/** Relative, at most 5 levels, plain segments that do not start with a dot (no `..`, no hidden files). */
const SUITE_FILE_PATH = /^(?:[A-Za-z0-9_][A-Za-z0-9._-]*\/){0,4}[A-Za-z0-9_][A-Za-z0-9._-]*$/;

export const MAX_SCRIPT_LENGTH = 1_000_000;
/** Starting the child process and handing over its files, beyond the script's own time. */
const PROCESS_START_MS = 2_000;

/** `script` sits on the check (as the service has it) or, also accepted, in `request`. */
export function parseScriptedRequest(fields: Fields, check: Fields): ScriptedRequest {
  // Missing everywhere: said at the check, where the service puts it.
  const source = fields.has('script') && !check.has('script') ? fields : check;
  const script = source.string('script', { required: true, minLength: 1, maxLength: MAX_SCRIPT_LENGTH }) ?? '';
  const runtimeId = check.string('runtimeId', { minLength: 1, maxLength: 100 }) ?? fields.string('runtimeId', { minLength: 1, maxLength: 100 });
  const detectionAt = check.has('secretDetection') ? check : fields.has('secretDetection') ? fields : undefined;
  const secretDetection = detectionAt?.boolean('secretDetection', false);
  return { script, ...(runtimeId !== undefined ? { runtimeId } : {}), ...(secretDetection !== undefined ? { secretDetection } : {}) };
}

/** A PLAYWRIGHT check: `script` (the spec) and `files` ([{path, content}]), on the check or in `request`. */
export function parseSuiteRequest(fields: Fields, check: Fields): ScriptedRequest {
  const request = parseScriptedRequest(fields, check);
  const source = check.has('files') ? check : fields;
  const list = source.list('files');
  if (list.length > SUITE_FILES_MAX) source.fail(source.at('files'), `must have at most ${SUITE_FILES_MAX} files (got ${list.length})`);
  const files: SuiteFile[] = [];
  const seen = new Set<string>([SUITE_SPEC_FILE]);
  let total = 0;
  for (const item of list) {
    const givenPath = item.string('path', { required: true, minLength: 1, maxLength: 200 }) ?? '';
    // A path over the limit is already a problem; testing it against SUITE_FILE_PATH would take quadratic time.
    const filePath = givenPath.length > 200 ? '' : givenPath;
    const content = item.string('content', { required: true, maxLength: SUITE_FILE_MAX_LENGTH }) ?? '';
    total += content.length;
    if (filePath && !SUITE_FILE_PATH.test(filePath)) {
      item.fail(item.at('path'), `must be a relative path of plain names (letters, digits, . _ -; not starting with a dot; at most 5 levels), got ${JSON.stringify(filePath)}`);
    } else if (filePath && seen.has(filePath)) {
      item.fail(item.at('path'), filePath === SUITE_SPEC_FILE ? `${SUITE_SPEC_FILE} is the spec that \`script\` becomes` : `${filePath} is given twice`);
    }
    if (SUITE_FILE_PATH.test(filePath)) seen.add(filePath);
    files.push({ path: filePath, content });
  }
  // A file cannot also be a folder of another (`a` and `a/b.ts`), the spec included.
  list.forEach((item, index) => {
    const filePath = files[index]?.path ?? '';
    if (!SUITE_FILE_PATH.test(filePath)) return;
    const segments = filePath.split('/');
    for (let depth = 1; depth < segments.length; depth++) {
      const folder = segments.slice(0, depth).join('/');
      if (seen.has(folder)) {
        item.fail(item.at('path'), `${filePath} puts a file inside ${folder}, which is a file of the suite`);
        break;
      }
    }
  });
  if (total > SUITE_FILES_TOTAL_LENGTH) source.fail(source.at('files'), `must hold at most ${SUITE_FILES_TOTAL_LENGTH} characters in all (got ${total})`);
  // Install scripts are the suite's code run by its package manager: off unless the check says so.
  const scriptsSource = check.has('allowInstallScripts') || !fields.has('allowInstallScripts') ? check : fields;
  const allowScripts = scriptsSource.boolean('allowInstallScripts', false);
  const dependencies = suiteDependencies(files, allowScripts);
  if (typeof dependencies === 'string') source.fail(source.at('files'), dependencies);
  // The suite's node_modules is the installed one, with the runner's @playwright/test first in it.
  if (dependencies && typeof dependencies !== 'string') {
    files.forEach((file, index) => {
      if (file.path.startsWith('node_modules/')) list[index]?.fail(list[index].at('path'), 'node_modules is made from package.json and the lockfile: it cannot be given as files');
    });
  }
  return { ...request, ...(files.length > 0 ? { files } : {}), ...(dependencies && typeof dependencies !== 'string' ? { dependencies } : {}) };
}

function detail(ctx: ExecutionContext, extra: Record<string, unknown>): Record<string, unknown> {
  return { assertions: [], request: null, response: null, requestError: null, failingStep: null, steps: [], requests: [], jobLog: ctx.jobLog, jobAssets: [], ...extra };
}

type ScriptedType = 'MULTI_STEP' | 'BROWSER' | 'PLAYWRIGHT';

/** BROWSER and PLAYWRIGHT results always carry their pages' errors and console messages (empty when none ran). */
function pageFields(checkType: ScriptedType, run?: ScriptRun): Record<string, unknown> {
  return checkType === 'MULTI_STEP' ? {} : { pageErrors: run?.pageErrors ?? [], consoleMessages: run?.consoleMessages ?? [] };
}
type ScriptedMember = 'multiStepCheckResult' | 'browserCheckResult';

/** A PLAYWRIGHT suite's verdict, as its report header states it. */
export type SuiteStatus = 'PASSED' | 'DEGRADED' | 'FAILED';

/**
 * The header of a PLAYWRIGHT suite's report: FAILED when a test did not pass or the suite could not
 * run, DEGRADED when every test passed but the run took longer than degradedResponseTime, else PASSED.
 * Judged on the run's duration as src/results/result.ts judges the result, so header and isDegraded agree.
 */
export function suiteHeader(run: ScriptRun, check: Pick<CheckDefinition, 'degradedResponseTime' | 'maxResponseTime'>): { status: SuiteStatus; line: string } {
  const durationMs = Math.max(0, Math.round(run.durationMs));
  const failed = !run.ok || durationMs > check.maxResponseTime;
  const status: SuiteStatus = failed ? 'FAILED' : durationMs > check.degradedResponseTime ? 'DEGRADED' : 'PASSED';
  const tests = run.tests;
  const counts = tests ? `${tests.expected} passed, ${tests.unexpected} failed, ${tests.flaky} flaky, ${tests.skipped} skipped` : 'no test report';
  const why =
    status === 'DEGRADED'
      ? `, over degradedResponseTime ${check.degradedResponseTime.toLocaleString('en-US')} ms`
      : status === 'FAILED' && run.ok
        ? `, over maxResponseTime ${check.maxResponseTime.toLocaleString('en-US')} ms`
        : '';
  return { status, line: `Suite ${status}: ${counts} in ${durationMs.toLocaleString('en-US')} ms${why}` };
}


async function runScripted(checkType: ScriptedType, member: ScriptedMember, check: CheckDefinition<ScriptedRequest>, ctx: ExecutionContext): Promise<Outcome> {
  const startedAt = new Date();
  let runtime: ReturnType<typeof resolveRuntime>;
  try {
    runtime = resolveRuntime(check.request.runtimeId, ctx.settings.runtimesDir ?? runtimesDir());
  } catch (error) {
    if (!(error instanceof RuntimeError)) throw error;
    ctx.jobLog.push(error.message);
    return { startedAt, stoppedAt: new Date(), responseTime: 0, error: error.message, assertionsFailed: false, member, detail: detail(ctx, { requestError: error.message, ...pageFields(checkType) }) };
  }
  ctx.jobLog.push(...runtimeNotices(runtime));
  if (checkType === 'PLAYWRIGHT' && !hasSuiteRunner(runtime)) {
    const withRunner = listRuntimes(ctx.settings.runtimesDir ?? runtimesDir())
      .runtimes.filter((r) => !isRemoved(r) && r.installed && hasSuiteRunner(r))
      .map((r) => r.name);
    const message = `Runtime ${runtime.name} has no ${SUITE_RUNNER_PACKAGE}, which PLAYWRIGHT checks run with (runtimes that have it: ${withRunner.join(', ') || 'none'})`;
    ctx.jobLog.push(message);
    return { startedAt, stoppedAt: new Date(), responseTime: 0, error: message, assertionsFailed: false, member, detail: detail(ctx, { runtimeId: runtime.name, requestError: message, ...pageFields(checkType) }) };
  }
  let dependencies: Awaited<ReturnType<typeof prepareDependencies>> | undefined;
  if (checkType === 'PLAYWRIGHT' && check.request.dependencies) {
    dependencies = await prepareDependencies(check.request.dependencies, runtime, ctx);
    if (!dependencies.ok) {
      const message = dependencies.error;
      ctx.jobLog.push(message);
      return {
        startedAt,
        stoppedAt: new Date(),
        responseTime: 0,
        error: message,
        assertionsFailed: false,
        member,
        detail: detail(ctx, { runtimeId: runtime.name, requestError: message, ...pageFields(checkType), tests: null, dependencies: dependencies.report }),
      };
    }
  }
  const headerAt = ctx.jobLog.length;
  let run: ScriptRun;
  try {
    run = await runScript(
      {
        kind: checkType,
        code: check.request.script,
        runtime,
        timeoutMs: check.maxResponseTime,
        environment: ctx.variables.entries(),
        ...(check.request.files ? { files: check.request.files } : {}),
        ...(dependencies?.ok ? { dependencies: dependencies.lease.dir } : {}),
        detectSecrets: check.request.secretDetection ?? ctx.settings.secretDetection === true,
      },
      ctx,
    );
  } finally {
    if (dependencies?.ok) dependencies.lease.release();
  }
  const report: DependencyReport | undefined = dependencies?.report;
  const failure = run.ok ? undefined : run.error;
  if (failure) ctx.jobLog.push(failure);
  // The suite's header opens what its run printed.
  const header = checkType === 'PLAYWRIGHT' ? suiteHeader(run, check) : undefined;
  if (header) ctx.jobLog.splice(headerAt, 0, header.line);
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
      ...pageFields(checkType, run),
      ...(header ? { tests: run.tests ?? null, suiteStatus: header.status } : {}),
      ...(run.detectedSecrets ? { detectedSecrets: run.detectedSecrets } : {}),
      ...(report ? { dependencies: report } : {}),
    }),
  };
}

/**
 * The three scripted executors differ only in type, result member, how `request` is read and what a
 * log line calls the target. The script's wall-clock limit is maxResponseTime (4 min cap); the queue's
 * cap allows for the run's own stop at its limit (its grace), process start and teardown.
 */
function scriptedExecutor(
  checkType: ScriptedType,
  member: ScriptedMember,
  parseRequest: (fields: Fields, check: Fields) => ScriptedRequest,
  what: string,
): Executor<ScriptedRequest> {
  const graceMs = timeoutGraceMs(checkType);
  // A PLAYWRIGHT suite may install its dependencies first: the cap allows for the longest install on top of its time limit.
  const installMs = checkType === 'PLAYWRIGHT' ? DEPENDENCY_INSTALL_TIMEOUT_MAX_MS : 0;
  return {
    checkType,
    member,
    limits: { degradedMs: 60_000, maxMs: SCRIPT_CAP_MS, capMs: SCRIPT_CAP_MS + graceMs + 10_000 + installMs, maxResponseTimeLimitMs: SCRIPT_CAP_MS },
    assertionSources: [],
    expectedMs: (check) => Math.min(check.maxResponseTime, SCRIPT_CAP_MS) + graceMs + PROCESS_START_MS + (check.request.dependencies ? installMs : 0),
    parseRequest,
    target: (request) => `${what} on runtime ${request.runtimeId ?? 'CURRENT'}`,
    run: (check, ctx) => runScripted(checkType, member, check, ctx),
  };
}

export const multiStepExecutor = scriptedExecutor('MULTI_STEP', 'multiStepCheckResult', parseScriptedRequest, 'script');

/**
 * BROWSER check: the same script runner, with playwright-core's `chromium.launch()`
 * defaulting to the agent's Chromium (headless, no sandbox: the agent runs unprivileged
 * in a container). Registered only when a Chromium is found (src/checks/registry.ts).
 */
export const browserExecutor = scriptedExecutor('BROWSER', 'browserCheckResult', parseScriptedRequest, 'browser script');

/**
 * PLAYWRIGHT check: a @playwright/test suite run by the runtime's own runner, on the agent's Chromium
 * (result member browserCheckResult, one step per test). Registered where BROWSER is and a runtime has
 * @playwright/test (src/checks/registry.ts).
 */
export const playwrightExecutor = scriptedExecutor('PLAYWRIGHT', 'browserCheckResult', parseSuiteRequest, 'Playwright suite');
