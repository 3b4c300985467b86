import { describe, expect, it } from 'vitest';
import { redactHar } from '../../src/secrets/har.js';

const har = {
  log: {
    version: '1.2',
    entries: [
      {
        request: {
          method: 'GET',
          url: 'https://shop.internal/cart',
          headers: [
            { name: 'authorization', value: 'Bearer abc' },
            { name: 'Cookie', value: 'sid=s3cr3t' },
            { name: 'Accept', value: 'text/html' },
          ],
          cookies: [{ name: 'sid', value: 's3cr3t', path: '/' }],
          queryString: [],
        },
        response: {
          status: 200,
          headers: [
            { name: 'Set-Cookie', value: 'sid=n3w; HttpOnly' },
            { name: 'Content-Type', value: 'text/html' },
          ],
          cookies: [{ name: 'sid', value: 'n3w', httpOnly: true }],
        },
      },
    ],
  },
};

describe('redactHar', () => {
  it('redacts sensitive headers and every cookie value in requests and responses, keeping the rest', () => {
    const out = JSON.parse(redactHar(JSON.stringify(har)) ?? 'null') as typeof har;
    const [entry] = out.log.entries;
    expect(entry?.request.headers).toEqual([
      { name: 'authorization', value: '*****' },
      { name: 'Cookie', value: '*****' },
      { name: 'Accept', value: 'text/html' },
    ]);
    expect(entry?.request.cookies).toEqual([{ name: 'sid', value: '*****', path: '/' }]);
    expect(entry?.response.headers).toEqual([
      { name: 'Set-Cookie', value: '*****' },
      { name: 'Content-Type', value: 'text/html' },
    ]);
    expect(entry?.response.cookies).toEqual([{ name: 'sid', value: '*****', httpOnly: true }]);
    expect(out.log.version).toBe('1.2');
  });

  it('says null for a file that is not JSON, and leaves JSON without entries as it is', () => {
    expect(redactHar('not { json')).toBeNull();
    expect(JSON.parse(redactHar('{"log":{}}') ?? 'null')).toEqual({ log: {} });
    expect(JSON.parse(redactHar('[1,2]') ?? 'null')).toEqual([1, 2]);
  });
});
