// The secrets scrubber (src/secrets/scrubber.ts): every encoded form, overlaps,
// special characters, unicode, short and empty secrets, the text, buffer and
// deep-value APIs, and agreement between its two search paths.

import { describe, expect, it } from 'vitest';
import { Automaton } from '../../src/secrets/automaton.js';
import { isScrubbable, MIN_SECRET_LENGTH, REDACTED, Scrubber, scrubJsonLine, secretForms } from '../../src/secrets/scrubber.js';

const TRICKY = [
  'hunter2-plain-secret',
  'p@ss w0rd+plus/slash=eq',
  'quote"double\'single`back',
  'back\\slash\\\\double',
  'dollar$&$1$`$\'$$',
  '100%encoded%20not%zz',
  // biome-ignore lint/suspicious/noTemplateCurlyInString: a secret with "${}" in it, on purpose
  'regex.*+?^${}()|[]\\/',
  'ünïcödé-sécret-ß',
  '秘密のパスワード123',
  'emoji🔑secret🚀',
  'tab\tnew\nline\r\u0001ctl',
  '<script>&amp;</script>',
  'AAAA/BBBB+CCCC==',
  'dGhpcyBpcyBiYXNlNjQ=',
  'x'.repeat(500),
];

const b64 = (s: string) => Buffer.from(s, 'utf8').toString('base64');
const b64url = (s: string) => Buffer.from(s, 'utf8').toString('base64url');
const html = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;').replace(/'/g, '&#39;');

/** The forms the issue names, computed independently of the scrubber. */
function namedForms(secret: string): Record<string, string> {
  const url = new URL('http://h/');
  url.pathname = `/${secret}`;
  const path = url.pathname.slice(1);
  url.search = `?q=${secret}`;
  const query = url.search.slice(3);
  return {
    raw: secret,
    encodeURIComponent: encodeURIComponent(secret),
    'form (+)': new URLSearchParams({ q: secret }).toString().slice(2),
    'encodeURIComponent with +': encodeURIComponent(secret).replace(/%20/g, '+'),
    'URL path': path,
    'URL query': query,
    base64: b64(secret),
    'base64 unpadded': b64(secret).replace(/=+$/, ''),
    base64url: b64url(secret),
    'JSON-escaped': JSON.stringify(secret).slice(1, -1),
    'JSON ASCII': JSON.stringify(secret)
      .slice(1, -1)
      .replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`),
    'JSON in JSON': JSON.stringify(JSON.stringify(secret).slice(1, -1)).slice(1, -1),
    'HTML-escaped': html(secret),
  };
}

describe('encoded forms', () => {
  it.each(TRICKY.map((s, i) => [i, s]))('secret #%i is scrubbed in every form, alone and inside other text', (_i, secret) => {
    const scrubber = Scrubber.of([secret]);
    for (const [form, encoded] of Object.entries(namedForms(secret))) {
      expect(scrubber.scrubText(encoded), form).toBe(REDACTED);
      const embedded = `before [${encoded}] after`;
      expect(scrubber.scrubText(embedded), form).toBe(`before [${REDACTED}] after`);
    }
  });

  it('finds base64 of a secret embedded at each of the three byte alignments, and at the end with padding', () => {
    const secret = 'alignment-secret-value';
    const scrubber = Scrubber.of([secret]);
    for (const prefix of ['', 'a', 'ab', 'abc', 'user:', 'Basic user:']) {
      for (const suffix of ['', 'z', 'zz', 'zzz', ' trailing data']) {
        for (const encode of [b64, b64url]) {
          const encoded = encode(`${prefix}${secret}${suffix}`);
          const out = scrubber.scrubText(`Authorization: Basic ${encoded}`);
          expect(out, `${JSON.stringify(prefix)} + secret + ${JSON.stringify(suffix)}`).toContain(REDACTED);
          // What survives is at most the characters that mix the secret with its neighbours.
          const kept = out.replace('Authorization: Basic ', '').replace(REDACTED, '');
          expect(kept.length).toBeLessThanOrEqual(Math.ceil(((prefix.length + suffix.length) * 4) / 3) + 4);
        }
      }
    }
    expect(scrubber.scrubText(`Basic ${b64(`user:${secret}`)}`)).toMatch(/^Basic [A-Za-z0-9+/]{0,8}\*{5}$/);
  });

  it('finds the lower-cased form (host names are lower-cased by URL parsing) and punycode', () => {
    const secret = 'Mixed-Case-Host-Secret';
    expect(Scrubber.of([secret]).scrubText(`getaddrinfo ENOTFOUND ${new URL(`http://${secret}.invalid/`).hostname}`)).toBe(
      `getaddrinfo ENOTFOUND ${REDACTED}.invalid`,
    );
    const idn = 'bücher-geheimnis';
    expect(Scrubber.of([idn]).scrubText(new URL(`http://${idn}.example/`).hostname)).toBe(`${REDACTED}.example`);
  });

  it('lists each form once, none shorter than the minimum', () => {
    const forms = secretForms('p@ss w0rd"x');
    expect(new Set(forms).size).toBe(forms.length);
    for (const f of forms) expect(f.length).toBeGreaterThanOrEqual(MIN_SECRET_LENGTH);
    expect(forms).toContain('p%40ss%20w0rd%22x');
    expect(forms).toContain('p%40ss+w0rd%22x');
    expect(forms).toContain('p@ss w0rd\\"x');
    expect(forms).toContain('p@ss w0rd&quot;x');
  });
});

