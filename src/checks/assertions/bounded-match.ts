// A wall-clock bound on a check's regular-expression matches. Accepting only
// patterns V8's linear engine can run does not bound their time: V8 runs them on
// its backtracking engine (much faster on the usual patterns) and moves to the
// linear one only when a single attempt backtracks too much, so `.*a.*a` on a
// megabyte without an `a` takes tens of seconds, a little at each of a million
// start positions, all on the thread that runs the checks. A match over more
// than a few kilobytes therefore runs under node:vm's watchdog, which stops it
// when its time is up: first on the backtracking engine for a short while, then
// on the linear engine (time proportional to pattern × text) for the rest of
// the limit, and only then is it refused. See docs/regular-expressions.md.

import { performance } from 'node:perf_hooks';
import vm from 'node:vm';

/** Most wall time the matches of one check's assertions may take together, both engines included. */
export const MATCH_TIME_LIMIT_MS = 5_000;

/**
 * How long the backtracking engine may try before the same matches run again on the linear engine.
 * The usual pattern reads megabytes in a few milliseconds there; the rest of the limit is the linear
 * engine's, which reads about 80 characters of text per microsecond per character of pattern.
 */
export const BACKTRACKING_TRY_MS = 250;

/**
 * Text (summed over the values an assertion's regex reads) up to which its matches run without a
 * watchdog: starting one costs 50–110 µs, and the slowest patterns measured (`.*a` repeated,
 * `(?:\w+\d+)+x`) take 25–33 ms on this much text on the backtracking engine.
 */
export const UNWATCHED_TEXT_LENGTH = 8_192;

/** Time one check's assertions may spend in matches without a watchdog; past it, even short texts get one. */
export const UNWATCHED_TIME_MS = 100;

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

/** What one check's assertions have spent on matches: its deadline, and the time spent unwatched. */
interface MatchBudget {
  deadline: number;
  unwatchedMs: number;
}

/** The budget of the check whose assertions are being evaluated (withMatchBudget), if any. */
let budget: MatchBudget | null = null;

function newBudget(): MatchBudget {
  return { deadline: performance.now() + MATCH_TIME_LIMIT_MS, unwatchedMs: 0 };
}

/** Evaluates a check's assertions (`run`) with one time limit for all their matches. */
export function withMatchBudget<T>(run: () => T): T {
  if (budget !== null) return run();
  budget = newBudget();
  try {
    return run();
  } finally {
    budget = null;
  }
}

/**
 * Runs `run`, whose regex matches go through execCheckRegex, within what is left of the check's time
 * limit (a limit of its own outside withMatchBudget): on the backtracking engine for up to
 * BACKTRACKING_TRY_MS, then again from the start on the linear engine for the rest; throws
 * `timedOut()` when neither finished. `run` must do nothing but compute: it may be stopped anywhere
 * and run twice. Inside another bounded run it simply runs.
 */
export function boundedRun<T>(run: () => T, timedOut: () => Error): T {
  if (running !== null) return run();
  const { deadline } = budget ?? newBudget();
  const first = watched(run, 'backtracking', Math.min(BACKTRACKING_TRY_MS, deadline - performance.now()));
  if (first !== 'timed out') return first.value;
  const second = watched(run, 'linear', deadline - performance.now());
  if (second !== 'timed out') return second.value;
  throw timedOut();
}

/**
 * How the matches of one assertion over `textLength` characters run: as they are when the text is
 * short and the check has not yet spent UNWATCHED_TIME_MS so; else bounded.
 */
export function matchesWithin<T>(textLength: number, run: () => T, timedOut: () => Error): T {
  if (running !== null) return run();
  const spent = budget ?? newBudget();
  if (textLength > UNWATCHED_TEXT_LENGTH || spent.unwatchedMs >= UNWATCHED_TIME_MS) return boundedRun(run, timedOut);
  const started = performance.now();
  try {
    return run();
  } finally {
    spent.unwatchedMs += performance.now() - started;
  }
}
