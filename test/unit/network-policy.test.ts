// The network policy (src/net/network-policy.ts): parsing BLOCKED_NETWORKS and
// ALLOWED_NETWORKS, `default`, the most specific rule winning, and the address
// judged being the one resolved for the socket, whatever notation named it.

import net from 'node:net';
import { networkInterfaces } from 'node:os';
import { describe, expect, it } from 'vitest';
import {
  addressBits,
  describePolicy,
  judge,
  NetworkPolicyError,
  NetworkPolicyParseError,
  parseNetworkPolicy,
  parseRule,
  resolvePermitted,
} from '../../src/net/network-policy.js';
import { configFromEnv, ConfigError } from '../../src/config.js';

const policyOf = (blocked: string, allowed?: string) => {
  const policy = parseNetworkPolicy(blocked, allowed, [{ port: 8081, what: 'health port' }]);
  if (!policy) throw new Error('no policy');
  return policy;
};

describe('parsing', () => {
  it('reads IPv4 and IPv6 CIDRs, hosts, ports, and clears host bits', () => {
    expect(parseRule('10.0.0.0/8', 'X').text).toBe('10.0.0.0/8');
    expect(parseRule('10.1.2.3/8', 'X').text).toBe('10.0.0.0/8');
    expect(parseRule('10.1.2.3', 'X')).toMatchObject({ family: 4, prefix: 32, text: '10.1.2.3' });
    expect(parseRule('10.1.2.3:8081', 'X')).toMatchObject({ prefix: 32, port: 8081, text: '10.1.2.3:8081' });
    expect(parseRule('fd00::/8', 'X')).toMatchObject({ family: 6, prefix: 8, text: 'fd00::/8' });
    expect(parseRule('[fd00:0:0::1/64]:443', 'X')).toMatchObject({ family: 6, prefix: 64, port: 443, text: '[fd00::/64]:443' });
    expect(parseRule('fd00:ec2::254', 'X').text).toBe('fd00:ec2::254');
    expect(parseRule('0.0.0.0/0', 'X').text).toBe('0.0.0.0/0');
    expect(parseRule('::/0', 'X').text).toBe('::/0');
  });

  it('normalises IPv4-mapped IPv6 networks to IPv4', () => {
    expect(parseRule('::ffff:10.0.0.0/104', 'X')).toMatchObject({ family: 4, prefix: 8, text: '10.0.0.0/8' });
    expect(parseRule('::ffff:7f00:1', 'X')).toMatchObject({ family: 4, prefix: 32, text: '127.0.0.1' });
  });

  it.each([
    ['10.0.0.0/33', 'the prefix length of an IPv4 network is 0 to 32'],
    ['fd00::/129', 'the prefix length of an IPv6 network is 0 to 128'],
    ['10.0.0/8', 'must be an IP address or CIDR'],
    ['example.com', 'must be an IP address or CIDR'],
    ['10.0.0.1:0', 'the port must be 1 to 65535'],
    ['10.0.0.1:70000', 'the port must be 1 to 65535'],
    ['10.0.0.0/8/8', 'must be an IP address or CIDR'],
    ['0x7f.1', 'must be an IP address or CIDR'],
  ])('refuses %s, naming the entry', (entry, why) => {
    expect(() => parseRule(entry, 'BLOCKED_NETWORKS')).toThrow(`BLOCKED_NETWORKS entry ${JSON.stringify(entry)} is invalid: ${why}`);
  });

  it('expands default, ignores empty entries, and needs BLOCKED_NETWORKS for ALLOWED_NETWORKS', () => {
    const policy = policyOf(' default , 10.0.0.0/8,,');
    expect(describePolicy(policy)).toEqual({
      blocked: [
        '127.0.0.0/8 (default: loopback)',
        '::1 (default: loopback)',
        '0.0.0.0/8 (default: this host)',
        '::/96 (default: unspecified and IPv4-compatible, this host)',
        '169.254.0.0/16 (default: link-local, cloud metadata)',
        'fe80::/10 (default: link-local)',
        'fd00:ec2::254 (default: cloud metadata)',
        "own addresses:8081 (default: the agent's own health port)",
        '10.0.0.0/8',
      ],
      allowed: [],
    });
    expect(parseNetworkPolicy(undefined, undefined, [])).toBeUndefined();
    expect(() => parseNetworkPolicy(undefined, '10.0.0.1', [])).toThrow(NetworkPolicyParseError);
    expect(() => parseNetworkPolicy('10.0.0.0/8', 'default', [])).toThrow('ALLOWED_NETWORKS entry "default" is invalid');
  });

  it('is read by config.ts: a bad entry is a one-line ConfigError, and the policy reaches the check settings', () => {
    const env = { BLOCKED_NETWORKS: 'default,10.0.0.0/99' };
    expect(() => configFromEnv(env, 'once')).toThrow(ConfigError);
    expect(() => configFromEnv(env, 'once')).toThrow(/^BLOCKED_NETWORKS entry "10.0.0.0\/99" is invalid: the prefix length/);
    const config = configFromEnv({ BLOCKED_NETWORKS: 'default', ALLOWED_NETWORKS: '127.0.0.2', AGENT_HEALTH_PORT: '9123', API_PORT: '9124' }, 'local');
    const shown = describePolicy(config.networkPolicy);
    expect(shown?.blocked).toContain("own addresses:9123 (default: the agent's own health port (AGENT_HEALTH_PORT))");
    expect(shown?.blocked).toContain("own addresses:9124 (default: the agent's own API port (API_PORT))");
    expect(shown?.allowed).toEqual(['127.0.0.2']);
    expect(configFromEnv({}, 'once').networkPolicy).toBeUndefined();
  });
});

