// The IPv6 addresses an agent reports with its claims, so that its server
// can list them for allow-lists (GET /v1/static-ipv6s.txt, docs/analytics.md).
// They are the host's own: global unicast (2000::/3) and unique local
// (fc00::/7) addresses of its non-loopback interfaces, temporary ones
// included, as the kernel may pick any of them as a source. Link-local,
// loopback and multicast addresses never leave the link, so they are left
// out. A NAT66 or a proxy between the agent and a target shows the target
// another address; this list cannot know it.

import { networkInterfaces, type NetworkInterfaceInfo } from 'node:os';
import { performance } from 'node:perf_hooks';

/** More than any host has; the claim body stays small. */
export const MAX_ADDRESSES = 32;

function routable(address: string): boolean {
  const first = Number.parseInt(address.split(':')[0] || '0', 16);
  // 2000::/3: first 16 bits 0x2000–0x3fff; fc00::/7: 0xfc00–0xfdff.
  return (first >= 0x2000 && first <= 0x3fff) || (first >= 0xfc00 && first <= 0xfdff);
}

export function interfaceIpv6Addresses(interfaces: NodeJS.Dict<NetworkInterfaceInfo[]> = networkInterfaces()): string[] {
  const found = new Set<string>();
  for (const infos of Object.values(interfaces)) {
    for (const info of infos ?? []) {
      if (info.family !== 'IPv6' || info.internal || !routable(info.address)) continue;
      found.add(info.address.toLowerCase());
    }
  }
  return [...found].sort().slice(0, MAX_ADDRESSES);
}

/** How long a read of the interfaces stands: addresses change seldom, and reading them at every claim cost 1–2 % of a busy agent's CPU. */
export const IPV6_ADDRESSES_REREAD_MS = 30_000;

/** interfaceIpv6Addresses, read again at most every `everyMs`. */
export function ipv6AddressesReader(
  everyMs = IPV6_ADDRESSES_REREAD_MS,
  // A monotonic clock: a wall clock set back would keep stale addresses until it caught up.
  now: () => number = () => performance.now(),
  read: () => string[] = () => interfaceIpv6Addresses(),
): () => string[] {
  let addresses: string[] = [];
  let readAt = Number.NEGATIVE_INFINITY;
  return () => {
    const at = now();
    if (at - readAt >= everyMs) {
      addresses = read();
      readAt = at;
    }
    return addresses;
  };
}
