// A JSON body's nesting is checked on its text before JSON.parse builds it
// (src/server/http/router.ts readJsonBody, src/core/json-depth.ts
// textNestedDeeperThan): `[` × 8M took the server seconds and a gigabyte to
// parse before the depth check refused it.

import type { IncomingMessage } from 'node:http';
import { Readable } from 'node:stream';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { nestedDeeperThan, textNestedDeeperThan } from '../../src/core/json-depth.js';
import { MAX_BODY_DEPTH, readJsonBody } from '../../src/server/http/router.js';

const bytes = (text: string) => Buffer.from(text, 'utf8');

/** A request whose body is `text`, in chunks of `chunk` bytes. */
function request(text: string, chunk = 64 * 1024): IncomingMessage {
  const body = bytes(text);
  const parts: Buffer[] = [];
  for (let at = 0; at < body.length; at += chunk) parts.push(body.subarray(at, at + chunk));
  return Object.assign(Readable.from(parts), { headers: {} }) as unknown as IncomingMessage;
}

afterEach(() => {
  vi.restoreAllMocks();
});

describe('textNestedDeeperThan', () => {
  it('agrees with nestedDeeperThan on parsed values: brackets in strings and escaped quotes do not count', () => {
    const texts = [
      '"x"',
      '[]',
      '{"a":[{"b":1}]}',
      '{"a":"[[[[{{{{"}',
      '["\\"[[[", ["\\\\"], "\\\\\\"{{"]',
      '{"k[":{"v":"]]]]"},"é€🔑":[[["日本"]]]}',
      `{"results":[{"result":${'['.repeat(300)}1${']'.repeat(300)}}]}`,
    ];
    for (const text of texts) {
      for (const limit of [0, 1, 2, 3, 4, 5, 300, 303, 304]) {
        expect(textNestedDeeperThan(bytes(text), limit), `${text.slice(0, 40)} ${limit}`).toBe(nestedDeeperThan(JSON.parse(text), limit));
      }
    }
  });

  it('refuses 8M levels after reading past the limit only', () => {
    const deep = bytes(`{"results":${'['.repeat(8_000_000)}${']'.repeat(8_000_000)}}`);
    expect(textNestedDeeperThan(deep, MAX_BODY_DEPTH)).toBe(true);
  });
});

describe('readJsonBody', () => {
  it('answers 400 for a body nested past MAX_BODY_DEPTH without calling JSON.parse', async () => {
    const parse = vi.spyOn(JSON, 'parse');
    const text = `{"results":${'['.repeat(8_000_000)}${']'.repeat(8_000_000)}}`;
    await expect(readJsonBody(request(text), 17 * 1024 * 1024)).rejects.toMatchObject({
      statusCode: 400,
      message: `the body is nested deeper than ${MAX_BODY_DEPTH} levels`,
    });
    expect(parse).not.toHaveBeenCalled();
  });

  it('parses bodies up to MAX_BODY_DEPTH, split anywhere, and a typical results batch', async () => {
    const atLimit = `${'['.repeat(MAX_BODY_DEPTH)}"]]\\"[["${']'.repeat(MAX_BODY_DEPTH)}`;
    expect(nestedDeeperThan(await readJsonBody(request(atLimit, 7), 1024 * 1024), MAX_BODY_DEPTH - 1)).toBe(true);
    await expect(readJsonBody(request(`[${atLimit}]`), 1024 * 1024)).rejects.toMatchObject({ statusCode: 400 });
    const batch = { results: [{ jobId: 'j', resultId: 'r', result: { id: 'r', apiCheckResult: { response: { body: '{"a":[1,2,{"b":"[{"}]}'.repeat(1000) } } } }] };
    expect(await readJsonBody(request(JSON.stringify(batch), 1000), 1024 * 1024)).toEqual(batch);
    await expect(readJsonBody(request('{"a":'), 1024)).rejects.toMatchObject({ statusCode: 400, message: expect.stringContaining('not valid JSON') });
  });
});
