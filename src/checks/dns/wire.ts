// DNS messages for the DNS monitor: the query is encoded with dns-packet; an
// answer is decoded by dns-packet (header, flags, rcode) and, independently, by
// a small record walker over the wire bytes that yields dig's presentation
// format. Both must agree on where the message ends, so a record whose rdata
// length does not fit its type is a malformed answer, never a silent misread.
// The walker exists because dns-packet decodes labels as UTF-8 (escapes and
// dots inside labels are lost), prints IPv6 differently from dig, and does not
// know SVCB/HTTPS.

import { isIPv4, isIPv6 } from 'node:net';
import { domainToASCII } from 'node:url';
import { type DecodedPacket, decode, encode, type OptAnswer, RECURSION_DESIRED, type RecordType } from 'dns-packet';

export const RECORD_TYPES = ['A', 'AAAA', 'CNAME', 'MX', 'NS', 'TXT', 'SOA', 'SRV', 'CAA', 'PTR', 'HTTPS'] as const;
export type QueryType = (typeof RECORD_TYPES)[number];

/** EDNS0 UDP payload size we advertise: the DNS Flag Day 2020 value, the same as dig's default. */
export const EDNS_UDP_PAYLOAD = 1232;

const TYPE_NAMES: Record<number, string> = {
  1: 'A',
  2: 'NS',
  5: 'CNAME',
  6: 'SOA',
  12: 'PTR',
  13: 'HINFO',
  15: 'MX',
  16: 'TXT',
  17: 'RP',
  18: 'AFSDB',
  25: 'KEY',
  28: 'AAAA',
  29: 'LOC',
  33: 'SRV',
  35: 'NAPTR',
  36: 'KX',
  37: 'CERT',
  39: 'DNAME',
  41: 'OPT',
  43: 'DS',
  44: 'SSHFP',
  46: 'RRSIG',
  47: 'NSEC',
  48: 'DNSKEY',
  50: 'NSEC3',
  51: 'NSEC3PARAM',
  52: 'TLSA',
  53: 'SMIMEA',
  59: 'CDS',
  60: 'CDNSKEY',
  61: 'OPENPGPKEY',
  64: 'SVCB',
  65: 'HTTPS',
  99: 'SPF',
  108: 'EUI48',
  109: 'EUI64',
  249: 'TKEY',
  250: 'TSIG',
  255: 'ANY',
  256: 'URI',
  257: 'CAA',
};

export const TYPE_CODES: Record<QueryType, number> = {
  A: 1,
  NS: 2,
  CNAME: 5,
  SOA: 6,
  PTR: 12,
  MX: 15,
  TXT: 16,
  AAAA: 28,
  SRV: 33,
  HTTPS: 65,
  CAA: 257,
};

const CLASS_NAMES: Record<number, string> = { 1: 'IN', 3: 'CH', 4: 'HS', 254: 'NONE', 255: 'ANY' };

const RCODE_NAMES: Record<number, string> = {
  0: 'NOERROR',
  1: 'FORMERR',
  2: 'SERVFAIL',
  3: 'NXDOMAIN',
  4: 'NOTIMP',
  5: 'REFUSED',
  6: 'YXDOMAIN',
  7: 'YXRRSET',
  8: 'NXRRSET',
  9: 'NOTAUTH',
  10: 'NOTZONE',
  11: 'DSOTYPENI',
  16: 'BADVERS',
  17: 'BADKEY',
  18: 'BADTIME',
  19: 'BADMODE',
  20: 'BADNAME',
  21: 'BADALG',
  22: 'BADTRUNC',
  23: 'BADCOOKIE',
};

export const typeName = (code: number): string => TYPE_NAMES[code] ?? `TYPE${code}`;
export const className = (code: number): string => CLASS_NAMES[code] ?? `CLASS${code}`;
export const rcodeName = (code: number): string => RCODE_NAMES[code] ?? `RCODE${code}`;

/** Raised for an answer that cannot be decoded; the message says what is wrong with it. */
export class WireError extends Error {
  override name = 'WireError';
}

// ---------------------------------------------------------------------------
// Names: validation of what a check asks for, and reverse names for PTR.

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

// ---------------------------------------------------------------------------
// The query.

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

// ---------------------------------------------------------------------------
// Presentation (dig's text format).

const NAME_SPECIALS = new Set([0x22, 0x28, 0x29, 0x2e, 0x3b, 0x5c, 0x40, 0x24]); // " ( ) . ; \ @ $

