// Real DNS servers on loopback for tests.
//
// startNamed(): BIND 9 (`named -g`, Debian's bind9) authoritative for a test
// zone, on 127.0.0.1 at a free port, UDP and TCP, with its own temporary
// directory. The default zones give every record type the DNS monitor asks
// for, a CNAME chain, a TXT longer than 255 bytes, an A RRset too big for a
// 1232-byte UDP answer (TC → TCP), NXDOMAIN (a missing name), SERVFAIL (a
// zone that is configured but fails to load) and REFUSED (any name outside
// the zones: recursion is off). Why BIND: dnsmasq cannot serve SERVFAIL or
// HTTPS records natively, and unbound's local-data cannot make a zone fail.
//
// startFakeDnsServer(): a scripted server (node:dgram + node:net) for what no
// real server does on purpose: wrong ids, garbage, silence, cut connections.
//
// Neither installs anything: .ci/run installs bind9 (and bind9-dnsutils for
// dig); a missing binary is a clear error.

import { type ChildProcess, spawn } from 'node:child_process';
import dgram from 'node:dgram';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { decode, encode, type Packet, RECURSION_DESIRED } from 'dns-packet';
import { onFreePort, READY_DEADLINE_MS, retryUntil, stopEscalating, watchExit } from './daemon.js';
import { findExecutable, freePort } from './nginx.js';

export interface ZoneSpec {
  /** The zone's origin, without the trailing dot. */
  name: string;
  /** Zone file text (relative names are under `name`). */
  text: string;
  /** Configure the zone with a file that cannot load: named answers SERVFAIL for it. */
  broken?: boolean;
}

export interface DnsServer {
  host: '127.0.0.1';
  port: number;
  dir: string;
  pid: number | undefined;
  /** named's log (stderr) so far. */
  log(): string;
  stop(): Promise<void>;
}

export const TEST_ZONE = 'outpost.test';
export const SERVFAIL_ZONE = 'broken.test';
/** Number of A records of big.outpost.test: 90 × 16 bytes does not fit 1232 (named allows ≤ 100 per RRset). */
export const BIG_RRSET = 90;
export const LONG_TXT = ['a'.repeat(255), 'b'.repeat(100)];

/** The 32 nibbles of an IPv6 address, reversed, for ip6.arpa. */
function ip6Nibbles(hex32: string): string {
  return hex32.split('').reverse().join('.');
}

export function defaultZones(): ZoneSpec[] {
  const big = Array.from({ length: BIG_RRSET }, (_, i) => `big A 198.51.100.${i + 1}`).join('\n');
  const outpost = `$TTL 300
@ IN SOA ns1.outpost.test. hostmaster.outpost.test. 2024010101 3600 900 604800 60
@ NS ns1
ns1 A 127.0.0.1
www A 192.0.2.10
www A 192.0.2.11
www AAAA 2001:db8::10
mapped AAAA ::ffff:192.0.2.1
@ MX 10 mail
@ MX 20 mail2
mail A 192.0.2.25
mail2 A 192.0.2.26
@ TXT "v=spf1 -all"
long TXT "${LONG_TXT[0]}" "${LONG_TXT[1]}"
quote TXT "say \\"hi\\"" "back\\\\slash" "\\001ctrl tab\\009x"
alias CNAME alias2
alias2 CNAME www
dangling CNAME nowhere
_sip._tcp SRV 10 60 5060 sip
sip A 192.0.2.50
@ CAA 0 issue "ca.example.net"
@ CAA 128 iodef "mailto:security@outpost.test"
svc HTTPS 1 . alpn="h2,h3" port=8443 ipv4hint=192.0.2.10 ipv6hint=2001:db8::10
alias-svc HTTPS 0 www.outpost.test.
svc2 HTTPS 16 svc.outpost.test. mandatory=alpn,port alpn="h2,h3\\\\,x" no-default-alpn port=443 ech=AEX+DQBBpQAgACA= key7="/q{?dns}" key667=hello key668="a b\\"c" key669
unk TYPE65534 \\# 4 0A000001
unk2 TYPE65534 \\# 40 ${'00112233445566778899'.repeat(4)}
we\\\\ird\\.l\\032x A 192.0.2.99
odd MX 5 we\\\\ird\\.l\\032x
${big}
`;
  const reverse4 = `$TTL 300
@ IN SOA ns1.outpost.test. hostmaster.outpost.test. 1 3600 900 604800 60
@ NS ns1.outpost.test.
10 PTR www.outpost.test.
`;
  // 2001:db8::10 under 8.b.d.0.1.0.0.2.ip6.arpa.
  const reverse6 = `$TTL 300
@ IN SOA ns1.outpost.test. hostmaster.outpost.test. 1 3600 900 604800 60
@ NS ns1.outpost.test.
${ip6Nibbles('000000000000000000000010')} PTR www.outpost.test.
`;
  return [
    { name: TEST_ZONE, text: outpost },
    { name: '2.0.192.in-addr.arpa', text: reverse4 },
    { name: '8.b.d.0.1.0.0.2.ip6.arpa', text: reverse6 },
    { name: SERVFAIL_ZONE, text: '$TTL 300\n@ IN A 192.0.2.1\n', broken: true },
  ];
}

