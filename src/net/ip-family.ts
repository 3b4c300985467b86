// Address selection for checks: the requested family first, and IPv4 when
// IPv6 is not usable here (no AAAA record, IPv6 disabled, or no route), with
// a jobLog line saying so (net/ip-family.ts).

import dgram from 'node:dgram';
import { lookup } from 'node:dns/promises';
import net from 'node:net';

export type IpFamily = 'IPv4' | 'IPv6';

/** The longest DNS name (RFC 1035), the bound for every `hostname` field. */
export const MAX_HOSTNAME_LENGTH = 253;

export interface ResolvedTarget {
  address: string;
  family: 4 | 6;
  /** Milliseconds spent resolving (0 for an IP literal). */
  lookupMs: number;
  /** Why IPv6 was not used, when it was asked for and IPv4 was used instead. */
  fallback?: string;
}

/**
 * Why this host cannot reach an IPv6 address, or undefined if it can. A UDP
 * connect sends nothing but needs a route and picks a source address; with
 * IPv6 disabled (net.ipv6.conf.*.disable_ipv6=1) it still "connects", to the
 * unspecified source `::`, so that counts as unusable too.
 */
export function canRouteIPv6(address: string): Promise<string | undefined> {
  return new Promise((resolve) => {
    let socket: dgram.Socket;
    try {
      socket = dgram.createSocket('udp6');
    } catch (error) {
      return resolve((error as NodeJS.ErrnoException).code ?? 'EAFNOSUPPORT');
    }
    const finish = (reason: string | undefined) => {
      try {
        socket.close();
      } catch {
        // Already closed.
      }
      resolve(reason);
    };
    socket.once('error', (error: NodeJS.ErrnoException) => finish(error.code ?? error.message));
    try {
      // Node hands a connect failure (EADDRNOTAVAIL, ENETUNREACH…) to this callback rather than emitting it.
      socket.connect(9, address, (error?: Error) => {
        if (error) return finish((error as NodeJS.ErrnoException).code ?? error.message);
        const source = socket.address().address;
        finish(source === '::' ? 'IPv6 disabled: no source address' : undefined);
      });
    } catch (error) {
      finish((error as NodeJS.ErrnoException).code ?? 'EINVAL');
    }
  });
}

const stripBrackets = (host: string) => host.replace(/^\[(.*)\]$/, '$1');

/**
 * Resolves `host` for the requested family. Asked for IPv6, it falls back to
 * IPv4 when the name has no AAAA record or IPv6 cannot be routed from here.
 * Errors from the final lookup (ENOTFOUND…) are thrown as Node raises them.
 */
export function resolveTarget(rawHost: string, family: IpFamily, signal?: AbortSignal): Promise<ResolvedTarget> {
  if (!signal) return resolveNow(rawHost, family);
  // A lookup cannot be cancelled, only abandoned: reject when the signal aborts first.
  return new Promise((done, fail) => {
    if (signal.aborted) return fail(signal.reason);
    const onAbort = () => fail(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    resolveNow(rawHost, family)
      .then(done, fail)
      .finally(() => signal.removeEventListener('abort', onAbort));
  });
}

async function resolveNow(rawHost: string, family: IpFamily): Promise<ResolvedTarget> {
  const host = stripBrackets(rawHost);
  const literal = net.isIP(host);
  if (literal !== 0) {
    if (literal === 6) {
      const reason = await canRouteIPv6(host);
      if (reason) throw Object.assign(new Error(`IPv6 address ${host} is not reachable from this host (${reason})`), { code: reason });
    }
    return { address: host, family: literal as 4 | 6, lookupMs: 0 };
  }
  const started = performance.now();
  if (family === 'IPv6') {
    let why: string;
    try {
      const { address } = await lookup(host, { family: 6, verbatim: true });
      const reason = await canRouteIPv6(address);
      if (!reason) return { address, family: 6, lookupMs: performance.now() - started };
      why = `IPv6 is not usable on this host (${reason})`;
    } catch (error) {
      why = `${host} has no IPv6 address (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`;
    }
    const { address } = await lookup(host, { family: 4 });
    return { address, family: 4, lookupMs: performance.now() - started, fallback: `${why}: falling back to IPv4` };
  }
  const { address } = await lookup(host, { family: 4 });
  return { address, family: 4, lookupMs: performance.now() - started };
}
