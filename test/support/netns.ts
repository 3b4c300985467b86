// Network namespaces for tests that need several hosts on one machine
// (docs/development.md, "Tests"): namespaces, veth pairs, per-namespace sysctls, nftables rules
// and /etc/hosts files, all with names unique to this run. Every command runs
// through execFileSync/spawn without a shell. Addresses are picked by the test
// in 10.213.N.0/24 (a subnet this host does not route), and traffic only ever
// goes to addresses a lab created.
//
// Names carry the creating process id (`op-<pid36>-…`), so that leftovers of a
// killed run are recognised and removed by the next run, while namespaces of a
// run still going (another test file in parallel) are left alone.

import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { findExecutable } from './nginx.js';
import { isAlive } from './daemon.js';

const PREFIX = 'op-';
const NAME = /^op-([0-9a-z]{1,6})-/;
const NETNS_ETC = '/etc/netns';

/** The absolute path of a system tool (PATH, then the sbin directories), or the name itself. */
export function tool(name: string): string {
  return name.includes('/') ? name : (findExecutable(name) ?? name);
}

/** Runs a command without a shell; throws with its stderr on failure. */
export function sh(command: string, args: string[], input?: string): string {
  try {
    return execFileSync(tool(command), args, {
      encoding: 'utf8',
      stdio: ['pipe', 'pipe', 'pipe'],
      timeout: 15_000,
      ...(input !== undefined ? { input } : {}),
    });
  } catch (error) {
    const e = error as Error & { stderr?: string };
    throw new Error(`${command} ${args.join(' ')} failed: ${e.stderr?.trim() || e.message}`);
  }
}

/** Why namespaces cannot be used here (not root, tools missing), or undefined when they can. */
export function netnsUnavailable(tools: string[] = ['ip']): string | undefined {
  if (process.getuid?.() !== 0) return 'network namespace tests need root';
  const missing = tools.filter((tool) => !findExecutable(tool));
  if (missing.length > 0) return `missing ${missing.join(', ')} (.ci/run installs them: iproute2, nftables, iputils-ping, util-linux)`;
  return undefined;
}


function staleOwner(name: string): boolean {
  const match = NAME.exec(name);
  if (!match?.[1]) return false;
  const pid = Number.parseInt(match[1], 36);
  return pid !== process.pid && !isAlive(pid);
}

/** Removes namespaces, host-side veths and /etc/netns entries left by runs whose process is gone. */
export function cleanupStale(): void {
  const namespaces = sh('ip', ['netns', 'list'])
    .split('\n')
    .map((line) => line.split(' ')[0] ?? '')
    .filter((name) => name.startsWith(PREFIX));
  for (const name of namespaces) {
    if (!staleOwner(name)) continue;
    try {
      sh('ip', ['netns', 'del', name]);
    } catch {
      // Raced with another cleanup.
    }
  }
  const links = sh('ip', ['-o', 'link', 'show'])
    .split('\n')
    .map((line) => /^\d+:\s+([^:@\s]+)/.exec(line)?.[1] ?? '')
    .filter((name) => name.startsWith(PREFIX));
  for (const link of links) {
    if (!staleOwner(link)) continue;
    try {
      sh('ip', ['link', 'del', link]);
    } catch {
      // Gone with its peer.
    }
  }
  if (existsSync(NETNS_ETC)) {
    for (const entry of readdirSync(NETNS_ETC)) {
      if (entry.startsWith(PREFIX) && staleOwner(entry)) rmSync(path.join(NETNS_ETC, entry), { recursive: true, force: true });
    }
  }
}

export interface NamespaceOptions {
  /** `sysctl -w` settings inside the namespace, e.g. {'net.ipv4.ping_group_range': '0 2147483647'}. */
  sysctls?: Record<string, string>;
  /** Disable IPv6 on every interface of the namespace (for IPv4-fallback tests). */
  disableIPv6?: boolean;
  /** Contents of the namespace's own /etc/hosts (`ip netns exec` bind-mounts /etc/netns/NAME/hosts). */
  hosts?: string;
  /** An nftables ruleset loaded with `nft -f -` inside the namespace. */
  nftables?: string;
}

export class Netns {
  constructor(
    readonly name: string,
    private readonly lab: NetLab,
  ) {}

  /** Runs a command inside the namespace (as root), returning its stdout. */
  exec(command: string, args: string[], input?: string): string {
    return sh('ip', ['netns', 'exec', this.name, tool(command), ...args], input);
  }

  sysctl(key: string, value: string): void {
    this.exec('sysctl', ['-q', '-w', `${key}=${value}`]);
  }

  nft(ruleset: string): void {
    this.exec('nft', ['-f', '-'], ruleset);
  }

  /** Adds an address (CIDR) to an interface of this namespace. */
  addAddress(device: string, cidr: string): void {
    sh('ip', ['-n', this.name, 'addr', 'add', cidr, 'dev', device]);
  }

  /** argv prefix that runs a command in this namespace, optionally as an unprivileged user without any capability. */
  argv(command: string[], as?: { uid: number; gid: number }): string[] {
    const drop = as
      ? [
          tool('setpriv'),
          `--reuid=${as.uid}`,
          `--regid=${as.gid}`,
          '--clear-groups',
          '--inh-caps=-all',
          '--bounding-set=-all',
        ]
      : [];
    return [tool('ip'), 'netns', 'exec', this.name, ...drop, ...command];
  }