function namedConf(dir: string, port: number, zones: ZoneSpec[]): string {
  const zoneLines = zones.map(
    (z, i) => `zone "${z.name}" { type primary; file "${path.join(dir, `zone${i}.db`)}"; check-names ignore; };`,
  );
  return `# Written by test/support/dns-server.ts
options {
  directory "${dir}";
  pid-file "${path.join(dir, 'named.pid')}";
  session-keyfile "${path.join(dir, 'session.key')}";
  managed-keys-directory "${dir}";
  listen-on port ${port} { 127.0.0.1; };
  listen-on-v6 { none; };
  recursion no;
  dnssec-validation no;
  notify no;
  max-udp-size 1232;
  edns-udp-size 1232;
};
controls { };
${zoneLines.join('\n')}
`;
}

/** One query to 127.0.0.1:port over UDP or TCP; resolves with the decoded answer or null after `timeoutMs`. */
export function rawQuery(
  port: number,
  name: string,
  type: string,
  transport: 'UDP' | 'TCP',
  timeoutMs = 1_000,
): Promise<(Packet & { rcode?: string; flag_aa?: boolean }) | null> {
  const query = encode({ type: 'query', id: 4242, flags: RECURSION_DESIRED, questions: [{ name, type: type as 'A' }] });
  return new Promise((resolve) => {
    const done = (value: (Packet & { rcode?: string }) | null) => {
      clearTimeout(timer);
      resolve(value);
    };
    const safeDecode = (buf: Buffer) => {
      try {
        return decode(buf);
      } catch {
        return null;
      }
    };
    let close: () => void = () => undefined;
    const timer = setTimeout(() => {
      close();
      done(null);
    }, timeoutMs);
    if (transport === 'UDP') {
      const socket = dgram.createSocket('udp4');
      close = () => socket.close();
      socket.on('error', () => {
        close();
        done(null);
      });
      socket.on('message', (msg) => {
        close();
        done(safeDecode(msg));
      });
      socket.send(query, port, '127.0.0.1');
    } else {
      const socket = net.connect({ host: '127.0.0.1', port });
      close = () => void socket.destroy();
      let received = Buffer.alloc(0);
      socket.on('connect', () => {
        const prefix = Buffer.alloc(2);
        prefix.writeUInt16BE(query.length);
        socket.write(Buffer.concat([prefix, query]));
      });
      socket.on('data', (chunk: Buffer) => {
        received = Buffer.concat([received, chunk]);
        if (received.length >= 2 && received.length >= 2 + received.readUInt16BE(0)) {
          close();
          done(safeDecode(received.subarray(2, 2 + received.readUInt16BE(0))));
        }
      });
      socket.on('error', () => done(null));
    }
  });
}

