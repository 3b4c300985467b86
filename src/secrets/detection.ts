// Runtime secret detection (SECRET_DETECTION, or a check's `secretDetection`;
// docs/secrets.md "Runtime detection"): what a scripted check's run printed,
// logged in its pages or saved is searched for values that look like
// credentials although nobody declared them secret. The caller registers each
// value found with the job's secrets (`ctx.secrets.add`), so from then on it
// is scrubbed everywhere like a declared secret, and reports what was found by
// kind and place, never by value.
//
// Bounded work: each pattern is accepted by V8's linear-time engine
// (test/unit/secret-detection.test.ts checks it with the guard of
// src/checks/assertions/regex.ts), and each begins at a literal (`eyJ`,
// `AKIA`, `bearer`, `-----BEGIN `, a key word) or a character that ends a
// token, so a failed attempt reads one token at most and a scan is linear in
// the text. A scan reads at most DETECTION_MAX_CHARS_PER_OUTPUT characters of
// one output and DETECTION_MAX_CHARS_PER_JOB of a job's outputs together,
// and keeps at most DETECTION_MAX_VALUES values; what is past a limit is
// said (as a note, without values), never silently skipped.

/** What a detected value looked like. */
export type DetectedKind = 'jwt' | 'aws-access-key' | 'bearer-token' | 'private-key' | 'credential-assignment';

/** One kind of value found in one output; `where` names the output (`jobLog`, `consoleMessages`, `artifact notes.txt`, …). */
export interface DetectedSecret {
  kind: DetectedKind;
  where: string;
}

/** Characters of one output that are searched. */
export const DETECTION_MAX_CHARS_PER_OUTPUT = 10 * 1024 * 1024;
/** Characters of all a job's outputs together that are searched. */
export const DETECTION_MAX_CHARS_PER_JOB = 32 * 1024 * 1024;
/** Distinct values a job may register (each one grows the job's scrubber). */
export const DETECTION_MAX_VALUES = 100;
/** Values longer than this are not taken (a credential is shorter; a longer run is data). */
const MAX_VALUE_LENGTH = 4096;
/** A private key's END line is looked for this far after its BEGIN line. */
const PRIVATE_KEY_MAX_LENGTH = 16_384;
/** How far before a key word its name is read (`client_secret`, `X-Api-Key`). */
const KEY_NAME_MAX_LENGTH = 40;

// A JWS in compact form: base64url of a JSON header (`{"` → `eyJ`), of a JSON payload, and a signature of
// at least 16 characters (HS256 gives 43). An unsigned token (`alg: none`, empty signature) is not taken.
const JWT = /(?:^|[^A-Za-z0-9_-])(eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{16,})/g;
// An AWS access key id: a long-term (AKIA) or temporary (ASIA) one, 20 characters, alone.
const AWS_ACCESS_KEY = /(?:^|[^A-Za-z0-9])((?:AKIA|ASIA)[0-9A-Z]{16})(?:[^A-Za-z0-9]|$)/g;
// `Bearer <token>` (RFC 6750's b64token), as an Authorization header or a log line prints it.
// (Case spelled out: V8's linear engine refuses this class under the `i` flag.)
const BEARER = /[Bb][Ee][Aa][Rr][Ee][Rr]\s+([A-Za-z0-9._~+/-]{16,}=*)/g;
// A PEM private key of any kind (RSA, EC, OPENSSH, ENCRYPTED, PGP … BLOCK), up to the first END line after it.
const PRIVATE_KEY = /-----BEGIN ((?:[A-Z0-9]+ )*)PRIVATE KEY( BLOCK)?-----/g;
/** A private key's END line (exported for the linear-time test). */
export const PRIVATE_KEY_END = /-----END ((?:[A-Z0-9]+ )*)PRIVATE KEY( BLOCK)?-----/g;

/**
 * The first line of a kind (BEGIN or END) at or after a position, for one text. Positions asked about
 * only grow (BEGIN lines are met left to right), so the text is searched once, left to right, however
 * many BEGIN lines lack an END: looking for each one's END up to the text's end would be quadratic.
 */
class MarkerLines {
  private readonly pattern: RegExp;
  private next: RegExpExecArray | null | undefined;

  constructor(
    private readonly text: string,
    marker: RegExp,
  ) {
    this.pattern = new RegExp(marker.source, 'g');
  }

  after(position: number): RegExpExecArray | null {
    // None after an earlier position: none after this one.
    if (this.next === null) return null;
    if (this.next !== undefined && this.next.index >= position) return this.next;
    this.pattern.lastIndex = Math.max(position, this.pattern.lastIndex);
    this.next = this.pattern.exec(this.text);
    return this.next;
  }
}
// `password=…`, `"token": "…"`, `apikey: …`, `client_secret=…` (the key word ends the key's name; its start is read back).
// Case is spelled out: V8's linear engine refuses these classes under the `i` flag.
const caseless = (word: string) => [...word].map((c) => (/[a-z]/.test(c) ? `[${c.toUpperCase()}${c}]` : c)).join('');
const KEY_WORDS = ['password', 'passwd', 'pwd', 'token', 'secret', 'api[_-]?key'].map((w) => w.split('[_-]?').map(caseless).join('[_-]?'));
const ASSIGNMENT = new RegExp(`(?:${KEY_WORDS.join('|')})["']?\\s{0,3}[:=]\\s{0,3}["']?([^\\s"'\`&;,<>{}()[\\]\\\\|]{8,})`, 'g');