  /** Spawns a command in the namespace and collects its output; kills it after `timeoutMs`. */
  run(
    command: string[],
    opts: { env?: NodeJS.ProcessEnv; as?: { uid: number; gid: number }; timeoutMs?: number; cwd?: string } = {},
  ): Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }> {
    const [bin, ...args] = this.argv(command, opts.as);
    return new Promise((resolve, reject) => {
      const child: ChildProcess = spawn(bin as string, args, {
        env: opts.env ?? process.env,
        stdio: ['ignore', 'pipe', 'pipe'],
        ...(opts.cwd ? { cwd: opts.cwd } : {}),
      });
      this.lab.track(child);
      let stdout = '';
      let stderr = '';
      child.stdout?.on('data', (chunk: Buffer) => {
        stdout += chunk;
      });
      child.stderr?.on('data', (chunk: Buffer) => {
        stderr += chunk;
      });
      const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 60_000);
      child.once('error', (error) => {
        clearTimeout(timer);
        reject(error);
      });
      child.once('close', (code, signal) => {
        clearTimeout(timer);
        resolve({ code, signal, stdout, stderr });
      });
    });
  }
}

/** The host's side of a link, for veths with one end in the test's own namespace. */
export const HOST = 'host' as const;

/**
 * One test file's namespaces. Create it in beforeAll, call destroy() in
 * afterAll; it also removes what a killed earlier run left behind.
 */
export class NetLab {
  readonly id: string;
  private readonly namespaces: Netns[] = [];
  private readonly hostLinks: string[] = [];
  private readonly children = new Set<ChildProcess>();
  private counter = 0;

  constructor() {
    cleanupStale();
    this.id = `${PREFIX}${process.pid.toString(36)}-`;
  }

  /** A fresh short name: op-<pid36>-<n><random>, at most 15 characters (a valid interface name too). */
  private name(): string {
    this.counter += 1;
    const name = `${this.id}${this.counter.toString(36)}${randomBytes(2).toString('hex').slice(0, 15 - this.id.length - 2)}`;
    return name.slice(0, 15);
  }

  track(child: ChildProcess): void {
    this.children.add(child);
    child.once('close', () => this.children.delete(child));
  }

  /** A /24 prefix like "10.213.57" that no route of this host covers yet. */
  subnet(): string {
    const routes = sh('ip', ['-4', 'route', 'show', 'table', 'all']);
    for (let attempt = 0; attempt < 64; attempt++) {
      const third = 1 + ((randomBytes(1)[0] ?? 0) % 254);
      const prefix = `10.213.${third}`;
      if (!routes.includes(`${prefix}.`)) return prefix;
    }
    throw new Error('no free 10.213.x.0/24 subnet on this host');
  }

  namespace(opts: NamespaceOptions = {}): Netns {
    const name = this.name();
    sh('ip', ['netns', 'add', name]);
    const ns = new Netns(name, this);
    this.namespaces.push(ns);
    sh('ip', ['-n', name, 'link', 'set', 'lo', 'up']);
    if (opts.disableIPv6) {
      for (const scope of ['all', 'default', 'lo']) ns.sysctl(`net.ipv6.conf.${scope}.disable_ipv6`, '1');
    }
    for (const [key, value] of Object.entries(opts.sysctls ?? {})) ns.sysctl(key, value);
    if (opts.hosts !== undefined) {
      mkdirSync(path.join(NETNS_ETC, name), { recursive: true, mode: 0o755 });
      writeFileSync(path.join(NETNS_ETC, name, 'hosts'), opts.hosts, { mode: 0o644 });
    }
    if (opts.nftables) ns.nft(opts.nftables);
    return ns;
  }

  /**
   * A veth pair between `a` (a namespace, or HOST for the test process's own
   * namespace) and namespace `b`, with the given addresses (CIDR), both up.
   * Returns the interface names.
   */
  link(a: Netns | typeof HOST, aCidr: string, b: Netns, bCidr: string, opts: { disableIPv6?: boolean } = {}): { a: string; b: string } {
    const aName = this.name();
    const bName = this.name();
    if (a === HOST) {
      sh('ip', ['link', 'add', aName, 'type', 'veth', 'peer', 'name', bName, 'netns', b.name]);
      this.hostLinks.push(aName);
      if (opts.disableIPv6) sh('sysctl', ['-q', '-w', `net.ipv6.conf.${aName}.disable_ipv6=1`]);
      sh('ip', ['addr', 'add', aCidr, 'dev', aName]);
      sh('ip', ['link', 'set', aName, 'up']);
    } else {
      sh('ip', ['-n', a.name, 'link', 'add', aName, 'type', 'veth', 'peer', 'name', bName, 'netns', b.name]);
      sh('ip', ['-n', a.name, 'addr', 'add', aCidr, 'dev', aName]);
      sh('ip', ['-n', a.name, 'link', 'set', aName, 'up']);
    }
    sh('ip', ['-n', b.name, 'addr', 'add', bCidr, 'dev', bName]);
    sh('ip', ['-n', b.name, 'link', 'set', bName, 'up']);
    return { a: aName, b: bName };
  }

  /** Kills what still runs in the lab, deletes its namespaces (their veths go with them) and hosts files. */
  destroy(): void {
    for (const child of this.children) child.kill('SIGKILL');
    for (const link of this.hostLinks) {
      try {
        sh('ip', ['link', 'del', link]);
      } catch {
        // Already gone with its peer.
      }
    }
    for (const ns of this.namespaces) {
      try {
        sh('ip', ['netns', 'del', ns.name]);
      } catch {
        // Already gone.
      }
      rmSync(path.join(NETNS_ETC, ns.name), { recursive: true, force: true });
    }
    this.namespaces.length = 0;
  }
}
