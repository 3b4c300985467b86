// ICMP monitor: `pingCount` echo requests through the system's ping (no root,
// no capabilities: see net/ping.ts), packet loss judged against two
// thresholds, latency statistics, LATENCY and JSON_RESPONSE assertions.
//
// Verdict (docs/checks/icmp.md): 100 % loss is an error; loss above
// maxPacketLossThreshold fails the run; loss above degradedPacketLossThreshold
// marks it degraded. responseTime is the average round-trip time, so the
// check's degradedResponseTime / maxResponseTime judge latency; by default
// they are at the cap, i.e. latency alone does not degrade or fail a run.

import { getegid, getgroups, getuid } from 'node:process';
import { performance } from 'node:perf_hooks';
import { type IpFamily, MAX_HOSTNAME_LENGTH, type ResolvedTarget } from '../../net/ip-family.js';
import { resolvePermitted } from '../../net/network-policy.js';
import {
  explainPingFailure,
  type LatencyStats,
  latencyStats,
  locatePing,
  type PingReply,
  parsePingOutput,
  pingArgs,
  readPingGroupRange,
  runPing,
} from '../../net/ping.js';
import { type Assertion, type AssertionOutcome, evaluate } from '../assertions/assertions.js';
import type { CheckDefinition } from '../definition.js';
import { describeError, errorCode, JobAbortedError } from '../../core/errors.js';
import { timedSignal } from '../../core/timed-signal.js';
import type { CheckLimits, ExecutionContext, Executor } from '../executor.js';
import type { Outcome } from '../../core/outcome.js';
import type { Fields } from '../fields.js';
import { withMatchBudget } from '../assertions/bounded-match.js';
import { evaluateJsonPath } from '../assertions/jsonpath.js';

export interface IcmpRequest {
  hostname: string;
  ipFamily: IpFamily;
  pingCount: number;
  /** Percent; loss above it marks the run degraded. */
  degradedPacketLossThreshold: number;
  /** Percent; loss above it fails the run. */
  maxPacketLossThreshold: number;
}

export const DEFAULT_PING_COUNT = 10;
export const MAX_PING_COUNT = 50;
/** Seconds between echo requests (iputils' default floor for unprivileged users is 0.2 s on older versions). */
export const PING_INTERVAL_SECONDS = 0.2;
/** Seconds ping waits after the last request when no reply came at all; a reply later than this counts as lost. */
export const PING_LINGER_SECONDS = 2;
export const DEFAULT_DEGRADED_LOSS = 10;
export const DEFAULT_MAX_LOSS = 20;
export const LATENCY_PROPERTIES = ['avg', 'min', 'max', 'stdDev'] as const;

// 50 pings take (50 − 1) × 0.2 s + 2 s linger ≈ 12 s, plus name resolution.
// Latency thresholds default to the cap: loss, not latency, judges by default.
const LIMITS: CheckLimits = { degradedMs: 20_000, maxMs: 20_000, capMs: 20_000 };

/** An outcome that can also be degraded for a reason other than its response time (here: packet loss). */
export type IcmpOutcome = Outcome & { degraded: boolean };

function percent(fields: Fields, name: string, fallback: number): number {
  const value = fields.raw(name);
  if (value === undefined || value === null) return fallback;
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0 || value > 100) {
    fields.fail(fields.at(name), `must be a number of percent between 0 and 100 (got ${JSON.stringify(value)})`);
    return fallback;
  }
  return value;
}

/** Loss thresholds are check-level fields; inside `request` they are accepted too, check level winning. */
function parseIcmp(fields: Fields, check: Fields): IcmpRequest {
  const hostname = fields.string('hostname', { required: true, minLength: 1, maxLength: MAX_HOSTNAME_LENGTH }) ?? '';
  if (/\s|\/|^-/.test(hostname)) {
    fields.fail(fields.at('hostname'), `must be a host name or an IP address (got ${JSON.stringify(hostname.slice(0, 80))})`);
  }
  const threshold = (name: string, fallback: number) =>
    check.has(name) ? percent(check, name, fallback) : percent(fields, name, fallback);
  const degradedPacketLossThreshold = threshold('degradedPacketLossThreshold', DEFAULT_DEGRADED_LOSS);
  const maxPacketLossThreshold = threshold('maxPacketLossThreshold', DEFAULT_MAX_LOSS);
  if (degradedPacketLossThreshold > maxPacketLossThreshold) {
    fields.fail(
      fields.at('degradedPacketLossThreshold'),
      `must not exceed maxPacketLossThreshold (${degradedPacketLossThreshold} > ${maxPacketLossThreshold})`,
    );
  }
  return {
    hostname,
    ipFamily: fields.oneOf('ipFamily', ['IPv4', 'IPv6'] as const, { default: 'IPv4' }),
    pingCount: fields.integer('pingCount', { min: 1, max: MAX_PING_COUNT, default: DEFAULT_PING_COUNT }),
    degradedPacketLossThreshold,
    maxPacketLossThreshold,
  };
}

