// When the network fails, show why: after a network failure the
// request is repeated once under packet capture, then a traceroute runs to
// the target; both are attached as artifacts and summed up in the jobLog.
// Everything is bounded (DIAGNOSTICS_BUDGET_MS), stops with the job, and
// never throws: diagnostics explain a result, they never spoil one.

import { jobScrubber, scrubArtifactText, scrubPcapFile } from '../artifacts/scrub.js';
import type { ArtifactFile } from '../artifacts/writer.js';
import { JobAbortedError } from '../core/errors.js';
import type { Logger } from '../observability/logger.js';
import type { SecretRegistry } from '../secrets/policy.js';
import type { DiagnosticsHooks } from './hooks.js';
import { type IpFamily, resolveTarget } from '../net/ip-family.js';
import { judge, type NetworkPolicy } from '../net/network-policy.js';
import { startCapture } from './pcap.js';
import type { ToolPaths } from './tools.js';
import { summarizeTrace, traceroute } from './traceroute.js';

/** The repeated request gets at most this long (enough for a SYN and two retransmissions). */
export const REPEAT_TIMEOUT_MS = 5_000;
/** The traceroute gets at most this long. */
export const TRACE_TIMEOUT_MS = 8_000;
/** Name resolution for the capture filter and the traceroute. */
const RESOLVE_TIMEOUT_MS = 3_000;
/** Diagnostics running at once, agent-wide; a failure beyond that is reported without them. */
export const MAX_CONCURRENT_DIAGNOSTICS = 4;

export const PCAP_NAME = 'capture.pcap';
export const PCAP_CONTENT_TYPE = 'application/vnd.tcpdump.pcap';
export const TRACE_BUNDLE_NAME = 'traceroute.tar.gz';

export interface DiagnosisTarget {
  /** Host name or IP literal the connection goes to (the proxy, when the check uses one). */
  host: string;
  port: number;
  ipFamily: IpFamily;
  /** Says what the target is when it is not the check's URL, e.g. "the proxy". */
  via?: string;
  /** Repeats the failed request once under `signal`; resolves with its error, or undefined when it succeeded. */
  repeat(signal: AbortSignal): Promise<string | undefined>;
}

export interface Diagnosis {
  jobLogLines: string[];
  files: ArtifactFile[];
}

let active = 0;

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T | 'timeout'> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** A signal aborted by `parent` or after `ms`, with a JobAbortedError saying so (performExchange reports it). */
function limited(parent: AbortSignal, ms: number, what: string): AbortSignal {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(new JobAbortedError('timeout', `${what} timed out after ${ms} ms`)), ms);
  const forward = () => {
    clearTimeout(timer);
    controller.abort(parent.reason);
  };
  if (parent.aborted) forward();
  else parent.addEventListener('abort', forward, { once: true });
  controller.signal.addEventListener('abort', () => {
    clearTimeout(timer);
    parent.removeEventListener('abort', forward);
  });
  return controller.signal;
}

/** The part of an executor's context diagnostics use (src/checks/executor.ts ExecutionContext has all of it). */
export interface DiagnosisContext {
  logger: Logger;
  secrets?: SecretRegistry;
  diagnostics?: DiagnosticsHooks;
  /** Where tcpdump, traceroute and the like are found (src/checks/executor.ts CheckSettings). */
  settings?: { readonly tools?: ToolPaths; readonly networkPolicy?: NetworkPolicy };
}

/**
 * Runs the diagnostics for a network failure. Returns the jobLog lines to
 * add and the files attached to the attempt's artifacts (ctx.diagnostics);
 * without ctx.diagnostics (diagnostics off) it does nothing.
 */
