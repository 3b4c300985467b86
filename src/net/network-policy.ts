// The network policy (BLOCKED_NETWORKS, ALLOWED_NETWORKS): which addresses a
// check may connect to. It is judged on the address a socket is about to
// connect to — after name resolution, whatever notation named it — never on
// the text of a URL or host name (docs/network-policy.md).

import net, { isIP } from 'node:net';
import { networkInterfaces } from 'node:os';
import tls from 'node:tls';
import type { buildConnector } from 'undici';

import { type IpFamily, type ResolvedTarget, resolveTarget } from './ip-family.js';

export type AddressFamily = 4 | 6;

/** One CIDR of either list, with an optional port. */
export interface NetworkRule {
  family: AddressFamily;
  /** The network number, host bits cleared. */
  network: bigint;
  prefix: number;
  /** Only this port, when set. */
  port?: number;
  /** Any address of this host's own interfaces (the agent's own listening ports), instead of `network`. */
  ownAddresses?: boolean;
  /** The rule as shown in errors, /health and the log: `127.0.0.0/8`, `[fd00::/8]:443`, `own addresses:8081`. */
  text: string;
  /** Why a `default` rule is there ("loopback", "cloud metadata"…); absent for a rule written out. */
  label?: string;
}

export interface NetworkPolicy {
  blocked: readonly NetworkRule[];
  allowed: readonly NetworkRule[];
}

export type PolicyVerdict = { allowed: true; rule?: NetworkRule } | { allowed: false; rule: NetworkRule; reason: string };

/** What a refused connection throws; its message is the reason a result shows. */
export class NetworkPolicyError extends Error {
  readonly code = 'ENETPOLICY';
  constructor(
    message: string,
    readonly rule: NetworkRule,
  ) {
    super(message);
    this.name = 'NetworkPolicyError';
  }
}

/** A bad entry of BLOCKED_NETWORKS or ALLOWED_NETWORKS; the message names it. */
export class NetworkPolicyParseError extends Error {}

/** Bounds the lists: a policy is a handful of ranges, and every connection walks it. */
export const MAX_POLICY_ENTRIES = 256;

const IPV4_BITS = 32;
const IPV6_BITS = 128;

/** Parses an IPv4 dotted quad (as net.isIP accepts it) into 32 bits. */
function ipv4Bits(text: string): bigint {
  let value = 0n;
  for (const part of text.split('.')) value = (value << 8n) | BigInt(Number(part));
  return value;
}

/** Parses an IPv6 address (as net.isIP accepts it, zone index removed) into 128 bits. */
function ipv6Bits(text: string): bigint {
  let address = text;
  // An embedded IPv4 tail (::ffff:1.2.3.4) becomes two hextets.
  const tail = /(\d+\.\d+\.\d+\.\d+)$/.exec(address);
  if (tail?.[1]) {
    const v4 = ipv4Bits(tail[1]);
    address = `${address.slice(0, -tail[1].length)}${(v4 >> 16n).toString(16)}:${(v4 & 0xffffn).toString(16)}`;
  }
  const [head = '', rest] = address.split('::');
  const left = head === '' ? [] : head.split(':');
  const right = rest === undefined || rest === '' ? [] : rest.split(':');
  const missing = rest === undefined ? 0 : 8 - left.length - right.length;
  const hextets = [...left, ...Array<string>(missing).fill('0'), ...right];
  let value = 0n;
  for (const hextet of hextets) value = (value << 16n) | BigInt(Number.parseInt(hextet, 16));
  return value;
}

const MAPPED_PREFIX = 0xffffn << 32n;

/**
 * An IP address as the policy compares it: IPv4-mapped IPv6 (`::ffff:a.b.c.d`,
 * which a dual-stack socket connects to as IPv4) counts as the IPv4 address.
 * Undefined for text that is not an IP address.
 */
export function addressBits(raw: string): { family: AddressFamily; bits: bigint } | undefined {
  const text = raw.replace(/^\[(.*)\]$/, '$1').replace(/%.*$/, '');
  const kind = isIP(text);
  if (kind === 4) return { family: 4, bits: ipv4Bits(text) };
  if (kind !== 6) return undefined;
  const bits = ipv6Bits(text);
  if (bits >> 32n === MAPPED_PREFIX >> 32n) return { family: 4, bits: bits & 0xffffffffn };
  return { family: 6, bits };
}