const running = new Set<ChildProcess>();
let exitHookInstalled = false;
function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once('exit', () => {
    for (const child of running) {
      try {
        child.kill('SIGKILL');
      } catch {
        // Already gone.
      }
    }
  });
}

async function startNamedOnce(binary: string, port: number, zones: ZoneSpec[]): Promise<DnsServer> {
  const dir = mkdtempSync(path.join(tmpdir(), 'outpost-named-'));
  zones.forEach((z, i) => {
    writeFileSync(path.join(dir, `zone${i}.db`), z.broken ? z.text : `$ORIGIN ${z.name}.\n${z.text}`);
  });
  const confFile = path.join(dir, 'named.conf');
  writeFileSync(confFile, namedConf(dir, port, zones));
  // -g: foreground, log to stderr, no setuid; -4: IPv4 only; -n 1: one worker thread.
  const child = spawn(binary, ['-g', '-4', '-n', '1', '-c', confFile], { stdio: ['ignore', 'ignore', 'pipe'] });
  running.add(child);
  installExitHook();
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-20_000);
  });
  const { exited, description: exitDescription } = watchExit(
    child,
    'named',
    (code, signal) => `named exited (code ${code}, signal ${signal}): ${stderr.trim().split('\n').slice(-5).join(' | ')}`,
    () => running.delete(child),
  );
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    if (exitDescription() === undefined) {
      await stopEscalating([['SIGTERM', 5_000], ['SIGKILL', 2_000]], (signal) => child.kill(signal), exited);
    }
    rmSync(dir, { recursive: true, force: true });
  };

  try {
    const deadline = Date.now() + READY_DEADLINE_MS;
    // named's last start-up line is "running" alone; its first ("running on Linux ...") says nothing about the zones.
    while (!/ running$/m.test(stderr)) {
      const exit = exitDescription();
      if (exit !== undefined) throw new Error(exit);
      if (Date.now() > deadline) throw new Error(`named did not start within ${READY_DEADLINE_MS / 1000} s: ${stderr.slice(-1500)}`);
      await new Promise((r) => setTimeout(r, 25));
    }
    if (/address in use|could not listen/i.test(stderr)) throw new Error(`named could not listen on 127.0.0.1:${port}: address in use`);
    // It is our server, on both transports, with every zone that can load: each zone's SOA, authoritatively.
    // Asked again until a deadline: on a busy machine named says "running" a while before it answers.
    const loadable = zones.filter((z) => !z.broken).map((z) => z.name);
    for (const transport of ['UDP', 'TCP'] as const) {
      for (const zone of loadable.length > 0 ? loadable : [TEST_ZONE]) {
        const served = await retryUntil(READY_DEADLINE_MS, async () => {
          const answer = await rawQuery(port, zone, 'SOA', transport, 2_000).catch(() => undefined);
          if (exitDescription() !== undefined) throw new Error(exitDescription());
          return answer?.rcode === 'NOERROR' && answer.flag_aa === true;
        });
        if (!served) throw new Error(`named on 127.0.0.1:${port} does not serve ${zone} over ${transport}: ${stderr.slice(-1500)}`);
      }
    }
  } catch (error) {
    await stop();
    throw error;
  }
  return { host: '127.0.0.1', port, dir, pid: child.pid, log: () => stderr, stop };
}

/** Starts named with `zones` (default: defaultZones()). Throws if named is not installed. */
export async function startNamed(zones: ZoneSpec[] = defaultZones()): Promise<DnsServer> {
  const binary = findExecutable('named');
  if (!binary) throw new Error('named is not installed: apt-get install -y bind9 (.ci/run installs it; tests do not)');
  // A free TCP port may have its UDP twin taken, or be taken before named binds.
  return onFreePort((port) => startNamedOnce(binary, port, zones), /address in use|does not serve/i, 'named');
}

// ---------------------------------------------------------------------------
// A scripted server.

