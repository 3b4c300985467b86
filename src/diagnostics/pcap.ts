// Packet capture around a repeated request: tcpdump with a BPF
// filter on the target's address and port plus DNS, on the interface the
// route to the target uses, bounded in size and time. Capturing needs
// CAP_NET_RAW on tcpdump; without it the capture is reported as unavailable
// in one line that says what to do.

import { execFile } from 'node:child_process';
import { stat } from 'node:fs/promises';
import net from 'node:net';
import { type Located, locateTool, startTool, type ToolPaths } from './tools.js';

/** A capture stops once its file passes this size (it may overshoot by what arrives in one poll). */
export const PCAP_MAX_BYTES = 5 * 1024 * 1024;
/** How long tcpdump may take to say it is listening. */
export const CAPTURE_START_TIMEOUT_MS = 3_000;
/** How long tcpdump may take to flush and exit after SIGINT, before SIGKILL. */
export const CAPTURE_STOP_TIMEOUT_MS = 2_000;
const SIZE_POLL_MS = 100;
/** Before stopping, the capture runs until its file has not grown for QUIET_MS (at most SETTLE_MAX_MS): the last packets (a RST right after the SYN) are still in tcpdump's hands when the repeat returns. */
const QUIET_MS = 250;
const SETTLE_MAX_MS = 1_000;

/** What to do when tcpdump may not capture, for the jobLog line. */
export function captureFix(tcpdumpPath: string): string {
  return `run the container with --cap-add NET_RAW, or give tcpdump the capability: setcap cap_net_raw+ep ${tcpdumpPath} (TCPDUMP_PATH picks another tcpdump)`;
}

/**
 * The BPF filter: the target's address and port, DNS (port 53), and ICMP
 * errors (destination unreachable, time exceeded) that explain a failed
 * connection. Without an address (the name did not resolve), DNS only.
 */
export function captureFilter(address: string | undefined, port: number): string {
  const icmp = '(icmp and (icmp[icmptype] == icmp-unreach or icmp[icmptype] == icmp-timxceed)) or (icmp6 and (ip6[40] == 1 or ip6[40] == 3))';
  if (!address) return `port 53 or ${icmp}`;
  return `(host ${address} and port ${port}) or port 53 or ${icmp}`;
}

/** The interface `ip route get <address>` names (`lo`, `eth0`…), or `any` when there is no route or no `ip`. */
export function captureInterface(address: string | undefined, signal: AbortSignal, tools: ToolPaths): Promise<string> {
  const ip = locateTool('ip', tools);
  if (!address || !ip || net.isIP(address) === 0) return Promise.resolve('any');
  return new Promise((resolve) => {
    execFile(ip.path, ['route', 'get', address], { timeout: 2_000, signal, env: { LC_ALL: 'C' } }, (error, stdout) => {
      resolve((!error && /\bdev\s+(\S+)/.exec(stdout)?.[1]) || 'any');
    });
  });
}

export interface CaptureStats {
  bytes: number;
  /** tcpdump's own count ("N packets captured"), when it printed one. */
  packets: number | null;
  /** True when the capture stopped early at PCAP_MAX_BYTES. */
  truncated: boolean;
}

export interface Capture {
  interface: string;
  /** Stops tcpdump cleanly (SIGINT: it flushes the file), SIGKILL after CAPTURE_STOP_TIMEOUT_MS. */
  stop(): Promise<CaptureStats>;
}

export type CaptureStart = { ok: true; capture: Capture } | { ok: false; reason: string };

export interface CaptureOptions {
  address: string | undefined;
  port: number;
  file: string;
  signal: AbortSignal;
  maxBytes?: number;
  tools: ToolPaths;
}

/** tcpdump's complaint in one line: "c0: You don't have permission to … device; socket: Operation not permitted". */
export function tcpdumpComplaint(stderr: string): string {
  return stderr
    .split('\n')
    .map((l) => l.trim().replace(/^tcpdump:\s*/, '').replace(/^\((.*)\)$/, '$1'))
    .filter((l) => l && !/^Running as user|^data link type|^listening on/.test(l))
    .join('; ');
}