describe('escaped and transformed encodings', () => {
  const hex = (bytes: Buffer) => bytes.toString('hex');
  const utf16 = (s: string, le: boolean) => {
    const b = Buffer.from(s, 'utf16le');
    if (!le) b.swap16();
    return b;
  };
  /** Forms a script or a target writes easily, computed independently of the scrubber. */
  function escapedForms(secret: string): Record<string, string> {
    const utf8 = Buffer.from(secret, 'utf8');
    const json = JSON.stringify(secret).slice(1, -1);
    return {
      'upper-case': secret.toUpperCase(),
      hex: hex(utf8),
      'HEX (upper)': hex(utf8).toUpperCase(),
      '\\x per byte': [...utf8].map((b) => `\\x${b.toString(16).padStart(2, '0')}`).join(''),
      '% per byte': [...utf8].map((b) => `%${b.toString(16).padStart(2, '0').toUpperCase()}`).join(''),
      'UTF-16LE hex': hex(utf16(secret, true)),
      'UTF-16BE HEX': hex(utf16(secret, false)).toUpperCase(),
      '\\u per code unit': Array.from({ length: secret.length }, (_, i) => `\\u${secret.charCodeAt(i).toString(16).padStart(4, '0')}`).join(''),
      '\\u per code unit (upper)': Array.from({ length: secret.length }, (_, i) => `\\u${secret.charCodeAt(i).toString(16).padStart(4, '0').toUpperCase()}`).join(''),
      'HTML decimal entities': Array.from(secret, (c) => `&#${c.codePointAt(0)};`).join(''),
      'HTML hex entities': Array.from(secret, (c) => `&#x${(c.codePointAt(0) as number).toString(16)};`).join(''),
      'double URL-encoding': encodeURIComponent(encodeURIComponent(secret)),
      'base64 of the JSON-escaped secret': b64(json),
      'base64 of a JSON document holding it': b64(JSON.stringify({ token: secret })),
      'base64 with CRLF every 76': b64(`Authorization: ${secret} and more text to make it long enough ${secret}`).replace(/.{76}/g, '$&\r\n'),
      'base64 with CRLF every 3': b64(secret).replace(/.{3}/g, '$&\r\n'),
      'base64 with LF every 4': b64(`x${secret}`).replace(/.{4}/g, '$&\n'),
    };
  }

  it('unfolds only line breaks between base64 lines: prose, headers and JSON lines are left as they are', () => {
    const secret = 'folded-secret-value-42';
    const scrubber = Scrubber.of([secret]);
    const text = `Content-Type: text/html\r\nServer: nginx\r\n\r\nhello\nworld\n{"a":1}\n{"b":2}\nfolded\nsecret`;
    expect(scrubber.scrubText(text)).toBe(text);
    const pem = `-----BEGIN DATA-----\n${b64(`prefix ${secret} suffix`).replace(/.{16}/g, '$&\n')}\n-----END DATA-----\n`;
    const out = scrubber.scrubText(pem);
    expect(out).toContain(REDACTED);
    expect(out.startsWith('-----BEGIN DATA-----\n')).toBe(true);
    expect(out.endsWith('\n-----END DATA-----\n')).toBe(true);
    expect(Buffer.from(out.replace(/-----[A-Z ]+-----|\n/g, '').replace(REDACTED, ''), 'base64').toString('latin1')).not.toContain('secret');
  });

  it.each(TRICKY.map((s, i) => [i, s]))('secret #%i is scrubbed in every escaped form, alone and inside other text', (_i, secret) => {
    const scrubber = Scrubber.of([secret]);
    for (const [form, encoded] of Object.entries(escapedForms(secret))) {
      const out = scrubber.scrubText(`before [${encoded}] after`);
      expect(out, form).toContain(REDACTED);
      // What survives of the form: at most a few characters at each end (base64 that mixes in neighbouring bytes).
      const kept = out.replace(/^before \[/, '').replace(/\] after$/, '').split(REDACTED).join('');
      if (!form.includes('base64')) expect(kept, form).toBe('');
      else if (!form.includes('document') && !form.includes('76')) expect(kept.replace(/[\r\n]/g, '').length, form).toBeLessThanOrEqual(8);
      expect(out, form).not.toContain(encoded);
    }
  });
});