describe('judging an address', () => {
  const policy = policyOf('default,10.0.0.0/8,fd00::/8', '10.1.0.0/16,127.0.0.2,[fd00::5]:443');

  it('refuses with the rule and why', () => {
    expect(judge(policy, '127.0.0.1', 80)).toMatchObject({
      allowed: false,
      reason: 'blocked by network policy: 127.0.0.1:80 is in BLOCKED_NETWORKS 127.0.0.0/8 (default: loopback)',
    });
    expect(judge(policy, '169.254.169.254', 80)).toMatchObject({
      allowed: false,
      reason: 'blocked by network policy: 169.254.169.254:80 is in BLOCKED_NETWORKS 169.254.0.0/16 (default: link-local, cloud metadata)',
    });
    expect(judge(policy, 'fd00:ec2::254', 80)).toMatchObject({ allowed: false });
    expect(judge(policy, '::1', 80)).toMatchObject({ allowed: false, reason: 'blocked by network policy: [::1]:80 is in BLOCKED_NETWORKS ::1 (default: loopback)' });
    expect(judge(policy, 'fe80::1%eth0', 80)).toMatchObject({ allowed: false });
    // 0.0.0.0 and :: reach the host itself on Linux.
    expect(judge(policy, '0.0.0.0', 5432)).toMatchObject({ allowed: false, reason: 'blocked by network policy: 0.0.0.0:5432 is in BLOCKED_NETWORKS 0.0.0.0/8 (default: this host)' });
    expect(judge(policy, '::', 5432)).toMatchObject({ allowed: false });
    expect(judge(policy, '::127.0.0.1', 5432)).toMatchObject({ allowed: false });
    expect(judge(policy, '10.2.3.4')).toMatchObject({ allowed: false, reason: 'blocked by network policy: 10.2.3.4 is in BLOCKED_NETWORKS 10.0.0.0/8' });
  });

  it('judges IPv4-mapped IPv6 as the IPv4 address it reaches', () => {
    expect(addressBits('::ffff:127.0.0.1')).toEqual({ family: 4, bits: 0x7f000001n });
    expect(addressBits('[::ffff:7f00:1]')).toEqual({ family: 4, bits: 0x7f000001n });
    expect(judge(policy, '::ffff:127.0.0.1', 80)).toMatchObject({ allowed: false, reason: expect.stringContaining('127.0.0.1:80 is in BLOCKED_NETWORKS 127.0.0.0/8') });
    expect(judge(policy, '::ffff:10.2.3.4', 80)).toMatchObject({ allowed: false });
  });

  it('lets the more specific allowed rule win, and a block win a tie', () => {
    expect(judge(policy, '10.1.2.3', 80)).toMatchObject({ allowed: true, rule: { text: '10.1.0.0/16' } });
    expect(judge(policy, '127.0.0.2', 80)).toMatchObject({ allowed: true });
    expect(judge(policy, '[fd00::5]', 443)).toMatchObject({ allowed: true });
    expect(judge(policy, 'fd00::5', 80)).toMatchObject({ allowed: false });
    expect(judge(policy, '192.0.2.1', 80)).toEqual({ allowed: true });
    expect(judge(policy, '2001:db8::1', 80)).toEqual({ allowed: true });
    const tie = policyOf('10.0.0.0/8', '10.0.0.0/8');
    expect(judge(tie, '10.0.0.1', 80)).toMatchObject({ allowed: false });
    // A port makes a rule more specific than the same network without one.
    const ported = policyOf('10.0.0.5:22', '10.0.0.5');
    expect(judge(ported, '10.0.0.5', 22)).toMatchObject({ allowed: false });
    expect(judge(ported, '10.0.0.5', 80)).toMatchObject({ allowed: true });
  });

  it('blocks the agent own ports on every address of this host, and only those ports', () => {
    const own = Object.values(networkInterfaces())
      .flat()
      .map((i) => i?.address)
      .filter((a): a is string => a !== undefined && !a.startsWith('127.') && a !== '::1' && !a.startsWith('fe80'));
    const onlyPorts = policyOf('default', '127.0.0.0/9');
    for (const address of own) {
      expect(judge(onlyPorts, address, 8081)).toMatchObject({ allowed: false, reason: expect.stringContaining("own addresses:8081 (default: the agent's own health port)") });
      expect(judge(onlyPorts, address, 8082)).toMatchObject({ allowed: true });
    }
    // Loopback allowed by a /9 is still refused on the health port: the port rule is a host rule with a port.
    expect(judge(onlyPorts, '127.0.0.1', 8081)).toMatchObject({ allowed: false });
    expect(judge(onlyPorts, '0.0.0.0', 8081)).toMatchObject({ allowed: false });
    expect(judge(onlyPorts, '127.0.0.1', 8082)).toMatchObject({ allowed: true });
  });

  it('refuses what is not an IP address', () => {
    expect(judge(policy, 'localhost', 80)).toMatchObject({ allowed: false });
  });
});

