// Traceroute to a failed check's target: the path the packets
// take, hop by hop, as text and JSON, and a few lines for the jobLog.
//
// Which tool: with CAP_NET_RAW and Debian's `traceroute` installed, a TCP
// traceroute (`traceroute -T -p <port>`: SYNs to the check's own port, so it
// follows what the check's traffic meets, firewalls included). Otherwise
// `tracepath -p <port>` (UDP with IP_RECVERR: no privileges at all), and when
// tracepath is missing, `traceroute` in its default UDP mode (also
// unprivileged on Linux). All are bounded in hops (15) and in time: a
// traceroute still running at its deadline is stopped and what it printed
// so far is kept (tracepath is run under `stdbuf -oL` where coreutils'
// stdbuf exists, so its lines are not lost in a pipe buffer).

import net from 'node:net';
import { hasNetRaw, lastLine, locateTool, startTool, type ToolPaths, type ToolRun } from './tools.js';

export const TRACE_MAX_HOPS = 15;

export interface Hop {
  hop: number;
  /** null: no reply at this hop. */
  address: string | null;
  /** Round-trip times in ms of the probes this address answered. */
  rttMs: number[];
  /** Flags the tool printed: `reached`, `!H` (host unreachable), `!N`, `!X`, `asymm 3`… */
  notes?: string[];
}

export interface TraceResult {
  tool: string;
  command: string[];
  target: string;
  port: number;
  hops: Hop[];
  /** True when the last hop answering was the target. */
  reached: boolean;
  /** True when the tool was stopped at the time limit before it finished. */
  stoppedEarly: boolean;
  text: string;
}

export type TraceOutcome = { ok: true; trace: TraceResult } | { ok: false; reason: string };

function addProbe(hops: Hop[], hop: number, address: string | null, rtt: number | undefined, note?: string): void {
  let entry = hops.find((h) => h.hop === hop && h.address === address);
  if (!entry) {
    // A hop that answered makes an earlier "no reply" entry for it moot.
    if (address !== null) {
      const silent = hops.findIndex((h) => h.hop === hop && h.address === null);
      if (silent !== -1) hops.splice(silent, 1);
    } else if (hops.some((h) => h.hop === hop)) {
      return;
    }
    entry = { hop, address, rttMs: [] };
    hops.push(entry);
  }
  if (rtt !== undefined && Number.isFinite(rtt)) entry.rttMs.push(rtt);
  if (note) {
    entry.notes ??= [];
    if (!entry.notes.includes(note)) entry.notes.push(note);
  }
}

/**
 * Parses iputils tracepath output (`-n`):
 * ` 1:  10.0.0.1   0.175ms `, ` 2:  10.0.1.2   0.082ms reached`, ` 3:  no reply`.
 */
export function parseTracepath(text: string): Hop[] {
  const hops: Hop[] = [];
  for (const raw of text.split('\n')) {
    const match = /^\s*(\d+)\??:\s+(.*)$/.exec(raw);
    if (!match) continue;
    const hop = Number(match[1]);
    const rest = (match[2] as string).trim();
    if (rest.startsWith('[LOCALHOST]')) continue;
    if (rest.startsWith('no reply')) {
      addProbe(hops, hop, null, undefined);
      continue;
    }
    const [address] = rest.split(/\s+/);
    if (!address || net.isIP(address) === 0) continue;
    const rtt = /([\d.]+)ms/.exec(rest)?.[1];
    const notes = [...rest.matchAll(/\b(reached|asymm\s+\d+|pmtu\s+\d+)\b|(![A-Z0-9]+)/g)].map((m) => m[0]);
    addProbe(hops, hop, address, rtt === undefined ? undefined : Number(rtt));
    for (const note of notes) addProbe(hops, hop, address, undefined, note);
  }
  return hops.sort((a, b) => a.hop - b.hop);
}

/**
 * Parses traceroute output (`-n`): ` 1  10.0.0.1  0.043 ms  0.006 ms`,
 * ` 2  * *`, ` 3  10.0.0.9  1.0 ms !H  10.0.0.8  2.0 ms`.
 */
export function parseTraceroute(text: string): Hop[] {
  const hops: Hop[] = [];
  for (const raw of text.split('\n')) {
    const match = /^\s*(\d+)\s+(.*)$/.exec(raw);
    if (!match) continue;
    const hop = Number(match[1]);
    const tokens = (match[2] as string).trim().split(/\s+/);
    let address: string | null = null;
    let answered = false;
    for (let i = 0; i < tokens.length; i++) {
      const token = tokens[i] as string;
      if (token === '*') continue;
      if (net.isIP(token) !== 0) {
        address = token;
        addProbe(hops, hop, address, undefined);
        answered = true;
      } else if (/^[\d.]+$/.test(token) && tokens[i + 1] === 'ms' && address !== null) {
        addProbe(hops, hop, address, Number(token));
        i++;
      } else if (token.startsWith('!') && address !== null) {
        addProbe(hops, hop, address, undefined, token);
      }
    }
    if (!answered) addProbe(hops, hop, null, undefined);
  }
  return hops.sort((a, b) => a.hop - b.hop);
}

interface Plan {
  tool: string;
  binary: string;
  args: string[];
  parse: (text: string) => Hop[];
}

