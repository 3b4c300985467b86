// The cache of installed suite dependencies (DEPENDENCY_CACHE_DIR):
//
//   entries/<key>/            one install: package.json, the lockfile, node_modules/
//   entries/<key>/.outpost-entry.json   its size; its mtime is when it was last used
//   installs/<key>-<random>/  installs in progress (and removed entries on their way out)
//
// An install happens in installs/ and becomes an entry by one rename, so an
// entry is complete or absent. Jobs of this agent that need the same key while
// it installs wait for that one install (bounded by its time limit and their
// own abort signal). After each install the least recently used entries not in
// use are removed until the cache fits DEPENDENCY_CACHE_MAX_MB. One agent per
// cache folder: another agent's runs are not known here.

import { randomBytes } from 'node:crypto';
import { chmod, lstat, mkdir, readdir, readFile, rename, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { makeDirectories } from '../../../core/make-directories.js';
import path from 'node:path';

export const ENTRY_MARK = '.outpost-entry.json';
/** A folder in installs/ older than this is from an agent that died mid-install. */
const STALE_INSTALL_MS = 30 * 60_000;
/** The size walk of one entry stops counting here (a suite's node_modules is far smaller). */
const SIZE_WALK_MAX_ENTRIES = 500_000;

export interface EntryRecord {
  manager: string;
  managerVersion: string;
  lockfile: string;
  sizeBytes: number;
  installedAt: string;
}

/** Installs into its scratch folder; resolves to the entry's record, or null when it failed. */
export type Installer = (scratch: string) => Promise<Omit<EntryRecord, 'sizeBytes' | 'installedAt'> | null>;

/** What a job got from the cache: the entry's folder, released when its run is over. */
export interface CacheLease {
  dir: string;
  hit: boolean;
  release(): void;
}

/** The bytes under `dir` (files and links, not following links), bounded in entries. */
export async function folderSize(dir: string): Promise<number> {
  let total = 0;
  let seen = 0;
  const stack = [dir];
  while (stack.length > 0 && seen < SIZE_WALK_MAX_ENTRIES) {
    const current = stack.pop() as string;
    let names: string[];
    try {
      names = await readdir(current);
    } catch {
      continue;
    }
    for (const name of names) {
      if (++seen > SIZE_WALK_MAX_ENTRIES) break;
      const file = path.join(current, name);
      try {
        const info = await lstat(file);
        total += info.size;
        if (info.isDirectory()) stack.push(file);
      } catch {
        // Gone meanwhile.
      }
    }
  }
  return total;
}

export class DependencyCache {
  private readonly inflight = new Map<string, Promise<string | null>>();
  private readonly inUse = new Map<string, number>();
  private swept = false;

  constructor(
    readonly root: string,
    readonly maxBytes: number,
  ) {}

  private entryDir(key: string): string {
    return path.join(this.root, 'entries', key);
  }

  private installsDir(): string {
    return path.join(this.root, 'installs');
  }

  /** Creates the folders (0755: a run's own uid reads its entry) and, once, removes installs a dead agent left. */
  private async prepare(): Promise<void> {
    for (const dir of [this.root, path.join(this.root, 'entries'), this.installsDir()]) {
      await makeDirectories(dir, 0o755);
      await chmod(dir, 0o755);
    }
    if (this.swept) return;
    this.swept = true;
    const now = Date.now();
    for (const name of await readdir(this.installsDir()).catch(() => [] as string[])) {
      const dir = path.join(this.installsDir(), name);
      const info = await lstat(dir).catch(() => null);
      if (info && now - info.mtimeMs > STALE_INSTALL_MS) await rm(dir, { recursive: true, force: true }).catch(() => undefined);
    }
  }

  private async present(key: string): Promise<boolean> {
    return stat(path.join(this.entryDir(key), ENTRY_MARK)).then(
      () => true,
      () => false,
    );
  }

  private hold(key: string): void {
    this.inUse.set(key, (this.inUse.get(key) ?? 0) + 1);
  }

  private drop(key: string): void {
    const left = (this.inUse.get(key) ?? 1) - 1;
    if (left <= 0) this.inUse.delete(key);
    else this.inUse.set(key, left);
  }

  /** The job's hold on the entry, handed over as a lease; its mark's mtime is the entry's last use (LRU), whatever the file system does with atimes. */
  private leased(key: string, hit: boolean): CacheLease {
    const now = new Date();
    void utimes(path.join(this.entryDir(key), ENTRY_MARK), now, now).catch(() => undefined);
    let released = false;
    return {
      dir: this.entryDir(key),
      hit,
      release: () => {
        if (released) return;
        released = true;
        this.drop(key);
      },
    };
  }

  /**
   * The entry for `key`: there already (a hit), installed by another job of this agent meanwhile (also a
   * hit: this job installed nothing), or installed now by `install` into the folder it is given, which
   * must leave `project/` (package.json, lockfile, node_modules) in it. `install` resolves to the
   * record on success or to null (the entry is then not made; the caller has its reason).
   */
  async acquire(key: string, install: Installer, signal: AbortSignal): Promise<CacheLease | null> {
    await this.prepare();
    // Held from the start: an eviction meanwhile (after another key's install) passes it by.
    this.hold(key);
    let lease: CacheLease | null = null;
    try {
      lease = await this.find(key, install, signal);
      return lease;
    } finally {
      if (!lease) this.drop(key);
    }
  }

  private async find(key: string, install: Installer, signal: AbortSignal): Promise<CacheLease | null> {
    if (await this.present(key)) return this.leased(key, true);
    const running = this.inflight.get(key);
    if (running) {
      const done = await Promise.race([running, abortOf(signal)]);
      return done === ABORTED || done === null ? null : this.leased(key, true);
    }
    const attempt = this.installEntry(key, install);
    this.inflight.set(key, attempt);
    try {
      return (await attempt) === null ? null : this.leased(key, false);
    } finally {
      this.inflight.delete(key);
    }
  }

  private async installEntry(key: string, install: Installer): Promise<string | null> {
    const scratch = path.join(this.installsDir(), `${key.slice(0, 32)}-${randomBytes(6).toString('hex')}`);
    await mkdir(scratch, { mode: 0o755 });
    try {
      const record = await install(scratch);
      if (record === null) return null;
      const project = path.join(scratch, 'project');
      const full: EntryRecord = {
        ...record,
        sizeBytes: await folderSize(project),
        installedAt: new Date().toISOString(),
      };
      await writeFile(path.join(project, ENTRY_MARK), `${JSON.stringify(full)}\n`);
      await chmod(project, 0o755);
      try {
        await rename(project, this.entryDir(key));
      } catch (error) {
        // Another agent on the same folder made it first: theirs is as good.
        const code = (error as NodeJS.ErrnoException).code;
        if ((code !== 'ENOTEMPTY' && code !== 'EEXIST') || !(await this.present(key))) throw error;
      }
      await this.evict(key);
      return this.entryDir(key);
    } finally {
      await rm(scratch, { recursive: true, force: true }).catch(() => undefined);
    }
  }

  /** Removes least recently used entries, not in use and not `keep`, until the cache fits its bound. */
  async evict(keep?: string): Promise<string[]> {
    const names = await readdir(path.join(this.root, 'entries')).catch(() => [] as string[]);
    const entries: Array<{ key: string; size: number; usedAt: number }> = [];
    for (const key of names) {
      try {
        const mark = path.join(this.entryDir(key), ENTRY_MARK);
        const [info, text] = await Promise.all([stat(mark), readFile(mark, 'utf8')]);
        const size = Number((JSON.parse(text) as Partial<EntryRecord>).sizeBytes);
        entries.push({
          key,
          size: Number.isFinite(size) ? size : 0,
          usedAt: info.mtimeMs,
        });
      } catch {
        // Not an entry (a half-removed one): counted as nothing.
      }
    }
    let total = entries.reduce((sum, e) => sum + e.size, 0);
    const removed: string[] = [];
    entries.sort((a, b) => a.usedAt - b.usedAt);
    for (const entry of entries) {
      if (total <= this.maxBytes) break;
      if (entry.key === keep || this.inUse.has(entry.key)) continue;
      // Out of entries/ in one rename, then deleted: a job never finds half an entry.
      const away = path.join(this.installsDir(), `${entry.key.slice(0, 32)}-removed-${randomBytes(6).toString('hex')}`);
      try {
        await rename(this.entryDir(entry.key), away);
      } catch {
        continue;
      }
      await rm(away, { recursive: true, force: true }).catch(() => undefined);
      total -= entry.size;
      removed.push(entry.key);
    }
    return removed;
  }
}

const ABORTED = Symbol('aborted');

function abortOf(signal: AbortSignal): Promise<typeof ABORTED> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve(ABORTED);
    signal.addEventListener('abort', () => resolve(ABORTED), { once: true });
  });
}

const caches = new Map<string, DependencyCache>();

/** One cache object per folder in this process (its in-flight installs and leases are shared). */
export function dependencyCache(root: string, maxBytes: number): DependencyCache {
  let cache = caches.get(root);
  if (!cache) {
    cache = new DependencyCache(root, maxBytes);
    caches.set(root, cache);
  }
  return cache;
}
