// configFromEnv and parseArgs (docs/configuration.md): defaults, every variable's bad
// values as one ConfigError naming the variable, the value and what is
// allowed (exit 78), and usage errors (exit 64).

import { linkSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, checkSettings, configFromEnv, type Env, EXIT_CONFIG, EXIT_USAGE, type Mode, maskUrlCredentials, parseArgs, USAGE } from '../../src/config.js';

const AGENT_ENV = { API_URL: 'https://cp.example.test', API_KEY: 'pl_key_123' };

/** Runs `fn`, expecting a ConfigError; returns it. */
function configError(fn: () => unknown): ConfigError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return error as ConfigError;
  }
  throw new Error('expected a ConfigError, but nothing was thrown');
}

function envError(env: Env, mode: Mode = 'local'): ConfigError {
  return configError(() => configFromEnv(env, mode));
}

/** A self-signed certificate (P-256, valid until 2126), for NODE_EXTRA_CA_CERTS. */
const TEST_CA = `-----BEGIN CERTIFICATE-----
MIIBjDCCATGgAwIBAgIUV4VJ5wgoa/+H/GrtaSXRMy5nEVAwCgYIKoZIzj0EAwIw
GjEYMBYGA1UEAwwPb3V0cG9zdC10ZXN0LWNhMCAXDTI2MTEyMzIxNDQwMVoYDzIx
MjYxMDMwMjE0NDAxWjAaMRgwFgYDVQQDDA9vdXRwb3N0LXRlc3QtY2EwWTATBgcq
hkjOPQIBBggqhkjOPQMBBwNCAAQ3OnArrrHfmxwydpeXbne3pPPRjq6NIPJamI2X
z6364mswV+P6H+q1CMJX6D6ZY4KpQpVymZeYiB92nZmKgSXEo1MwUTAdBgNVHQ4E
FgQUE4zh4T4BlmIBRpfmlowKcJjt1u4wHwYDVR0jBBgwFoAUE4zh4T4BlmIBRpfm
lowKcJjt1u4wDwYDVR0TAQH/BAUwAwEB/zAKBggqhkjOPQQDAgNJADBGAiEAlCmW
ZSgd5lhpgF+C6p01F+azpZXscSOOj0DSEdswpegCIQC8wpo/OE+eOmTHwY45koAe
kCo6wGZJHsAtzmDHFRU3vg==
-----END CERTIFICATE-----`;

describe('configFromEnv: defaults', () => {
  it('fills every default in local mode from an empty environment', () => {
    const config = configFromEnv({}, 'local', { checksFile: '/tmp/checks.json' });
    expect(config).toMatchObject({
      mode: 'local',
      checksFile: '/tmp/checks.json',
      jobConcurrency: 1,
      healthPort: 8081,
      logLevel: 'info',
      proxy: {},
      externalObservability: true,
      stateDir: path.resolve('.outpost'),
      shutdownGraceSeconds: 280,
      spoolMaxResults: 50_000,
      spoolMaxBytes: 1024 ** 3,
      claimWaitSeconds: 25,
      authRetrySeconds: 60,
      controlPlaneTimeoutSeconds: 30,
    });
    expect(config.apiUrl).toBeUndefined();
    expect(config.apiKey).toBeUndefined();
    expect(config.extraCaCerts).toBeUndefined();
    expect(config.resultsFile).toBeUndefined();
  });

  it('does not need API_URL or API_KEY outside agent mode', () => {
    expect(configFromEnv({}, 'once').mode).toBe('once');
    expect(configFromEnv({}, 'local').mode).toBe('local');
  });

  it('reads agent settings and valid values', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'outpost-config-'));
    const ca = path.join(dir, 'ca.pem');
    writeFileSync(ca, `# a bundle may carry comments\n${TEST_CA}\n`);
    const config = configFromEnv(
      {
        ...AGENT_ENV,
        JOB_CONCURRENCY: '1000',
        AGENT_HEALTH_PORT: '0',
        LOG_LEVEL: 'DEBUG',
        EXTERNAL_OBSERVABILITY: 'off',
        NODE_EXTRA_CA_CERTS: ca,
        STATE_DIR: dir,
        SHUTDOWN_GRACE_SECONDS: '0',
        HTTPS_PROXY: 'http://proxy.internal:3128',
        HTTP_PROXY: 'http://proxy.internal:3128',
        NO_PROXY: 'localhost,.internal',
      },
      'agent',
    );
    expect(config).toMatchObject({
      mode: 'agent',
      apiUrl: 'https://cp.example.test',
      apiKey: 'pl_key_123',
      jobConcurrency: 1000,
      healthPort: 0,
      logLevel: 'debug',
      externalObservability: false,
      extraCaCerts: ca,
      stateDir: dir,
      shutdownGraceSeconds: 0,
      proxy: { httpsProxy: 'http://proxy.internal:3128', httpProxy: 'http://proxy.internal:3128', noProxy: 'localhost,.internal' },
    });
  });

  it('reads AGENT_HEALTH_HOST as an IPv4 or IPv6 address; unset means every interface', () => {
    expect(configFromEnv({}, 'local').healthHost).toBeUndefined();
    expect(configFromEnv({ AGENT_HEALTH_HOST: '127.0.0.1' }, 'local').healthHost).toBe('127.0.0.1');
    expect(configFromEnv({ AGENT_HEALTH_HOST: ' :: ' }, 'local').healthHost).toBe('::');
  });

  it('treats empty and blank values as unset, and trims values', () => {
    const config = configFromEnv({ JOB_CONCURRENCY: '', AGENT_HEALTH_PORT: '   ', LOG_LEVEL: ' warn ' }, 'local');
    expect(config.jobConcurrency).toBe(1);
    expect(config.healthPort).toBe(8081);
    expect(config.logLevel).toBe('warn');
  });

  it('accepts true/false as well as on/off for EXTERNAL_OBSERVABILITY', () => {
    expect(configFromEnv({ EXTERNAL_OBSERVABILITY: 'true' }, 'local').externalObservability).toBe(true);
    expect(configFromEnv({ EXTERNAL_OBSERVABILITY: 'false' }, 'local').externalObservability).toBe(false);
    expect(configFromEnv({ EXTERNAL_OBSERVABILITY: 'ON' }, 'local').externalObservability).toBe(true);
  });
});

