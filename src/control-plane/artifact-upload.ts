// Uploads one artifact over protocol v1 (docs/protocol.md): `POST
// /v1/agent/artifacts` announces it, then the file is PUT to the answer's
// uploadUrl, streamed from disk with its Content-Length. At most
// 157,286,400 bytes (150 MB); 5xx, 429 and network errors are retried with
// backoff (withRetry) until the caller's signal ends it.

import { stat } from 'node:fs/promises';
import { Backoff } from '../core/backoff.js';
import { type ControlPlaneClient, ControlPlaneError, withRetry } from './client.js';
import type { ArtifactResponse } from '../core/protocol.js';
import type { Logger } from '../observability/logger.js';
import type { ArtifactFile, JobAsset } from '../artifacts/writer.js';

/** The control plane's limit for one artifact. */
export const MAX_ARTIFACT_BYTES = 157_286_400;

export type ArtifactClient = Pick<ControlPlaneClient, 'createArtifact' | 'uploadArtifact'>;

export interface UploadOptions {
  jobId: string;
  logger: Logger;
  /** Ends the retries (and an upload in flight): the job's abort plus the upload time limit. */
  signal: AbortSignal;
  authRetryMs: number;
  backoff?: Backoff;
}

export type UploadOutcome = { ok: true; asset: JobAsset; attempts: number } | { ok: false; line: string; attempts: number };

const bytes = (n: number) => n.toLocaleString('en-US');

/** Uploads `file`; never throws. A failure comes back as one jobLog line naming the file, its size and why. */
export async function uploadArtifact(client: ArtifactClient, file: ArtifactFile, opts: UploadOptions): Promise<UploadOutcome> {
  const { jobId, logger } = opts;
  let size: number;
  try {
    size = (await stat(file.path)).size;
  } catch (error) {
    return { ok: false, attempts: 0, line: `Artifact ${file.name} was not uploaded: ${(error as Error).message}` };
  }
  if (size > MAX_ARTIFACT_BYTES) {
    logger.warn({ jobId, file: file.name, size, limit: MAX_ARTIFACT_BYTES }, 'artifact not uploaded: larger than the limit');
    return {
      ok: false,
      attempts: 0,
      line: `Artifact ${file.name} (${bytes(size)} bytes) was not uploaded: it is larger than the ${bytes(MAX_ARTIFACT_BYTES)}-byte (150 MB) limit`,
    };
  }
  let slot: ArtifactResponse | undefined;
  let attempts = 0;
  let last: ControlPlaneError | undefined;
  const onFailure = (error: ControlPlaneError) => {
    last = error;
    // A PUT refused as unknown or gone (an expired upload URL): announce the artifact again.
    if (error.statusCode === 404 || error.statusCode === 410) slot = undefined;
    logger.warn(
      { jobId, file: file.name, size, attempt: attempts, status: error.statusCode ?? null, body: error.body ?? null, err: error.message },
      'artifact upload attempt failed',
    );
  };
  try {
    await withRetry(
      async () => {
        attempts++;
        slot ??= await client.createArtifact({ jobId, name: file.name, contentType: file.contentType, size }, opts.signal);
        await client.uploadArtifact(slot.uploadUrl, { path: file.path, size, contentType: file.contentType }, opts.signal);
      },
      {
        signal: opts.signal,
        // Each failed attempt is logged once, above, with everything known about it.
        logger: logger.child({ jobId, file: file.name, size }, { level: 'error' }),
        authRetryMs: opts.authRetryMs,
        backoff: opts.backoff ?? new Backoff(500, 15_000),
        onFailure,
      },
    );
  } catch (error) {
    const failure = error instanceof ControlPlaneError ? error : last;
    const why = opts.signal.aborted && !(failure && failure.kind === 'fatal') ? `stopped (${reasonOf(opts.signal)}); last error: ${failure?.message ?? 'none'}` : (failure?.message ?? String(error));
    logger.error(
      { jobId, file: file.name, size, attempts, status: failure?.statusCode ?? null, body: failure?.body ?? null, err: failure?.message ?? String(error) },
      'artifact upload failed; the result is delivered without it',
    );
    return { ok: false, attempts, line: `Artifact ${file.name} (${bytes(size)} bytes) was not uploaded after ${attempts} attempt${attempts === 1 ? '' : 's'}: ${why}` };
  }
  return { ok: true, attempts, asset: { name: file.name, url: (slot as ArtifactResponse).url, size, contentType: file.contentType } };
}

function reasonOf(signal: AbortSignal): string {
  const reason = signal.reason as Error | undefined;
  if (reason?.name === 'TimeoutError') return 'the upload time limit was reached';
  return reason?.message ?? 'aborted';
}
