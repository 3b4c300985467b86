// A time limit on a check's regular-expression matches. Accepting only
// patterns V8's linear engine can run does not bound their time: V8 runs them on
// its backtracking engine (much faster on the usual patterns) and moves to the
// linear one only when a single attempt backtracks too much, so `.*a.*a` on a
// megabyte without an `a` takes tens of seconds, a little at each of a million
// start positions, all on the thread that runs the checks. Matches that could
// take long therefore run under node:vm's watchdog, which stops them when
// their time is up. Where the linear engine can be trusted to give the same
// match and to finish in time, a run stopped on the backtracking engine gets a
// second try there. See docs/regular-expressions.md.

import { performance } from 'node:perf_hooks';
import vm from 'node:vm';

/** Most time the matches of one check's assertions may take together, both engines included. */
export const MATCH_TIME_LIMIT_MS = 5_000;

/**
 * How long the backtracking engine may try before the same matches run again on the linear engine,
 * when they may (see linearRetry). The usual pattern reads megabytes in a few milliseconds there.
 */
export const BACKTRACKING_TRY_MS = 250;

/**
 * Text (summed over the values an assertion's regex reads) and work (pattern length, long counts
 * written out, × text length) up to which the matches run without a watchdog: starting one costs
 * 50–130 µs, and the slowest patterns measured take up to 43 ms within both bounds on Node.js 24
 * (124 ms on Node.js 20).
 */
export const UNWATCHED_TEXT_LENGTH = 8_192;
export const UNWATCHED_WORK = 1_000_000;

/** Time one check's assertions may spend in matches without a watchdog; past it, even short texts get one. */
export const UNWATCHED_TIME_MS = 100;

/**
 * Work the linear engine does per millisecond, taken low: 80,000–115,000 on plain patterns, 17,000–24,000
 * on counted groups (Node.js 24). A second try there is made only if it should end in time.
 */
const LINEAR_WORK_PER_MS = 20_000;

/**
 * Whether this V8's linear engine gives the match the backtracking engine gives. V8 13 (Node.js 24)
 * does on every pattern tried (test/unit/bounded-match.test.ts); V8 11.3 (Node.js 20) differs on
 * captures and sometimes on the match, so there a stopped run is never tried on it.
 */
export const LINEAR_RETRY = Number.parseInt(process.versions.v8, 10) >= 13;

/** Which engine a check's matches run on (see execCheckRegex in ./regex.ts). */
export type MatchEngine = 'backtracking' | 'linear';

/** Set while a bounded run runs: the engine its matches use, which its own watchdog bounds. */
let running: MatchEngine | null = null;

/** The engine the current bounded run has chosen, or null outside one (the backtracking engine then). */
export function boundedRunEngine(): MatchEngine | null {
  return running;
}

let context: vm.Context | undefined;
let script: vm.Script | undefined;

/** `run` under a watchdog of `limitMs`, its matches on `engine`; 'timed out' when the watchdog stopped it. */
function watched<T>(run: () => T, engine: MatchEngine, limitMs: number): { value: T } | 'timed out' {
  if (limitMs < 1) return 'timed out';
  context ??= vm.createContext({});
  script ??= new vm.Script('run()', { filename: 'outpost-bounded-match' });
  context.run = run;
  running = engine;
  try {
    // V8 terminates the script from the watchdog's thread: no catch or finally inside `run` runs then.
    return { value: script.runInContext(context, { timeout: Math.floor(limitMs) }) as T };
  } catch (error) {
    if ((error as { code?: unknown }).code === 'ERR_SCRIPT_EXECUTION_TIMEOUT') return 'timed out';
    throw error;
  } finally {
    running = null;
    context.run = undefined;
  }
}

/** What one check's assertions have spent on matches, watched or not. */
interface MatchBudget {
  spentMs: number;
  unwatchedMs: number;
}

/** The budget of the check whose assertions are being evaluated (withMatchBudget), if any. */
let budget: MatchBudget | null = null;

/** Set while unwatched matches run: the matches inside them are timed with them, not again. */
let unwatched = false;

/** The current check's budget; outside withMatchBudget, one of the caller's own. */
function currentBudget(): MatchBudget {
  return budget ?? { spentMs: 0, unwatchedMs: 0 };
}

/** Evaluates a check's assertions (`run`) with one time limit for all their matches. */
export function withMatchBudget<T>(run: () => T): T {
  if (budget !== null) return run();
  // A check is never evaluated inside a bounded run: if `running` is set, a termination from outside
  // (none in the agent) skipped watched's finally, and every later run would go unbounded.
  running = null;
  budget = currentBudget();
  try {
    return run();
  } finally {
    budget = null;
  }
}

/** `run`, its time added to what `spent` has spent. */
function timed<T>(spent: MatchBudget, run: () => T): T {
  const started = performance.now();
  try {
    return run();
  } finally {
    spent.spentMs += performance.now() - started;
  }
}

/**
 * Runs `run`, whose regex matches go through execCheckRegex, within what is left of the check's time
 * limit (a limit of its own outside withMatchBudget), and throws `timedOut()` when it does not end
 * within it. `linearWork` is the matches' work when known (pattern length × text length): when the
 * linear engine may be trusted (LINEAR_RETRY) and should end within what is left, the backtracking
 * engine gets BACKTRACKING_TRY_MS and the linear engine the rest, from the start; otherwise the
 * backtracking engine gets it all. `run` must do nothing but compute: it may be stopped anywhere and
 * run twice. Inside another bounded run it simply runs.
 */
export function boundedRun<T>(run: () => T, timedOut: () => Error, linearWork: number | null = null): T {
  if (running !== null) return run();
  const spent = currentBudget();
  const left = () => MATCH_TIME_LIMIT_MS - spent.spentMs;
  const retry = LINEAR_RETRY && linearWork !== null && linearWork / LINEAR_WORK_PER_MS < left() - BACKTRACKING_TRY_MS;
  const first = timed(spent, () => watched(run, 'backtracking', retry ? Math.min(BACKTRACKING_TRY_MS, left()) : left()));
  if (first !== 'timed out') return first.value;
  const second = retry ? timed(spent, () => watched(run, 'linear', left())) : 'timed out';
  if (second !== 'timed out') return second.value;
  spent.spentMs = MATCH_TIME_LIMIT_MS;
  throw timedOut();
}

/**
 * Runs the matches of one assertion, `patternLength` (written out) over `textLength` characters:
 * as they are when both are small and the check has not yet spent UNWATCHED_TIME_MS so; else
 * bounded (boundedRun). A text whose length is not known is Infinity.
 */
export function matchesWithin<T>(textLength: number, patternLength: number, run: () => T, timedOut: () => Error): T {
  if (running !== null) return run();
  const spent = currentBudget();
  const work = patternLength * textLength;
  if (textLength > UNWATCHED_TEXT_LENGTH || work > UNWATCHED_WORK || spent.unwatchedMs >= UNWATCHED_TIME_MS) {
    return boundedRun(run, timedOut, Number.isFinite(work) ? work : null);
  }
  if (unwatched) return run();
  const before = spent.spentMs;
  unwatched = true;
  try {
    return timed(spent, run);
  } finally {
    unwatched = false;
    spent.unwatchedMs += spent.spentMs - before;
  }
}