/** What JSON_RESPONSE paths are evaluated against (the result's `response`). */
export interface IcmpResponse {
  address: string;
  family: IpFamily;
  packetsSent: number;
  packetsReceived: number;
  /** Percent, 0–100, two decimals. */
  packetLoss: number;
  duplicates: number;
  latency: LatencyStats | null;
  packets: PingReply[];
  timings: { dns: number; total: number };
}

/** LATENCY: property avg | min | max | stdDev (empty means avg), in ms. */
export function evaluateLatency(assertion: Assertion, latency: LatencyStats): AssertionOutcome {
  const property = assertion.property || 'avg';
  if (!(LATENCY_PROPERTIES as readonly string[]).includes(property)) {
    return {
      ...assertion,
      actual: null,
      passed: false,
      error: `LATENCY property must be one of ${LATENCY_PROPERTIES.join(', ')} (got ${JSON.stringify(assertion.property)})`,
    };
  }
  return evaluate(assertion, latency[property as keyof LatencyStats]);
}

function abortText(signal: AbortSignal, elapsedMs: number, what: string): string {
  const reason = signal.reason;
  if (reason instanceof JobAbortedError && reason.reason !== 'timeout') return reason.message;
  return `${what} timed out after ${Math.round(elapsedMs)} ms (the ICMP check limit is ${LIMITS.capMs} ms)`;
}

const round2 = (n: number) => Math.round(n * 100) / 100;