describe('matching', () => {
  it('lets the longest match win and leaves no piece of overlapping secrets', () => {
    const scrubber = Scrubber.of(['token1234', 'token1234-extended', 'abcdef-secret', 'secret-tail-xyz']);
    expect(scrubber.scrubText('a token1234-extended!')).toBe(`a ${REDACTED}!`);
    expect(scrubber.scrubText('a token1234!')).toBe(`a ${REDACTED}!`);
    expect(scrubber.scrubText('[abcdef-secret-tail-xyz]')).toBe(`[${REDACTED}]`);
  });

  it('replaces adjacent secrets each, and repeated ones everywhere', () => {
    const scrubber = Scrubber.of(['aaaa1111', 'bbbb2222']);
    expect(scrubber.scrubText('aaaa1111bbbb2222')).toBe(`${REDACTED}${REDACTED}`);
    expect(scrubber.scrubText('aaaa1111 aaaa1111 aaaa1111')).toBe(`${REDACTED} ${REDACTED} ${REDACTED}`);
  });

  it('treats special characters literally (no regex, no replacement patterns)', () => {
    const secrets = ['.*.*', '$&$&', '(a|b)+', '[^x]', '\\d+\\w', '$1$2$`'];
    const scrubber = Scrubber.of(secrets);
    expect(scrubber.scrubText('abc $1 xyz (a|b) .* d+')).toBe('abc $1 xyz (a|b) .* d+');
    for (const s of secrets) expect(scrubber.scrubText(`<${s}>`)).toBe(`<${REDACTED}>`);
  });

  it('returns the very same string when nothing matched, and copes with tiny texts', () => {
    const scrubber = Scrubber.of(['not-in-here']);
    const text = 'some text without it';
    expect(scrubber.scrubText(text)).toBe(text);
    for (const t of ['', 'a', 'abc']) expect(scrubber.scrubText(t)).toBe(t);
    expect(new Scrubber().scrubText('anything')).toBe('anything');
  });

  it('agrees with a reference implementation on random texts, with few secrets (native search) and many (the index)', () => {
    let seed = 42;
    const random = () => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      return seed / 2 ** 32;
    };
    const alphabet = Array.from('abcAB12-_ %"\\é🔑');
    const word = (n: number) => Array.from({ length: n }, () => alphabet[Math.floor(random() * alphabet.length)]).join('');
    for (const count of [1, 2, 5, 40]) {
      const secrets = Array.from({ length: count }, () => word(4 + Math.floor(random() * 6)));
      const scrubber = Scrubber.of(secrets);
      const patterns = [...new Set(secrets.flatMap((s) => secretForms(s)))];
      for (let round = 0; round < 50; round++) {
        const parts: string[] = [];
        for (let k = 0; k < 20; k++) parts.push(random() < 0.3 ? (patterns[Math.floor(random() * patterns.length)] as string) : word(Math.floor(random() * 8)));
        const text = parts.join('');
        expect(scrubber.scrubText(text)).toBe(reference(text, patterns));
        expect(Buffer.from(scrubber.scrubBuffer(Buffer.from(text, 'utf8'))).toString('utf8')).toBe(reference(text, patterns));
      }
    }
  });
});

