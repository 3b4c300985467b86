// Runtime secret detection (src/secrets/detection.ts): each pattern's
// positives and the near misses it must leave alone, the linear-time guard,
// and the limits on work and on values.

import { describe, expect, it } from 'vitest';
import { regexProblem } from '../../src/checks/assertions/regex.js';
import { DETECTION_PATTERNS, type DetectedKind, entropyBits, looksLikeCredential, PRIVATE_KEY_END, SecretDetector } from '../../src/secrets/detection.js';

// A real HS256 token ({"alg":"HS256","typ":"JWT"}.{"sub":"1234567890","name":"John Doe","iat":1516239022}).
const JWT =
  'eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c';
const AWS_KEY = 'AKIAQ3EGRZLN7VW2KX5D';
const BEARER = 'ya29.a0AfB_byC3xR9mK2pL7vN4qT8sW1zY6hJ5gF0dE';
const PEM_BODY = ['MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj', 'MZEfYyjiWA4R4/M2bS1GB4t7NXp98C3SC6dVMvDuictGeurT8jNbvJZHtCSuYEvu'];
const PEM = `-----BEGIN PRIVATE KEY-----\n${PEM_BODY.join('\n')}\n-----END PRIVATE KEY-----`;

function detect(text: string, where = 'jobLog'): { values: string[]; kinds: DetectedKind[] } {
  const detector = new SecretDetector();
  detector.scan(text, where);
  return { values: detector.values, kinds: detector.detections.map((d) => d.kind) };
}

