// Local results: one readable line per result on a terminal, JSON lines
// otherwise (so pipelines can parse them), and optionally a JSONL file.

import { closeSync, constants, createWriteStream, openSync, statSync, type WriteStream } from 'node:fs';
import { once } from 'node:events';
import { resultOutcome } from '../results/result.js';
import type { CheckResultEntry } from '../core/result-entry.js';

const MARKS = { passed: '\x1b[32m✔ PASSED \x1b[0m', degraded: '\x1b[33m▲ DEGRADED\x1b[0m', failed: '\x1b[31m✘ FAILED \x1b[0m', error: '\x1b[31m✘ ERROR  \x1b[0m' };
/** A failed attempt that is tried again: not a result of its own (the summary counts it as a retry). */
const RETRY_MARK = '\x1b[33m↻ RETRY  \x1b[0m';

export function readableLine(result: CheckResultEntry): string {
  const outcome = resultOutcome(result);
  const detail = (result.apiCheckResult ??
    result.tcpCheckResult ??
    result.dnsCheckResult ??
    result.icmpCheckResult ??
    result.multiStepCheckResult ??
    result.browserCheckResult ??
    {}) as {
    response?: { status?: number; statusText?: string } | null;
    requestError?: string | null;
    request?: { url?: string };
  };
  const what = detail.requestError ?? (detail.response?.status !== undefined ? `${detail.response.status} ${detail.response.statusText ?? ''}`.trim() : '');
  const extra = result.overMaxResponseTime ? ' (over max response time)' : '';
  const mark = result.resultType === 'ATTEMPT' ? RETRY_MARK : MARKS[outcome];
  const attempt = result.resultType === 'ATTEMPT' ? ` (attempt ${result.attempts}, tried again)` : '';
  return `${mark} ${result.name ?? result.checkId} [${result.checkType}] ${result.responseTime} ms  ${what}${extra}${attempt}\n`;
}

/**
 * A FIFO nobody reads would block the open for ever, on a thread of the
 * pool, with nothing said; a non-blocking open asks whether a reader is
 * there (ENXIO when not). With one there, the blocking open the stream
 * writes through returns at once; the probe is closed only after it, or the
 * reader would see the end of its input. Answers that descriptor, or
 * undefined when the file is no FIFO.
 */
function openedFifo(file: string): number | undefined {
  let fifo = false;
  try {
    fifo = statSync(file).isFIFO();
  } catch {
    return undefined;
  }
  if (!fifo) return undefined;
  const probe = openSync(file, constants.O_WRONLY | constants.O_NONBLOCK);
  try {
    return openSync(file, constants.O_WRONLY | constants.O_APPEND);
  } finally {
    closeSync(probe);
  }
}

export class LocalSink {
  private file: WriteStream | undefined;
  /** The first write error is the one reported: later ones (ERR_STREAM_DESTROYED) only echo it. */
  private failed = false;
  /**
   * Set once `out` failed (a reader that closed the pipe: EPIPE; a full disk: ENOSPC). Results are no longer
   * written there, but still counted and written to the results file (and stored by the caller).
   */
  private outFailed = false;
  /** FINAL results by outcome: one per check run. */
  readonly counts = { passed: 0, degraded: 0, failed: 0, error: 0 };
  /** ATTEMPT results: failed attempts that were retried, not checks of their own. */
  retries = 0;

  constructor(
    private readonly out: NodeJS.WriteStream,
    resultsFile: string | undefined,
    /** A write to the results file failed (a full disk, /dev/full): results would be lost from here on. */
    private readonly onWriteError: (error: NodeJS.ErrnoException) => void = () => undefined,
    /** Called once when `out` fails: a closed or full stdout is not worth a crash (src/cli.ts exits 70 on an uncaught 'error'). */
    private readonly onOutputError: (error: NodeJS.ErrnoException) => void = () => undefined,
  ) {
    if (resultsFile) {
      const fd = openedFifo(resultsFile);
      this.file = fd === undefined ? createWriteStream(resultsFile, { flags: 'a' }) : createWriteStream(resultsFile, { fd });
    }
    out.on('error', (error: NodeJS.ErrnoException) => this.outputFailed(error));
  }

  /** Opens the results file; rejects if it cannot be opened. */
  async open(): Promise<void> {
    if (!this.file) return;
    // A stream on a descriptor already open (a FIFO) is not pending and says no 'open'.
    if (this.file.pending) await once(this.file, 'open');
    this.file.on('error', (error: NodeJS.ErrnoException) => this.fail(error));
  }

  /**
   * Writes the result (`line`: its JSON, if already made); resolves once the streams have taken it (a slow reader
   * of stdout holds it back), so that what is buffered counts until then.
   */
  deliver(result: CheckResultEntry, line?: string): Promise<void> {
    if (result.resultType === 'ATTEMPT') this.retries++;
    else this.counts[resultOutcome(result)]++;
    // `line`, when given, is JSON.stringify(result), made once when it was scrubbed.
    const json = `${line ?? JSON.stringify(result)}\n`;
    const written = (stream: NodeJS.WritableStream, text: string) =>
      new Promise<void>((resolve) => {
        // The result is handed on either way; a failed write to the results file is reported once.
        stream.write(text, (error?: Error | null) => {
          if (error && stream === file) this.fail(error as NodeJS.ErrnoException);
          else if (error) this.outputFailed(error as NodeJS.ErrnoException);
          resolve();
        });
      });
    const file = this.file;
    const out = this.outFailed ? undefined : written(this.out, this.out.isTTY ? readableLine(result) : json);
    return Promise.all([out, file ? written(file, json) : undefined]).then(() => undefined);
  }

  private outputFailed(error: NodeJS.ErrnoException): void {
    if (this.outFailed) return;
    this.outFailed = true;
    this.onOutputError(error);
  }

  private fail(error: NodeJS.ErrnoException): void {
    if (this.failed) return;
    this.failed = true;
    this.onWriteError(error);
  }

  async close(): Promise<void> {
    const file = this.file;
    if (!file) return;
    this.file = undefined;
    await new Promise<void>((resolve, reject) =>
      file.end((error?: Error | null) => {
        if (!error) return resolve();
        this.fail(error as NodeJS.ErrnoException);
        reject(error);
      }),
    );
  }
}
