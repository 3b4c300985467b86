// Agent mode's artifact store: an attempt's files are uploaded to the control
// plane (artifact-upload.ts) and then removed from STATE_DIR/artifacts; the
// result names them by their URL. publish() never throws and never waits past
// its time limit: a missing artifact is one jobLog line.

import { rm } from 'node:fs/promises';
import { makeDirectories } from '../core/make-directories.js';
import path from 'node:path';
import { type ArtifactStore, type Published, removeAttemptDir } from '../artifacts/store.js';
import { type ArtifactFile, safeSegment } from '../artifacts/writer.js';
import type { Logger } from '../observability/logger.js';
import { type ArtifactClient, uploadArtifact } from './artifact-upload.js';

export interface ControlPlaneStoreOptions {
  /** Bound on publishing one attempt's artifacts (ARTIFACT_UPLOAD_TIMEOUT_SECONDS). */
  timeoutMs: number;
  authRetryMs: number;
  /** Told of every upload that failed after trying (for error events); not of files over the size limit. */
  onUploadFailed?: (error: Error) => void;
}

/** Agent mode: STATE_DIR/artifacts/<jobId>/<attempt>/, uploaded and then removed. */
export class ControlPlaneArtifacts implements ArtifactStore {
  private constructor(
    readonly root: string,
    private readonly client: ArtifactClient,
    private readonly options: ControlPlaneStoreOptions,
  ) {}

  /** Opens the store; what an earlier run left (a crash mid-upload) is removed, so disk use stays bounded. */
  static async open(root: string, client: ArtifactClient, options: ControlPlaneStoreOptions): Promise<ControlPlaneArtifacts> {
    await rm(root, { recursive: true, force: true });
    await makeDirectories(root, 0o700);
    return new ControlPlaneArtifacts(root, client, options);
  }

  directory(jobId: string, attempt: number): string {
    return path.join(this.root, safeSegment(jobId), String(attempt));
  }

  async publish(jobId: string, dir: string, files: readonly ArtifactFile[], signal: AbortSignal, logger: Logger): Promise<Published> {
    const published: Published = { assets: [], pcapDataUrl: null, jobLog: [] };
    const limit = new AbortController();
    const seconds = Math.round(this.options.timeoutMs / 1000);
    const timer = setTimeout(() => limit.abort(new Error(`the upload time limit of ${seconds} s was reached`)), this.options.timeoutMs);
    const bounded = AbortSignal.any([signal, limit.signal]);
    try {
      for (const file of files) {
        const outcome = await uploadArtifact(this.client, file, { jobId, logger, signal: bounded, authRetryMs: this.options.authRetryMs });
        if (!outcome.ok) {
          published.jobLog.push(outcome.line);
          if (outcome.attempts > 0) this.options.onUploadFailed?.(Object.assign(new Error(outcome.line), { name: 'ArtifactUploadError' }));
          continue;
        }
        published.assets.push(outcome.asset);
        if (file.role === 'pcap') published.pcapDataUrl = outcome.asset.url;
      }
    } finally {
      clearTimeout(timer);
      await removeAttemptDir(dir).catch((error) => logger.warn({ err: error, dir }, 'could not remove an artifact directory'));
    }
    return published;
  }

  discard(dir: string): Promise<void> {
    return removeAttemptDir(dir).catch(() => undefined);
  }
}