/** One line: why there is no capture, and what to do about it. */
function unavailable(tcpdump: Located, detail: string): string {
  const where = tcpdump.from === 'PATH' ? tcpdump.path : `${tcpdump.from}=${tcpdump.path}`;
  if (/permission|not permitted|EPERM|EACCES/i.test(detail)) {
    return `Packet capture unavailable: ${where} may not capture without CAP_NET_RAW ("${detail}"); to capture, ${captureFix(tcpdump.path)}`;
  }
  return `Packet capture unavailable: ${where} failed: ${detail || 'no output'}`;
}

/**
 * Starts tcpdump and resolves once it is capturing (its "listening on" line),
 * or with the reason it cannot.
 */
export async function startCapture(opts: CaptureOptions): Promise<CaptureStart> {
  const tcpdump = locateTool('tcpdump', opts.tools);
  if (!tcpdump) {
    return { ok: false, reason: `Packet capture unavailable: tcpdump is not installed (install it, e.g. apt-get install tcpdump, or set TCPDUMP_PATH); it also needs CAP_NET_RAW (--cap-add NET_RAW)` };
  }
  const iface = await captureInterface(opts.address, opts.signal, opts.tools);
  const filter = captureFilter(opts.address, opts.port);
  const maxBytes = opts.maxBytes ?? PCAP_MAX_BYTES;
  let listening: () => void = () => undefined;
  const heard = new Promise<void>((resolve) => {
    listening = resolve;
  });
  // -U and --immediate-mode: each packet is written at once (no buffering in libpcap's ring), so a
  // stop right after the repeat loses nothing; -n: no name lookups of our own.
  const tool = startTool(tcpdump.path, ['-i', iface, '-n', '-U', '--immediate-mode', '-w', opts.file, filter], opts.signal, opts.tools.searchPath, (stderr) => {
    if (/listening on/.test(stderr)) listening();
  });
  const startTimer = new Promise<'timeout'>((resolve) => {
    const timer = setTimeout(() => resolve('timeout'), CAPTURE_START_TIMEOUT_MS);
    tool.done.finally(() => clearTimeout(timer));
  });
  const started = await Promise.race([heard.then(() => 'listening' as const), tool.done.then(() => 'exited' as const), startTimer]);
  if (started !== 'listening') {
    tool.stop(200);
    const run = await tool.done;
    if (run.spawnError) return { ok: false, reason: unavailable(tcpdump, `${run.spawnError.code ?? ''} ${run.spawnError.message}`.trim()) };
    if (started === 'timeout' && !opts.signal.aborted) {
      return { ok: false, reason: `Packet capture unavailable: ${tcpdump.path} did not start listening within ${CAPTURE_START_TIMEOUT_MS} ms` };
    }
    return { ok: false, reason: unavailable(tcpdump, tcpdumpComplaint(run.stderr) || `exit code ${run.code}`) };
  }

  let truncated = false;
  const poll = setInterval(() => {
    stat(opts.file).then(
      (s) => {
        if (s.size > maxBytes && !truncated) {
          truncated = true;
          tool.stop(CAPTURE_STOP_TIMEOUT_MS);
        }
      },
      () => undefined,
    );
  }, SIZE_POLL_MS);
  tool.done.finally(() => clearInterval(poll));
  const capture: Capture = {
    interface: iface,
    async stop() {
      await settle(opts.file, opts.signal);
      tool.stop(CAPTURE_STOP_TIMEOUT_MS);
      const run = await tool.done;
      clearInterval(poll);
      const bytes = await stat(opts.file).then(
        (s) => s.size,
        () => 0,
      );
      const count = /(\d+) packets? captured/.exec(run.stderr)?.[1];
      return { bytes, packets: count === undefined ? null : Number(count), truncated };
    },
  };
  return { ok: true, capture };
}

const sizeOf = (file: string) =>
  stat(file).then(
    (s) => s.size,
    () => 0,
  );

/** Waits until `file` has not grown for QUIET_MS, at most SETTLE_MAX_MS. */
async function settle(file: string, signal: AbortSignal): Promise<void> {
  const end = Date.now() + SETTLE_MAX_MS;
  let size = await sizeOf(file);
  let quietSince = Date.now();
  while (!signal.aborted && Date.now() < end && Date.now() - quietSince < QUIET_MS) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    const now = await sizeOf(file);
    if (now !== size) {
      size = now;
      quietSince = Date.now();
    }
  }
}
