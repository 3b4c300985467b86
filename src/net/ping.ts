// ICMP echo without root and without capabilities: Node.js has no ICMP socket
// API, so ICMP checks run the system's iputils `ping`, which opens an ICMP
// datagram socket (SOCK_DGRAM, IPPROTO_ICMP/ICMPV6) where the kernel allows it
// (`net.ipv4.ping_group_range`, per network namespace), and falls back to a raw
// socket only when it holds CAP_NET_RAW. This module finds the binary, runs it
// (no shell), parses its output and turns its failures into what to configure.

import { accessSync, constants } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { startTool, type ToolPaths } from './tool-process.js';

/** One echo reply. */
export interface PingReply {
  seq: number;
  /** Time to live (IPv4) or hop limit (IPv6) of the reply; null when ping did not print it. */
  ttl: number | null;
  /** Round-trip time in ms. */
  rtt: number;
}

export interface PingOutput {
  /** From the summary line; null when ping printed none (killed, or failed before sending). */
  transmitted: number | null;
  received: number | null;
  /** Unique replies, in arrival order (duplicates are counted, not listed). */
  replies: PingReply[];
  duplicates: number;
  /** ICMP errors ping reported, e.g. "From 10.0.0.1 icmp_seq=1 Destination Host Unreachable". */
  icmpErrors: string[];
}

const REPLY = /^\d+ bytes from .*?:?\s(?:icmp_)?seq=(\d+)(?:.*?\s(?:ttl|hlim)=(\d+))?.*?\stime[=<]\s?([\d.]+)\s?ms/;
const SUMMARY = /(\d+) packets transmitted, (\d+) (?:packets )?received/;
const ICMP_ERROR = /^From \S+.*(?:icmp_seq|seq)=\d+/;

/**
 * Parses iputils ping output (`-n`, C locale); also BusyBox's. Per-reply lines
 * look like `64 bytes from 127.0.0.1: icmp_seq=1 ttl=64 time=0.045 ms`.
 */
export function parsePingOutput(stdout: string): PingOutput {
  const out: PingOutput = { transmitted: null, received: null, replies: [], duplicates: 0, icmpErrors: [] };
  const seen = new Set<number>();
  for (const raw of stdout.split('\n')) {
    const line = raw.trim();
    const reply = REPLY.exec(line);
    if (reply) {
      const seq = Number(reply[1]);
      const rtt = Number(reply[3]);
      if (!Number.isFinite(rtt)) continue;
      if (line.includes('(DUP!)') || seen.has(seq)) {
        out.duplicates += 1;
        continue;
      }
      seen.add(seq);
      out.replies.push({ seq, ttl: reply[2] === undefined ? null : Number(reply[2]), rtt });
      continue;
    }
    const summary = SUMMARY.exec(line);
    if (summary) {
      out.transmitted = Number(summary[1]);
      out.received = Number(summary[2]);
      continue;
    }
    if (ICMP_ERROR.test(line)) out.icmpErrors.push(line);
  }
  return out;
}

export interface LatencyStats {
  min: number;
  avg: number;
  max: number;
  /** Population standard deviation (what iputils prints as mdev). */
  stdDev: number;
}

const round3 = (n: number) => Math.round(n * 1000) / 1000;

export function latencyStats(rtts: readonly number[]): LatencyStats | null {
  if (rtts.length === 0) return null;
  const avg = rtts.reduce((a, b) => a + b, 0) / rtts.length;
  const variance = rtts.reduce((a, b) => a + (b - avg) ** 2, 0) / rtts.length;
  return { min: round3(Math.min(...rtts)), avg: round3(avg), max: round3(Math.max(...rtts)), stdDev: round3(Math.sqrt(variance)) };
}

export interface PingBinary {
  path: string;
  /** How it was found, for messages: `PING_PATH` or `PATH`. */
  from: 'PING_PATH' | 'PATH';
}

/**
 * The ping to run: `PING_PATH` when set (used as given), else the first
 * executable `ping` on PATH. Returns an explanation when there is none.
 */
export function locatePing(tools: ToolPaths): PingBinary | { error: string } {
  if (tools.ping) return { path: tools.ping, from: 'PING_PATH' };
  const dirs = (tools.searchPath ?? '').split(path.delimiter).filter(Boolean);
  for (const dir of dirs) {
    const file = path.join(dir, 'ping');
    try {
      accessSync(file, constants.X_OK);
      return { path: file, from: 'PATH' };
    } catch {
      // Not here.
    }
  }
  return {
    error: `ping is not installed: no executable "ping" on PATH (${tools.searchPath ?? ''}). ICMP checks need iputils ping: install it (Debian/Ubuntu: apt-get install iputils-ping; Alpine: apk add iputils) or set PING_PATH to its location`,
  };
}

export interface PingOptions {
  address: string;
  family: 4 | 6;
  count: number;
  /** Seconds between echo requests. */
  intervalSeconds: number;
  /** Seconds to wait after the last request when no reply came at all. */
  lingerSeconds: number;
}

export function pingArgs(opts: PingOptions): string[] {
  return [
    '-n',
    '-c',
    String(opts.count),
    '-i',
    String(opts.intervalSeconds),
    '-W',
    String(opts.lingerSeconds),
    opts.family === 6 ? '-6' : '-4',
    opts.address,
  ];
}

export interface PingRun {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  /** spawn failed (ENOENT, EACCES, EPERM…): ping never ran. */
  spawnError?: NodeJS.ErrnoException;
  /** True when `signal` stopped it. */
  aborted: boolean;
}

/**
 * Runs ping without a shell, in the C locale. On `signal` it is sent SIGINT
 * (iputils then prints its summary), and SIGKILL a second later.
 */
