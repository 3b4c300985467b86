// Scrubbing a result once as its serialized line (scrubResultLine) against
// the deep-copy scrub it replaces (scrubResult, then JSON.stringify): on
// random results and random secrets — quotes, backslashes, control
// characters, line breaks, non-ASCII, lone surrogates, every encoded form,
// folded base64, sensitive headers — the line must be the very same text,
// valid JSON, and mayHoldSecret must never miss a value scrubValue changes.
// FUZZ_SEED and FUZZ_CASES change the seed and the count.

import { describe, expect, it } from 'vitest';
import type { CheckResultEntry } from '../../src/core/result-entry.js';
import { scrubResult, scrubResultLine } from '../../src/secrets/policy.js';
import { foldedRegions, jsonHasBreak, jsonMayFold, unfoldJson } from '../../src/secrets/folding.js';
import { REDACTED, Scrubber, secretForms } from '../../src/secrets/scrubber.js';
import { mulberry32 } from '../support/random.js';

const SEED = process.env.FUZZ_SEED === 'random' ? Math.floor(Math.random() * 2 ** 31) : Number(process.env.FUZZ_SEED ?? 20261124);
const CASES = Number(process.env.FUZZ_CASES ?? 1500);

/** Characters that JSON escapes, that encodings change, or that sit next to JSON syntax. */
const ALPHABET = [...'abcXYZ019+/=-_ ', '"', '\\', '\n', '\r', '\t', '\u0000', '\u001f', 'é', '€', '\u2028', '🔑', '\ud800', '\udfff', '{', '}', ':', ','];

function entryOf(detail: Record<string, unknown>): CheckResultEntry {
  return {
    resultType: 'FINAL',
    id: '00000000-0000-4000-8000-000000000000',
    name: 'fuzz',
    checkId: 'check',
    checkType: 'API',
    hasFailures: false,
    hasErrors: false,
    isDegraded: false,
    overMaxResponseTime: false,
    runLocation: 'here',
    startedAt: '2026-11-24T00:00:00.000Z',
    stoppedAt: '2026-11-24T00:00:01.000Z',
    created_at: '2026-11-24T00:00:01.000Z',
    responseTime: 1000,
    checkRunId: null,
    attempts: 1,
    sequenceId: null,
    apiCheckResult: detail,
  };
}

function makeCase(random: () => number) {
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)] as T;
  const word = (min: number, max: number) => Array.from({ length: min + Math.floor(random() * (max - min + 1)) }, () => pick(ALPHABET)).join('');
  const secrets = Array.from({ length: 1 + Math.floor(random() * 3) }, () => word(4, 9));
  const forms = secrets.flatMap((s) => secretForms(s));
  // A third of the results carry no secret on purpose (random words may still hold one by chance).
  const clean = random() < 0.33;
  /** A string that sometimes holds a secret form, folded base64 with line breaks, or nothing of a secret. */
  const text = (): string => {
    const roll = random();
    if (clean || roll < 0.45) return word(0, 12);
    if (roll < 0.8) return `${word(0, 4)}${pick(forms)}${word(0, 4)}`;
    // A form cut by line breaks, the way folded base64 arrives.
    const form = pick(forms);
    const cut = 1 + Math.floor(random() * Math.max(1, form.length - 1));
    return `${word(0, 3)}\n${form.slice(0, cut)}${pick(['\n', '\r\n'])}${form.slice(cut)}\n${word(0, 3)}`;
  };
  const value = (depth: number): unknown => {
    const roll = random();
    if (depth > 3 || roll < 0.5) return roll < 0.1 ? Math.floor(random() * 1e6) : roll < 0.15 ? null : text();
    if (roll < 0.75) return Array.from({ length: Math.floor(random() * 4) }, () => value(depth + 1));
    const out: Record<string, unknown> = {};
    for (let i = Math.floor(random() * 4); i > 0; i--) out[random() < 0.2 ? text() : word(1, 6)] = value(depth + 1);
    return out;
  };
  const headerName = () => pick(['Authorization', 'cookie', 'X-Api-Key', 'Set-Cookie', 'accept', 'x-trace', word(3, 8)]);
  const detail: Record<string, unknown> = {
    request: { url: `https://example.test/${text()}`, headers: Array.from({ length: Math.floor(random() * 3) }, () => ({ key: headerName(), value: text() })) },
    response: {
      status: 200,
      headers: Object.fromEntries(Array.from({ length: Math.floor(random() * 3) }, () => [headerName(), random() < 0.3 ? [text(), text()] : text()])),
      body: text(),
    },
    jobLog: Array.from({ length: Math.floor(random() * 4) }, text),
    extra: value(0),
  };
  return { secrets, entry: entryOf(detail) };
}

/** The deep-copy scrub, on its own copy of the result (it may redact headers in place). */
function reference(entry: CheckResultEntry, scrubber: Scrubber): string {
  return JSON.stringify(scrubResult(structuredClone(entry), scrubber));
}