describe('secret detection patterns', () => {
  it('are all accepted by the linear-time guard', () => {
    for (const [kind, pattern] of Object.entries(DETECTION_PATTERNS)) expect(regexProblem(pattern.source, pattern.flags), kind).toBeNull();
    expect(regexProblem(PRIVATE_KEY_END.source, PRIVATE_KEY_END.flags)).toBeNull();
  });

  it('finds a JWT, alone, in a URL, in JSON and after Bearer', () => {
    expect(detect(JWT)).toEqual({ values: [JWT], kinds: ['jwt'] });
    expect(detect(`GET /api?access=${JWT}&x=1`).values).toEqual([JWT]);
    expect(detect(`{"id_token":"${JWT}"}`)).toEqual({ values: [JWT], kinds: ['jwt'] });
    expect(detect(`Authorization: Bearer ${JWT}`)).toEqual({ values: [JWT], kinds: ['jwt'] });
  });

  it('leaves alone what only resembles a JWT', () => {
    // Unsigned (alg none), a short signature, a base64 JSON that is not a token, a dotted version.
    expect(detect('eyJhbGciOiJub25lIn0.eyJzdWIiOiIxMjM0NTY3ODkwIn0.').values).toEqual([]);
    expect(detect('eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.abc').values).toEqual([]);
    expect(detect('data:application/json;base64,eyJuYW1lIjoiT3V0cG9zdCIsInZlcnNpb24iOjF9').values).toEqual([]);
    expect(detect('react-dom@18.2.0.production.min.js').values).toEqual([]);
  });

  it('finds AWS access key ids (AKIA, ASIA), also next to each other', () => {
    expect(detect(`aws_access_key_id = ${AWS_KEY}`)).toEqual({ values: [AWS_KEY], kinds: ['aws-access-key'] });
    expect(detect(`${AWS_KEY} ASIAY34FZKBOKMUTVV7A`).values).toEqual([AWS_KEY, 'ASIAY34FZKBOKMUTVV7A']);
    expect(detect(`"key":"${AWS_KEY}"`).values).toEqual([AWS_KEY]);
  });

  it('leaves alone what only resembles an AWS key id', () => {
    // Too short, too long (a longer token that contains one), lower case, another prefix.
    expect(detect('AKIAQ3EGRZLN7VW2KX5').values).toEqual([]);
    expect(detect('XAKIAQ3EGRZLN7VW2KX5D').values).toEqual([]);
    expect(detect('AKIAQ3EGRZLN7VW2KX5DQ').values).toEqual([]);
    expect(detect('akiaq3egrzln7vw2kx5d').values).toEqual([]);
    expect(detect('AIDAQ3EGRZLN7VW2KX5D').values).toEqual([]);
  });

  it('finds a bearer token in a header, a log line and HAR JSON', () => {
    expect(detect(`Authorization: Bearer ${BEARER}`)).toEqual({ values: [BEARER], kinds: ['bearer-token'] });
    expect(detect(`calling with bearer ${BEARER}`).values).toEqual([BEARER]);
    expect(detect(`{"name":"authorization","value":"Bearer ${BEARER}"}`).values).toEqual([BEARER]);
    expect(detect('Bearer dGhpcyBpcyBhIHRva2VuIQ==').values).toEqual(['dGhpcyBpcyBhIHRva2VuIQ==']);
  });

  it('leaves alone the word bearer without a token', () => {
    expect(detect('WWW-Authenticate: Bearer realm="example", error="invalid_token"').values).toEqual([]);
    expect(detect('uses the Bearer authentication scheme').values).toEqual([]);
    expect(detect('headers.Authorization="Bearer "+t.accessToken').values).toEqual([]);
    expect(detect('Bearer {{ACCESS_TOKEN}}').values).toEqual([]);
    expect(detect('the bearer-of-the-ring-was-here-all-along').values).toEqual([]);
  });

  it('finds a private key block, and each base64 line of it, also JSON-escaped', () => {
    const found = detect(`key:\n${PEM}\ndone`);
    expect(found.kinds).toEqual(['private-key']);
    expect(found.values).toEqual([PEM, ...PEM_BODY]);
    const rsa = PEM.replaceAll('PRIVATE KEY', 'RSA PRIVATE KEY');
    expect(detect(rsa).values[0]).toBe(rsa);
    const escaped = JSON.stringify(PEM).slice(1, -1);
    expect(detect(`{"text":"${escaped}"}`).values).toEqual([escaped, ...PEM_BODY]);
  });

  it('leaves alone a public key, a certificate, a BEGIN line without its END and one closed by another kind', () => {
    expect(detect(PEM.replaceAll('PRIVATE KEY', 'PUBLIC KEY')).values).toEqual([]);
    expect(detect(PEM.replaceAll('PRIVATE KEY', 'CERTIFICATE')).values).toEqual([]);
    expect(detect(`-----BEGIN PRIVATE KEY-----\n${PEM_BODY[0]}\n(cut)`).values).toEqual([]);
    expect(detect(`-----BEGIN RSA PRIVATE KEY-----\n${PEM_BODY[0]}\n-----END EC PRIVATE KEY-----`).values).toEqual([]);
  });

  it('finds each of several keys, after BEGIN lines that lack an END', () => {
    const rsa = PEM.replaceAll('PRIVATE KEY', 'RSA PRIVATE KEY');
    const found = detect(`-----BEGIN PRIVATE KEY-----\n(cut)\n${PEM}\n${rsa}`);
    expect(found.values).toEqual([PEM, ...PEM_BODY, rsa]);
  });

  it('finds high-entropy values after password=, token=, secret=, apikey= and names ending so', () => {
    const cases: Array<[string, string]> = [
      ['password=Xk9#mQ2$vL7pR4', 'Xk9#mQ2$vL7pR4'],
      ['https://api.example/v1?apikey=9f8e7d6c5b4a3f2e1d0c&page=2', '9f8e7d6c5b4a3f2e1d0c'],
      ['{"client_secret": "s3cr3t-Zq8Lw2Nv5Ty7"}', 's3cr3t-Zq8Lw2Nv5Ty7'],
      ["API_KEY: 'sk_live_51HxQ2eKf8Gz3Lm'", 'sk_live_51HxQ2eKf8Gz3Lm'],
      ['X-Api-Key: hJ8kL2mN4pQ6rS9t', 'hJ8kL2mN4pQ6rS9t'],
      ['refresh_token=1//0gR7kT2pX9mQ4vL8nZ3', '1//0gR7kT2pX9mQ4vL8nZ3'],
      ['PWD=Kq7Tr0ub4dx&n=1', 'Kq7Tr0ub4dx'],
    ];
    for (const [text, value] of cases) expect(detect(text), text).toEqual({ values: [value], kinds: ['credential-assignment'] });
  });

  it('leaves alone low-entropy values, placeholders, code and paging or anti-forgery tokens', () => {
    const quiet = [
      'password=changeme',
      'password=hunter22',
      'password=********',
      'password: {{PASSWORD}}',
      `token=\${TOKEN}`,
      'password=<your password>',
      'var e={password:t.password,token:n.token}',
      'if(r.apiKey)return r.apiKey.trim()',
      'secretary=Jane Doe',
      'token_type=bearer&expires_in=3600',
      'nextPageToken=CAoQAA8x2kLmQ7rT',
      '{"csrfToken":"a8Kd93jfLq02mZx7"}',
      'authenticity_token=Zk29fLq8Xm3vT7pR',
      'page_token=Q2FyZDEyMzQ1Njc4OTA',
      '.token-list{color:#333333;padding:12px}',
      'sessionid=8a7b6c5d4e3f2a1b0c9d8e7f; Path=/; HttpOnly',
    ];
    for (const text of quiet) expect(detect(text).values, text).toEqual([]);
  });

  it('leaves alone UUIDs, hashes in URLs, git SHAs, base64 images, CSS and minified JS', () => {
    const ordinary = [
      'request 3f2b8c1e-9d4a-4f6b-8e2c-7a1d5b9c0e3f done',
      'GET /static/app.3f2b8c1e9d4a4f6b.js 200',
      'GET /assets/main-5d41402abc4b2a76b9719d911017c592.css',
      'commit 9fceb02d0ae598e95dc970b74767f19372d61af8',
      'integrity="sha384-oqVuAfXRKap7fdgcCY5uykM6+R9GqQ8K/uxy9rx7HNQlGYl1kPzQho1wx4JwY8wC"',
      `background:url(data:image/png;base64,${'iVBORw0KGgoAAAANSUhEUgAAABAAAAAQCAYAAAAf8/9hAAAAGXRFWHRTb2Z0d2FyZQBBZG9iZSBJbWFnZVJlYWR5ccllPAAAAj'.repeat(20)})`,
      '.btn-primary{color:#fff;background-color:#0d6efd;border-color:#0d6efd}@media (min-width:768px){.navbar{padding:0}}',
      '!function(e,t){"object"==typeof exports?module.exports=t():e.lib=t()}(this,function(){var n={token:null,secret:!1};return n});',
      'sourceMappingURL=app.min.js.map',
    ];
    for (const text of ordinary) expect(detect(text).values, text).toEqual([]);
  });
});