describe('the address judged is the one resolved for the socket', () => {
  const policy = policyOf('default');
  // Each names loopback: the resolver (getaddrinfo, inet_aton rules) turns them into 127.0.0.1 before the check.
  it.each(['127.0.0.1', '[::ffff:127.0.0.1]', '2130706433', '0x7f.1', '017700000001', '127.1', '0x7f000001', 'localhost', '0177.0.0.1'])(
    '%s resolves to loopback and is refused',
    async (host) => {
      const error = await resolvePermitted(host, 'IPv4', policy, 80).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(NetworkPolicyError);
      expect((error as NetworkPolicyError).code).toBe('ENETPOLICY');
      expect((error as Error).message).toMatch(/^blocked by network policy: 127\.0\.0\.1:80 is in BLOCKED_NETWORKS 127\.0\.0\.0\/8 \(default: loopback\)$/);
    },
  );

  it('returns the address it judged, for the caller to connect to', async () => {
    const allowed = policyOf('default', '127.0.0.2');
    await expect(resolvePermitted('0x7f.2', 'IPv4', allowed, 80)).resolves.toMatchObject({ address: '127.0.0.2', family: 4 });
    await expect(resolvePermitted('127.0.0.3', 'IPv4', undefined, 80)).resolves.toMatchObject({ address: '127.0.0.3' });
    expect(net.isIP('0x7f.2')).toBe(0);
  });
});