function escapeLabel(bytes: Buffer): string {
  let out = '';
  for (const b of bytes) {
    if (NAME_SPECIALS.has(b)) out += `\\${String.fromCharCode(b)}`;
    else if (b > 0x20 && b < 0x7f) out += String.fromCharCode(b);
    else out += `\\${String(b).padStart(3, '0')}`;
  }
  return out;
}

/** A <character-string> as dig prints it: quoted, `"` and `\` escaped, other bytes outside printable ASCII as \DDD. */
export function quoteString(bytes: Buffer): string {
  let out = '"';
  for (const b of bytes) {
    if (b === 0x22 || b === 0x5c) out += `\\${String.fromCharCode(b)}`;
    else if (b >= 0x20 && b < 0x7f) out += String.fromCharCode(b);
    else out += `\\${String(b).padStart(3, '0')}`;
  }
  return `${out}"`;
}

/** An IPv6 address the way inet_ntop (and so dig) writes it: RFC 5952 zero compression, `::ffff:1.2.3.4`. */
export function formatIPv6(bytes: Buffer | number[]): string {
  const words: number[] = [];
  for (let i = 0; i < 16; i += 2) words.push(((bytes[i] ?? 0) << 8) | (bytes[i + 1] ?? 0));
  let best = { base: -1, len: 0 };
  let current = { base: -1, len: 0 };
  for (let i = 0; i < 8; i++) {
    if (words[i] === 0) {
      current = current.base === -1 ? { base: i, len: 1 } : { base: current.base, len: current.len + 1 };
      if (current.len > best.len) best = current;
    } else {
      current = { base: -1, len: 0 };
    }
  }
  if (best.len < 2) best = { base: -1, len: 0 };
  const embeddedV4 =
    best.base === 0 && (best.len === 6 || (best.len === 7 && words[7] !== 1) || (best.len === 5 && words[5] === 0xffff));
  let out = '';
  for (let i = 0; i < 8; i++) {
    if (i >= best.base && i < best.base + best.len) {
      if (i === best.base) out += ':';
      continue;
    }
    if (i !== 0) out += ':';
    if (i === 6 && embeddedV4) {
      out += [12, 13, 14, 15].map((j) => bytes[j] ?? 0).join('.');
      break;
    }
    out += (words[i] ?? 0).toString(16);
  }
  if (best.base !== -1 && best.base + best.len === 8) out += ':';
  return out;
}

/** RFC 3597 form, hex in groups of 28 bytes as dig prints it: `\# 4 0A000001`. */
export function unknownRdata(rdata: Buffer): string {
  if (rdata.length === 0) return '\\# 0';
  const hex = rdata.toString('hex').toUpperCase();
  const chunks: string[] = [];
  for (let i = 0; i < hex.length; i += 56) chunks.push(hex.slice(i, i + 56));
  return `\\# ${rdata.length} ${chunks.join(' ')}`;
}

// ---------------------------------------------------------------------------
// Decoding.

/** Reads a (possibly compressed) name; pointers must point backwards, which bounds the walk. */
export function readName(buf: Buffer, offset: number): { name: string; end: number } {
  const labels: string[] = [];
  let pos = offset;
  let segmentStart = offset;
  let end = -1;
  let wireLength = 1;
  for (;;) {
    const len = buf[pos];
    if (len === undefined) throw new WireError(`a name at byte ${offset} runs past the end of the message`);
    if (len === 0) {
      if (end === -1) end = pos + 1;
      break;
    }
    if ((len & 0xc0) === 0xc0) {
      const low = buf[pos + 1];
      if (low === undefined) throw new WireError(`a name at byte ${offset} runs past the end of the message`);
      const target = ((len & 0x3f) << 8) | low;
      if (target >= segmentStart) throw new WireError(`a name at byte ${offset} has a compression pointer that does not point backwards`);
      if (end === -1) end = pos + 2;
      pos = target;
      segmentStart = target;
      continue;
    }
    if ((len & 0xc0) !== 0) throw new WireError(`a name at byte ${offset} uses an unknown label type`);
    if (pos + 1 + len > buf.length) throw new WireError(`a name at byte ${offset} runs past the end of the message`);
    wireLength += len + 1;
    if (wireLength > 255) throw new WireError(`a name at byte ${offset} is longer than 255 bytes`);
    labels.push(escapeLabel(buf.subarray(pos + 1, pos + 1 + len)));
    pos += 1 + len;
  }
  return { name: labels.length === 0 ? '.' : `${labels.join('.')}.`, end };
}