describe('scrubResultLine: one serialization and one scan, the same text as the deep scrub', () => {
  it(`equals JSON.stringify(scrubResult(…)) on ${CASES} random results and secrets (seed ${SEED})`, () => {
    const random = mulberry32(SEED);
    let scrubbed = 0;
    let fast = 0;
    for (let n = 0; n < CASES; n++) {
      const { secrets, entry } = makeCase(random);
      const scrubber = Scrubber.of(secrets);
      const expected = reference(entry, scrubber);
      const { line, entry: out } = scrubResultLine(structuredClone(entry), scrubber);
      if (line !== expected) throw new Error(`case ${n} (seed ${SEED}): secrets ${JSON.stringify(secrets)}\n  got      ${line}\n  expected ${expected}`);
      expect(JSON.stringify(out)).toBe(line);
      expect(() => JSON.parse(line)).not.toThrow();
      if (scrubber.mayHoldSecret(JSON.stringify(entry))) scrubbed++;
      else fast++;
    }
    // Both paths were taken often: the fuzz covers secrets found and secrets absent.
    expect(scrubbed).toBeGreaterThan(CASES / 4);
    expect(fast).toBeGreaterThan(CASES / 20);
  }, 120_000);

  it('mayHoldSecret is true whenever scrubValue would change the value', () => {
    const random = mulberry32(SEED + 1);
    let changed = 0;
    for (let n = 0; n < CASES; n++) {
      const { secrets, entry } = makeCase(random);
      const scrubber = Scrubber.of(secrets);
      const line = JSON.stringify(entry);
      if (scrubber.scrubValue(entry) !== entry) {
        changed++;
        if (!scrubber.mayHoldSecret(line)) throw new Error(`case ${n} (seed ${SEED + 1}): missed ${JSON.stringify(secrets)} in ${line}`);
      }
    }
    expect(changed).toBeGreaterThan(CASES / 4);
  }, 120_000);

  it('finds base64 folded at a string\'s ends, with CRLF, and in pretty-printed JSON; not in prose with line breaks', () => {
    const secret = 'folded-secret-value-42';
    const scrubber = Scrubber.of([secret]);
    const base64 = Buffer.from(secret).toString('base64');
    const cuts = [4, 8, 12, 16, 20, base64.length - 2];
    for (const cut of cuts) {
      const [head, tail] = [base64.slice(0, cut), base64.slice(cut)];
      for (const gap of ['\n', '\r\n', '\n\n']) {
        // The folded lines are the whole string: its quotes are their ends.
        for (const body of [`${head}${gap}${tail}`, `xx yy${gap}${head}${gap}${tail}`, `${head}${gap}${tail}${gap}prose, not base64`]) {
          const entry = entryOf({ body });
          expect(scrubber.scrubValue(entry), JSON.stringify(body)).not.toBe(entry);
          expect(scrubber.mayHoldSecret(JSON.stringify(entry)), JSON.stringify(body)).toBe(true);
          expect(scrubber.mayHoldSecret(JSON.stringify(entry, null, 2)), JSON.stringify(body)).toBe(true);
        }
      }
    }
    // A DNS answer's lines: breaks between base64 characters, but no line of base64 alone on either side.
    const answer = entryOf({ textAnswer: 'www.outpost.test.\t300\tIN\tA\t10.0.0.1\nwww.outpost.test.\t300\tIN\tA\t10.0.0.2' });
    expect(scrubber.mayHoldSecret(JSON.stringify(answer))).toBe(false);
  });

  it(`jsonMayFold answers as foldedRegions of the unfolded text does, on ${CASES * 100} random texts (seed ${SEED + 2})`, () => {
    const random = mulberry32(SEED + 2);
    const alphabet = ['A', 'z', '9', '+', 'n', 'r', 't', '\\', '"', '\n', '\r', '.', ' ', ':'];
    let folding = 0;
    for (let n = 0; n < CASES * 100; n++) {
      const text = Array.from({ length: Math.floor(random() * 16) }, () => alphabet[Math.floor(random() * alphabet.length)]).join('');
      const expected = foldedRegions(unfoldJson(text)).length > 0;
      if (jsonMayFold(text) !== expected) throw new Error(`case ${n}: ${JSON.stringify(text)}: expected ${expected}`);
      if (expected) folding++;
    }
    // Both answers were given often.
    expect(folding).toBeGreaterThan(CASES);
    expect(folding).toBeLessThan(CASES * 90);
  }, 120_000);

  it(`jsonHasBreak is never false where jsonMayFold is true, on ${CASES * 20} random JSON values, compact and indented (seed ${SEED + 3})`, () => {
    const random = mulberry32(SEED + 3);
    const alphabet = ['A', 'z', '9', '+', '/', '=', 'n', 'r', '\\', '"', '\n', '\r', '.', ' ', ':', ',', '[', '{'];
    const text = () => Array.from({ length: Math.floor(random() * 8) }, () => alphabet[Math.floor(random() * alphabet.length)]).join('');
    const value = (depth: number): unknown => {
      const pick = random();
      if (depth > 2 || pick < 0.4) return text();
      if (pick < 0.5) return Math.floor(random() * 1000);
      if (pick < 0.55) return null;
      if (pick < 0.8) return Array.from({ length: Math.floor(random() * 4) }, () => value(depth + 1));
      return Object.fromEntries(Array.from({ length: Math.floor(random() * 4) }, () => [text(), value(depth + 1)]));
    };
    let withoutBreak = 0;
    let folding = 0;
    for (let n = 0; n < CASES * 20; n++) {
      const v = value(0);
      for (const json of [JSON.stringify(v), JSON.stringify(v, null, 2)]) {
        const mayFold = jsonMayFold(json);
        if (mayFold && !jsonHasBreak(json)) throw new Error(`case ${n}: ${JSON.stringify(json)} may fold but has no break`);
        if (!jsonHasBreak(json)) withoutBreak++;
        if (mayFold) folding++;
      }
    }
    // Both kinds of text were met often.
    expect(withoutBreak).toBeGreaterThan(CASES);
    expect(folding).toBeGreaterThan(CASES);
  }, 120_000);

  it('reads a megabyte of escaped breaks, quotes or base64 lines in one pass, whatever their pattern', () => {
    const scrubber = Scrubber.of(['folded-secret-value-42']);
    // A regular expression for the same question backtracked quadratically on the first: minutes for this megabyte.
    for (const text of ['\\n'.repeat(500_000), `n${'\\n'.repeat(500_000)}`, '"A'.repeat(500_000), `${'A\\n'.repeat(333_333)}.`]) {
      expect(typeof scrubber.mayHoldSecret(text)).toBe('boolean');
    }
  }, 30_000);

  it('finds a secret JSON-escaped in the line: quotes, backslashes, \\u escapes, control characters', () => {
    for (const secret of ['pa"ss\\word', 'tab\there', 'nul\u0000byte', 'lone\ud800half', '\udc00starts-low', 'ends-high\ud83d', 'line\u2028sep']) {
      const scrubber = Scrubber.of([secret]);
      const entry = entryOf({ body: `before ${secret} after`, escaped: `\\x${[...Buffer.from(secret)].map((b) => b.toString(16).padStart(2, '0')).join('\\x')}` });
      const { line } = scrubResultLine(structuredClone(entry), scrubber);
      expect(line).toBe(reference(entry, scrubber));
      const parsed = JSON.parse(line) as CheckResultEntry;
      expect(parsed.apiCheckResult?.body).toBe(`before ${REDACTED} after`);
      expect(parsed.apiCheckResult?.escaped).toBe(REDACTED);
    }
  });

  it('a secret paired with a neighbouring surrogate in the text is still found', () => {
    // The secret ends in a high surrogate; in the body it is followed by a low one: JSON keeps the pair raw.
    const secret = 'abc\ud83d';
    const entry = entryOf({ body: `x${secret}\udd11y` });
    const scrubber = Scrubber.of([secret]);
    expect(scrubResultLine(structuredClone(entry), scrubber).line).toBe(reference(entry, scrubber));
    expect(scrubber.mayHoldSecret(JSON.stringify(entry))).toBe(true);
  });

  it('finds folded base64 whose line breaks are written as \\n escapes', () => {
    const secret = 'a-secret-long-enough-to-fold-over-lines';
    const b64 = Buffer.from(`user:${secret}`).toString('base64');
    const folded = `-----BEGIN-----\n${b64.slice(0, 16)}\r\n${b64.slice(16, 32)}\n${b64.slice(32)}\n-----END-----`;
    const entry = entryOf({ body: folded });
    const scrubber = Scrubber.of([secret]);
    expect(scrubber.mayHoldSecret(JSON.stringify(entry))).toBe(true);
    const { line } = scrubResultLine(structuredClone(entry), scrubber);
    expect(line).toBe(reference(entry, scrubber));
    expect(line).not.toContain(b64.slice(16, 32));
  });

  it('keeps the very same entry and its line when there is nothing to scrub or redact', () => {
    const entry = entryOf({ request: { headers: [{ key: 'accept', value: '*/*' }] }, body: 'nothing secret here' });
    const result = scrubResultLine(entry, Scrubber.of(['a-secret-value']));
    expect(result.entry).toBe(entry);
    expect(result.line).toBe(JSON.stringify(entry));
  });

  it('redacts sensitive headers without any secret, in any case (the Kelvin sign folds to k)', () => {
    const entry = entryOf({ request: { headers: [{ key: 'X-API-\u212Aey', value: 'v1' }, { key: ' Cookie ', value: 'c=1' }] } });
    const { line } = scrubResultLine(structuredClone(entry), new Scrubber());
    expect(line).toBe(reference(entry, new Scrubber()));
    expect(line).not.toContain('v1');
    expect(line).not.toContain('c=1');
  });
});
