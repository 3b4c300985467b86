// The scrubber's skipping search (Wu–Manber over the shortest pattern, used
// on texts of 1,024 characters and more when every pattern is at least 8
// long) against a naive reference: every occurrence of every form found,
// overlapping ones merged, on long random texts built from a small alphabet
// (near-misses everywhere) with forms planted at every offset, at the text's
// ends and overlapping each other. FUZZ_SEED changes the seed.

import { describe, expect, it } from 'vitest';
import { REDACTED, Scrubber, secretForms } from '../../src/secrets/scrubber.js';
import { mulberry32 } from '../support/random.js';

const SEED = process.env.FUZZ_SEED === 'random' ? Math.floor(Math.random() * 2 ** 31) : Number(process.env.FUZZ_SEED ?? 7);

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

describe(`skipping search on long texts (seed ${SEED})`, () => {
  it('finds exactly what a naive search finds, for 1 to 100 secrets of 12 to 40 characters', () => {
    const random = mulberry32(SEED);
    const alphabet = Array.from('abAB01-_=+/ %"\\é');
    const word = (n: number) => Array.from({ length: n }, () => alphabet[Math.floor(random() * alphabet.length)]).join('');
    let planted = 0;
    for (const count of [1, 3, 20, 100]) {
      for (let round = 0; round < 4; round++) {
        // 12 or more: every form is then at least 8 long, so the skipping search is the one used.
        const secrets = Array.from({ length: count }, () => word(12 + Math.floor(random() * 29)));
        const scrubber = Scrubber.of(secrets);
        const patterns = [...new Set(secrets.flatMap((s) => secretForms(s)))];
        const parts: string[] = [];
        let length = 0;
        const target = 1024 + Math.floor(random() * 20_000);
        while (length < target) {
          // Whole forms, forms cut short (near-misses) and forms run into each other.
          const roll = random();
          const form = patterns[Math.floor(random() * patterns.length)] as string;
          const part = roll < 0.15 ? form : roll < 0.3 ? form.slice(0, Math.max(1, form.length - 1 - Math.floor(random() * 3))) : word(Math.floor(random() * 24));
          if (roll < 0.15) planted++;
          parts.push(part);
          length += part.length;
        }
        const text = parts.join('');
        const expected = reference(text, patterns);
        const got = scrubber.scrubText(text);
        if (got !== expected) throw new Error(`count ${count}, round ${round}: differs from the reference (${text.length} characters)`);
        // A form at the very start and the very end.
        const edge = `${patterns[0]}${word(1100)}${patterns[patterns.length - 1]}`;
        expect(scrubber.scrubText(edge)).toBe(reference(edge, patterns));
      }
    }
    expect(planted).toBeGreaterThan(100);
  }, 120_000);

  it('a short secret among long ones turns the skipping off without changing the answer', () => {
    const random = mulberry32(SEED + 1);
    const long = Array.from({ length: 20 }, (_, i) => `long-secret-number-${i}-${Math.floor(random() * 1e9)}`);
    const scrubber = Scrubber.of([...long, 'tiny']);
    const patterns = [...new Set([...long, 'tiny'].flatMap((s) => secretForms(s)))];
    const text = Array.from({ length: 400 }, (_, i) => (i % 37 === 0 ? (long[i % long.length] as string) : i % 53 === 0 ? 'tiny' : `filler-${i}`)).join(' ');
    expect(text.length).toBeGreaterThan(1024);
    expect(scrubber.scrubText(text)).toBe(reference(text, patterns));
  });

  it('keeps finding secrets after the set changes (the shift table follows the patterns)', () => {
    const scrubber = Scrubber.of(['first-secret-value-0001']);
    const filler = 'x'.repeat(2000);
    expect(scrubber.scrubText(`${filler}first-secret-value-0001${filler}`)).toBe(`${filler}${REDACTED}${filler}`);
    scrubber.add('second-secret-value-0002');
    expect(scrubber.scrubText(`${filler}second-secret-value-0002${filler}`)).toBe(`${filler}${REDACTED}${filler}`);
    scrubber.remove('first-secret-value-0001');
    expect(scrubber.scrubText(`${filler}first-secret-value-0001${filler}`)).toBe(`${filler}first-secret-value-0001${filler}`);
    const copy = new Scrubber(scrubber);
    copy.add('third-secret-value-0003');
    expect(copy.scrubText(`${filler}third-secret-value-0003 second-secret-value-0002${filler}`)).toBe(`${filler}${REDACTED} ${REDACTED}${filler}`);
    // The copy's additions never reach the scrubber it was copied from (the shift table is copied before it changes).
    expect(scrubber.scrubText(`${filler}third-secret-value-0003${filler}`)).toBe(`${filler}third-secret-value-0003${filler}`);
    // A pattern shorter than the window (a short secret's forms) makes the table be rebuilt, not extended.
    copy.add('short8ch');
    expect(copy.scrubText(`${filler}short8ch third-secret-value-0003${filler}`)).toBe(`${filler}${REDACTED} ${REDACTED}${filler}`);
  });
});