export interface DnsQuestion {
  name: string;
  type: string;
  typeCode: number;
  class: string;
}

export interface DnsRecord {
  name: string;
  type: string;
  typeCode: number;
  class: string;
  ttl: number;
  /** dig's presentation of the rdata. */
  data: string;
  /** TXT/SPF only: the character-strings, decoded as UTF-8. */
  strings?: string[];
}

export interface EdnsInfo {
  udpPayloadSize: number;
  version: number;
  /** The DO bit. */
  dnssecOk: boolean;
  /** Option codes present in the OPT record (e.g. 10 for a cookie). */
  options: number[];
}

export interface DnsFlags {
  AA: boolean;
  TC: boolean;
  RD: boolean;
  RA: boolean;
  AD: boolean;
  CD: boolean;
}

export interface DnsMessage {
  id: number;
  isResponse: boolean;
  opcode: string;
  /** The full rcode (header rcode plus the EDNS extended bits). */
  rcode: number;
  rcodeName: string;
  flags: DnsFlags;
  /** dig's flag list, e.g. `qr aa rd`. */
  flagsText: string;
  question: DnsQuestion[];
  answer: DnsRecord[];
  authority: DnsRecord[];
  /** Without the OPT pseudo-record, which is reported as `edns`. */
  additional: DnsRecord[];
  edns: EdnsInfo | null;
  size: number;
  /** Bytes after the last record (ignored; dig warns about them too). */
  trailingBytes: number;
}

class Reader {
  constructor(
    private readonly buf: Buffer,
    public pos: number,
    private readonly end: number,
    private readonly what: string,
  ) {}

  private need(n: number): void {
    if (this.pos + n > this.end) throw new WireError(`${this.what} is shorter than its type requires`);
  }
  u8(): number {
    this.need(1);
    return this.buf.readUInt8(this.pos++);
  }
  u16(): number {
    this.need(2);
    const v = this.buf.readUInt16BE(this.pos);
    this.pos += 2;
    return v;
  }
  u32(): number {
    this.need(4);
    const v = this.buf.readUInt32BE(this.pos);
    this.pos += 4;
    return v;
  }
  bytes(n: number): Buffer {
    this.need(n);
    const v = this.buf.subarray(this.pos, this.pos + n);
    this.pos += n;
    return v;
  }
  name(): string {
    const { name, end } = readName(this.buf, this.pos);
    if (end > this.end) throw new WireError(`${this.what} has a name that runs past its rdata`);
    this.pos = end;
    return name;
  }
  charString(): Buffer {
    return this.bytes(this.u8());
  }
  get remaining(): number {
    return this.end - this.pos;
  }
  done(): void {
    if (this.pos !== this.end) throw new WireError(`${this.what} has ${this.end - this.pos} bytes more than its type uses`);
  }
}

const SVC_KEYS = ['mandatory', 'alpn', 'no-default-alpn', 'port', 'ipv4hint', 'ech', 'ipv6hint', 'dohpath', 'ohttp'];
const svcKeyName = (key: number) => SVC_KEYS[key] ?? `key${key}`;