export async function runPing(binary: string, args: string[], signal: AbortSignal, searchPath: string | undefined): Promise<PingRun> {
  const { stopped, ...run } = await startTool(binary, args, signal, searchPath, undefined, 256 * 1024).done;
  return { ...run, aborted: stopped };
}

/** `net.ipv4.ping_group_range` of this process's network namespace, e.g. [0, 2147483647]; null if unreadable. */
export async function readPingGroupRange(file = '/proc/sys/net/ipv4/ping_group_range'): Promise<[number, number] | null> {
  try {
    const [low, high] = (await readFile(file, 'utf8')).trim().split(/\s+/).map(Number);
    if (low === undefined || high === undefined || !Number.isFinite(low) || !Number.isFinite(high)) return null;
    return [low, high];
  } catch {
    return null;
  }
}

export const PING_GROUP_RANGE_FIX =
  'allow unprivileged ICMP sockets in this network namespace: sysctl -w net.ipv4.ping_group_range="0 2147483647" ' +
  '(containers: docker/podman run --sysctl net.ipv4.ping_group_range="0 2147483647"; Kubernetes: securityContext.sysctls), ' +
  'or grant the capability instead: --cap-add NET_RAW';

export interface FailureContext {
  binary: PingBinary;
  groupRange: [number, number] | null;
  gids: number[];
  uid: number | null;
}

function groupsText(ctx: FailureContext): string {
  const range = ctx.groupRange ? `"${ctx.groupRange[0]} ${ctx.groupRange[1]}"` : 'unreadable';
  const uid = ctx.uid === null ? '' : `uid ${ctx.uid}, `;
  return `${uid}groups ${ctx.gids.join(',') || 'none'}; net.ipv4.ping_group_range is ${range}`;
}

/** True when the process's groups fall inside the range, i.e. the kernel permits ICMP datagram sockets. */
export function groupsAllowed(range: [number, number] | null, gids: number[]): boolean | null {
  if (!range) return null;
  return gids.some((gid) => gid >= range[0] && gid <= range[1]);
}

export interface PingFailure {
  message: string;
  /** errno-style code: ENOENT, EACCES, EPERM (this host's setup) or ENETUNREACH, EHOSTUNREACH (the network). */
  code: string;
}

/**
 * Why ping did not produce a measurement, in words that say what to do.
 * Returns undefined when ping ran and its output is to be judged (replies or loss).
 */
export function explainPingFailure(run: PingRun, ctx: FailureContext): PingFailure | undefined {
  const text = explainText(run, ctx);
  return text ? { message: text[0], code: text[1] } : undefined;
}

function explainText(run: PingRun, ctx: FailureContext): [string, string] | undefined {
  const where = ctx.binary.from === 'PING_PATH' ? `PING_PATH=${ctx.binary.path}` : ctx.binary.path;
  const error = run.spawnError;
  if (error) {
    switch (error.code) {
      case 'ENOENT':
        return [
          ctx.binary.from === 'PING_PATH'
            ? `ping is not installed at ${where} (ENOENT): point PING_PATH at iputils ping, or install it (Debian/Ubuntu: apt-get install iputils-ping)`
            : `ping is not installed (ENOENT for ${where}): install iputils ping (Debian/Ubuntu: apt-get install iputils-ping) or set PING_PATH`,
          'ENOENT',
        ];
      case 'EACCES':
        return [`${where} cannot be executed by this process (EACCES): make it executable and readable for the agent's user`, 'EACCES'];
      case 'EPERM':
        return [
          `${where} cannot be executed (EPERM): the file carries capabilities (Debian's ping has cap_net_raw=ep) that this process may not gain, ` +
            `because its capability bounding set lacks CAP_NET_RAW (e.g. --cap-drop ALL). Either use a ping without file capabilities ` +
            `(a copy of the binary, or setcap -r; set PING_PATH to it) and ${PING_GROUP_RANGE_FIX}`,
          'EPERM',
        ];
      default:
        return [`${where} could not be started (${error.code ?? error.message})`, error.code ?? 'ENOEXEC'];
    }
  }
  // Replies came: ping worked, whatever it complained about on the way; loss is judged from the output.
  if (parsePingOutput(run.stdout).replies.length > 0) return undefined;
  const stderr = run.stderr.trim();
  const said = stderr ? ` (ping said: ${stderr.split('\n').slice(-3).join(' | ')})` : '';
  const permission =
    /missing cap_net_raw|socket: (?:Operation not permitted|Permission denied)|Lacking privilege|permission denied/i.test(stderr);
  if (permission) {
    return [`ICMP sockets are not permitted for this process (${groupsText(ctx)}): ${PING_GROUP_RANGE_FIX}${said}`, 'EPERM'];
  }
  if (/sendmsg: Operation not permitted/i.test(stderr)) {
    return [`Sending ICMP echo requests was refused by a local firewall rule (sendmsg: EPERM)${said}`, 'EPERM'];
  }
  if (/Network is unreachable/i.test(stderr)) return [`network unreachable (ENETUNREACH)${said}`, 'ENETUNREACH'];
  if (/No route to host|Host is unreachable/i.test(stderr)) return [`host unreachable (EHOSTUNREACH)${said}`, 'EHOSTUNREACH'];
  if (/Address family not supported|Cannot assign requested address/i.test(stderr)) {
    return [`the address family is not usable on this host${said}`, 'EADDRNOTAVAIL'];
  }
  // iputils exits 2 for errors; 1 when replies were missing (judged from the output).
  if (run.code === 2 || (run.code !== 0 && run.code !== 1 && !run.aborted)) {
    const output = parsePingOutput(run.stdout);
    if (output.transmitted === null && output.replies.length === 0) {
      return [`ping failed (exit code ${run.code ?? run.signal})${said || ' without a message'}`, 'EPING'];
    }
  }
  return undefined;
}
