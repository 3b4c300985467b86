// The queue's side of artifacts, for one attempt: the writer and
// diagnostics window the executor gets (ctx.diagnostics), and publishing the
// files into the attempt's result before the result is delivered.

import { performance } from 'node:perf_hooks';
import type { ResultMemberName } from '../core/outcome.js';
import { DIAGNOSTICS_BUDGET_MS, type DiagnosticsHooks } from '../diagnostics/hooks.js';
import type { Logger } from '../observability/logger.js';
import type { CheckResultEntry } from '../core/result-entry.js';
import type { ArtifactStore, Published } from '../artifacts/store.js';
import { ArtifactWriter } from '../artifacts/writer.js';

export class AttemptArtifacts {
  readonly writer: ArtifactWriter;
  readonly hooks: DiagnosticsHooks;
  private windowEnd: number | undefined;

  constructor(
    private readonly store: ArtifactStore,
    private readonly jobId: string,
    attempt: number,
    private readonly jobSignal: AbortSignal,
    private readonly logger: Logger,
  ) {
    this.writer = new ArtifactWriter(() => store.directory(jobId, attempt));
    this.hooks = { artifacts: this.writer, begin: () => this.begin() };
  }

  private begin(): AbortSignal | undefined {
    if (this.jobSignal.aborted) return undefined;
    this.windowEnd = performance.now() + DIAGNOSTICS_BUDGET_MS;
    return AbortSignal.any([this.jobSignal, AbortSignal.timeout(DIAGNOSTICS_BUDGET_MS)]);
  }

  /** Nothing was written: nothing to publish or discard. */
  get untouched(): boolean {
    return !this.writer.created;
  }

  /** True once the executor opened a diagnostics window. */
  get diagnosing(): boolean {
    return this.windowEnd !== undefined;
  }

  /** Milliseconds the diagnostics window has left (0 when none is open): the queue does not abandon the executor before. */
  windowLeft(): number {
    return this.windowEnd === undefined ? 0 : Math.max(0, this.windowEnd - performance.now());
  }

  /**
   * Publishes the attempt's files (upload, or keep locally) and writes where
   * they are into the result: `jobAssets`, `pcapDataUrl`, and jobLog lines
   * for any that could not be published. Bounded by the store's time limit.
   */
  async publish(entry: CheckResultEntry, member: ResultMemberName): Promise<void> {
    const files = this.writer.files;
    if (files.length === 0) return this.discard();
    let published: Published;
    try {
      published = await this.store.publish(this.jobId, this.writer.dir, files, this.jobSignal, this.logger);
    } catch (error) {
      this.logger.warn({ err: error }, 'publishing artifacts failed');
      published = { assets: [], pcapDataUrl: null, jobLog: [`Artifacts were not published: ${(error as Error)?.message ?? String(error)}`] };
    }
    const detail = entry[member];
    if (!detail) return;
    detail.jobAssets = [...(Array.isArray(detail.jobAssets) ? detail.jobAssets : []), ...published.assets];
    if (published.pcapDataUrl) detail.pcapDataUrl = published.pcapDataUrl;
    if (published.jobLog.length > 0) {
      if (!Array.isArray(detail.jobLog)) detail.jobLog = [];
      (detail.jobLog as string[]).push(...published.jobLog);
    }
  }

  /** Drops the attempt's files unpublished. */
  discard(): Promise<void> {
    // Nothing was written: no directory to remove, and no failing lstat/rmdir per check.
    if (!this.writer.created) return Promise.resolve();
    return this.store.discard(this.writer.dir);
  }
}