/** SVCB/HTTPS (RFC 9460) presentation: `1 . alpn="h2,h3" port=8443 ipv4hint=192.0.2.1`. */
function svcbText(r: Reader): string {
  const priority = r.u16();
  const parts = [String(priority), r.name()];
  while (r.remaining > 0) {
    const key = r.u16();
    const bytes = r.bytes(r.u16());
    const list = (size: number, f: (b: Buffer) => string) => {
      if (bytes.length === 0 || bytes.length % size !== 0) throw new WireError(`SvcParam ${svcKeyName(key)} has a bad length (${bytes.length})`);
      const items: string[] = [];
      for (let i = 0; i < bytes.length; i += size) items.push(f(bytes.subarray(i, i + size)));
      return items.join(',');
    };
    switch (key) {
      case 0:
        parts.push(`mandatory=${list(2, (b) => svcKeyName(b.readUInt16BE(0)))}`);
        break;
      case 1: {
        const ids: string[] = [];
        for (let i = 0; i < bytes.length; ) {
          const len = bytes[i] ?? 0;
          if (len === 0 || i + 1 + len > bytes.length) throw new WireError('SvcParam alpn has a bad length');
          // Value-list escaping (`,` and `\`) first, then the string's own escaping, as RFC 9460 and dig do.
          ids.push(bytes.subarray(i + 1, i + 1 + len).toString('latin1').replace(/[,\\]/g, '\\$&'));
          i += 1 + len;
        }
        parts.push(`alpn=${quoteString(Buffer.from(ids.join(','), 'latin1'))}`);
        break;
      }
      case 2:
      case 8:
        if (bytes.length !== 0) throw new WireError(`SvcParam ${svcKeyName(key)} must be empty`);
        parts.push(svcKeyName(key));
        break;
      case 3:
        if (bytes.length !== 2) throw new WireError('SvcParam port must be 2 bytes');
        parts.push(`port=${bytes.readUInt16BE(0)}`);
        break;
      case 4:
        parts.push(`ipv4hint=${list(4, (b) => [...b].join('.'))}`);
        break;
      case 5:
        parts.push(`ech=${bytes.toString('base64')}`);
        break;
      case 6:
        parts.push(`ipv6hint=${list(16, formatIPv6)}`);
        break;
      default:
        parts.push(bytes.length === 0 ? svcKeyName(key) : `${svcKeyName(key)}=${quoteString(bytes)}`);
    }
  }
  return parts.join(' ');
}

function rdataText(buf: Buffer, type: number, start: number, end: number, what: string): { data: string; strings?: string[] } {
  const r = new Reader(buf, start, end, what);
  let data: string;
  let strings: string[] | undefined;
  switch (type) {
    case 1:
      data = [...r.bytes(4)].join('.');
      break;
    case 28:
      data = formatIPv6(r.bytes(16));
      break;
    case 2:
    case 5:
    case 12:
    case 39:
      data = r.name();
      break;
    case 15:
      data = `${r.u16()} ${r.name()}`;
      break;
    case 6:
      data = [r.name(), r.name(), r.u32(), r.u32(), r.u32(), r.u32(), r.u32()].join(' ');
      break;
    case 33:
      data = [r.u16(), r.u16(), r.u16(), r.name()].join(' ');
      break;
    case 16:
    case 99: {
      const parts: Buffer[] = [];
      while (r.remaining > 0) parts.push(r.charString());
      data = parts.map(quoteString).join(' ');
      strings = parts.map((p) => p.toString('utf8'));
      break;
    }
    case 257: {
      const flags = r.u8();
      const tag = r.charString();
      data = `${flags} ${tag.toString('latin1')} ${quoteString(r.bytes(r.remaining))}`;
      break;
    }
    case 64:
    case 65:
      data = svcbText(r);
      break;
    default:
      data = unknownRdata(r.bytes(r.remaining));
  }
  r.done();
  return strings ? { data, strings } : { data };
}

const SECTIONS = ['question', 'answer', 'authority', 'additional'] as const;

interface Walked {
  question: DnsQuestion[];
  answer: DnsRecord[];
  authority: DnsRecord[];
  additional: DnsRecord[];
  opt: { udpPayloadSize: number; extendedRcode: number; version: number; dnssecOk: boolean; options: number[] } | null;
  end: number;
}