describe('configFromEnv: bad values name the variable, the value and what is allowed (exit 78)', () => {
  const cases: Array<{ env: Env; mode?: Mode; parts: string[] }> = [
    { env: { JOB_CONCURRENCY: '0' }, parts: ['JOB_CONCURRENCY', '"0"', '1 to 1000'] },
    { env: { JOB_CONCURRENCY: '1001' }, parts: ['JOB_CONCURRENCY', '"1001"', '1 to 1000'] },
    { env: { JOB_CONCURRENCY: 'abc' }, parts: ['JOB_CONCURRENCY', '"abc"', 'integer'] },
    { env: { JOB_CONCURRENCY: '2.5' }, parts: ['JOB_CONCURRENCY', '"2.5"', 'integer'] },
    { env: { CHECK_WORKERS: '0' }, parts: ['CHECK_WORKERS', '"0"', '1 to 256'] },
    { env: { CHECK_WORKERS: 'auto' }, parts: ['CHECK_WORKERS', '"auto"', 'integer'] },
    { env: { AGENT_HEALTH_PORT: 'abc' }, parts: ['AGENT_HEALTH_PORT', '"abc"', '0 to 65535'] },
    { env: { AGENT_HEALTH_PORT: '70000' }, parts: ['AGENT_HEALTH_PORT', '"70000"', '0 to 65535'] },
    { env: { AGENT_HEALTH_HOST: 'localhost' }, parts: ['AGENT_HEALTH_HOST', '"localhost"', 'IP address'] },
    { env: { AGENT_HEALTH_HOST: '127.0.0.300' }, parts: ['AGENT_HEALTH_HOST', '"127.0.0.300"', 'IP address'] },
    { env: { LOG_LEVEL: 'verbose' }, parts: ['LOG_LEVEL', '"verbose"', 'debug, info, warn, error'] },
    { env: { EXTERNAL_OBSERVABILITY: 'maybe' }, parts: ['EXTERNAL_OBSERVABILITY', '"maybe"', 'on or off'] },
    { env: { SHUTDOWN_GRACE_SECONDS: '-1' }, parts: ['SHUTDOWN_GRACE_SECONDS', '"-1"', '0 to 3600'] },
    { env: { SHUTDOWN_GRACE_SECONDS: '3601' }, parts: ['SHUTDOWN_GRACE_SECONDS', '"3601"', '0 to 3600'] },
    { env: { HTTPS_PROXY: 'ftp://x' }, parts: ['HTTPS_PROXY', '"ftp://x"', 'http:// or https://'] },
    { env: { HTTP_PROXY: 'not a url' }, parts: ['HTTP_PROXY', '"not a url"', 'http:// or https://'] },
    { env: { SPOOL_MAX_RESULTS: '0' }, parts: ['SPOOL_MAX_RESULTS', '"0"'] },
    { env: { CLAIM_WAIT_SECONDS: '61' }, parts: ['CLAIM_WAIT_SECONDS', '"61"', '0 to 60'] },
    {
      env: { NODE_EXTRA_CA_CERTS: '/no/such/dir/ca.pem' },
      parts: ['NODE_EXTRA_CA_CERTS', '"/no/such/dir/ca.pem"', 'readable PEM file'],
    },
    { env: { ...AGENT_ENV, API_URL: 'ftp://x' }, mode: 'agent', parts: ['API_URL', '"ftp://x"', 'http:// or https://'] },
    { env: { ...AGENT_ENV, API_URL: 'cp.example.test' }, mode: 'agent', parts: ['API_URL', '"cp.example.test"', 'http:// or https://'] },
  ];

  for (const { env, mode, parts } of cases) {
    it(`${JSON.stringify(env)} (${mode ?? 'local'})`, () => {
      const error = envError(env, mode);
      expect(error.exitCode).toBe(EXIT_CONFIG);
      expect(error.exitCode).toBe(78);
      for (const part of parts) expect(error.message).toContain(part);
      expect(error.message).not.toContain('\n');
    });
  }

  it('reports every bad value, each as its own line, not only the first', () => {
    const error = envError({ JOB_CONCURRENCY: '0', LOG_LEVEL: 'x', AGENT_HEALTH_PORT: '-1', API_PORT: 'y' });
    expect(error.exitCode).toBe(EXIT_CONFIG);
    expect(error.problems).toEqual([
      'LOG_LEVEL="x" is invalid: must be one of debug, info, warn, error',
      'JOB_CONCURRENCY="0" is invalid: must be an integer from 1 to 1000',
      'AGENT_HEALTH_PORT="-1" is invalid: must be an integer from 0 to 65535',
      'API_PORT="y" is invalid: must be an integer from 0 to 65535',
    ]);
    expect(error.message).toBe(error.problems.join('\n'));
  });

  it('reports every bad server setting and a missing API_URL and API_KEY together', () => {
    expect(envError({ API_HOST: 'nowhere', LEASE_SECONDS: '1' }, 'server').problems).toEqual([
      'OUTPOST_API_KEY is not set: server mode needs the key its public API requires (Authorization: Bearer …)',
      'API_HOST="nowhere" is invalid: must be an IP address (0.0.0.0, ::, 127.0.0.1)',
      'LEASE_SECONDS="1" is invalid: must be an integer from 5 to 3600',
    ]);
    expect(envError({ DIAGNOSTICS: 'maybe' }, 'agent').problems).toEqual([
      'DIAGNOSTICS="maybe" is invalid: must be on or off',
      'API_URL is not set: agent mode needs the control-plane base URL (https://…)',
      'API_KEY is not set: agent mode needs a private-location key',
    ]);
  });

  it('refuses --results naming the checks file itself (exit 78): results would be appended to it', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'outpost-config-'));
    const checks = path.join(dir, 'checks.json');
    writeFileSync(checks, '{"checks":[]}');
    const error = configError(() => configFromEnv({}, 'once', { checksFile: checks, resultsFile: checks }));
    expect(error.exitCode).toBe(EXIT_CONFIG);
    expect(error.message).toBe(`--results ${checks} is the checks file: results would be appended to it; name another file`);
    // A hard link is the same file under another name.
    const link = path.join(dir, 'results.jsonl');
    linkSync(checks, link);
    expect(configError(() => configFromEnv({}, 'local', { checksFile: checks, resultsFile: link })).message).toContain('is the checks file');
    expect(configFromEnv({}, 'once', { checksFile: checks, resultsFile: path.join(dir, 'other.jsonl') }).resultsFile).toBe(path.join(dir, 'other.jsonl'));
  });

  it('requires API_URL in agent mode', () => {
    const error = envError({ API_KEY: 'k' }, 'agent');
    expect(error.exitCode).toBe(78);
    expect(error.message).toMatch(/^API_URL is not set/);
  });

  it('requires API_KEY in agent mode', () => {
    const error = envError({ API_URL: 'https://cp.example.test' }, 'agent');
    expect(error.exitCode).toBe(78);
    expect(error.message).toMatch(/^API_KEY is not set/);
  });

  it('rejects an API_KEY with whitespace without printing the key', () => {
    const error = envError({ API_URL: 'https://cp.example.test', API_KEY: 'pl_secret part2' }, 'agent');
    expect(error.exitCode).toBe(78);
    expect(error.message).toContain('API_KEY');
    expect(error.message).not.toContain('pl_secret');
  });

  it('shortens very long values in the message', () => {
    const error = envError({ JOB_CONCURRENCY: 'x'.repeat(500) });
    expect(error.message).toContain('...');
    expect(error.message.length).toBeLessThan(200);
  });

  it('names the value as it was set, not a normalised form of it', () => {
    // An operator searches their manifests for what they wrote.
    expect(envError({ LOG_LEVEL: 'Verbose' }).message).toContain('"Verbose"');
    expect(envError({ EXTERNAL_OBSERVABILITY: 'Maybe' }).message).toContain('"Maybe"');
  });

  it('rejects a NODE_EXTRA_CA_CERTS that is a directory, not a PEM file', () => {
    const error = envError({ NODE_EXTRA_CA_CERTS: tmpdir() });
    expect(error.exitCode).toBe(78);
    expect(error.message).toContain(`NODE_EXTRA_CA_CERTS=${JSON.stringify(tmpdir())}`);
  });

  it('rejects a NODE_EXTRA_CA_CERTS file that holds no PEM certificate that parses', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'outpost-config-'));
    const garbage = path.join(dir, 'ca.pem');
    writeFileSync(garbage, '-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n');
    const error = envError({ NODE_EXTRA_CA_CERTS: garbage });
    expect(error.exitCode).toBe(78);
    expect(error.message).toBe(`NODE_EXTRA_CA_CERTS=${JSON.stringify(garbage)} is invalid: holds no PEM certificate that parses`);
    writeFileSync(garbage, 'just text\n');
    expect(envError({ NODE_EXTRA_CA_CERTS: garbage }).message).toContain('holds no PEM certificate that parses');
    // BEGIN lines without an END, 5 MB: a lazy regular expression took minutes on this.
    writeFileSync(garbage, '-----BEGIN CERTIFICATE-----\n'.repeat(180_000));
    expect(envError({ NODE_EXTRA_CA_CERTS: garbage }).message).toContain('holds no PEM certificate that parses');
  });

  it('does not print proxy credentials in the error line', () => {
    // Credentials in a proxy URL are secrets (docs/secrets.md: nothing secret leaves the process).
    const error = envError({ HTTPS_PROXY: 'socks5://user:s3cret-pw@proxy.internal:1080' });
    expect(error.message).toContain('HTTPS_PROXY');
    expect(error.message).not.toContain('s3cret-pw');
  });
});