describe('repetitive secrets and text (linear time)', () => {
  /** Milliseconds to build a scrubber for `secrets` and scrub `text` as text and as bytes. */
  function timed(secrets: string[], text: string): { ms: number; text: string; bytes: string } {
    const start = performance.now();
    const scrubber = Scrubber.of(secrets);
    const out = scrubber.scrubText(text);
    const bytes = Buffer.from(scrubber.scrubBuffer(Buffer.from(text))).toString();
    return { ms: performance.now() - start, text: out, bytes };
  }

  const others = Array.from({ length: 10 }, (_, i) => `other-secret-${i}-value`);

  it.each([
    ['one secret (the engine’s own search)', [] as string[]],
    ['with other secrets (the index)', others],
  ])('scrubs a secret of 100,000 "a" from 400 KB of "a" in time comparable to ordinary text: %s', (_what, extra) => {
    let seed = 1;
    const random = (n: number) =>
      Array.from({ length: n }, () => {
        seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
        return String.fromCharCode(97 + (seed >>> 27));
      }).join('');
    const plainSecret = random(100_000);
    const baseline = timed([plainSecret, ...extra], `${random(300_000)}${plainSecret}`);
    expect(baseline.text.endsWith(REDACTED)).toBe(true);
    const secret = 'a'.repeat(100_000);
    const worst = timed([secret, ...extra], `<${'a'.repeat(400_000)}>${others[3]}`);
    expect(worst.text).toBe(`<${REDACTED}>${extra.length > 0 ? REDACTED : others[3]}`);
    expect(worst.bytes).toBe(worst.text);
    // A ratio with a floor, not an absolute time: the quadratic search took 100 to 1,000 times the baseline.
    expect(worst.ms).toBeLessThan(baseline.ms * 20 + 2_000);
  });

  it('gives the same runs through the automaton as the reference, on random repetitive patterns and texts', () => {
    let seed = 7;
    const random = () => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      return seed / 2 ** 32;
    };
    const word = (n: number, alphabet: string) => Array.from({ length: n }, () => alphabet[Math.floor(random() * alphabet.length)]).join('');
    for (let round = 0; round < 200; round++) {
      const alphabet = round % 2 === 0 ? 'ab' : 'abcé🔑';
      const patterns = [...new Set(Array.from({ length: 1 + Math.floor(random() * 6) }, () => word(1 + Math.floor(random() * 8), alphabet)))];
      const text = word(Math.floor(random() * 80), alphabet);
      const runs = new Automaton(
        patterns.map((p) => Array.from({ length: p.length }, (_, i) => p.charCodeAt(i))),
        0x10000,
      ).scan(text.length, (i) => text.charCodeAt(i));
      let out = '';
      let last = 0;
      runs.starts.forEach((start, r) => {
        out += text.slice(last, start) + REDACTED;
        last = runs.ends[r] as number;
      });
      expect(out + text.slice(last), JSON.stringify({ patterns, text })).toBe(reference(text, patterns));
    }
  });
});

