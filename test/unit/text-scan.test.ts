// Scans of outsider-chosen text in one pass (src/core/text-scan.ts): the same
// answers as the regular expressions they replace, and linear time on the
// inputs that made those take minutes.

import { describe, expect, it } from 'vitest';
import { jobTargetStrings } from '../../src/control-plane/events.js';
import { urlAuthorities, withoutTrailingSlashes } from '../../src/core/text-scan.js';
import { mulberry32 } from '../support/random.js';

const URL_AUTHORITY = /[a-z][a-z0-9+.-]*:\/\/([^/?#\s]*)/gi;

describe('urlAuthorities', () => {
  it('finds what the regular expression finds, on 20,000 random texts', () => {
    const next = mulberry32(24);
    const pieces = ['a', 'Z', '1', '+', '.', '-', ':', '/', '//', '://', '?', '#', ' ', '\n', '@', 'http', 'https://', 'x.example', ':8080', '[::1]'];
    for (let i = 0; i < 20_000; i++) {
      const text = Array.from({ length: Math.floor(next() * 20) }, () => pieces[Math.floor(next() * pieces.length)]).join('');
      expect(urlAuthorities(text), JSON.stringify(text)).toEqual([...text.matchAll(URL_AUTHORITY)].map((m) => m[1]));
    }
  });

  it('reads a megabyte of each input that made the regular expression quadratic within the test timeout', () => {
    // The regex took 8 minutes on the first: a scheme tried from every letter of a long word.
    for (const text of ['a'.repeat(1_000_000), `${'a'.repeat(1_000_000)}://h`, 'a://'.repeat(250_000), ':/'.repeat(500_000), `x://${'b'.repeat(1_000_000)}`]) {
      const found = urlAuthorities(text);
      expect(found.length).toBeLessThanOrEqual(250_000);
    }
    expect(urlAuthorities(`${'a'.repeat(1_000_000)}://h.example:1/x`)).toEqual(['h.example:1']);
  });

  it('jobTargetStrings takes the hosts of a job with a megabyte of word in its body', () => {
    const strings = jobTargetStrings({ id: 'c1', request: { url: 'https://user@api.internal:8443/v1', body: `${'a'.repeat(1_000_000)}` } }, [
      { value: 'see http://[fd00::1]:80/x' },
    ]);
    expect(strings).toEqual(expect.arrayContaining(['api.internal', 'fd00::1', 'c1']));
  });
});

describe('withoutTrailingSlashes', () => {
  it('drops the slashes a URL ends with, in linear time on a long run of them', () => {
    expect(withoutTrailingSlashes('https://cp.example/api//')).toBe('https://cp.example/api');
    expect(withoutTrailingSlashes('https://cp.example')).toBe('https://cp.example');
    expect(withoutTrailingSlashes('////')).toBe('');
    // The regex /\/+$/ took 5 minutes on this: a run of slashes tried from each of its slashes.
    expect(withoutTrailingSlashes(`https://cp.example/${'/'.repeat(1_000_000)}x`)).toHaveLength(1_000_020);
  });
});