describe('configFromEnv: proxy variables', () => {
  it('honours lower-case proxy variables', () => {
    const config = configFromEnv(
      { https_proxy: 'http://lower-https:3128', http_proxy: 'http://lower-http:3128', no_proxy: 'localhost' },
      'local',
    );
    expect(config.proxy).toEqual({ httpsProxy: 'http://lower-https:3128', httpProxy: 'http://lower-http:3128', noProxy: 'localhost' });
  });

  it('prefers the upper-case variable when both are set', () => {
    const config = configFromEnv(
      { HTTPS_PROXY: 'http://upper:3128', https_proxy: 'http://lower:3128', NO_PROXY: 'a', no_proxy: 'b' },
      'local',
    );
    expect(config.proxy).toEqual({ httpsProxy: 'http://upper:3128', noProxy: 'a' });
  });

  it('names the lower-case variable when its value is bad', () => {
    const error = envError({ https_proxy: 'ftp://x' });
    expect(error.exitCode).toBe(78);
    expect(error.message).toContain('https_proxy="ftp://x"');
  });
});

describe('parseArgs', () => {
  it('takes the argument after --results as its file, even one that looks like -v or --help', () => {
    expect(parseArgs(['once', 'x.json', '--results', '-v'])).toEqual({ kind: 'run', mode: 'once', checksFile: path.resolve('x.json'), resultsFile: path.resolve('-v') });
    expect(parseArgs(['local', '--results', '--help', 'x.json'])).toEqual({ kind: 'run', mode: 'local', checksFile: path.resolve('x.json'), resultsFile: path.resolve('--help') });
    expect(parseArgs(['once', 'x.json', '--results', 'r.jsonl', '-v'])).toEqual({ kind: 'version' });
  });

  it('recognises help and version anywhere', () => {
    expect(parseArgs(['--help'])).toEqual({ kind: 'help' });
    expect(parseArgs(['-h'])).toEqual({ kind: 'help' });
    expect(parseArgs(['help'])).toEqual({ kind: 'help' });
    expect(parseArgs(['local', 'x.json', '--help'])).toEqual({ kind: 'help' });
    expect(parseArgs(['--version'])).toEqual({ kind: 'version' });
    expect(parseArgs(['-v'])).toEqual({ kind: 'version' });
    expect(parseArgs(['version'])).toEqual({ kind: 'version' });
  });

  it('parses the three modes', () => {
    expect(parseArgs(['agent'])).toEqual({ kind: 'run', mode: 'agent' });
    expect(parseArgs(['local', 'checks.json'])).toEqual({ kind: 'run', mode: 'local', checksFile: path.resolve('checks.json') });
    expect(parseArgs(['once', '/abs/checks.json', '--results', 'out.jsonl'])).toEqual({
      kind: 'run',
      mode: 'once',
      checksFile: '/abs/checks.json',
      resultsFile: path.resolve('out.jsonl'),
    });
    expect(parseArgs(['local', '--results=r.jsonl', 'c.json'])).toEqual({
      kind: 'run',
      mode: 'local',
      checksFile: path.resolve('c.json'),
      resultsFile: path.resolve('r.jsonl'),
    });
  });

  it('parses the runtimes command, without arguments', () => {
    expect(parseArgs(['runtimes'])).toEqual({ kind: 'runtimes' });
    expect(() => parseArgs(['runtimes', 'x'])).toThrow(/unexpected argument "x"/);
  });

  it('reads the script settings and refuses bad ones with exit 78', () => {
    const defaults = configFromEnv({}, 'once');
    expect([defaults.scriptConcurrency, defaults.scriptMemoryMb, defaults.runtimesDir]).toEqual([2, 256, undefined]);
    expect(configFromEnv({ SCRIPT_CONCURRENCY: '5', SCRIPT_MEMORY_MB: '64', RUNTIMES_DIR: 'rt' }, 'once')).toMatchObject({
      scriptConcurrency: 5,
      scriptMemoryMb: 64,
      runtimesDir: path.resolve('rt'),
    });
    for (const env of [{ SCRIPT_CONCURRENCY: '0' }, { SCRIPT_MEMORY_MB: '8' }] as Env[]) {
      expect(() => configFromEnv(env, 'once')).toThrow(expect.objectContaining({ exitCode: EXIT_CONFIG }));
    }
  });

  it('reads the dependency settings of PLAYWRIGHT suites (cache under STATE_DIR by default) and refuses bad ones with exit 78, naming them', () => {
    expect(configFromEnv({ STATE_DIR: '/var/lib/outpost' }, 'once').dependencies).toEqual({ cacheDir: '/var/lib/outpost/dependency-cache', maxBytes: 2048 * 1024 * 1024, installTimeoutMs: 120_000 });
    expect(
      configFromEnv({ DEPENDENCY_CACHE_DIR: '/cache/deps', DEPENDENCY_CACHE_MAX_MB: '64', DEPENDENCY_INSTALL_TIMEOUT_SECONDS: '30', DEPENDENCY_REGISTRY: 'https://npm.example/' }, 'once').dependencies,
    ).toEqual({ cacheDir: '/cache/deps', maxBytes: 64 * 1024 * 1024, installTimeoutMs: 30_000, registry: 'https://npm.example/' });
    for (const [env, part] of [
      [{ DEPENDENCY_CACHE_DIR: 'relative/cache' }, 'DEPENDENCY_CACHE_DIR="relative/cache" is invalid: must be an absolute path'],
      [{ DEPENDENCY_CACHE_MAX_MB: '8' }, 'DEPENDENCY_CACHE_MAX_MB="8" is invalid: must be an integer from 16 to 1048576'],
      [{ DEPENDENCY_INSTALL_TIMEOUT_SECONDS: '301' }, 'DEPENDENCY_INSTALL_TIMEOUT_SECONDS="301" is invalid: must be an integer from 5 to 300'],
      [{ DEPENDENCY_REGISTRY: 'file:///srv/npm' }, 'DEPENDENCY_REGISTRY="file:///srv/npm" is invalid: must be an http:// or https:// URL'],
    ] as Array<[Env, string]>) {
      expect(() => configFromEnv(env, 'once')).toThrow(expect.objectContaining({ exitCode: EXIT_CONFIG, message: expect.stringContaining(part) }));
    }
  });

  it('reads CHECK_WORKERS; unset leaves the count to the available cores (src/jobs/workers/cores.ts)', () => {
    expect(configFromEnv({}, 'local').checkWorkers).toBeUndefined();
    expect(configFromEnv({ CHECK_WORKERS: ' 3 ' }, 'local').checkWorkers).toBe(3);
  });

  it('reads the memory settings: BODY_MEMORY_BUDGET_MB (default: sized from the memory limits) and MAX_RESULT_BYTES', () => {
    const defaults = configFromEnv({}, 'once');
    expect([defaults.bodyMemoryBudgetBytes, defaults.maxResultBytes]).toEqual([undefined, 4 * 1024 * 1024]);
    expect(configFromEnv({ BODY_MEMORY_BUDGET_MB: '32', MAX_RESULT_BYTES: '65536' }, 'once')).toMatchObject({
      bodyMemoryBudgetBytes: 32 * 1024 * 1024,
      maxResultBytes: 65536,
    });
    expect(envError({ BODY_MEMORY_BUDGET_MB: '0' }).message).toBe('BODY_MEMORY_BUDGET_MB="0" is invalid: must be an integer from 1 to 1048576');
    expect(envError({ BODY_MEMORY_BUDGET_MB: '64MB' }).exitCode).toBe(EXIT_CONFIG);
    // A result must fit one results call (a spool segment, 8 MiB).
    expect(envError({ MAX_RESULT_BYTES: String(8 * 1024 * 1024 + 1) }).message).toBe(
      'MAX_RESULT_BYTES="8388609" is invalid: must be an integer from 65536 to 8388608',
    );
    expect(envError({ MAX_RESULT_BYTES: '1000' }).exitCode).toBe(EXIT_CONFIG);
  });

  it('reads SCRIPT_ISOLATION (auto by default, or off) and refuses any other value, naming it, with exit 78', () => {
    expect(configFromEnv({}, 'once').scriptIsolation).toBe('auto');
    expect(configFromEnv({ SCRIPT_ISOLATION: 'OFF' }, 'once').scriptIsolation).toBe('off');
    expect(() => configFromEnv({ SCRIPT_ISOLATION: 'none' }, 'once')).toThrow(
      expect.objectContaining({ exitCode: EXIT_CONFIG, message: 'SCRIPT_ISOLATION="none" is invalid: must be auto or off' }),
    );
  });

  it('reads SECRET_DETECTION (off by default, or on) into the check settings and refuses any other value, naming it, with exit 78', () => {
    expect(configFromEnv({}, 'once').secretDetection).toBe(false);
    expect(checkSettings(configFromEnv({}, 'once')).secretDetection).toBeUndefined();
    expect(configFromEnv({ SECRET_DETECTION: 'ON' }, 'once').secretDetection).toBe(true);
    expect(checkSettings(configFromEnv({ SECRET_DETECTION: 'on' }, 'once')).secretDetection).toBe(true);
    expect(configFromEnv({ SECRET_DETECTION: 'off' }, 'once').secretDetection).toBe(false);
    expect(() => configFromEnv({ SECRET_DETECTION: 'yes' }, 'once')).toThrow(
      expect.objectContaining({ exitCode: EXIT_CONFIG, message: 'SECRET_DETECTION="yes" is invalid: must be on or off' }),
    );
  });

  const usage: Array<[string[], string]> = [
    [[], 'no command given'],
    [['bogus'], 'unknown command "bogus"'],
    [['local', 'c.json', '--frobnicate'], 'unknown option "--frobnicate"'],
    [['local'], 'local needs a checks file'],
    [['once'], 'once needs a checks file'],
    [['local', 'a.json', 'b.json'], 'unexpected argument "b.json"'],
    [['agent', 'c.json'], 'unexpected argument "c.json"'],
    [['agent', '--results', 'r.jsonl'], '--results is for local and once modes'],
    [['once', 'c.json', '--results'], '--results needs a file path'],
    [['once', 'c.json', '--results='], '--results needs a file path'],
  ];
  for (const [argv, message] of usage) {
    it(`${JSON.stringify(argv)} is a usage error (exit 64)`, () => {
      const error = configError(() => parseArgs(argv));
      expect(error.exitCode).toBe(EXIT_USAGE);
      expect(error.exitCode).toBe(64);
      expect(error.message).toContain(message);
      expect(error.message).not.toContain('\n');
    });
  }
});