export async function diagnose(ctx: DiagnosisContext, target: DiagnosisTarget): Promise<Diagnosis> {
  const hooks = ctx.diagnostics;
  const result: Diagnosis = { jobLogLines: [], files: [] };
  if (!hooks) return result;
  if (active >= MAX_CONCURRENT_DIAGNOSTICS) {
    result.jobLogLines.push(`Diagnostics skipped: ${MAX_CONCURRENT_DIAGNOSTICS} other failed checks are being diagnosed right now`);
    return result;
  }
  const signal = hooks.begin();
  if (!signal) return result;
  active++;
  const lines = result.jobLogLines;
  const scrubber = jobScrubber(ctx.secrets);
  const tools = ctx.settings?.tools ?? {};
  const where = `${target.via ? `${target.via} ` : ''}${target.host.includes(':') ? `[${target.host}]` : target.host}:${target.port}`;
  try {
    // The address: for the capture filter, the capture interface and the traceroute.
    let address: string | undefined;
    const resolved = await withTimeout(
      resolveTarget(target.host, target.ipFamily).catch((error: NodeJS.ErrnoException) => error),
      RESOLVE_TIMEOUT_MS,
    );
    if (resolved === 'timeout') lines.push(`Diagnostics: ${target.host} did not resolve within ${RESOLVE_TIMEOUT_MS} ms; capturing DNS traffic only`);
    else if (resolved instanceof Error) lines.push(`Diagnostics: ${target.host} does not resolve (${resolved.code ?? resolved.message}); capturing DNS traffic only`);
    else address = resolved.address;
    const policy = ctx.settings?.networkPolicy;
    const verdict = policy && address ? judge(policy, address, target.port) : undefined;
    if (verdict && !verdict.allowed) {
      // The name resolves elsewhere now: neither the capture's repeat nor a traceroute may probe a blocked address.
      lines.push(`Diagnostics skipped: ${verdict.reason}`);
      return result;
    }

    // 1. The request again, under capture.
    if (!signal.aborted) {
      const file = await hooks.artifacts.pathFor(PCAP_NAME);
      const started = await startCapture({ address, port: target.port, file, signal, tools });
      if (!started.ok) {
        lines.push(started.reason);
      } else {
        const again = await target.repeat(limited(signal, REPEAT_TIMEOUT_MS, 'The repeated request')).catch((error: Error) => error.message);
        const stats = await started.capture.stop();
        const masked = await scrubPcapFile(file, scrubber);
        const attached = await hooks.artifacts.attach(PCAP_NAME, PCAP_CONTENT_TYPE, 'pcap');
        result.files.push(attached);
        const packets = stats.packets === null ? '' : `${stats.packets} packets, `;
        const cut = stats.truncated ? ', stopped at the size limit' : '';
        const scrubbed = masked ? `, ${masked} packets masked for secrets` : '';
        lines.push(
          `Packet capture (${PCAP_NAME}: ${packets}${stats.bytes} bytes on ${started.capture.interface}${cut}${scrubbed}) of the request repeated to ${where}: ${again ?? 'it succeeded this time'}`,
        );
      }
    }

    // 2. The path to the target.
    if (!signal.aborted) {
      if (!address) {
        lines.push(`Traceroute skipped: there is no address to trace to`);
      } else {
        const traced = await traceroute(address, target.port, TRACE_TIMEOUT_MS, signal, tools);
        if (!traced.ok) {
          lines.push(traced.reason);
        } else {
          const { text, ...json } = traced.trace;
          const summary = summarizeTrace(traced.trace);
          lines.push(...summary);
          const header = `# ${traced.trace.command.join(' ')}\n# target ${where}\n`;
          result.files.push(
            await hooks.artifacts.bundle(TRACE_BUNDLE_NAME, {
              'traceroute.txt': scrubArtifactText(`${header}${text}`, scrubber),
              'traceroute.json': scrubArtifactText(`${JSON.stringify({ ...json, host: target.host }, null, 2)}\n`, scrubber),
            }),
          );
        }
      }
    }
    if (signal.aborted) {
      const reason = signal.reason instanceof JobAbortedError ? signal.reason.message : 'the diagnostics time limit was reached';
      lines.push(`Diagnostics stopped early: ${reason}`);
    }
  } catch (error) {
    ctx.logger.warn({ err: error }, 'diagnostics failed');
    lines.push(`Diagnostics failed: ${(error as Error)?.message ?? String(error)}`);
  } finally {
    active--;
  }
  return result;
}