/** Every code unit covered by any occurrence of any pattern is redacted; each overlapping run becomes one REDACTED. */
function reference(text: string, patterns: string[]): string {
  const intervals: Array<[number, number]> = [];
  for (const p of patterns) for (let at = text.indexOf(p); at !== -1; at = text.indexOf(p, at + 1)) intervals.push([at, at + p.length]);
  intervals.sort((a, b) => a[0] - b[0] || b[1] - a[1]);
  let out = '';
  let last = 0;
  let open: [number, number] | undefined;
  for (const [s, e] of intervals) {
    if (open && s < open[1]) open[1] = Math.max(open[1], e);
    else {
      if (open) {
        out += text.slice(last, open[0]) + REDACTED;
        last = open[1];
      }
      open = [s, e];
    }
  }
  if (open) {
    out += text.slice(last, open[0]) + REDACTED;
    last = open[1];
  }
  return out + text.slice(last);
}

describe('short and empty secrets', () => {
  it(`does not scrub secrets shorter than ${MIN_SECRET_LENGTH} characters (code points), nor empty ones`, () => {
    const scrubber = new Scrubber();
    expect(scrubber.add('')).toBe(false);
    expect(scrubber.add('abc')).toBe(false);
    expect(scrubber.add('🔑🔑🔑')).toBe(false);
    expect(scrubber.secretCount).toBe(0);
    expect(scrubber.scrubText('abc 🔑🔑🔑')).toBe('abc 🔑🔑🔑');
    expect(isScrubbable('abcd')).toBe(true);
    expect(isScrubbable('🔑🔑🔑🔑')).toBe(true);
    expect(scrubber.add('🔑🔑🔑🔑')).toBe(true);
    expect(scrubber.scrubText('x🔑🔑🔑🔑x')).toBe(`x${REDACTED}x`);
  });
});

describe('the secret set', () => {
  it('counts references: a secret added twice must be removed twice', () => {
    const scrubber = new Scrubber();
    scrubber.add('shared-secret');
    scrubber.add('shared-secret');
    scrubber.remove('shared-secret');
    expect(scrubber.scrubText('shared-secret')).toBe(REDACTED);
    scrubber.remove('shared-secret');
    expect(scrubber.scrubText('shared-secret')).toBe('shared-secret');
    expect(scrubber.patternCount).toBe(0);
  });

  it('copies: a derived scrubber adds secrets without touching its base', () => {
    const base = Scrubber.of(['agent-wide-key']);
    const job = new Scrubber(base);
    job.add('job-only-secret');
    expect(job.scrubText('agent-wide-key job-only-secret')).toBe(`${REDACTED} ${REDACTED}`);
    expect(base.scrubText('agent-wide-key job-only-secret')).toBe(`${REDACTED} job-only-secret`);
  });

  it('stays correct through many additions and removals (tables grow and are rebuilt)', () => {
    const scrubber = new Scrubber();
    const values = Array.from({ length: 300 }, (_, i) => `secret-number-${i}-${'z'.repeat(i % 7)}`);
    for (const v of values) scrubber.add(v);
    for (const v of values.slice(0, 250)) scrubber.remove(v);
    for (const v of values.slice(0, 250)) expect(scrubber.scrubText(`<${v}>`)).toBe(`<${v}>`);
    for (const v of values.slice(250)) expect(scrubber.scrubText(`<${v}>`)).toBe(`<${REDACTED}>`);
  });
});