function formatBits(family: AddressFamily, bits: bigint): string {
  if (family === 4) return [24n, 16n, 8n, 0n].map((shift) => Number((bits >> shift) & 0xffn)).join('.');
  const hextets = [];
  for (let shift = 112n; shift >= 0n; shift -= 16n) hextets.push(((bits >> shift) & 0xffffn).toString(16));
  // The longest run of zero hextets (two or more) becomes `::`.
  let best = { start: -1, length: 1 };
  for (let i = 0; i < 8; ) {
    if (hextets[i] !== '0') {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && hextets[j] === '0') j++;
    if (j - i > best.length) best = { start: i, length: j - i };
    i = j;
  }
  if (best.start < 0) return hextets.join(':');
  return `${hextets.slice(0, best.start).join(':')}::${hextets.slice(best.start + best.length).join(':')}`;
}

function mask(family: AddressFamily, prefix: number): bigint {
  const width = BigInt(family === 4 ? IPV4_BITS : IPV6_BITS);
  return ((1n << width) - 1n) ^ ((1n << (width - BigInt(prefix))) - 1n);
}

function ruleText(family: AddressFamily, network: bigint, prefix: number, port?: number): string {
  const full = prefix === (family === 4 ? IPV4_BITS : IPV6_BITS);
  const cidr = full ? formatBits(family, network) : `${formatBits(family, network)}/${prefix}`;
  if (port === undefined) return cidr;
  return family === 6 ? `[${cidr}]:${port}` : `${cidr}:${port}`;
}

/**
 * One entry: `10.0.0.0/8`, `10.1.2.3` (one host), `fd00::/8`, `::ffff:10.0.0.0/104`
 * (IPv4-mapped: the same as 10.0.0.0/8), with an optional port: `10.0.0.5:8081`,
 * `[fd00::/8]:443`. Host bits below the prefix are cleared.
 */
export function parseRule(entry: string, variable: string): NetworkRule {
  const bad = (why: string) => new NetworkPolicyParseError(`${variable} entry ${JSON.stringify(entry)} is invalid: ${why}`);
  let body = entry;
  let port: number | undefined;
  const bracketed = /^\[([^\]]+)\](?::(\d+))?$/.exec(entry);
  if (bracketed) {
    body = bracketed[1] as string;
    if (bracketed[2] !== undefined) port = Number(bracketed[2]);
  } else {
    const v4port = /^([\d.]+(?:\/\d+)?):(\d+)$/.exec(entry);
    if (v4port) {
      body = v4port[1] as string;
      port = Number(v4port[2]);
    }
  }
  if (port !== undefined && (!Number.isInteger(port) || port < 1 || port > 65535)) throw bad('the port must be 1 to 65535');
  const [address = '', prefixText, extra] = body.split('/');
  if (extra !== undefined) throw bad('must be an IP address or CIDR (10.0.0.0/8, fd00::/8), optionally with a port (10.0.0.5:8081, [fd00::1]:443)');
  const parsed = isIP(address) === 0 ? undefined : addressBits(address);
  if (!parsed) throw bad('must be an IP address or CIDR (10.0.0.0/8, fd00::/8), optionally with a port (10.0.0.5:8081, [fd00::1]:443)');
  const writtenFamily = isIP(address) as AddressFamily;
  const width = writtenFamily === 4 ? IPV4_BITS : IPV6_BITS;
  let prefix = width;
  if (prefixText !== undefined) {
    if (!/^\d{1,3}$/.test(prefixText) || Number(prefixText) > width) throw bad(`the prefix length of an IPv${writtenFamily} network is 0 to ${width}`);
    prefix = Number(prefixText);
  }
  let family = parsed.family;
  if (writtenFamily === 6 && parsed.family === 4) {
    // ::ffff:0:0/96 and longer are IPv4 networks written as IPv6; shorter ones also cover real IPv6.
    if (prefix < 96) family = 6;
    else prefix -= 96;
  }
  const bits = family === 6 && writtenFamily === 6 ? ipv6Bits(address.replace(/%.*$/, '')) : parsed.bits;
  const network = bits & mask(family, prefix);
  return { family, network, prefix, ...(port !== undefined ? { port } : {}), text: ruleText(family, network, prefix, port) };
}

/** What `default` stands for, besides the agent's own ports. */
const DEFAULT_RULES: ReadonlyArray<{ cidr: string; label: string }> = [
  { cidr: '127.0.0.0/8', label: 'loopback' },
  { cidr: '::1', label: 'loopback' },
  // Linux connects 0.0.0.0 and :: to the host itself: loopback by another name.
  { cidr: '0.0.0.0/8', label: 'this host' },
  { cidr: '::/96', label: 'unspecified and IPv4-compatible, this host' },
  { cidr: '169.254.0.0/16', label: 'link-local, cloud metadata' },
  { cidr: 'fe80::/10', label: 'link-local' },
  { cidr: 'fd00:ec2::254', label: 'cloud metadata' },
];

