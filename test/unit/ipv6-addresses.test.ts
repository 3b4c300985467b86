// Which of the host's addresses an agent reports (src/net/ipv6-addresses.ts):
// global unicast and unique local IPv6 addresses of non-loopback interfaces,
// each once, sorted, at most MAX_ADDRESSES.

import type { NetworkInterfaceInfo } from 'node:os';
import { describe, expect, it } from 'vitest';
import { interfaceIpv6Addresses, ipv6AddressesReader, MAX_ADDRESSES } from '../../src/net/ipv6-addresses.js';

function info(address: string, family: 'IPv4' | 'IPv6' = 'IPv6', internal = false): NetworkInterfaceInfo {
  const common = { address, netmask: 'ffff:ffff:ffff:ffff::', mac: '00:00:00:00:00:00', internal, cidr: `${address}/64` };
  return family === 'IPv6' ? { ...common, family, scopeid: 0 } : { ...common, family, netmask: '255.255.255.0' };
}

describe('interfaceIpv6Addresses', () => {
  it('keeps global and unique local addresses, drops link-local, loopback, multicast, IPv4 and internal ones', () => {
    const found = interfaceIpv6Addresses({
      lo: [info('::1', 'IPv6', true), info('127.0.0.1', 'IPv4', true)],
      eth0: [info('192.0.2.10', 'IPv4'), info('fe80::1'), info('2001:DB8::10'), info('2a00:1450:4001:82a::200e'), info('ff02::1')],
      wg0: [info('fd12:3456:789a::1'), info('2001:db8::10'), info('fc00::9')],
      odd: [info('3fff::1'), info('4000::1'), info('fe00::1'), info('::ffff:192.0.2.1')],
      empty: undefined,
    });
    expect(found).toEqual(['2001:db8::10', '2a00:1450:4001:82a::200e', '3fff::1', 'fc00::9', 'fd12:3456:789a::1']);
  });

  it('reports at most MAX_ADDRESSES', () => {
    const many = Array.from({ length: MAX_ADDRESSES + 10 }, (_, i) => info(`2001:db8::${(i + 1).toString(16)}`));
    expect(interfaceIpv6Addresses({ eth0: many })).toHaveLength(MAX_ADDRESSES);
  });
});

describe('ipv6AddressesReader', () => {
  it('reads the interfaces at most once per interval, and again once it has passed', () => {
    let clock = 1_000;
    let reads = 0;
    const read = () => {
      reads++;
      return [`2001:db8::${reads}`];
    };
    const addresses = ipv6AddressesReader(30_000, () => clock, read);
    expect(addresses()).toEqual(['2001:db8::1']);
    clock += 29_999;
    expect(addresses()).toEqual(['2001:db8::1']);
    expect(reads).toBe(1);
    clock += 1;
    expect(addresses()).toEqual(['2001:db8::2']);
    expect(reads).toBe(2);
  });
});