/** The patterns, for the linear-time test and docs/secrets.md. */
export const DETECTION_PATTERNS: Readonly<Record<DetectedKind, RegExp>> = {
  jwt: JWT,
  'aws-access-key': AWS_ACCESS_KEY,
  'bearer-token': BEARER,
  'private-key': PRIVATE_KEY,
  'credential-assignment': ASSIGNMENT,
};

/**
 * Names whose value is not a credential although they end in a key word: paging cursors and
 * anti-forgery tokens (bound to a session the run already has; they change at every page).
 */
const NOT_CREDENTIAL_NAMES = /(?:page|next|prev|previous|continuation|cursor|sync|csrf|xsrf|authenticity|verification|request_?verification)[_-]?token$/i;
/** `a.b.c`: a property path in minified code (`password:t.password`), not a value. */
const PROPERTY_PATH = /^[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)+$/;
/** Characters that may precede a key word inside its name. */
const NAME_CHAR = /[A-Za-z0-9_-]/;

/** Shannon entropy of the value's characters, in bits per character. */
export function entropyBits(value: string): number {
  const counts = new Map<string, number>();
  for (const c of value) counts.set(c, (counts.get(c) ?? 0) + 1);
  const n = [...value].length;
  let bits = 0;
  for (const count of counts.values()) {
    const p = count / n;
    bits -= p * Math.log2(p);
  }
  return bits;
}

/**
 * Whether a value after a key word looks like a credential rather than a word, a placeholder or code:
 * letters and digits both, no property path, and at least 3 bits of entropy per character.
 */
export function looksLikeCredential(value: string): boolean {
  if (value.length < 8 || value.length > MAX_VALUE_LENGTH) return false;
  if (!/[0-9]/.test(value) || !/[A-Za-z]/.test(value)) return false;
  if (PROPERTY_PATH.test(value)) return false;
  return entropyBits(value) >= 3;
}

/** A bearer token: at least two of lower case, upper case and digits (not `Bearer authentication-scheme-name`). */
function looksLikeToken(value: string): boolean {
  const classes = Number(/[a-z]/.test(value)) + Number(/[A-Z]/.test(value)) + Number(/[0-9]/.test(value));
  return classes >= 2 && value.length <= MAX_VALUE_LENGTH;
}

/** A private key block's lines that are base64 (each is scrubbed too: a log prints the block line by line). */
function keyBodyLines(block: string): string[] {
  return block.split(/\\r\\n|\\n|\r?\n/).filter((line) => line.length >= 16 && /^[A-Za-z0-9+/=]+$/.test(line));
}

/** A text's BEGIN and END lines of private keys, found left to right. */
interface KeyLines {
  begin: MarkerLines;
  end: MarkerLines;
}

interface Found {
  kind: DetectedKind;
  /** Empty when the match is not taken. */
  values: string[];
  /**
   * Where the scan goes on: after the match's value, taken or not. A value is a maximal run of its
   * characters, so what starts inside it would be a piece of it; going on from there keeps a scan linear.
   */
  end: number;
}

export interface DetectorOptions {
  maxCharsPerOutput?: number;
  maxCharsPerJob?: number;
  maxValues?: number;
  /**
   * A value the job knows as a secret already (declared, or holding a declared one): it is scrubbed
   * anyway, and reporting it would say "nobody declared this" of a declared secret.
   */
  isKnown?: (value: string) => boolean;
}

/**
 * Collects a job's detections. `scan(text, where)` each output, then register `values` as the
 * job's secrets and report `detections` and `notes`. Not safe to share between jobs.
 */
export class SecretDetector {
  private readonly found = new Map<string, DetectedKind>();
  /** Values isKnown said yes to (a declared secret printed many times is asked about once). */
  private readonly known = new Set<string>();
  private readonly places = new Map<string, DetectedSecret>();
  private readonly limits: string[] = [];
  private scannedChars = 0;
  private judged = 0;
  private valuesFull = false;

  private readonly maxCharsPerOutput: number;
  private readonly maxCharsPerJob: number;
  private readonly maxValues: number;
  private readonly isKnown: (value: string) => boolean;

  constructor(options: DetectorOptions = {}) {
    this.maxCharsPerOutput = options.maxCharsPerOutput ?? DETECTION_MAX_CHARS_PER_OUTPUT;
    this.maxCharsPerJob = options.maxCharsPerJob ?? DETECTION_MAX_CHARS_PER_JOB;
    this.maxValues = options.maxValues ?? DETECTION_MAX_VALUES;
    this.isKnown = options.isKnown ?? (() => false);
  }