/** The agent's own listening ports that `default` blocks on every address of this host (health, local and server API). */
export interface OwnPort {
  port: number;
  /** What listens there: "health port", "API port". */
  what: string;
}

function splitList(value: string | undefined, variable: string): string[] {
  if (value === undefined) return [];
  const entries = value
    .split(',')
    .map((e) => e.trim())
    .filter((e) => e !== '');
  if (entries.length > MAX_POLICY_ENTRIES) throw new NetworkPolicyParseError(`${variable} has ${entries.length} entries: at most ${MAX_POLICY_ENTRIES}`);
  return entries;
}

/**
 * The policy from BLOCKED_NETWORKS and ALLOWED_NETWORKS as written; undefined
 * when BLOCKED_NETWORKS is empty (no policy: every address may be reached).
 * `default` (in BLOCKED_NETWORKS only) adds DEFAULT_RULES and `ownPorts`.
 */
export function parseNetworkPolicy(blocked: string | undefined, allowed: string | undefined, ownPorts: readonly OwnPort[]): NetworkPolicy | undefined {
  const blockedEntries = splitList(blocked, 'BLOCKED_NETWORKS');
  const allowedEntries = splitList(allowed, 'ALLOWED_NETWORKS');
  if (blockedEntries.length === 0) {
    if (allowedEntries.length > 0) throw new NetworkPolicyParseError('ALLOWED_NETWORKS is set but BLOCKED_NETWORKS is not: exceptions need something to be excepted from');
    return undefined;
  }
  const rules: NetworkRule[] = [];
  for (const entry of blockedEntries) {
    if (entry.toLowerCase() !== 'default') {
      rules.push(parseRule(entry, 'BLOCKED_NETWORKS'));
      continue;
    }
    for (const { cidr, label } of DEFAULT_RULES) rules.push({ ...parseRule(cidr, 'BLOCKED_NETWORKS'), label });
    for (const { port, what } of ownPorts) {
      if (port === 0) continue;
      rules.push({ family: 4, network: 0n, prefix: 0, port, ownAddresses: true, text: `own addresses:${port}`, label: `the agent's own ${what}` });
    }
  }
  const allowedRules = allowedEntries.map((entry) => {
    if (entry.toLowerCase() === 'default') throw new NetworkPolicyParseError('ALLOWED_NETWORKS entry "default" is invalid: default is a set of networks to block');
    return parseRule(entry, 'ALLOWED_NETWORKS');
  });
  return { blocked: rules, allowed: allowedRules };
}

/** How long a reading of this host's addresses is used: reading them costs ~0.2 ms, a connection far more. */
const OWN_ADDRESSES_TTL_MS = 1_000;
let ownAddressesRead: { at: number; addresses: Set<string> } | undefined;

/** This host's interface addresses, re-read at most every second: a pod's address may change between two checks' runs. */
function ownAddresses(): Set<string> {
  const now = Date.now();
  if (ownAddressesRead && now - ownAddressesRead.at < OWN_ADDRESSES_TTL_MS && now >= ownAddressesRead.at) return ownAddressesRead.addresses;
  const found = new Set<string>(['0.0.0.0', '::']);
  for (const list of Object.values(networkInterfaces())) {
    for (const entry of list ?? []) {
      const bits = addressBits(entry.address);
      if (bits) found.add(formatBits(bits.family, bits.bits));
    }
  }
  ownAddressesRead = { at: now, addresses: found };
  return found;
}

function matches(rule: NetworkRule, family: AddressFamily, bits: bigint, port: number | undefined, own: () => Set<string>): boolean {
  if (rule.port !== undefined && rule.port !== port) return false;
  if (rule.ownAddresses) return own().has(formatBits(family, bits));
  return rule.family === family && (bits & mask(family, rule.prefix)) === rule.network;
}

/** Specificity: the longer prefix wins; at equal prefixes a rule with a port beats one without; own-address rules count as a host. */
function weight(rule: NetworkRule): number {
  const prefix = rule.ownAddresses ? 128 : rule.family === 4 ? rule.prefix + 96 : rule.prefix;
  return prefix * 2 + (rule.port !== undefined ? 1 : 0);
}

function describeRule(rule: NetworkRule): string {
  return rule.label ? `${rule.text} (default: ${rule.label})` : rule.text;
}

/**
 * Whether `address` (an IP literal: what a socket connects to) on `port` may
 * be reached. The most specific matching rule of either list decides; at a tie
 * the blocking rule wins. An address no rule matches may be reached.
 */
