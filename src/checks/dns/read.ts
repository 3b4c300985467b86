// Reading an answer: it is decoded by dns-packet (header, flags, rcode) and,
// independently, by a small record walker over the wire bytes that yields
// dig's presentation format (present.ts). Both must agree on where the message
// ends, so a record whose rdata length does not fit its type is a malformed
// answer, never a silent misread. The walker exists because dns-packet decodes
// labels as UTF-8 (escapes and dots inside labels are lost), prints IPv6
// differently from dig, and does not know SVCB/HTTPS.

import { type DecodedPacket, decode } from 'dns-packet';
import {
  className,
  type DnsFlags,
  type DnsMessage,
  type DnsQuestion,
  type DnsRecord,
  rcodeName,
  typeName,
  WireError,
} from './message.js';
import { escapeLabel, formatIPv6, quoteString, unknownRdata } from './present.js';

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
