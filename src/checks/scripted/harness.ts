// The agent's side of the harness that runs a user's script inside the child Node process: the files
// of src/checks/scripted/harness/ (CommonJS, never evaluated in the agent itself, except shared.cjs),
// the limits they get through their input (HarnessLimits), and the user's script as a module.
// src/checks/scripted/runner.ts copies the files into the run's folder and starts harness.cjs.

import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';

/** At most this many pages are screenshotted at a failure. */
export const FAILURE_SCREENSHOTS_MAX = 3;
/** Each failure screenshot gets at most this long (inside the script's time limit). */
export const FAILURE_SCREENSHOT_TIMEOUT_MS = 5_000;
/** All failure screenshots of a run together get at most this long. */
export const FAILURE_SCREENSHOTS_BUDGET_MS = 20_000;
/** At most this many page errors, and this many console messages, are kept; the rest are counted. */
export const PAGE_EVENTS_MAX = 100;
/** A page error's message or a console message's text is cut to this many characters. */
export const PAGE_EVENT_TEXT_MAX = 1_000;
/** Closing a context to write its HAR at a failure gets at most this long. */
export const HAR_CLOSE_TIMEOUT_MS = 5_000;
/** After its time limit a BROWSER run has this long to save screenshots and HARs before the agent kills it. */
export const BROWSER_TIMEOUT_GRACE_MS = 15_000;
/** A MULTI_STEP run's time to write what it did after its time limit. */
export const MULTI_STEP_TIMEOUT_GRACE_MS = 2_000;
/** How often the watchdog looks whether the agent is still the harness's parent. */
export const ORPHAN_POLL_MS = 500;

/** The limits the harness applies, in its input (`limits`): harness/harness.cjs reads them there. */
export type HarnessLimits = typeof HARNESS_LIMITS;
export const HARNESS_LIMITS = {
  failureScreenshotsMax: FAILURE_SCREENSHOTS_MAX,
  failureScreenshotTimeoutMs: FAILURE_SCREENSHOT_TIMEOUT_MS,
  failureScreenshotsBudgetMs: FAILURE_SCREENSHOTS_BUDGET_MS,
  pageEventsMax: PAGE_EVENTS_MAX,
  pageEventTextMax: PAGE_EVENT_TEXT_MAX,
  harCloseTimeoutMs: HAR_CLOSE_TIMEOUT_MS,
  orphanPollMs: ORPHAN_POLL_MS,
} as const;

/** The harness's folder: src/checks/scripted/harness/, or its copy in dist/ (`npm run build` copies it). */
const HARNESS_DIR = new URL('./harness/', import.meta.url);

/** What the agent and the harness share (harness/shared.cjs), loaded from the same file the runs get. */
export const shared = createRequire(import.meta.url)('./harness/shared.cjs') as typeof import('./harness/shared.cjs');

/** The files a run's folder gets, by name; harness.cjs is the one started. */
export const HARNESS_FILES = ['harness.cjs', 'expect.cjs', 'shared.cjs', 'watchdog.cjs'] as const;
/** PLAYWRIGHT: the module a suite gets for '@playwright/test' (see harness/shim.cjs). */
export const SUITE_SHIM_FILE = 'shim.cjs';

/** The harness's files as text, by name. */
export type HarnessSources = Readonly<Record<(typeof HARNESS_FILES)[number] | typeof SUITE_SHIM_FILE, string>>;

let sources: Promise<HarnessSources> | undefined;

/** The harness's files as text, read at the first run and kept: later runs get the same harness. */
export function harnessSources(): Promise<HarnessSources> {
  sources ??= Promise.all(
    [...HARNESS_FILES, SUITE_SHIM_FILE].map(async (name) => [name, await readFile(new URL(name, HARNESS_DIR), 'utf8')] as const),
  ).then((entries) => Object.fromEntries(entries) as HarnessSources);
  // A failed read (a broken install) is tried again at the next run.
  sources.catch(() => {
    sources = undefined;
  });
  return sources;
}

/** The user's code as a CommonJS module exporting one async function; line numbers are kept (the wrapper opens on line 1). */
export function wrapUserScript(code: string): string {
  return `module.exports = async function outpostScript() {${code}\n};\n`;
}
