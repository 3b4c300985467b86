// `{{NAME}}` in a URL template: each value percent-encoded for the component
// it lands in (src/checks/variables.ts), `{{raw NAME}}` as written, and every
// such form of a secret caught by the scrubber.

import { describe, expect, it } from 'vitest';
import { encodeUrlValue, urlComponentAt, Variables } from '../../src/checks/variables.js';
import { REDACTED, Scrubber } from '../../src/secrets/scrubber.js';

const SECRET = "p@ss w/rd+&x=1#?%!'()*~";
const vars = (values: Record<string, string>) => new Variables(Object.entries(values).map(([key, value]) => ({ key, value, secret: true })));

function componentOf(template: string, reference: string) {
  const start = template.indexOf(reference);
  return urlComponentAt(template, start, start + reference.length);
}

describe('urlComponentAt', () => {
  it('tells origin, host, userinfo, path, query and fragment apart', () => {
    expect(componentOf('{{BASE}}/users', '{{BASE}}')).toBe('origin');
    expect(componentOf('{{A}}{{B}}/users', '{{B}}')).toBe('origin');
    expect(componentOf('https://{{HOST}}:8443/x', '{{HOST}}')).toBe('host');
    expect(componentOf('https://user:{{PASS}}@example.com/x', '{{PASS}}')).toBe('userinfo');
    expect(componentOf('https://example.com/users/{{ID}}/x', '{{ID}}')).toBe('path');
    expect(componentOf('https://{{HOST}}/users/{{ID}}', '{{ID}}')).toBe('path');
    expect(componentOf('{{BASE}}/users/{{ID}}', '{{ID}}')).toBe('path');
    expect(componentOf('https://example.com/?a=1&{{KEY}}=2', '{{KEY}}')).toBe('query');
    expect(componentOf('{{BASE}}?token={{T}}', '{{T}}')).toBe('query');
    expect(componentOf('https://example.com/x?y=1#{{F}}', '{{F}}')).toBe('fragment');
  });
});

describe('encodeUrlValue', () => {
  it('leaves only unreserved characters and %XX, which URL parsing keeps as they are', () => {
    const encoded = encodeUrlValue(SECRET);
    expect(encoded).toBe('p%40ss%20w%2Frd%2B%26x%3D1%23%3F%25%21%27%28%29%2A~');
    expect(encoded).toMatch(/^[A-Za-z0-9\-._~%]*$/);
    for (const url of [`https://example.com/a/${encoded}`, `https://example.com/?q=${encoded}`, `https://example.com/#${encoded}`]) {
      expect(new URL(url).toString()).toBe(url);
    }
  });
});

describe('Variables.interpolateUrl', () => {
  const v = vars({ S: SECRET, BASE: 'http://127.0.0.1:8080/api', HOST: 'example.com', PATH: 'v1/users?active=true' });

  it('path segment: the whole value is one segment, decoded back whole', () => {
    const url = new URL(v.interpolateUrl('https://example.com/items/{{S}}/x', 'request.url'));
    expect(url.pathname.split('/')).toHaveLength(4);
    expect(decodeURIComponent(url.pathname.split('/')[2] as string)).toBe(SECRET);
  });

  it('query value and key: read back whole by URLSearchParams, nothing cut at & or #', () => {
    const url = new URL(v.interpolateUrl('https://example.com/?a=1&token={{S}}&{{S}}=k&b=2', 'request.url'));
    expect(url.searchParams.get('token')).toBe(SECRET);
    expect(url.searchParams.get(SECRET)).toBe('k');
    expect(url.searchParams.get('b')).toBe('2');
    expect(url.hash).toBe('');
  });

  it('userinfo and fragment are encoded; origin and host are inserted as written', () => {
    const url = new URL(v.interpolateUrl('https://u:{{S}}@{{HOST}}/#{{S}}', 'request.url'));
    expect(decodeURIComponent(url.password)).toBe(SECRET);
    expect(url.host).toBe('example.com');
    expect(decodeURIComponent(url.hash.slice(1))).toBe(SECRET);
    expect(v.interpolateUrl('{{BASE}}/items?x=1', 'request.url')).toBe('http://127.0.0.1:8080/api/items?x=1');
  });

  it('{{raw NAME}} opts out, in URLs and elsewhere', () => {
    expect(v.interpolateUrl('https://example.com/{{raw PATH}}', 'request.url')).toBe('https://example.com/v1/users?active=true');
    expect(v.interpolateUrl('https://example.com/{{ raw  PATH }}', 'request.url')).toBe('https://example.com/v1/users?active=true');
    expect(v.interpolate('x {{raw PATH}} {{PATH}}', 'request.body')).toBe('x v1/users?active=true v1/users?active=true');
  });

  it('an unknown name is still an error naming it and the field', () => {
    expect(() => v.interpolateUrl('https://example.com/{{raw NOPE}}', 'request.url')).toThrow('Unknown variable {{NOPE}} in request.url');
  });

  it('the scrubber catches the secret in every form interpolation and URL serialization give it', () => {
    const scrubber = new Scrubber();
    scrubber.add(SECRET);
    const built = v.interpolateUrl('https://example.com/p/{{S}}?q={{S}}#{{S}}', 'request.url');
    const parsed = new URL(built);
    // As an API check's queryParameters re-serialize the query (form encoding).
    parsed.searchParams.append('extra', '1');
    for (const text of [built, new URL(built).toString(), parsed.toString(), new URL(built).href.toLowerCase()]) {
      const scrubbed = scrubber.scrubText(text);
      expect(scrubbed).not.toContain('p%40ss');
      expect(scrubbed).not.toContain('p@ss');
      expect(scrubbed.split(REDACTED).length - 1, scrubbed).toBe(3);
    }
  });
});
