// One attempt's artifact directory: diagnostics write files here,
// the queue publishes them (upload, or keep them in the local folder) after
// the attempt. The directory is made only when a first file is written.

import { createHash } from 'node:crypto';
import { rm, stat, unlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { create as createTar } from 'tar';
import { makeDirectories } from '../core/make-directories.js';

export type ArtifactRole = 'pcap' | 'asset';

export interface ArtifactFile {
  /** File name, also the artifact's name on the control plane. */
  name: string;
  path: string;
  contentType: string;
  size: number;
  /** A `pcap` is also the result's `pcapDataUrl`. */
  role: ArtifactRole;
}

/** One entry of a result's `jobAssets`. */
export interface JobAsset {
  name: string;
  url: string;
  size: number;
  contentType: string;
}

const SAFE_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/;

/** A directory name for a job id: the id itself when it is a plain token, else a hash of it (ids are not trusted as paths). */
export function safeSegment(id: string): string {
  if (SAFE_NAME.test(id) && id !== '.' && id !== '..') return id;
  return `job-${createHash('sha256').update(id).digest('hex').slice(0, 32)}`;
}

export class ArtifactWriter {
  private readonly attached: ArtifactFile[] = [];
  private made = false;
  private located: string | undefined;

  /** `dir`, or how to find it: most attempts never write a file, and never need the path. */
  constructor(private readonly where: string | (() => string)) {}

  get dir(): string {
    this.located ??= typeof this.where === 'string' ? this.where : this.where();
    return this.located;
  }

  /** Whether the directory was created (by pathFor); most attempts never write a file. */
  get created(): boolean {
    return this.made;
  }

  /** Files attached so far, in order. */
  get files(): readonly ArtifactFile[] {
    return this.attached;
  }

  /** The path for a new file (the directory is created). */
  async pathFor(name: string): Promise<string> {
    if (!SAFE_NAME.test(name)) throw new Error(`artifact name ${JSON.stringify(name)} is not a plain file name`);
    if (!this.made) {
      await makeDirectories(this.dir, 0o700);
      this.made = true;
    }
    return path.join(this.dir, name);
  }

  /** Attaches a file already written at pathFor(name). */
  async attach(name: string, contentType: string, role: ArtifactRole = 'asset'): Promise<ArtifactFile> {
    const file = path.join(this.dir, name);
    const { size } = await stat(file);
    const entry: ArtifactFile = { name, path: file, contentType, size, role };
    this.attached.push(entry);
    return entry;
  }

  /**
   * Bundles text files into one `.tar.gz` (tar npm package) and attaches it;
   * the loose files are removed. `files` maps a member name to its content,
   * which the caller has scrubbed already.
   */
  async bundle(name: string, files: Record<string, string>): Promise<ArtifactFile> {
    const members = Object.keys(files);
    for (const member of members) await writeFile(await this.pathFor(member), files[member] as string, { mode: 0o600 });
    try {
      await createTar({ gzip: true, file: await this.pathFor(name), cwd: this.dir, portable: true }, members);
    } finally {
      for (const member of members) await unlink(path.join(this.dir, member)).catch(() => undefined);
    }
    return this.attach(name, 'application/gzip');
  }

  /** Removes the directory and everything in it. */
  async remove(): Promise<void> {
    await rm(this.dir, { recursive: true, force: true });
  }
}
