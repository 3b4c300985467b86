// Keeps a script away from the agent and from other scripts: what the agent
// holds (API_KEY and OUTPOST_SECRET_* in its environment, readable at
// /proc/<pid>/environ by any process of its user) and what another run holds
// (its job's secret variables in its environment and in its folder).
//
// One mechanism, chosen once at start by trying each (strongest first):
//
// - `uid-pidns` (the agent runs as root and may unshare): each run gets a uid
//   of its own (SCRIPT_UID_FIRST…) and a mount and PID namespace of its own,
//   with its own /proc, so it sees only its own processes; an empty tmpfs
//   covers the temporary directory (other runs' folders), /dev/shm and the
//   state directory, and its own folder (its uid's, mode 0700) is bound back.
// - `uid` (root, but no namespaces, e.g. Docker's default seccomp profile):
//   a uid of its own per run. /proc lists every process, but another uid's
//   environment, memory and 0700 folders cannot be read.
// - `userns` (not root; the kernel allows unprivileged user namespaces): the
//   agent's own uid, in a user, mount and PID namespace of its own, covered
//   and bound back like uid-pidns.
//
// In each, the script's process has no capabilities and no_new_privs (a file
// capability such as tcpdump's cap_net_raw does not apply to it). When none
// works, scripts are refused unless the operator turned isolation off
// (SCRIPT_ISOLATION=off), knowing that a script may then read the agent's key.