export interface FakeQuery {
  id: number;
  name: string;
  type: string;
  raw: Buffer;
  transport: 'UDP' | 'TCP';
}

/** What to send back: a DNS message (framed with its length over TCP) or raw bytes sent as they are. */
export type FakeReply = Buffer | { raw: Buffer };

export interface FakeDnsServer {
  port: number;
  queries: FakeQuery[];
  stop(): Promise<void>;
}

/**
 * Listens on 127.0.0.1 (UDP, and TCP unless `tcp: false`) and answers each
 * query with what `handler` returns; nothing returned means silence (a TCP
 * connection then stays open). After replying over TCP the server closes.
 */
export async function startFakeDnsServer(
  handler: (query: FakeQuery) => FakeReply[],
  options: { tcp?: boolean } = {},
): Promise<FakeDnsServer> {
  const queries: FakeQuery[] = [];
  const parse = (raw: Buffer, transport: 'UDP' | 'TCP'): FakeQuery => {
    try {
      const packet = decode(raw);
      const q = packet.questions?.[0];
      return { id: packet.id ?? 0, name: q?.name ?? '', type: q?.type ?? '', raw, transport };
    } catch {
      return { id: raw.length >= 2 ? raw.readUInt16BE(0) : 0, name: '', type: '', raw, transport };
    }
  };
  for (let attempt = 0; ; attempt++) {
    const port = await freePort();
    const udp = dgram.createSocket('udp4');
    const sockets = new Set<net.Socket>();
    const tcp = net.createServer((socket) => {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      socket.on('error', () => undefined);
      let received = Buffer.alloc(0);
      socket.on('data', (chunk: Buffer) => {
        received = Buffer.concat([received, chunk]);
        if (received.length < 2 || received.length < 2 + received.readUInt16BE(0)) return;
        const query = parse(received.subarray(2, 2 + received.readUInt16BE(0)), 'TCP');
        queries.push(query);
        const replies = handler(query);
        if (replies.length === 0) return;
        for (const reply of replies) {
          if (Buffer.isBuffer(reply)) {
            const prefix = Buffer.alloc(2);
            prefix.writeUInt16BE(reply.length);
            socket.write(Buffer.concat([prefix, reply]));
          } else {
            socket.write(reply.raw);
          }
        }
        socket.end();
      });
    });
    udp.on('message', (raw, remote) => {
      const query = parse(raw, 'UDP');
      queries.push(query);
      for (const reply of handler(query)) udp.send(Buffer.isBuffer(reply) ? reply : reply.raw, remote.port, remote.address);
    });
    try {
      await new Promise<void>((resolve, reject) => {
        udp.once('error', reject);
        udp.bind(port, '127.0.0.1', () => resolve());
      });
      if (options.tcp !== false) {
        await new Promise<void>((resolve, reject) => {
          tcp.once('error', reject);
          tcp.listen(port, '127.0.0.1', () => resolve());
        });
      }
    } catch (error) {
      udp.close();
      tcp.close();
      if (attempt < 3) continue;
      throw error;
    }
    return {
      port,
      queries,
      stop: async () => {
        for (const s of sockets) s.destroy();
        await new Promise<void>((resolve) => udp.close(() => resolve()));
        if (options.tcp !== false) await new Promise<void>((resolve) => tcp.close(() => resolve()));
      },
    };
  }
}

/** An answer to `query` (same id and question, QR set), with the given records and rcode. */
export function answerTo(
  query: FakeQuery,
  options: { id?: number; rcode?: number; flags?: number; answers?: Packet['answers']; name?: string; type?: string } = {},
): Buffer {
  const message = encode({
    type: 'response',
    id: options.id ?? query.id,
    flags: (options.flags ?? RECURSION_DESIRED) | (options.rcode ?? 0),
    questions: [{ name: options.name ?? query.name, type: (options.type ?? query.type) as 'A', class: 'IN' }],
    answers: options.answers ?? [],
  });
  return message;
}