  /** Searches one output (its first maxCharsPerOutput characters, within the job's budget). */
  scan(text: string, where: string): void {
    if (text.length === 0) return;
    const room = Math.min(this.maxCharsPerOutput, this.maxCharsPerJob - this.scannedChars);
    if (room <= 0) {
      this.note(`${where} was not searched: the job's outputs passed ${this.maxCharsPerJob.toLocaleString('en-US')} characters`);
      return;
    }
    const part = text.length > room ? text.slice(0, room) : text;
    if (part.length < text.length) this.note(`only the first ${room.toLocaleString('en-US')} characters of ${where} were searched`);
    this.scannedChars += part.length;
    const lines: KeyLines = { begin: new MarkerLines(part, PRIVATE_KEY), end: new MarkerLines(part, PRIVATE_KEY_END) };
    for (const kind of Object.keys(DETECTION_PATTERNS) as DetectedKind[]) {
      const pattern = DETECTION_PATTERNS[kind];
      pattern.lastIndex = 0;
      for (let match = pattern.exec(part); match !== null; match = pattern.exec(part)) {
        this.judged++;
        const hit = this.judge(kind, part, match, lines);
        pattern.lastIndex = Math.max(hit.end, match.index + 1);
        for (const value of hit.values) this.keep(hit.kind, value, where);
        if (this.valuesFull) return;
      }
    }
  }

  /** Pattern matches judged (taken or not): how many near misses a text had, for the false-positive figure. */
  get candidates(): number {
    return this.judged;
  }

  /** Characters searched so far. */
  get searched(): number {
    return this.scannedChars;
  }

  /** The distinct values found, to register as the job's secrets. */
  get values(): string[] {
    return [...this.found.keys()];
  }

  /** Each kind found in each output, in the order first found. */
  get detections(): DetectedSecret[] {
    return [...this.places.values()];
  }

  /** What a limit left unsearched or untaken (no values), for the jobLog. */
  get notes(): readonly string[] {
    return this.limits;
  }

  private judge(kind: DetectedKind, text: string, match: RegExpExecArray, lines: KeyLines): Found {
    const value = match[1] ?? '';
    const end = match.index + match[0].lastIndexOf(value) + value.length;
    const taken = (ok: boolean): Found => ({ kind, values: ok ? [value] : [], end });
    switch (kind) {
      case 'jwt':
      case 'aws-access-key':
        return taken(value.length <= MAX_VALUE_LENGTH);
      case 'bearer-token':
        return taken(looksLikeToken(value));
      case 'private-key': {
        const afterBegin = match.index + match[0].length;
        const endLine = lines.end.after(afterBegin);
        const nextBegin = lines.begin.after(afterBegin);
        // The first END line after it closes the block: it must be this key's, near, and no other key may begin first.
        const same = endLine !== null && endLine[1] === match[1] && endLine[2] === match[2];
        if (!same || endLine.index - match.index > PRIVATE_KEY_MAX_LENGTH || (nextBegin !== null && nextBegin.index < endLine.index)) {
          return { kind, values: [], end: afterBegin };
        }
        const blockEnd = endLine.index + endLine[0].length;
        const block = text.slice(match.index, blockEnd);
        return { kind, values: [block, ...keyBodyLines(block)], end: blockEnd };
      }
      case 'credential-assignment': {
        // Found already as a stronger kind (a JWT after `token=`): that kind has this output recorded.
        if (this.found.has(value) || !looksLikeCredential(value)) return taken(false);
        const keyWord = /^[A-Za-z_-]+/.exec(match[0])?.[0] ?? '';
        let nameStart = match.index;
        while (nameStart > 0 && match.index - nameStart < KEY_NAME_MAX_LENGTH && NAME_CHAR.test(text[nameStart - 1] as string)) nameStart--;
        return taken(!NOT_CREDENTIAL_NAMES.test(text.slice(nameStart, match.index) + keyWord));
      }
    }
  }

  private keep(kind: DetectedKind, value: string, where: string): void {
    if (!this.found.has(value)) {
      if (this.known.has(value)) return;
      if (this.isKnown(value)) {
        if (this.known.size < this.maxValues) this.known.add(value);
        return;
      }
      if (this.found.size >= this.maxValues) {
        this.valuesFull = true;
        this.note(`the search stopped at ${this.maxValues} values; later ones are not scrubbed unless declared secret`);
        return;
      }
      this.found.set(value, kind);
    }
    // A value is reported as the kind it was first found as, wherever it is found again.
    const first = this.found.get(value) ?? kind;
    const key = `${first}\n${where}`;
    if (!this.places.has(key)) this.places.set(key, { kind: first, where });
  }

  private note(text: string): void {
    if (!this.limits.includes(text)) this.limits.push(text);
  }
}