describe('maskUrlCredentials', () => {
  it('hides the whole userinfo, also a password with a raw @ in it', () => {
    expect(maskUrlCredentials('https://user:p@ssw0rd@cp.example:8443/v1')).toBe('https://*****@cp.example:8443/v1');
    expect(maskUrlCredentials('http://cp-user:cp-pass@127.0.0.1:9000')).toBe('http://*****@127.0.0.1:9000');
    expect(maskUrlCredentials('http://127.0.0.1:9000/path?to=a@b')).toBe('http://127.0.0.1:9000/path?to=a@b');
  });
});

describe('configFromEnv: what the agent reads of its environment beyond settings', () => {
  it('finds tools, the browser and OUTPOST_SECRET_* variables, and keeps a frozen copy of the environment', () => {
    const env = {
      PATH: '/usr/bin:/bin',
      PING_PATH: ' /opt/ping ',
      TCPDUMP_PATH: '/opt/tcpdump',
      TRACEPATH_PATH: '',
      BROWSER_PATH: '/opt/chromium',
      OUTPOST_SECRET_DB: 'pw',
    };
    const config = configFromEnv(env, 'local');
    expect(config.tools).toEqual({ searchPath: '/usr/bin:/bin', ping: '/opt/ping', tcpdump: '/opt/tcpdump' });
    expect(config.browserPath).toBe('/opt/chromium');
    expect([...config.processSecrets]).toEqual([['OUTPOST_SECRET_DB', 'pw']]);
    expect(config.processEnv).toEqual(env);
    expect(Object.isFrozen(config.processEnv)).toBe(true);
    env.PATH = '/changed';
    expect(config.processEnv.PATH).toBe('/usr/bin:/bin');
  });

  it('rejects a PING_PATH that is not absolute', () => {
    expect(() => configFromEnv({ PING_PATH: 'ping' }, 'local')).toThrow(new ConfigError('PING_PATH="ping" is invalid: must be an absolute path to iputils ping'));
  });
});