import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { lchown, lstat, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { shared } from './harness.js';

export type IsolationSetting = 'auto' | 'off';
export type IsolationMechanism = 'uid-pidns' | 'uid' | 'userns';

export interface ScriptIsolation {
  /** The mechanism in use; 'off' when the operator turned isolation off, 'none' when nothing works. */
  mechanism: IsolationMechanism | 'off' | 'none';
  /** One line: what it protects, or why nothing works (what each mechanism answered). */
  detail: string;
  /** The programs it starts scripts through (absolute paths). */
  tools?: Tools;
  /** Paths an empty tmpfs covers in the script's mount namespace (userns). */
  hidden?: string[];
}

/** The uids runs get in the uid mechanisms: one per concurrent run, never reused while a run holds it. */
export const SCRIPT_UID_FIRST = 50_000;
export const SCRIPT_UID_COUNT = 1_000;

interface Tools {
  setpriv: string;
  unshare?: string;
  sh?: string;
}

/** The harness's watchdog (harness/watchdog.cjs) leaves this in the run's folder when the agent is gone. */
const { AGENT_GONE_MARK } = shared;

/** How a probe or a setup step reports that it failed inside the wrapper (before the script started). */
export const SETUP_FAILED_EXIT = 125;

const PROBE_TIMEOUT_MS = 15_000;

function findTool(name: string): string | undefined {
  for (const dir of ['/usr/bin', '/bin', '/usr/sbin', '/sbin']) {
    const candidate = path.join(dir, name);
    if (existsSync(candidate)) return candidate;
  }
  return undefined;
}

/** Drops every capability (also from the bounding set) and sets no_new_privs before the script's program starts. */
function dropPrivileges(setpriv: string, uid?: number): string[] {
  const ids = uid === undefined ? [] : [`--reuid=${uid}`, `--regid=${uid}`, '--clear-groups'];
  return [setpriv, ...ids, '--inh-caps=-all', '--bounding-set=-all', '--no-new-privs', '--'];
}

/** The setup shell's arguments: cover `hidden`, bind `dir` back (and `shared`, read-only), then run what follows. */
function hideThenRun(sh: string, dir: string, shared: string | undefined, hidden: string[] | undefined): string[] {
  return [sh, '-c', HIDE_SETUP, 'outpost-setup', dir, shared ?? '', ...(hidden ?? []), '--'];
}

// PID 1 of the run's namespaces, as root there (before the script's privileges are dropped): covers each
// hidden path with an empty tmpfs, binds the run's folder back in through a descriptor opened before (its
// path is covered too; `--no-canonicalize`, or mount would resolve /proc/self/fd/9 to the covered name),
// then runs the rest of its arguments as its child: PID 1 cannot be killed from inside its namespace, not
// even by itself, and the harness's watchdog must be able to end the run. When the watchdog marked the
// folder (the agent is gone), it kills what is left of the run and removes the folder, which the script's
// uid may not (detaching the mounts lazily: a process killed a moment ago may still hold them).
// `shared` (may be empty): a folder the run reads but must not change (a PLAYWRIGHT suite's installed
// dependencies in the cache, src/checks/scripted/dependencies/cache.ts), bound back read-only at its path.
const HIDE_SETUP = [
  'dir=$1; shared=$2; shift 2',
  `exec 9<"$dir" || exit ${SETUP_FAILED_EXIT}`,
  `if [ -n "$shared" ]; then exec 8<"$shared" || exit ${SETUP_FAILED_EXIT}; fi`,
  `while [ "$1" != -- ]; do mount -t tmpfs -o mode=0755,nosuid,nodev outpost-hidden "$1" || exit ${SETUP_FAILED_EXIT}; shift; done; shift`,
  `mkdir -p "$dir" && mount --no-canonicalize --bind /proc/self/fd/9 "$dir" || exit ${SETUP_FAILED_EXIT}`,
  'exec 9<&-',
  `if [ -n "$shared" ]; then mkdir -p "$shared" && mount --no-canonicalize --bind /proc/self/fd/8 "$shared" && mount -o remount,bind,ro "$shared" || exit ${SETUP_FAILED_EXIT}; exec 8<&-; fi`,
  '"$@"; code=$?',
  `if [ -e "$dir/${AGENT_GONE_MARK}" ]; then kill -9 -1; rm -rf "$dir"; umount -l "$dir"; umount -l "$(dirname "$dir")"; rmdir "$dir"; fi 2>/dev/null`,
  'exit $code',
].join('\n');

/**
 * The command line that starts `command args` for a run in `dir` under the mechanism; `uid` for the uid
 * mechanisms. Off: the command as it is.
 */
export function isolatedCommand(isolation: ScriptIsolation, run: { dir: string; uid?: number; shared?: string }, command: string, args: string[]): { file: string; args: string[] } {
  const tools = isolation.tools;
  const inner = [command, ...args];
  switch (isolation.mechanism) {
    case 'uid-pidns': {
      if (!tools?.unshare || !tools.sh) break;
      return {
        file: tools.unshare,
        args: ['--mount', '--pid', '--fork', '--mount-proc', '--kill-child', '--', ...hideThenRun(tools.sh, run.dir, run.shared, isolation.hidden), ...dropPrivileges(tools.setpriv, run.uid), ...inner],
      };
    }
    case 'uid': {
      if (!tools) break;
      const [file, ...rest] = dropPrivileges(tools.setpriv, run.uid);
      return { file: file as string, args: [...rest, ...inner] };
    }
    case 'userns': {
      if (!tools?.unshare || !tools.sh) break;
      return {
        file: tools.unshare,
        args: ['--user', '--map-root-user', '--mount', '--pid', '--fork', '--mount-proc', '--kill-child', '--', ...hideThenRun(tools.sh, run.dir, run.shared, isolation.hidden), ...dropPrivileges(tools.setpriv), ...inner],
      };
    }
    default:
      return { file: command, args };
  }
  throw new Error(`script isolation ${isolation.mechanism} is missing its tools`);
}

/** `inner` is `outer` or inside it. */
function isWithin(inner: string, outer: string): boolean {
  const relative = path.relative(outer, inner);
  return relative === '' || (!relative.startsWith('..') && !path.isAbsolute(relative));
}

/** True for the mechanisms that give each run a uid of its own. */
export function usesRunUid(isolation: ScriptIsolation): boolean {
  return isolation.mechanism === 'uid-pidns' || isolation.mechanism === 'uid';
}

const runUidsInUse = new Set<number>();
let nextRunUid = 0;

/** A uid no other live run holds (there are never more runs than SCRIPT_CONCURRENCY ≤ 100). */
export function takeRunUid(): number {
  for (let i = 0; i < SCRIPT_UID_COUNT; i++) {
    const uid = SCRIPT_UID_FIRST + ((nextRunUid + i) % SCRIPT_UID_COUNT);
    if (runUidsInUse.has(uid)) continue;
    nextRunUid = (uid - SCRIPT_UID_FIRST + 1) % SCRIPT_UID_COUNT;
    runUidsInUse.add(uid);
    return uid;
  }
  throw new Error(`all ${SCRIPT_UID_COUNT} script uids are in use`);
}

export function releaseRunUid(uid: number): void {
  runUidsInUse.delete(uid);
}

/** True when `uid` is one that runs get (a stale run folder of this agent's). */
export function isRunUid(uid: number): boolean {
  return uid >= SCRIPT_UID_FIRST && uid < SCRIPT_UID_FIRST + SCRIPT_UID_COUNT;
}

/** Hands the run's folder (what the agent wrote there, at most a suite's files) to the run's uid. */
export async function giveToRunUid(dir: string, uid: number): Promise<void> {
  const walk = async (target: string, depth: number): Promise<void> => {
    // lchown: a link in the folder (to a suite's dependencies) is handed over, never what it points to.
    await lchown(target, uid, uid);
    if (depth > 8 || !(await lstat(target)).isDirectory()) return;
    for (const name of await readdir(target)) await walk(path.join(target, name), depth + 1);
  };
  await walk(dir, 0);
}

/** The command line that a probe runs: fails (exit 1) if it can read what it must not. */
// A shell probe, not a Node one: the agent runs it before its health server starts, and on a loaded
// machine a Node process per mechanism took seconds (up to the timeout, which picked a weaker mechanism).
// It also checks that the run's user may execute the agent's Node, as every script needs to.
const PROBE_SCRIPT = [
  'failed=0',
  'if cat "/proc/$1/environ" >/dev/null 2>&1; then echo "it could read the agent\'s environment"; failed=1; fi',
  'if cat "$2" >/dev/null 2>&1; then echo "it could read another run\'s folder"; failed=1; fi',
  'if ! echo ok 2>/dev/null >"$3"; then echo "it could not write its own folder"; failed=1; fi',
  'if [ ! -x "$4" ]; then echo "it cannot execute $4"; failed=1; fi',
  'exit $failed',
].join('\n');

/** Runs the probe under a mechanism, in two folders made like runs' folders; resolves to null when it works, else why not. */
async function probe(isolation: ScriptIsolation): Promise<string | null> {
  const root = tmpdir();
  const dirs: string[] = [];
  const uid = usesRunUid(isolation) ? takeRunUid() : undefined;
  try {
    const dir = await mkdtemp(path.join(root, 'outpost-script-'));
    dirs.push(dir);
    const sibling = await mkdtemp(path.join(root, 'outpost-script-'));
    dirs.push(sibling);
    await writeFile(path.join(sibling, 'input.json'), '{}', { mode: 0o600 });
    if (uid !== undefined) await giveToRunUid(dir, uid);
    const shell = isolation.tools?.sh ?? '/bin/sh';
    const probeArgs = ['-c', PROBE_SCRIPT, 'probe', String(process.pid), path.join(sibling, 'input.json'), path.join(dir, 'out'), process.execPath];
    const { file, args } = isolatedCommand(isolation, { dir, ...(uid !== undefined ? { uid } : {}) }, shell, probeArgs);
    return await new Promise<string | null>((resolve) => {
      const child = spawn(file, args, { cwd: dir, env: {}, stdio: ['ignore', 'pipe', 'pipe'] });
      let output = '';
      const take = (chunk: Buffer) => {
        if (output.length < 2_000) output += chunk.toString();
      };
      child.stdout.on('data', take);
      child.stderr.on('data', take);
      const timer = setTimeout(() => child.kill('SIGKILL'), PROBE_TIMEOUT_MS);
      child.on('error', (error) => {
        clearTimeout(timer);
        resolve(error.message);
      });
      child.on('close', (code, signal) => {
        clearTimeout(timer);
        if (code === 0) return resolve(null);
        const said = output.trim().split('\n').filter(Boolean).at(-1) ?? '';
        resolve(said || (signal ? `killed by ${signal}` : `exit code ${code}`));
      });
    });
  } catch (error) {
    return (error as Error).message;
  } finally {
    if (uid !== undefined) releaseRunUid(uid);
    await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true }).catch(() => undefined)));
  }
}