async function runIcmp(check: CheckDefinition<IcmpRequest>, ctx: ExecutionContext): Promise<IcmpOutcome> {
  const startedAt = new Date();
  const start = performance.now();
  const bounded = timedSignal(ctx.signal, LIMITS.capMs);
  const signal = bounded.signal;

  let error: string | undefined;
  let code: string | undefined;
  let response: IcmpResponse | null = null;
  let resolved: ResolvedTarget | undefined;
  // {{NAME}} in hostname; the result reports the filled-in value (the scrubber hides secrets).
  let spec = check.request;
  const binary = locatePing(ctx.settings.tools ?? {});
  try {
    try {
      const hostname = ctx.variables.interpolate(spec.hostname, 'request.hostname').trim();
      if (!hostname || /\s|\/|^-/.test(hostname)) throw new Error('request.hostname is not a host name after variables were filled in');
      spec = { ...spec, hostname };
    } catch (caught) {
      // Not sent: an unknown {{NAME}} (the message names it and the field) or a bad hostname.
      error = (caught as Error).message;
    }
    if (error === undefined && 'error' in binary) {
      error = binary.error;
      code = 'ENOENT';
    } else if (error === undefined) {
      try {
        resolved = await resolvePermitted(spec.hostname, spec.ipFamily, ctx.settings.networkPolicy, undefined, signal);
        if (resolved.fallback) ctx.jobLog.push(resolved.fallback);
        if (resolved.address !== spec.hostname.replace(/^\[(.*)\]$/, '$1')) {
          ctx.jobLog.push(`Resolved ${spec.hostname} to ${resolved.address} (IPv${resolved.family})`);
        }
      } catch (caught) {
        error = signal.aborted
          ? abortText(signal, performance.now() - start, `DNS lookup of ${spec.hostname}`)
          : describeError(caught, signal, spec.hostname);
        code = signal.aborted ? 'ETIMEDOUT' : errorCode(caught);
      }
    }

    if (resolved && !('error' in binary)) {
      const args = pingArgs({
        address: resolved.address,
        family: resolved.family,
        count: spec.pingCount,
        intervalSeconds: PING_INTERVAL_SECONDS,
        lingerSeconds: PING_LINGER_SECONDS,
      });
      ctx.jobLog.push(`Running ${binary.path} ${args.join(' ')}`);
      const pingStart = performance.now();
      const run = await runPing(binary.path, args, signal, ctx.settings.tools?.searchPath);
      const explained = explainPingFailure(run, {
        binary,
        groupRange: await readPingGroupRange(),
        gids: [...new Set([getegid?.() ?? -1, ...(getgroups?.() ?? [])])].filter((g) => g >= 0),
        uid: getuid?.() ?? null,
      });
      const output = parsePingOutput(run.stdout);
      if (explained) {
        error = explained.message;
        code = explained.code;
      } else {
        const sent = output.transmitted ?? Math.max(output.replies.length, run.aborted ? 0 : spec.pingCount);
        const received = output.replies.length;
        const lossPct = sent === 0 ? 100 : round2(((sent - Math.min(received, sent)) / sent) * 100);
        response = {
          address: resolved.address,
          family: resolved.family === 6 ? 'IPv6' : 'IPv4',
          packetsSent: sent,
          packetsReceived: received,
          packetLoss: lossPct,
          duplicates: output.duplicates,
          latency: latencyStats(output.replies.map((r) => r.rtt)),
          packets: output.replies,
          timings: { dns: round2(resolved.lookupMs), total: round2(performance.now() - pingStart) },
        };
        for (const line of output.icmpErrors.slice(0, 3)) ctx.jobLog.push(line);
        if (output.icmpErrors.length > 3) ctx.jobLog.push(`… and ${output.icmpErrors.length - 3} more ICMP errors`);
        ctx.jobLog.push(
          `${sent} packets sent, ${received} received, ${lossPct} % packet loss` +
            (response.latency
              ? `; rtt min/avg/max/stdDev = ${response.latency.min}/${response.latency.avg}/${response.latency.max}/${response.latency.stdDev} ms`
              : ''),
        );
        if (run.aborted) {
          error = abortText(signal, performance.now() - start, `ping ${resolved.address}`);
          const reason = signal.reason;
          code = reason instanceof JobAbortedError && reason.reason !== 'timeout' ? undefined : 'ETIMEDOUT';
        } else if (received === 0) {
          // No reply at all counts as a network error (timed out) for retry rules.
          code = 'ETIMEDOUT';
          const hint = output.icmpErrors[0] ? ` (${output.icmpErrors[0]})` : '';
          error = `No reply from ${spec.hostname}${resolved.address === spec.hostname ? '' : ` (${resolved.address})`}: ${sent} of ${sent} packets lost (100 % packet loss)${hint}`;
        }
      }
    }
  } finally {
    bounded.dispose();
  }
  const stoppedAt = new Date();

  const assertions: AssertionOutcome[] = [];
  const latency = response?.latency;
  if (error === undefined && latency) {
    withMatchBudget(() => {
      for (const assertion of check.assertions) {
        assertions.push(
          assertion.source === 'LATENCY' ? evaluateLatency(assertion, latency) : evaluateJsonPath(assertion, JSON.parse(JSON.stringify(response))),
        );
      }
    });
  }

  let lossFailed = false;
  let degraded = false;
  if (error === undefined && response) {
    if (response.packetLoss > spec.maxPacketLossThreshold) {
      lossFailed = true;
      ctx.jobLog.push(`Packet loss ${response.packetLoss} % is over maxPacketLossThreshold ${spec.maxPacketLossThreshold} %: failed`);
    } else if (response.packetLoss > spec.degradedPacketLossThreshold) {
      degraded = true;
      ctx.jobLog.push(
        `Packet loss ${response.packetLoss} % is over degradedPacketLossThreshold ${spec.degradedPacketLossThreshold} %: degraded`,
      );
    }
  }
  if (error) ctx.jobLog.push(`Request failed: ${error}`);
  const assertionsFailed = error === undefined && (lossFailed || assertions.some((a) => !a.passed));

  return {
    startedAt,
    stoppedAt,
    // The average round-trip time; 0 when there was no reply.
    responseTime: response?.latency?.avg ?? 0,
    ...(error !== undefined ? { error } : {}),
    ...(error !== undefined && code !== undefined ? { errorCode: code } : {}),
    assertionsFailed,
    degraded,
    member: 'icmpCheckResult',
    detail: {
      assertions,
      request: {
        hostname: spec.hostname,
        ipFamily: spec.ipFamily,
        pingCount: spec.pingCount,
        degradedPacketLossThreshold: spec.degradedPacketLossThreshold,
        maxPacketLossThreshold: spec.maxPacketLossThreshold,
      },
      response,
      packetLossVerdict: response === null ? null : lossFailed ? 'failed' : degraded ? 'degraded' : 'passed',
      requestError: error ?? null,
      jobLog: ctx.jobLog,
      jobAssets: [],
    },
  };
}

export const icmpExecutor: Executor<IcmpRequest> = {
  checkType: 'ICMP',
  member: 'icmpCheckResult',
  limits: LIMITS,
  assertionSources: ['LATENCY', 'JSON_RESPONSE'],
  parseRequest: parseIcmp,
  // maxResponseTime judges latency here, not how long a run of pings takes.
  expectedMs: (check) => Math.round((check.request.pingCount * PING_INTERVAL_SECONDS + PING_LINGER_SECONDS) * 1000),
  target: (request) => `${request.hostname} (${request.ipFamily}, ${request.pingCount} pings)`,
  run: runIcmp,
};