describe('buffers', () => {
  it('replaces the UTF-8 bytes of every form and leaves binary bytes intact', () => {
    const secret = 'bïnary-secret';
    const scrubber = Scrubber.of([secret]);
    const input = Buffer.concat([Buffer.from([0xff, 0xfe, 0x00]), Buffer.from(secret), Buffer.from([0x80, 0x81]), Buffer.from(b64(secret)), Buffer.from([0xc3])]);
    const out = scrubber.scrubBuffer(input);
    expect(Buffer.compare(out, Buffer.concat([Buffer.from([0xff, 0xfe, 0x00]), Buffer.from(REDACTED), Buffer.from([0x80, 0x81]), Buffer.from(REDACTED), Buffer.from([0xc3])]))).toBe(0);
  });

  it('returns the same object when nothing matched; accepts a plain Uint8Array', () => {
    const scrubber = Scrubber.of(['abcdefgh']);
    const bytes = new Uint8Array([1, 2, 3, 4, 5, 6]);
    expect(scrubber.scrubBuffer(bytes)).toBe(bytes);
    const out = scrubber.scrubBuffer(new TextEncoder().encode('xxabcdefghxx'));
    expect(Buffer.from(out).toString()).toBe(`xx${REDACTED}xx`);
  });

  it('scrubs many secrets through the byte index as well', () => {
    const values = Array.from({ length: 50 }, (_, i) => `many-secrets-${i}-value`);
    const scrubber = Scrubber.of(values);
    expect(scrubber.scrubBuffer(Buffer.from(`a ${values[7]} b ${b64(values[49] as string)} c`)).toString()).toBe(`a ${REDACTED} b ${REDACTED} c`);
    expect(scrubber.maxPatternBytes).toBeGreaterThan(20);
  });
});

describe('deep values', () => {
  it('scrubs every string, keys as well as values, and keeps other values', () => {
    const scrubber = Scrubber.of(['deep-secret']);
    const value = {
      'deep-secret': 'x',
      n: 42,
      ok: true,
      none: null,
      list: ['a deep-secret b', { nested: encodeURIComponent('deep-secret') }],
      bytes: Buffer.from('deep-secret'),
      when: new Date(0),
    };
    const out = scrubber.scrubValue(value);
    expect(out).toEqual({
      [REDACTED]: 'x',
      n: 42,
      ok: true,
      none: null,
      list: [`a ${REDACTED} b`, { nested: REDACTED }],
      bytes: Buffer.from(REDACTED),
      when: new Date(0),
    });
    // A copy: the input is untouched.
    expect(value.list[0]).toBe('a deep-secret b');
  });

  it('copies on write: what holds no secret is returned as the very same object', () => {
    const scrubber = Scrubber.of(['cow-secret']);
    const clean = { a: ['x', { b: 'y' }], c: 1 };
    expect(scrubber.scrubValue(clean)).toBe(clean);
    const mixed = { keep: { b: 'y' }, change: ['x', 'cow-secret'] };
    const out = scrubber.scrubValue(mixed);
    expect(out).not.toBe(mixed);
    expect(out.keep).toBe(mixed.keep);
    expect(out.change).toEqual(['x', REDACTED]);
    expect(mixed.change[1]).toBe('cow-secret');
  });

  it('survives cycles', () => {
    const scrubber = Scrubber.of(['cyclic-secret']);
    const a: Record<string, unknown> = { v: 'cyclic-secret' };
    a.self = a;
    const out = scrubber.scrubValue(a);
    const text = JSON.stringify(out);
    expect(text).toContain('[Circular]');
    expect(text).not.toContain('cyclic-secret');
  });
});

describe('JSON log lines', () => {
  it('keeps a line valid JSON when a secret with quotes and backslashes is in it', () => {
    const secret = 'log"secret\\value';
    const scrubber = Scrubber.of([secret]);
    const line = `${JSON.stringify({ level: 30, msg: `token ${secret}`, err: { message: secret } })}\n`;
    const out = scrubJsonLine(line, scrubber);
    expect(out.endsWith('\n')).toBe(true);
    expect(JSON.parse(out)).toEqual({ level: 30, msg: `token ${REDACTED}`, err: { message: REDACTED } });
    const clean = `${JSON.stringify({ level: 30, msg: 'nothing here' })}\n`;
    expect(scrubJsonLine(clean, scrubber)).toBe(clean);
  });
});
