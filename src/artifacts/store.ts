// Where an attempt's artifacts go once the attempt is over:
// - agent mode: uploaded to the control plane, then removed from
//   STATE_DIR/artifacts; the result names them by their URL
//   (src/control-plane/artifact-store.ts).
// - local and once modes: kept in a folder next to the results file (or
//   STATE_DIR/artifacts), named in the result by file:// URL; the newest
//   LOCAL_ARTIFACT_JOBS_KEPT job folders are kept, older ones removed.
// Either way publish() never throws and never waits past its time limit:
// a missing artifact is one jobLog line, and the result is still delivered.

import { readdir, rm, rmdir, stat } from 'node:fs/promises';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Logger } from '../observability/logger.js';
import type { ArtifactFile, JobAsset } from './writer.js';
import { safeSegment } from './writer.js';

export interface Published {
  assets: JobAsset[];
  /** The pcap's URL, for `apiCheckResult.pcapDataUrl`. */
  pcapDataUrl: string | null;
  /** Lines for the result's jobLog (what was not published, and why). */
  jobLog: string[];
}

/** What publishing gives when it could not be done: no asset, and why in the jobLog. */
export function notPublished(why: unknown): Published {
  const reason = why instanceof Error ? why.message : String(why);
  return { assets: [], pcapDataUrl: null, jobLog: [`artifacts were not published: ${reason}`] };
}

export interface ArtifactStore {
  /** The folder every attempt's directory is under: <root>/<jobId>/<attempt> (check workers compute it themselves). */
  readonly root: string;
  /** The directory an attempt writes its artifacts to. */
  directory(jobId: string, attempt: number): string;
  /** Makes the files available and says where; removes what is no longer needed. */
  publish(jobId: string, dir: string, files: readonly ArtifactFile[], signal: AbortSignal, logger: Logger): Promise<Published>;
  /** Drops an attempt's directory whose files will not be published (lost lease, abandoned executor). */
  discard(dir: string): Promise<void>;
}

export async function removeAttemptDir(dir: string): Promise<void> {
  await rm(dir, { recursive: true, force: true });
  // The job's folder goes too once its last attempt's folder is gone.
  await rmdir(path.dirname(dir)).catch(() => undefined);
}

/** Job folders a local artifacts folder keeps (the newest); each holds at most ~6 MB of diagnostics, or 25 MB of a script's files. */
export const LOCAL_ARTIFACT_JOBS_KEPT = 100;

/**
 * The local artifacts folder: `<results file without extension>-artifacts`
 * beside the results file; without one, STATE_DIR/artifacts (the agent's
 * writable place: in the image a volume, while the working directory may be
 * read-only; by default ./.outpost/artifacts).
 */
export function localArtifactsRoot(resultsFile: string | undefined, stateDir: string): string {
  if (!resultsFile) return path.join(path.resolve(stateDir), 'artifacts');
  const parsed = path.parse(path.resolve(resultsFile));
  return path.join(parsed.dir, `${parsed.name}-artifacts`);
}

/** Local and once modes: files stay where the attempt wrote them, <root>/<jobId>/<attempt>/. */
export class LocalArtifacts implements ArtifactStore {
  constructor(
    readonly root: string,
    private readonly keep = LOCAL_ARTIFACT_JOBS_KEPT,
  ) {}

  directory(jobId: string, attempt: number): string {
    return path.join(this.root, safeSegment(jobId), String(attempt));
  }

  async publish(_jobId: string, dir: string, files: readonly ArtifactFile[], _signal: AbortSignal, logger: Logger): Promise<Published> {
    const published: Published = { assets: [], pcapDataUrl: null, jobLog: [] };
    for (const file of files) {
      const asset = { name: file.name, url: pathToFileURL(file.path).href, size: file.size, contentType: file.contentType };
      published.assets.push(asset);
      if (file.role === 'pcap') published.pcapDataUrl = asset.url;
    }
    await this.prune(path.dirname(dir)).catch((error) => logger.warn({ err: error, root: this.root }, 'could not prune the local artifacts folder'));
    return published;
  }

  discard(dir: string): Promise<void> {
    return removeAttemptDir(dir).catch(() => undefined);
  }

  /** Keeps the newest `keep` job folders (by modification time); `current` always stays. */
  private async prune(current: string): Promise<void> {
    const entries = await readdir(this.root, { withFileTypes: true });
    const folders = entries.filter((e) => e.isDirectory()).map((e) => path.join(this.root, e.name));
    if (folders.length <= this.keep) return;
    const dated = await Promise.all(folders.map(async (dir) => ({ dir, mtime: (await stat(dir).catch(() => undefined))?.mtimeMs ?? 0 })));
    dated.sort((a, b) => b.mtime - a.mtime);
    for (const { dir } of dated.slice(this.keep)) {
      if (dir !== current) await rm(dir, { recursive: true, force: true });
    }
  }
}