describe('secret detection', () => {
  it('reports each kind once per output, by the kind a value was first found as, never the value', () => {
    const detector = new SecretDetector();
    detector.scan(`token ${JWT} key ${AWS_KEY}`, 'jobLog');
    detector.scan(`Bearer ${JWT}`, 'consoleMessages');
    detector.scan(`again ${JWT} and ${JWT}`, 'artifact notes.txt');
    expect(detector.values).toEqual([JWT, AWS_KEY]);
    expect(detector.detections).toEqual([
      { kind: 'jwt', where: 'jobLog' },
      { kind: 'aws-access-key', where: 'jobLog' },
      { kind: 'jwt', where: 'consoleMessages' },
      { kind: 'jwt', where: 'artifact notes.txt' },
    ]);
    expect(JSON.stringify(detector.detections)).not.toContain(JWT.slice(0, 20));
    expect(detector.notes).toEqual([]);
  });

  it('searches at most the characters it is allowed, per output and per job, and says so', () => {
    const detector = new SecretDetector({ maxCharsPerOutput: 100, maxCharsPerJob: 150 });
    detector.scan(`${'x'.repeat(120)} ${AWS_KEY}`, 'jobLog');
    detector.scan(`${AWS_KEY} ${'y'.repeat(100)}`, 'consoleMessages');
    detector.scan(AWS_KEY, 'pageErrors');
    // The first output's key is past 100 characters; the second's first 50 fit the job's 150.
    expect(detector.detections).toEqual([{ kind: 'aws-access-key', where: 'consoleMessages' }]);
    expect(detector.notes).toEqual([
      'only the first 100 characters of jobLog were searched',
      'only the first 50 characters of consoleMessages were searched',
      "pageErrors was not searched: the job's outputs passed 150 characters",
    ]);
  });

  it('keeps at most the values it is allowed and says the search stopped', () => {
    const detector = new SecretDetector({ maxValues: 3 });
    const keys = Array.from({ length: 5 }, (_, i) => `AKIAQ3EGRZLN7VW2KX5${i}`);
    detector.scan(keys.join(' '), 'jobLog');
    expect(detector.values).toEqual(keys.slice(0, 3));
    expect(detector.notes).toEqual(['the search stopped at 3 values; later ones are not scrubbed unless declared secret']);
  });

  it('leaves out values the job knows as secrets already', () => {
    const detector = new SecretDetector({ isKnown: (value) => value === AWS_KEY });
    detector.scan(`${AWS_KEY} and ${JWT}`, 'jobLog');
    expect(detector.values).toEqual([JWT]);
    expect(detector.detections).toEqual([{ kind: 'jwt', where: 'jobLog' }]);
  });

  it('reads long runs without a separator, and many near misses, to the end', () => {
    // A token character run with many `eyJ`, `bearer` and key words in it: each is read a bounded number of times.
    const run = `${'eyJhbGciOi'.repeat(20_000)} ${'bearer '.repeat(20_000)} ${'token='.repeat(20_000)}x ${'-----BEGIN PRIVATE KEY-----\n'.repeat(20_000)} ${AWS_KEY}`;
    expect(detect(run).values).toEqual([AWS_KEY]);
  });

  it('measures entropy in bits per character', () => {
    expect(entropyBits('aaaaaaaa')).toBe(0);
    expect(entropyBits('abcdefgh')).toBe(3);
    expect(looksLikeCredential('abcdefgh')).toBe(false);
    expect(looksLikeCredential('a1b2c3d4e5')).toBe(true);
  });
});