/** Paths the userns mechanism covers: the temporary directory (runs' folders), /dev/shm, the state directory. */
function hiddenPaths(stateDir: string | undefined, keep: string[]): string[] {
  const candidates = [tmpdir(), '/dev/shm', ...(stateDir ? [stateDir] : [])];
  // Never cover what a script needs: Node.js, the runtimes, the browser.
  const usable = [...new Set(candidates.map((p) => path.resolve(p)))].filter((p) => existsSync(p) && !keep.some((k) => isWithin(k, p)));
  // A path inside another covered one is covered already (and its mount point is gone under the tmpfs).
  return usable.filter((p) => !usable.some((other) => other !== p && isWithin(p, other)));
}

export interface DetectOptions {
  /** STATE_DIR: covered under userns (results waiting to be sent, artifacts). */
  stateDir?: string;
  /** What scripts must still reach (the runtimes, the browser); Node.js itself always. */
  keep?: string[];
}

/** Tries each mechanism, strongest first, and returns the first that really keeps a probe out. */
export async function detectIsolation(setting: IsolationSetting, options: DetectOptions = {}): Promise<ScriptIsolation> {
  if (setting === 'off') return { mechanism: 'off', detail: 'SCRIPT_ISOLATION=off: scripts run as the agent\'s user and can read its environment (API_KEY) and other runs\' files' };
  if (process.platform !== 'linux') return { mechanism: 'none', detail: `no isolation on ${process.platform} (Linux namespaces and uids only)` };
  const setpriv = findTool('setpriv');
  const unshare = findTool('unshare');
  const sh = findTool('sh');
  const mount = findTool('mount');
  if (!setpriv) return { mechanism: 'none', detail: 'setpriv (util-linux) is not installed' };
  const tools: Tools = { setpriv, ...(unshare ? { unshare } : {}), ...(sh ? { sh } : {}) };
  // mount is run by the set-up shell (hideThenRun) by name: only its presence is checked.
  const tried: string[] = [];
  const candidates: ScriptIsolation[] = [];
  const root = process.getuid?.() === 0;
  const keep = [path.dirname(process.execPath), ...(options.keep ?? [])];
  const hidden = hiddenPaths(options.stateDir, keep);
  if (root && unshare && sh && mount) candidates.push({ mechanism: 'uid-pidns', detail: 'each run has a uid, a mount and a PID namespace of its own', tools, hidden });
  if (root) candidates.push({ mechanism: 'uid', detail: 'each run has a uid of its own (no PID namespace: processes are listed, but not readable)', tools });
  if (!root && unshare && sh && mount) {
    candidates.push({ mechanism: 'userns', detail: 'each run has a user, a mount and a PID namespace of its own (the agent\'s uid, no capabilities)', tools, hidden });
  }
  if (!root && !(unshare && sh && mount)) tried.push('userns: needs unshare, sh and mount (util-linux)');
  if (!root) tried.push('uid: the agent does not run as root');
  for (const candidate of candidates) {
    const why = await probe(candidate);
    if (why === null) return candidate;
    tried.push(`${candidate.mechanism}: ${why}`);
  }
  return { mechanism: 'none', detail: tried.join('; ') };
}

let current: Promise<ScriptIsolation> | undefined;

/** Chooses the mechanism (at start); later calls of scriptIsolation() get it. */
export function configureScriptIsolation(setting: IsolationSetting, options: DetectOptions = {}): Promise<ScriptIsolation> {
  current = detectIsolation(setting, options);
  return current;
}

/** The mechanism chosen at start; detected with the defaults on first use when nobody configured it. */
export function scriptIsolation(): Promise<ScriptIsolation> {
  current ??= detectIsolation('auto');
  return current;
}
