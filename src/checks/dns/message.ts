// What the DNS monitor's modules share about a DNS message: the record types a
// check may ask for, the code-to-mnemonic tables dig uses, the decoded
// message's shape, and the error for an answer that cannot be read. Kept apart
// so that query.ts, read.ts and present.ts all build on it while only read.ts
// imports another of them (present.ts, for dig's formatting): no cycle.

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
