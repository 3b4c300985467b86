// Local results: one readable line per result on a terminal, JSON lines
// otherwise (so pipelines can parse them), and optionally a JSONL file.

import { createWriteStream, type WriteStream } from 'node:fs';
import { once } from 'node:events';
import { type CheckResultEntry, resultOutcome } from '../results/result.js';

const MARKS = { passed: '\x1b[32m✔ PASSED \x1b[0m', degraded: '\x1b[33m▲ DEGRADED\x1b[0m', failed: '\x1b[31m✘ FAILED \x1b[0m', error: '\x1b[31m✘ ERROR  \x1b[0m' };

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
  return `${MARKS[outcome]} ${result.name ?? result.checkId} [${result.checkType}] ${result.responseTime} ms  ${what}${extra}\n`;
}

export class LocalSink {
  private file: WriteStream | undefined;
  readonly counts = { passed: 0, degraded: 0, failed: 0, error: 0 };

  constructor(
    private readonly out: NodeJS.WriteStream,
    resultsFile: string | undefined,
  ) {
    if (resultsFile) this.file = createWriteStream(resultsFile, { flags: 'a' });
  }

  async open(): Promise<void> {
    if (this.file) await once(this.file, 'open');
  }

  /**
   * Writes the result; resolves once the streams have taken it (a slow reader
   * of stdout holds it back), so that what is buffered counts until then.
   */
  deliver(result: CheckResultEntry): Promise<void> {
    this.counts[resultOutcome(result)]++;
    const json = `${JSON.stringify(result)}\n`;
    const written = (stream: NodeJS.WritableStream, text: string) =>
      new Promise<void>((resolve) => {
        // A write error is the stream's to report; the result is handed on either way.
        stream.write(text, () => resolve());
      });
    const file = this.file;
    return Promise.all([written(this.out, this.out.isTTY ? readableLine(result) : json), file ? written(file, json) : undefined]).then(() => undefined);
  }

  async close(): Promise<void> {
    const file = this.file;
    if (!file) return;
    this.file = undefined;
    await new Promise<void>((resolve, reject) => file.end((error?: Error | null) => (error ? reject(error) : resolve())));
  }
}