describe('configFromEnv: local mode', () => {
  it('reads API_PORT, an optional OUTPOST_API_KEY and RESULTS_RETENTION_DAYS, with their defaults', () => {
    expect(configFromEnv({}, 'local').local).toEqual({ apiPort: 8080, retentionDays: 30 });
    const key = 'a-long-enough-api-key';
    expect(configFromEnv({ OUTPOST_API_KEY: key, API_PORT: '0', RESULTS_RETENTION_DAYS: '2' }, 'local').local).toEqual({ apiPort: 0, apiKey: key, retentionDays: 2 });
    expect(() => configFromEnv({ OUTPOST_API_KEY: 'short' }, 'local')).toThrow('OUTPOST_API_KEY is invalid: must be at least 16 characters without whitespace');
    expect(configFromEnv({}, 'once').local).toBeUndefined();
  });
});

describe('configFromEnv: server mode', () => {
  const key = 'a-long-enough-api-key';

  it('reads API_PORT, API_HOST, OUTPOST_API_KEY and RESULTS_RETENTION_DAYS, with their defaults', () => {
    const budget = 512 * 1024 * 1024;
    expect(configFromEnv({ OUTPOST_API_KEY: key }, 'server').server).toEqual({
      apiPort: 8080,
      apiHost: '0.0.0.0',
      apiKey: key,
      retentionDays: 30,
      leaseSeconds: 60,
      leaderLeaseSeconds: 15,
      maxConnectionsPerAddress: 256,
      writeBytesPerMinute: budget,
    });
    expect(
      configFromEnv(
        { OUTPOST_API_KEY: key, API_PORT: '9000', API_HOST: '::1', RESULTS_RETENTION_DAYS: '7', LEASE_SECONDS: '15', API_MAX_CONNECTIONS_PER_ADDRESS: '1024' },
        'server',
      ).server,
    ).toEqual({ apiPort: 9000, apiHost: '::1', apiKey: key, retentionDays: 7, leaseSeconds: 15, leaderLeaseSeconds: 15, maxConnectionsPerAddress: 1024, writeBytesPerMinute: budget });
    expect(configFromEnv({}, 'local').server).toBeUndefined();
  });

  it('refuses API_MAX_CONNECTIONS_PER_ADDRESS outside 1 to the 2,048 connections the API holds, with exit 78', () => {
    for (const value of ['0', '2049', 'many']) {
      try {
        configFromEnv({ OUTPOST_API_KEY: key, API_MAX_CONNECTIONS_PER_ADDRESS: value }, 'server');
        throw new Error(`accepted ${value}`);
      } catch (error) {
        expect(error).toBeInstanceOf(ConfigError);
        expect((error as ConfigError).exitCode).toBe(EXIT_CONFIG);
        expect((error as Error).message).toMatch(/API_MAX_CONNECTIONS_PER_ADDRESS.*1.*2048/);
      }
    }
  });

  it('reads LOCATION_WRITE_BYTES_PER_MINUTE: 0 switches the budget off, anything but 0 to 1 TiB is refused with exit 78', () => {
    const read = (value: string) => configFromEnv({ OUTPOST_API_KEY: key, LOCATION_WRITE_BYTES_PER_MINUTE: value }, 'server').server?.writeBytesPerMinute;
    expect(read('0')).toBe(0);
    expect(read('65536')).toBe(65536);
    expect(read(String(1024 ** 4))).toBe(1024 ** 4);
    for (const bad of ['-1', '64MB', '1.5', String(1024 ** 4 + 1)]) {
      let caught: unknown;
      try {
        read(bad);
      } catch (error) {
        caught = error;
      }
      expect(caught, bad).toBeInstanceOf(ConfigError);
      expect((caught as ConfigError).exitCode).toBe(EXIT_CONFIG);
      expect((caught as Error).message).toBe(`LOCATION_WRITE_BYTES_PER_MINUTE=${JSON.stringify(bad)} is invalid: must be an integer from 0 to ${1024 ** 4}`);
    }
  });

  it('reads DATABASE_URL (postgres://), DATABASE_POOL_SIZE and LEADER_LEASE_SECONDS; shows the database without its password', () => {
    const url = 'postgres://outpost:s3cr%40t-pw@db.example:6543/outpost?sslmode=verify-full&sslrootcert=/etc/ca.pem';
    const server = configFromEnv({ OUTPOST_API_KEY: key, DATABASE_URL: url, DATABASE_POOL_SIZE: '20', LEADER_LEASE_SECONDS: '6' }, 'server').server;
    expect(server?.database).toEqual({
      kind: 'postgres',
      url,
      poolSize: 20,
      shown: { kind: 'postgres', location: 'db.example:6543/outpost', user: 'outpost', sslmode: 'verify-full' },
    });
    expect(server?.leaderLeaseSeconds).toBe(6);
    expect(JSON.stringify(server?.database && 'shown' in server.database ? server.database.shown : {})).not.toContain('s3cr');
    const socket = configFromEnv({ OUTPOST_API_KEY: key, DATABASE_URL: 'postgresql:///outpost?host=/run/postgresql' }, 'server').server?.database;
    expect(socket && 'shown' in socket ? socket.shown.location : undefined).toBe('/run/postgresql:5432/outpost');
  });

  it('refuses a malformed DATABASE_URL with exit 78, never printing its password', () => {
    const message = (value: string, extra: Env = {}) => {
      try {
        configFromEnv({ OUTPOST_API_KEY: key, DATABASE_URL: value, ...extra }, 'server');
      } catch (error) {
        expect(error).toBeInstanceOf(ConfigError);
        expect((error as ConfigError).exitCode).toBe(EXIT_CONFIG);
        return (error as Error).message;
      }
      throw new Error('accepted');
    };
    expect(message('not a url')).toContain('DATABASE_URL="not a url" is invalid: must be a URL');
    expect(message('mysql://u:hunter2-pw@h/db')).toMatch(/must be a postgres:\/\/ or postgresql:\/\/ URL/);
    expect(message('mysql://u:hunter2-pw@h/db')).not.toContain('hunter2');
    expect(message('postgres://u:hunter2-pw@h/')).toContain('must name one database');
    expect(message('postgres://u:hunter2-pw@h/db?sslmode=sometimes')).toContain('sslmode must be one of');
    expect(message('postgres://u:hunter2-pw@h/db?sslrootcert=ca.pem')).toContain('sslrootcert must be an absolute path');
    expect(message('postgres://h/db', { DATABASE_POOL_SIZE: '0' })).toBe('DATABASE_POOL_SIZE="0" is invalid: must be an integer from 1 to 100');
    expect(message('postgres://h/db', { LEADER_LEASE_SECONDS: '1' })).toBe('LEADER_LEASE_SECONDS="1" is invalid: must be an integer from 2 to 300');
  });

  it('refuses to start without a usable OUTPOST_API_KEY, never printing the key', () => {
    const message = (env: Env) => {
      try {
        configFromEnv(env, 'server');
      } catch (error) {
        expect(error).toBeInstanceOf(ConfigError);
        expect((error as ConfigError).exitCode).toBe(EXIT_CONFIG);
        return (error as Error).message;
      }
      throw new Error('accepted');
    };
    expect(message({})).toBe('OUTPOST_API_KEY is not set: server mode needs the key its public API requires (Authorization: Bearer …)');
    expect(message({ OUTPOST_API_KEY: 'short-secret' })).toBe('OUTPOST_API_KEY is invalid: must be at least 16 characters without whitespace');
    expect(message({ OUTPOST_API_KEY: 'has a secret in it, 16+' })).not.toContain('secret in it');
    expect(message({ OUTPOST_API_KEY: key, API_HOST: 'localhost' })).toBe('API_HOST="localhost" is invalid: must be an IP address (0.0.0.0, ::, 127.0.0.1)');
    expect(message({ OUTPOST_API_KEY: key, RESULTS_RETENTION_DAYS: '0' })).toBe('RESULTS_RETENTION_DAYS="0" is invalid: must be an integer from 1 to 3650');
    expect(message({ OUTPOST_API_KEY: key, LEASE_SECONDS: '1' })).toBe('LEASE_SECONDS="1" is invalid: must be an integer from 5 to 3600');
  });

  it('parses `server <checks.json>` and refuses the options of the modes that run checks', () => {
    expect(parseArgs(['server', 'checks.json'])).toEqual({ kind: 'run', mode: 'server', checksFile: path.resolve('checks.json') });
    expect(() => parseArgs(['server'])).toThrow('server needs a checks file: outpost server <checks.json>');
    expect(() => parseArgs(['server', 'c.json', '--results', 'r.jsonl'])).toThrow(/server mode only schedules them/);
    expect(() => parseArgs(['server', 'c.json', '--uptime-only'])).toThrow(/server mode only schedules them/);
  });
});

describe('every variable the agent reads is documented', () => {
  // Read from the source, so a new variable cannot be added without its line in the docs and in --help.
  const source = readFileSync(new URL('../../src/config.ts', import.meta.url), 'utf8');
  const read = [...source.matchAll(/[a-zA-Z]+\((?:env, )?'([A-Z][A-Z0-9_]{2,})'/g)].map((m) => m[1] as string);
  const variables = [...new Set(read)].filter((name) => name !== 'OUTPOST_TEST_FAULT');

  it('in docs/configuration.md and in --help', () => {
    expect(variables.length).toBeGreaterThan(40);
    const docs = readFileSync(new URL('../../docs/configuration.md', import.meta.url), 'utf8');
    expect(variables.filter((name) => !docs.includes(`\`${name}\``))).toEqual([]);
    expect(variables.filter((name) => !USAGE.includes(name))).toEqual([]);
  });
});