function plans(address: string, port: number, tools: ToolPaths): Plan[] {
  const family = net.isIP(address) === 6 ? '-6' : '-4';
  const traceroute = locateTool('traceroute', tools);
  const tracepath = locateTool('tracepath', tools);
  const stdbuf = locateTool('stdbuf', tools);
  const hops = String(TRACE_MAX_HOPS);
  const list: Plan[] = [];
  if (traceroute && hasNetRaw()) {
    list.push({
      tool: 'traceroute -T',
      binary: traceroute.path,
      args: [family, '-T', '-n', '-q', '2', '-w', '1', '-m', hops, '-p', String(port), address],
      parse: parseTraceroute,
    });
  }
  if (tracepath) {
    const args = [family, '-n', '-m', hops, '-p', String(port), address];
    list.push(
      stdbuf
        ? { tool: 'tracepath', binary: stdbuf.path, args: ['-oL', tracepath.path, ...args], parse: parseTracepath }
        : { tool: 'tracepath', binary: tracepath.path, args, parse: parseTracepath },
    );
  }
  if (traceroute) {
    list.push({
      tool: 'traceroute',
      binary: traceroute.path,
      args: [family, '-n', '-q', '2', '-w', '1', '-m', hops, '-p', String(port), address],
      parse: parseTraceroute,
    });
  }
  return list;
}

function permissionProblem(run: ToolRun): boolean {
  return /privilege|not permitted|permission/i.test(run.stderr) || run.spawnError?.code === 'EPERM' || run.spawnError?.code === 'EACCES';
}

async function runPlan(plan: Plan, timeoutMs: number, signal: AbortSignal, searchPath: string | undefined): Promise<{ run: ToolRun; timedOut: boolean }> {
  const deadline = AbortSignal.timeout(Math.max(1, timeoutMs));
  const tool = startTool(plan.binary, plan.args, AbortSignal.any([signal, deadline]), searchPath);
  const run = await tool.done;
  return { run, timedOut: deadline.aborted };
}

/**
 * Traces the path to `address`, trying the tools in the order above; a tool
 * that fails for lack of privileges gives way to the next one.
 */
export async function traceroute(address: string, port: number, timeoutMs: number, signal: AbortSignal, tools: ToolPaths): Promise<TraceOutcome> {
  const candidates = plans(address, port, tools);
  if (candidates.length === 0) {
    return { ok: false, reason: 'Traceroute unavailable: neither tracepath nor traceroute is installed (apt-get install iputils-tracepath, or set TRACEPATH_PATH)' };
  }
  const started = Date.now();
  let lastProblem = '';
  for (const plan of candidates) {
    const left = timeoutMs - (Date.now() - started);
    if (left <= 0 || signal.aborted) break;
    const { run, timedOut } = await runPlan(plan, left, signal, tools.searchPath);
    const hops = plan.parse(run.stdout);
    if (hops.length === 0 && (run.spawnError || permissionProblem(run) || (run.code !== 0 && !timedOut))) {
      lastProblem = `${plan.tool}: ${run.spawnError ? `${run.spawnError.code ?? ''} ${run.spawnError.message}`.trim() : lastLine(run.stderr) || `exit code ${run.code}`}`;
      continue;
    }
    const last = hops.filter((h) => h.address !== null).at(-1);
    return {
      ok: true,
      trace: {
        tool: plan.tool,
        command: [plan.binary, ...plan.args],
        target: address,
        port,
        hops,
        reached: last?.address === address,
        stoppedEarly: timedOut || run.stopped,
        text: run.stdout,
      },
    };
  }
  return { ok: false, reason: `Traceroute unavailable: ${lastProblem || 'no time was left for it'}` };
}

const fmt = (ms: number) => (ms >= 10 ? ms.toFixed(0) : ms.toFixed(2));

/** A few lines for the jobLog: a header, then one line per hop, runs of silent hops folded into one. */
export function summarizeTrace(trace: TraceResult, maxLines = 8): string[] {
  const how = trace.tool === 'traceroute -T' ? `TCP port ${trace.port}` : `UDP, ${trace.tool}`;
  const answered = trace.hops.filter((h) => h.address !== null);
  const lastHop = trace.hops.at(-1)?.hop ?? 0;
  const verdict = trace.reached
    ? `reached in ${answered.at(-1)?.hop} hop${answered.at(-1)?.hop === 1 ? '' : 's'}`
    : `not reached${answered.length > 0 ? ` (last reply from hop ${answered.at(-1)?.hop}, ${answered.at(-1)?.address})` : ''}`;
  const lines = [`Traceroute to ${trace.target} (${how}): ${verdict}${trace.stoppedEarly ? '; stopped at the time limit' : ''}`];
  const body: string[] = [];
  for (let i = 0; i < trace.hops.length; i++) {
    const hop = trace.hops[i] as Hop;
    if (hop.address === null) {
      let j = i;
      while (j + 1 < trace.hops.length && (trace.hops[j + 1] as Hop).address === null) j++;
      const last = (trace.hops[j] as Hop).hop;
      body.push(`  ${last === hop.hop ? `${hop.hop}` : `${hop.hop}-${last}`}  no reply`);
      i = j;
      continue;
    }
    const rtts = hop.rttMs.length > 0 ? `  ${hop.rttMs.map((r) => `${fmt(r)} ms`).join(' ')}` : '';
    const notes = hop.notes?.length ? `  ${hop.notes.join(' ')}` : '';
    body.push(`  ${hop.hop}  ${hop.address}${rtts}${notes}`);
  }
  if (body.length > maxLines - 1) {
    const keep = maxLines - 2;
    body.splice(Math.ceil(keep / 2), body.length - keep, `  … (${lastHop} hops in all: see the traceroute artifact)`);
  }
  return [...lines, ...body];
}
