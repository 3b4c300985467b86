// The query the DNS monitor sends: the name a check asks for, checked and made
// fully qualified (IDNA for non-ASCII names, reverse names for PTR), and the
// query message, encoded with dns-packet.

import { isIPv4, isIPv6 } from 'node:net';
import { domainToASCII } from 'node:url';
import { encode, type OptAnswer, RECURSION_DESIRED, type RecordType } from 'dns-packet';
import { EDNS_UDP_PAYLOAD, type QueryType, TYPE_CODES } from './message.js';

const LABEL = /^[A-Za-z0-9_*/-]+$/;

/**
 * Checks a query name and returns it fully qualified (with the trailing dot).
 * Accepted: dot-separated labels of 1–63 letters, digits, `-`, `_`, `*` or `/`
 * (RFC 2317 reverse names), at most 253 characters; `.` is the root.
 * A name with non-ASCII letters is converted to its IDNA (punycode) form.
 */
export function normalizeQueryName(input: string): { ok: true; name: string } | { ok: false; problem: string } {
  if (input === '.') return { ok: true, name: '.' };
  let name = input;
  // biome-ignore lint/suspicious/noControlCharactersInRegex: the range is the point: anything outside ASCII.
  if (/[^\x00-\x7f]/.test(name)) {
    const ascii = domainToASCII(name);
    if (!ascii) return { ok: false, problem: `is not a valid internationalized domain name (got ${JSON.stringify(input)})` };
    name = ascii;
  }
  if (name.endsWith('.')) name = name.slice(0, -1);
  if (name === '') return { ok: false, problem: 'must not be empty' };
  if (name.length > 253) return { ok: false, problem: `must be at most 253 characters (got ${name.length})` };
  for (const label of name.split('.')) {
    if (label === '') return { ok: false, problem: `has an empty label (got ${JSON.stringify(input)})` };
    if (label.length > 63) return { ok: false, problem: `has a label longer than 63 characters (${JSON.stringify(label.slice(0, 20))}…)` };
    if (!LABEL.test(label)) {
      return {
        ok: false,
        problem: `must be a domain name: labels of letters, digits, '-', '_', '*' or '/' (got ${JSON.stringify(input.slice(0, 80))})`,
      };
    }
  }
  return { ok: true, name: `${name}.` };
}

/** The 16 bytes of an IPv6 address (a zone id such as `%eth0` is ignored); null if it is not one. */
export function ipv6Bytes(text: string): number[] | null {
  const address = text.split('%')[0] ?? '';
  if (!isIPv6(address)) return null;
  let tail: number[] = [];
  let body = address;
  const v4 = /(\d+\.\d+\.\d+\.\d+)$/.exec(address);
  if (v4?.[1]) {
    tail = v4[1].split('.').map(Number);
    body = address.slice(0, -v4[1].length);
    if (body.endsWith(':') && !body.endsWith('::')) body = body.slice(0, -1);
  }
  const [head = '', rest] = body.split('::');
  const groups = (part: string | undefined) => (part ? part.split(':').filter((g) => g !== '') : []);
  const left = groups(head);
  const right = groups(rest);
  const missing = 8 - tail.length / 2 - left.length - right.length;
  const words = [...left, ...(rest === undefined ? [] : new Array<string>(missing).fill('0')), ...right].map((g) => Number.parseInt(g, 16));
  const bytes = words.flatMap((w) => [w >> 8, w & 0xff]);
  return [...bytes, ...tail];
}

/** The in-addr.arpa / ip6.arpa name for an IP address (fully qualified), or null if `text` is no IP address. */
export function reverseName(text: string): string | null {
  if (isIPv4(text)) return `${text.split('.').reverse().join('.')}.in-addr.arpa.`;
  const bytes = ipv6Bytes(text);
  if (!bytes) return null;
  const nibbles = bytes.flatMap((b) => [(b >> 4).toString(16), (b & 0xf).toString(16)]);
  return `${nibbles.reverse().join('.')}.ip6.arpa.`;
}

/** A standard query: one question, class IN, RD set, EDNS0 with a 1232-byte UDP payload, no DO bit. */
export function encodeQuery(id: number, qname: string, type: QueryType): Buffer {
  const edns: OptAnswer = {
    type: 'OPT',
    name: '.',
    udpPayloadSize: EDNS_UDP_PAYLOAD,
    extendedRcode: 0,
    ednsVersion: 0,
    flags: 0,
    flag_do: false,
    options: [],
  };
  // dns-packet has no mnemonic for HTTPS; its UNKNOWN_<n> form carries the number.
  const qtype = (type === 'HTTPS' ? `UNKNOWN_${TYPE_CODES.HTTPS}` : type) as RecordType;
  return encode({ type: 'query', id, flags: RECURSION_DESIRED, questions: [{ name: qname, type: qtype, class: 'IN' }], additionals: [edns] });
}