export function judge(policy: NetworkPolicy, address: string, port?: number): PolicyVerdict {
  const parsed = addressBits(address);
  if (!parsed) {
    // Not an address: only a bug could bring one here, and refusing is the safe answer.
    const rule: NetworkRule = { family: 6, network: 0n, prefix: 0, text: 'anything that is not an IP address' };
    return { allowed: false, rule, reason: `blocked by network policy: ${JSON.stringify(address)} is not an IP address` };
  }
  const own = ownAddresses;
  let best: { rule: NetworkRule; blocked: boolean } | undefined;
  for (const [list, blocked] of [
    [policy.blocked, true],
    [policy.allowed, false],
  ] as const) {
    for (const rule of list) {
      if (!matches(rule, parsed.family, parsed.bits, port, own)) continue;
      const better = !best || weight(rule) > weight(best.rule) || (weight(rule) === weight(best.rule) && blocked && !best.blocked);
      if (better) best = { rule, blocked };
    }
  }
  if (!best) return { allowed: true };
  if (!best.blocked) return { allowed: true, rule: best.rule };
  const shown = formatBits(parsed.family, parsed.bits);
  const where = port === undefined ? shown : parsed.family === 6 ? `[${shown}]:${port}` : `${shown}:${port}`;
  return { allowed: false, rule: best.rule, reason: `blocked by network policy: ${where} is in BLOCKED_NETWORKS ${describeRule(best.rule)}` };
}

/** Throws NetworkPolicyError when the policy refuses the address; no policy allows everything. */
export function enforcePolicy(policy: NetworkPolicy | undefined, address: string, port?: number): void {
  if (!policy) return;
  const verdict = judge(policy, address, port);
  if (!verdict.allowed) throw new NetworkPolicyError(verdict.reason, verdict.rule);
}

/**
 * Resolves once and judges the address the caller will connect to: the
 * caller connects to `address` as returned, never to the name again, so a
 * name that resolves differently the second time (DNS rebinding) gains nothing.
 */
export async function resolvePermitted(
  host: string,
  family: IpFamily,
  policy: NetworkPolicy | undefined,
  port: number | undefined,
  signal?: AbortSignal,
): Promise<ResolvedTarget> {
  const resolved = await resolveTarget(host, family, signal);
  enforcePolicy(policy, resolved.address, port);
  return resolved;
}

/** The policy as /health and the startup log show it: the rules, nothing else. */
export function describePolicy(policy: NetworkPolicy | undefined): { blocked: string[]; allowed: string[] } | null {
  if (!policy) return null;
  return { blocked: policy.blocked.map(describeRule), allowed: policy.allowed.map(describeRule) };
}

/**
 * An undici connector for traffic of the agent's or server's own (alert
 * webhooks) under the policy: resolve once, judge, connect to that address.
 * TLS verifies the name the URL gave, as undici's own connector does.
 */
export function policedConnector(policy: NetworkPolicy, timeoutMs: number): buildConnector.connector {
  return (opts, callback) => {
    const port = Number(opts.port) || (opts.protocol === 'https:' ? 443 : 80);
    const host = opts.hostname.replace(/^\[(.*)\]$/, '$1');
    let done = false;
    const finish = (error: Error | null, socket?: net.Socket) => {
      if (done) {
        socket?.destroy();
        return;
      }
      done = true;
      clearTimeout(timer);
      if (error || !socket) callback(error ?? new Error('no socket'), null);
      else callback(null, socket);
    };
    let pending: net.Socket | undefined;
    const timer = setTimeout(() => {
      pending?.destroy();
      finish(Object.assign(new Error(`connecting to ${host}:${port} timed out after ${timeoutMs} ms`), { code: 'ETIMEDOUT' }));
    }, timeoutMs);
    // IPv4 first, as checks default to; a name with only an IPv6 address is tried over IPv6.
    const resolved = resolvePermitted(host, isIP(host) === 6 ? 'IPv6' : 'IPv4', policy, port).catch((error: NodeJS.ErrnoException) => {
      if (isIP(host) !== 0 || (error.code !== 'ENOTFOUND' && error.code !== 'ENODATA')) throw error;
      return resolvePermitted(host, 'IPv6', policy, port);
    });
    resolved.then(({ address }) => {
      if (done) return;
      const options = { host: address, port, noDelay: true };
      const socket =
        opts.protocol === 'https:'
          ? tls.connect({ ...options, servername: opts.servername || (isIP(host) ? undefined : host), ALPNProtocols: ['http/1.1'] })
          : net.connect(options);
      pending = socket;
      socket.once('error', (error) => finish(error));
      socket.once(opts.protocol === 'https:' ? 'secureConnect' : 'connect', () => {
        socket.removeAllListeners('error');
        finish(null, socket);
      });
    }, (error: Error) => finish(error));
  };
}
