// Reload without restart (local and server modes): SIGHUP, POST /-/reload on
// the health port and a change of the checks file re-read it. A valid file
// replaces what the store holds and the scheduler re-reads the store; an
// invalid one is refused with every problem logged and changes nothing.

import { type FSWatcher, watch } from 'node:fs';
import path from 'node:path';
import { ChecksFileError, logIgnoredFields, readChecksFileText } from './checks/checks-file.js';
import type { ReloadOutcome } from './health/server.js';
import type { Logger } from './observability/logger.js';

/** Editors write a file in several steps (truncate, write; or write a temporary file and rename it): one reload once they are done. */
export const RELOAD_DEBOUNCE_MS = 300;
/** Events that keep coming (another file of the directory written all the time) delay a reload by at most this. */
export const RELOAD_MAX_WAIT_MS = 2_000;

export type ReloadTrigger = 'SIGHUP' | 'POST /-/reload' | 'file change';

/** What a reload parses: `ignoredFields`, the JSON paths of fields nobody reads, are named in a warning. */
export interface ParsedChecksFileFields {
  ignoredFields: readonly string[];
}

export interface ChecksFileReloaderOptions<Parsed extends ParsedChecksFileFields> {
  file: string;
  logger: Logger;
  /** Throws a ChecksFileError listing every problem of an invalid file. */
  parse(text: string): Parsed;
  /** Puts a parsed file in force; resolves with the number of checks it runs. */
  apply(parsed: Parsed): Promise<number>;
  /** The text the process started with, so that a watch event that changed nothing reloads nothing. */
  initialText?: string;
}

export class ChecksFileReloader<Parsed extends ParsedChecksFileFields> {
  /** The reload under way, if any. */
  private running: Promise<ReloadOutcome> | undefined;
  /** The one reload that starts when the running one ends: every request made meanwhile joins it. */
  private pending: { trigger: ReloadTrigger; outcome: Promise<ReloadOutcome> } | undefined;
  private lastText: string | undefined;
  private watcher: FSWatcher | undefined;
  private debounce: NodeJS.Timeout | undefined;
  private firstEventAt: number | undefined;
  private stopped = false;

  constructor(private readonly options: ChecksFileReloaderOptions<Parsed>) {
    this.lastText = options.initialText;
  }

  /**
   * One reload at a time, and at most one waiting: a request made while a
   * reload runs joins the waiting one, which starts (reading the file anew)
   * once the running one ends. Every caller is answered with the outcome of a
   * reload that started after it asked, so none is told of a file older than
   * its request; and a flood of requests (POST /-/reload needs no key,
   * docs/server.md) costs two reloads, not one each.
   */
  reload(trigger: ReloadTrigger): Promise<ReloadOutcome> {
    if (this.pending) {
      // A 'file change' skips a text equal to the one in force; a joined SIGHUP or POST applies it whatever.
      if (this.pending.trigger === 'file change') this.pending.trigger = trigger;
      return this.pending.outcome;
    }
    if (!this.running) return this.start(trigger);
    // One object: a request that joins later may change the trigger the waiting reload starts with.
    const joined: { trigger: ReloadTrigger } = { trigger };
    const outcome = this.running
      .catch(() => undefined)
      .then(() => {
        this.pending = undefined;
        return this.start(joined.trigger);
      });
    this.pending = Object.assign(joined, { outcome });
    return outcome;
  }

  private start(trigger: ReloadTrigger): Promise<ReloadOutcome> {
    const run: Promise<ReloadOutcome> = this.run(trigger).finally(() => {
      if (this.running === run) this.running = undefined;
    });
    this.running = run;
    return run;
  }

  /**
   * Watches the file's directory rather than the file: an editor or a
   * Kubernetes ConfigMap that replaces the file (rename, symlink swap) ends a
   * watch on the file itself. An event for the file, for a name of the
   * ConfigMap kind (`..data`), or without a name re-reads the file once
   * things settle; a text equal to the one in force changes nothing.
   */
  watch(): void {
    const dir = path.dirname(path.resolve(this.options.file));
    const name = path.basename(this.options.file);
    try {
      this.watcher = watch(dir, { persistent: false }, (_event, filename) => {
        const changed = filename === null ? null : String(filename);
        if (changed === null || changed === name || changed.startsWith('..')) this.changed();
      });
      this.watcher.on('error', (error) => {
        this.options.logger.warn({ err: error, dir }, 'watching the checks file stopped: reload it with SIGHUP or POST /-/reload');
        this.watcher?.close();
        this.watcher = undefined;
      });
    } catch (error) {
      this.options.logger.warn({ err: error, dir }, 'the checks file cannot be watched: reload it with SIGHUP or POST /-/reload');
    }
  }

  close(): void {
    this.stopped = true;
    clearTimeout(this.debounce);
    this.watcher?.close();
    this.watcher = undefined;
  }

  private changed(): void {
    if (this.stopped) return;
    const now = Date.now();
    this.firstEventAt ??= now;
    clearTimeout(this.debounce);
    const delay = Math.max(0, Math.min(RELOAD_DEBOUNCE_MS, this.firstEventAt + RELOAD_MAX_WAIT_MS - now));
    this.debounce = setTimeout(() => {
      this.firstEventAt = undefined;
      void this.reload('file change');
    }, delay);
    this.debounce.unref();
  }

  private async run(trigger: ReloadTrigger): Promise<ReloadOutcome> {
    const { file, logger } = this.options;
    if (this.stopped) return { ok: false, status: 503, problems: ['shutting down'] };
    let text: string;
    let parsed: Parsed;
    try {
      text = await readChecksFileText(file);
      if (trigger === 'file change' && text === this.lastText) return { ok: true, checks: -1, unchanged: true };
      parsed = this.options.parse(text);
    } catch (error) {
      const problems = error instanceof ChecksFileError ? error.problems : [(error as Error).message];
      // A file half written by an editor is refused here too; the next event brings the finished one.
      logger.error({ trigger, file, problems }, `checks file refused (${problems.length} problem${problems.length === 1 ? '' : 's'}): the running checks stay as they were`);
      return { ok: false, status: 400, problems };
    }
    try {
      const checks = await this.options.apply(parsed);
      this.lastText = text;
      logger.info({ trigger, file, checks }, 'checks file reloaded');
      logIgnoredFields(logger, file, parsed.ignoredFields);
      return { ok: true, checks };
    } catch (error) {
      // Applying takes several steps (locations, checks, heartbeats, channels…): some may have been applied. What is
      // applied is no longer known, so the next event applies the file whole, even the very text applied before.
      this.lastText = undefined;
      logger.error({ err: error, trigger, file }, 'applying the checks file failed part way: the next change, SIGHUP or POST /-/reload applies it again');
      return { ok: false, status: 500, problems: [(error as Error).message] };
    }
  }
}
