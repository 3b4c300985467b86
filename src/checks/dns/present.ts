// dig's presentation format: labels, character-strings, IPv6 addresses and
// unknown rdata as dig writes them, and a decoded answer as dig's text or as
// the DNS-over-HTTPS-style JSON document the JSON_ANSWER assertions read.

import type { DnsMessage, DnsRecord } from './message.js';

const NAME_SPECIALS = new Set([0x22, 0x28, 0x29, 0x2e, 0x3b, 0x5c, 0x40, 0x24]); // " ( ) . ; \ @ $

/** A label as dig writes it: the name specials backslash-escaped, bytes outside printable ASCII as \DDD. */
export function escapeLabel(bytes: Buffer): string {
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