function walk(buf: Buffer): Walked {
  if (buf.length < 12) throw new WireError(`the message is ${buf.length} bytes, shorter than a DNS header`);
  const counts = [buf.readUInt16BE(4), buf.readUInt16BE(6), buf.readUInt16BE(8), buf.readUInt16BE(10)];
  const out: Walked = { question: [], answer: [], authority: [], additional: [], opt: null, end: 12 };
  let pos = 12;
  for (const [index, section] of SECTIONS.entries()) {
    const count = counts[index] ?? 0;
    for (let i = 0; i < count; i++) {
      const what = `record ${i + 1} of the ${section} section`;
      const { name, end } = readName(buf, pos);
      pos = end;
      if (section === 'question') {
        if (pos + 4 > buf.length) throw new WireError(`${what} runs past the end of the message`);
        const typeCode = buf.readUInt16BE(pos);
        out.question.push({ name, type: typeName(typeCode), typeCode, class: className(buf.readUInt16BE(pos + 2)) });
        pos += 4;
        continue;
      }
      if (pos + 10 > buf.length) throw new WireError(`${what} runs past the end of the message`);
      const typeCode = buf.readUInt16BE(pos);
      const klass = buf.readUInt16BE(pos + 2);
      const ttl = buf.readUInt32BE(pos + 4);
      const rdlength = buf.readUInt16BE(pos + 8);
      const start = pos + 10;
      pos = start + rdlength;
      if (pos > buf.length) throw new WireError(`${what} has an rdata length (${rdlength}) that runs past the end of the message`);
      if (typeCode === 41) {
        if (section !== 'additional' || out.opt) throw new WireError(`${what} is an OPT record out of place`);
        const options: number[] = [];
        for (let o = start; o + 4 <= pos; o += 4 + buf.readUInt16BE(o + 2)) options.push(buf.readUInt16BE(o));
        out.opt = { udpPayloadSize: klass, extendedRcode: ttl >>> 24, version: (ttl >>> 16) & 0xff, dnssecOk: (ttl & 0x8000) !== 0, options };
        continue;
      }
      const record: DnsRecord = {
        name,
        type: typeName(typeCode),
        typeCode,
        class: className(klass),
        ttl,
        ...rdataText(buf, typeCode, start, pos, `the ${typeName(typeCode)} ${what}`),
      };
      out[section].push(record);
    }
  }
  out.end = pos;
  return out;
}

/** Decodes an answer. Throws WireError (with a reason) for anything malformed. */
export function decodeMessage(buf: Buffer): DnsMessage {
  let packet: DecodedPacket & { opcode?: string };
  try {
    packet = decode(buf);
  } catch (error) {
    throw new WireError((error as Error).message);
  }
  const walked = walk(buf);
  if (decode.bytes !== walked.end) {
    throw new WireError(`the record lengths are inconsistent (${walked.end} bytes by rdata length, ${decode.bytes} by record content)`);
  }
  const header = buf.readUInt16BE(2);
  const rcode = (header & 0xf) | ((walked.opt?.extendedRcode ?? 0) << 4);
  const flags: DnsFlags = {
    AA: packet.flag_aa,
    TC: packet.flag_tc,
    RD: packet.flag_rd,
    RA: packet.flag_ra,
    AD: packet.flag_ad,
    CD: packet.flag_cd,
  };
  const flagsText = [
    ['qr', packet.flag_qr],
    ['aa', flags.AA],
    ['tc', flags.TC],
    ['rd', flags.RD],
    ['ra', flags.RA],
    ['ad', flags.AD],
    ['cd', flags.CD],
  ]
    .filter(([, on]) => on)
    .map(([name]) => name)
    .join(' ');
  return {
    id: buf.readUInt16BE(0),
    isResponse: packet.flag_qr,
    opcode: packet.opcode ?? String((header >> 11) & 0xf),
    rcode,
    rcodeName: rcodeName(rcode),
    flags,
    flagsText,
    question: walked.question,
    answer: walked.answer,
    authority: walked.authority,
    additional: walked.additional,
    edns: walked.opt
      ? { udpPayloadSize: walked.opt.udpPayloadSize, version: walked.opt.version, dnssecOk: walked.opt.dnssecOk, options: walked.opt.options }
      : null,
    size: buf.length,
    trailingBytes: buf.length - walked.end,
  };
}

/** The answer section as dig prints it: `name.\tTTL\tIN\tTYPE\tDATA`, one record a line. */
export function textAnswer(records: DnsRecord[]): string {
  return records.map((r) => `${r.name}\t${r.ttl}\t${r.class}\t${r.type}\t${r.data}`).join('\n');
}

/**
 * The JSON_ANSWER document, in the style of the DNS-over-HTTPS JSON API:
 * Status is the numeric rcode; records are {name, type (number), TTL, data};
 * TXT data is the record's strings joined without separators.
 */
export function jsonAnswer(message: DnsMessage): Record<string, unknown> {
  const records = (list: DnsRecord[]) =>
    list.map((r) => ({ name: r.name, type: r.typeCode, TTL: r.ttl, data: r.strings ? r.strings.join('') : r.data }));
  return {
    Status: message.rcode,
    TC: message.flags.TC,
    RD: message.flags.RD,
    RA: message.flags.RA,
    AD: message.flags.AD,
    CD: message.flags.CD,
    AA: message.flags.AA,
    Question: message.question.map((q) => ({ name: q.name, type: q.typeCode })),
    Answer: records(message.answer),
    Authority: records(message.authority),
    Additional: records(message.additional),
  };
}
