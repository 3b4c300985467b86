// A check worker's ArtifactStore: the attempt writes its files to the same
// folder the main thread's store would give it (both stores use
// <root>/<jobId>/<attempt>), and publishing them — an upload to the control
// plane, or the local folder's pruning — is asked of the main thread, whose
// store is the only one. Discarding unpublished files is removing the
// folder in both stores, so it is done here.

import path from 'node:path';
import { type ArtifactStore, notPublished, type Published, removeAttemptDir } from '../../artifacts/store.js';
import type { ArtifactFile } from '../../artifacts/writer.js';
import { safeSegment } from '../../artifacts/writer.js';
import type { FromWorker } from './protocol.js';

/** Answers to publish calls that can be waiting at once: one per running attempt, well within this. */
const MAX_PENDING = 10_000;

export class RemoteArtifacts implements ArtifactStore {
  private nextCall = 1;
  private readonly pending = new Map<number, (published: Published) => void>();

  constructor(
    readonly root: string,
    private readonly post: (message: FromWorker) => void,
  ) {}

  directory(jobId: string, attempt: number): string {
    return path.join(this.root, safeSegment(jobId), String(attempt));
  }

  /**
   * The main thread's store bounds the upload by its own time limit and the
   * job's signal (aborted there first: aborts start on the main thread).
   */
  publish(jobId: string, dir: string, files: readonly ArtifactFile[]): Promise<Published> {
    if (this.pending.size >= MAX_PENDING) return Promise.resolve(notPublished('too many uploads waiting'));
    const callId = this.nextCall++;
    return new Promise((resolve) => {
      this.pending.set(callId, resolve);
      this.post({ type: 'publish', callId, jobId, dir, files: [...files] });
    });
  }

  /** The main thread's answer to publish(). */
  published(callId: number, published: Published): void {
    this.pending.get(callId)?.(published);
    this.pending.delete(callId);
  }

  /** Both stores discard by removing the folder (removeAttemptDir): done here, without a message per attempt. */
  discard(dir: string): Promise<void> {
    return removeAttemptDir(dir).catch(() => undefined);
  }
}
