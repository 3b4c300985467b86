// Environment and command line → one typed, validated Config.
// Every problem is one line naming the variable, its value and what is
// allowed; main.ts prints it and exits 78 (EX_CONFIG).

import { X509Certificate } from 'node:crypto';
import { accessSync, constants, readFileSync, statSync } from 'node:fs';
import { isIP } from 'node:net';
import path from 'node:path';
import type { CheckSettings } from './checks/executor.js';
import { DEPENDENCY_INSTALL_TIMEOUT_MAX_MS } from './checks/scripted/dependencies/prepare.js';
import { MAX_SEGMENT_BYTES } from './control-plane/spool.js';
import { bodyBudgetSize, MemoryBudget, MIB } from './core/memory-budget.js';
import { DEFAULT_MAX_RESULT_BYTES } from './results/result-size.js';
import { LOG_LEVELS, type Logger, type LogLevel } from './observability/logger.js';
import { VERSION } from './core/version.js';
import type { ProxyConfig } from './net/proxy.js';
import { type NetworkPolicy, NetworkPolicyParseError, type OwnPort, parseNetworkPolicy } from './net/network-policy.js';
import type { ToolPaths } from './net/tool-process.js';
import { processSecrets } from './core/process-secrets.js';
import { releaseFifoReaders } from './core/release-fifo-readers.js';
import type { DatabaseSetting } from './store/server-stores.js';
import { API_MAX_CONNECTIONS, API_MAX_CONNECTIONS_PER_ADDRESS } from './server/http/router.js';
import { DEFAULT_WRITE_BYTES_PER_MINUTE } from './server/write-budget.js';

export const EXIT_USAGE = 64;
export const EXIT_CONFIG = 78;

export type Mode = 'agent' | 'local' | 'once' | 'server';

export interface Config {
  mode: Mode;
  checksFile?: string;
  resultsFile?: string;
  apiKey?: string;
  apiUrl?: string;
  jobConcurrency: number;
  healthPort: number;
  /** AGENT_HEALTH_HOST: the address the health server binds; undefined means every interface. */
  healthHost?: string;
  logLevel: LogLevel;
  proxy: ProxyConfig;
  extraCaCerts?: string;
  externalObservability: boolean;
  stateDir: string;
  shutdownGraceSeconds: number;
  spoolMaxResults: number;
  spoolMaxBytes: number;
  claimWaitSeconds: number;
  authRetrySeconds: number;
  controlPlaneTimeoutSeconds: number;
  responseBodyLimitBytes: number;
  /** CHECK_WORKERS; undefined: one per available core (src/jobs/workers/cores.ts). */
  checkWorkers?: number;
  /** BODY_MEMORY_BUDGET_MB in bytes; undefined: sized from the memory limits (src/core/memory-budget.ts). */
  bodyMemoryBudgetBytes?: number;
  /** MAX_RESULT_BYTES: a result's largest size as JSON. */
  maxResultBytes: number;
  checkProxy?: string;
  /** DIAGNOSTICS: packet capture and traceroute after a network failure. */
  diagnostics: boolean;
  /** ARTIFACT_UPLOAD_TIMEOUT_SECONDS: bound on uploading one attempt's artifacts. */
  artifactUploadTimeoutSeconds: number;
  /** SCRIPT_CONCURRENCY: scripted runs at once. */
  scriptConcurrency: number;
  /** SCRIPT_MEMORY_MB: heap limit of one script's process. */
  scriptMemoryMb: number;
  /** SECRET_DETECTION: search scripted checks' outputs for credentials nobody declared (docs/secrets.md). */
  secretDetection: boolean;
  /** SCRIPT_ISOLATION: auto (the strongest mechanism that works, else scripts are refused) or off. */
  scriptIsolation: 'auto' | 'off';
  /** RUNTIMES_DIR, resolved; undefined means <package root>/runtimes. */
  runtimesDir?: string;
  /** BROWSER_PATH as given (undefined: Debian's chromium); whether it exists is decided where it is used. */
  browserPath?: string;
  /** DEPENDENCY_CACHE_DIR, DEPENDENCY_CACHE_MAX_MB, DEPENDENCY_INSTALL_TIMEOUT_SECONDS, DEPENDENCY_REGISTRY: PLAYWRIGHT suites' own dependencies. */
  dependencies: { cacheDir: string; maxBytes: number; installTimeoutMs: number; registry?: string };
  /** PING_PATH, TCPDUMP_PATH, TRACEPATH_PATH, TRACEROUTE_PATH and PATH: where the system tools are found. */
  tools: ToolPaths;
  /** The OUTPOST_SECRET_* variables: secrets the agent holds itself, which checks may use by name. */
  processSecrets: ReadonlyMap<string, string>;
  /**
   * The environment the agent started with, frozen: where the agent's own
   * secrets are looked for (src/secrets/policy.ts secretsInAgentEnv). Nothing
   * else under src/ reads process.env.
   */
  processEnv: Readonly<Env>;
  /** Test hook OUTPOST_TEST_FAULT (docs/configuration.md); never set in production. */
  testFault?: TestFault;
  /** Server mode (docs/server.md): where the API listens, its key, and how long results are kept. */
  server?: ServerSettings;
  /** Local mode (docs/server.md "Local mode"): its read API on 127.0.0.1, and how long results are kept. */
  local?: LocalSettings;
  /** BLOCKED_NETWORKS and ALLOWED_NETWORKS (docs/network-policy.md); undefined: no policy. */
  networkPolicy?: NetworkPolicy;
}

export interface LocalSettings {
  /** API_PORT, default 8080; always on 127.0.0.1. */
  apiPort: number;
  /** OUTPOST_API_KEY; unset: the read API answers without a key (it is on loopback only). */
  apiKey?: string;
  /** RESULTS_RETENTION_DAYS, default 30. */
  retentionDays: number;
}

export interface ServerSettings {
  /** API_PORT, default 8080. */
  apiPort: number;
  /** API_HOST, default 0.0.0.0. */
  apiHost: string;
  /** OUTPOST_API_KEY: the public API's bearer token. */
  apiKey: string;
  /** RESULTS_RETENTION_DAYS, default 30. */
  retentionDays: number;
  /** LEASE_SECONDS: how long a claimed job stays an agent's without an extension, default 60. */
  leaseSeconds: number;
  /** DATABASE_URL (postgres://…) with DATABASE_POOL_SIZE; unset: SQLite in STATE_DIR. */
  database?: DatabaseSetting;
  /** LEADER_LEASE_SECONDS: with PostgreSQL, how long the scheduling replica's lease lasts unrenewed, default 15. */
  leaderLeaseSeconds: number;
  /** API_MAX_CONNECTIONS_PER_ADDRESS: connections one client address may hold on the API, default 256. */
  maxConnectionsPerAddress: number;
  /** LOCATION_WRITE_BYTES_PER_MINUTE: bytes of results and events a location's agents may send a minute, default 512 MiB; 0: unbounded. */
  writeBytesPerMinute: number;
}

/** The shortest OUTPOST_API_KEY accepted: a key is a password, not a name. */
export const MIN_API_KEY_LENGTH = 16;

/**
 * OUTPOST_TEST_FAULT values: `executor-throw` makes every executor call throw;
 * `claim-loop-throw` makes the agent's claim loop crash on every run.
 */
export const TEST_FAULTS = ['executor-throw', 'claim-loop-throw'] as const;
export type TestFault = (typeof TEST_FAULTS)[number];

export class ConfigError extends Error {
  /** One line each; main.ts prints each as its own `outpost: …` line. */
  readonly problems: readonly string[];

  constructor(
    message: string | readonly string[],
    readonly exitCode: number = EXIT_CONFIG,
  ) {
    const problems = typeof message === 'string' ? [message] : message;
    super(problems.join('\n'));
    this.name = 'ConfigError';
    this.problems = problems;
  }
}

/**
 * Collects the problems of many settings, so that an operator fixes them in
 * one round rather than one start per bad variable (README: one line per problem).
 */
class Problems {
  private readonly found: string[] = [];

  /** `read()`'s value, or `fallback` when it throws a ConfigError, whose lines are kept. */
  take<T>(read: () => T, fallback: T): T {
    try {
      return read();
    } catch (error) {
      if (!(error instanceof ConfigError)) throw error;
      this.found.push(...error.problems);
      return fallback;
    }
  }

  add(problem: string): void {
    this.found.push(problem);
  }

  /** Throws one ConfigError holding every problem found, if any. */
  throwIfAny(): void {
    if (this.found.length > 0) throw new ConfigError(this.found);
  }
}

export type Env = Record<string, string | undefined>;

/** A CA bundle is a few hundred certificates at most: far below this. */
const MAX_CA_FILE_BYTES = 10 * 1024 * 1024;
const PEM_BEGIN = '-----BEGIN CERTIFICATE-----';
const PEM_END = '-----END CERTIFICATE-----';

/**
 * The PEM certificate blocks of `text`, BEGIN line to the first END after it. With indexOf, not a lazy
 * regular expression, which took minutes on a file of BEGIN lines without an END.
 */
function pemCertificates(text: string): string[] {
  const blocks: string[] = [];
  for (let from = 0; ; ) {
    const begin = text.indexOf(PEM_BEGIN, from);
    if (begin < 0) return blocks;
    const end = text.indexOf(PEM_END, begin + PEM_BEGIN.length);
    if (end < 0) return blocks;
    blocks.push(text.slice(begin, end + PEM_END.length));
    from = end + PEM_END.length;
  }
}

/**
 * Node reads NODE_EXTRA_CA_CERTS itself and only warns when it cannot; a
 * file without one certificate that parses would leave TLS checks failing
 * for reasons far from the cause.
 */
function checkExtraCaCerts(file: string): void {
  let text: string;
  try {
    accessSync(file, constants.R_OK);
    const stat = statSync(file);
    // Node's own reader of the setting may be blocked opening it; the process could not exit (release-fifo-readers.ts).
    if (stat.isFIFO()) releaseFifoReaders(file);
    if (!stat.isFile() || stat.size > MAX_CA_FILE_BYTES) throw new Error('not a file of a usable size');
    text = readFileSync(file, 'utf8');
  } catch {
    throw new ConfigError(`NODE_EXTRA_CA_CERTS=${shown(file)} is invalid: must be a readable PEM file`);
  }
  const parses = (pem: string) => {
    try {
      new X509Certificate(pem);
      return true;
    } catch {
      return false;
    }
  };
  if (!pemCertificates(text).some(parses)) {
    throw new ConfigError(`NODE_EXTRA_CA_CERTS=${shown(file)} is invalid: holds no PEM certificate that parses`);
  }
}

/** SCRIPT_ISOLATION: auto (default) or off, any case; anything else is a ConfigError. */
export function scriptIsolationSetting(env: Env): 'auto' | 'off' {
  const given = read(env, 'SCRIPT_ISOLATION') ?? 'auto';
  const setting = given.toLowerCase();
  if (setting !== 'auto' && setting !== 'off') throw new ConfigError(`SCRIPT_ISOLATION=${shown(given)} is invalid: must be auto or off`);
  return setting;
}

/** STATE_DIR, resolved (default ./.outpost). */
export function stateDirSetting(env: Env): string {
  return path.resolve(read(env, 'STATE_DIR') ?? '.outpost');
}

/** RUNTIMES_DIR, resolved; undefined when unset (the runtimes are then in <package root>/runtimes). */
export function runtimesDirSetting(env: Env): string | undefined {
  const given = read(env, 'RUNTIMES_DIR');
  return given === undefined ? undefined : path.resolve(given);
}

/** The DEPENDENCY_* variables; the cache is under STATE_DIR unless DEPENDENCY_CACHE_DIR says where. */
function dependencySettings(env: Env, problems: Problems): Config['dependencies'] {
  const cacheDir =
    problems.take(() => absolutePath(env, 'DEPENDENCY_CACHE_DIR', 'a folder for installed suite dependencies'), undefined) ?? path.join(stateDirSetting(env), 'dependency-cache');
  const registry = problems.take(() => httpUrl('DEPENDENCY_REGISTRY', read(env, 'DEPENDENCY_REGISTRY')), undefined);
  return {
    cacheDir: path.resolve(cacheDir),
    maxBytes: problems.take(() => integer(env, 'DEPENDENCY_CACHE_MAX_MB', 2048, 16, 1_048_576), 2048) * 1024 * 1024,
    // At most what a PLAYWRIGHT job's cap allows for.
    installTimeoutMs: problems.take(() => integer(env, 'DEPENDENCY_INSTALL_TIMEOUT_SECONDS', 120, 5, DEPENDENCY_INSTALL_TIMEOUT_MAX_MS / 1000), 120) * 1000,
    ...(registry ? { registry } : {}),
  };
}

/** BROWSER_PATH, trimmed; undefined when unset. */
export function browserPathSetting(env: Env): string | undefined {
  return read(env, 'BROWSER_PATH');
}

function absolutePath(env: Env, name: string, what: string): string | undefined {
  const value = read(env, name);
  if (value !== undefined && !path.isAbsolute(value)) throw new ConfigError(`${name}=${shown(value)} is invalid: must be an absolute path to ${what}`);
  return value;
}

/** A URL (or any text holding one) with its userinfo replaced by `*****`: fit for logs and /health. */
export function maskUrlCredentials(value: string): string {
  // Up to the authority's last `@`: a password may hold a raw `@` (WHATWG URLs accept it).
  return value.replace(/\/\/[^/?#\s]*@/g, '//*****@');
}

/** The value as the operator wrote it, quoted and shortened, with URL credentials hidden. */
function shown(value: string): string {
  const safe = maskUrlCredentials(value);
  return JSON.stringify(safe.length > 80 ? `${safe.slice(0, 77)}...` : safe);
}

function read(env: Env, name: string): string | undefined {
  const value = env[name];
  return value === undefined || value.trim() === '' ? undefined : value.trim();
}

function integer(env: Env, name: string, fallback: number, min: number, max: number): number {
  const value = read(env, name);
  if (value === undefined) return fallback;
  if (!/^\d+$/.test(value) || Number(value) < min || Number(value) > max) {
    throw new ConfigError(`${name}=${shown(value)} is invalid: must be an integer from ${min} to ${max}`);
  }
  return Number(value);
}

function httpUrl(name: string, value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  let parsed: URL;
  try {
    parsed = new URL(value);
  } catch {
    throw new ConfigError(`${name}=${shown(value)} is invalid: must be an http:// or https:// URL`);
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    throw new ConfigError(`${name}=${shown(value)} is invalid: must be an http:// or https:// URL`);
  }
  return value;
}

function proxyVariable(env: Env, name: string): string | undefined {
  const lower = name.toLowerCase();
  if (read(env, name) !== undefined) return httpUrl(name, read(env, name));
  return httpUrl(lower, read(env, lower));
}

const GIB = 1024 ** 3;

/**
 * PING_PATH must be absolute; the diagnostics tools' variables are used as
 * given (a wrong one shows in the diagnostics of the first failed check).
 */
function toolPaths(env: Env): ToolPaths {
  const ping = absolutePath(env, 'PING_PATH', 'iputils ping');
  const tcpdump = read(env, 'TCPDUMP_PATH');
  const tracepath = read(env, 'TRACEPATH_PATH');
  const traceroute = read(env, 'TRACEROUTE_PATH');
  return {
    ...(env.PATH !== undefined ? { searchPath: env.PATH } : {}),
    ...(ping ? { ping } : {}),
    ...(tcpdump ? { tcpdump } : {}),
    ...(tracepath ? { tracepath } : {}),
    ...(traceroute ? { traceroute } : {}),
  };
}

function apiKeySetting(env: Env): string | undefined {
  const apiKey = read(env, 'OUTPOST_API_KEY');
  if (apiKey !== undefined && (/\s/.test(apiKey) || apiKey.length < MIN_API_KEY_LENGTH)) {
    throw new ConfigError(`OUTPOST_API_KEY is invalid: must be at least ${MIN_API_KEY_LENGTH} characters without whitespace`);
  }
  return apiKey;
}

function localSettings(env: Env, problems: Problems): LocalSettings {
  const apiKey = problems.take(() => apiKeySetting(env), undefined);
  return {
    apiPort: problems.take(() => integer(env, 'API_PORT', 8080, 0, 65535), 8080),
    ...(apiKey !== undefined ? { apiKey } : {}),
    retentionDays: problems.take(() => integer(env, 'RESULTS_RETENTION_DAYS', 30, 1, 3650), 30),
  };
}

/** LOCATION_WRITE_BYTES_PER_MINUTE's largest value: 1 TiB, far past any disk's minute. */
const MAX_WRITE_BYTES_PER_MINUTE = 1024 ** 4;

/** Server mode's settings; undefined when one of them is bad (each problem is in `problems`). */
function serverSettings(env: Env, problems: Problems): ServerSettings | undefined {
  const found = new Problems();
  const int = (name: string, fallback: number, min: number, max: number) => found.take(() => integer(env, name, fallback, min, max), fallback);
  const apiKey = found.take(() => apiKeySetting(env), undefined);
  if (apiKey === undefined && read(env, 'OUTPOST_API_KEY') === undefined) {
    found.add('OUTPOST_API_KEY is not set: server mode needs the key its public API requires (Authorization: Bearer …)');
  }
  const apiHost = read(env, 'API_HOST') ?? '0.0.0.0';
  if (isIP(apiHost) === 0) found.add(`API_HOST=${shown(apiHost)} is invalid: must be an IP address (0.0.0.0, ::, 127.0.0.1)`);
  const settings = {
    apiPort: int('API_PORT', 8080, 0, 65535),
    apiHost,
    apiKey: apiKey ?? '',
    retentionDays: int('RESULTS_RETENTION_DAYS', 30, 1, 3650),
    leaseSeconds: int('LEASE_SECONDS', 60, 5, 3600),
    ...found.take(() => databaseSettings(env), {}),
    leaderLeaseSeconds: int('LEADER_LEASE_SECONDS', 15, 2, 300),
    maxConnectionsPerAddress: int('API_MAX_CONNECTIONS_PER_ADDRESS', API_MAX_CONNECTIONS_PER_ADDRESS, 1, API_MAX_CONNECTIONS),
    writeBytesPerMinute: int('LOCATION_WRITE_BYTES_PER_MINUTE', DEFAULT_WRITE_BYTES_PER_MINUTE, 0, MAX_WRITE_BYTES_PER_MINUTE),
  };
  return problems.take(() => {
    found.throwIfAny();
    return settings;
  }, undefined);
}

/** BLOCKED_NETWORKS and ALLOWED_NETWORKS; `default` also blocks the ports this process listens on. */
function networkPolicySetting(env: Env, config: Config): NetworkPolicy | undefined {
  const ownPorts: OwnPort[] = [{ port: config.healthPort, what: 'health port (AGENT_HEALTH_PORT)' }];
  const apiPort = config.server?.apiPort ?? config.local?.apiPort;
  if (apiPort !== undefined) ownPorts.push({ port: apiPort, what: 'API port (API_PORT)' });
  try {
    return parseNetworkPolicy(read(env, 'BLOCKED_NETWORKS'), read(env, 'ALLOWED_NETWORKS'), ownPorts);
  } catch (error) {
    if (error instanceof NetworkPolicyParseError) throw new ConfigError(error.message);
    throw error;
  }
}

const SSL_MODES = ['disable', 'prefer', 'require', 'verify-ca', 'verify-full', 'no-verify'];

/**
 * DATABASE_URL: a postgres:// URL naming a host (or a socket folder in
 * `?host=`) and a database; its sslmode, sslrootcert, sslcert and sslkey
 * parameters are node-postgres's. What the server shows of it never has the
 * password, and a bad value's message neither.
 */
function databaseSettings(env: Env): { database?: DatabaseSetting } {
  const value = read(env, 'DATABASE_URL');
  if (value === undefined) return {};
  return { database: postgresSetting('DATABASE_URL', value, integer(env, 'DATABASE_POOL_SIZE', 10, 1, 100)) };
}

/** A postgres:// URL checked as DATABASE_URL is; `name` is what a bad one's message calls it. */
function postgresSetting(name: string, value: string, poolSize: number): Extract<DatabaseSetting, { kind: 'postgres' }> {
  const invalid = (why: string) => new ConfigError(`${name}=${shown(value)} is invalid: ${why}`);
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw invalid('must be a URL such as postgres://user:password@host:5432/database');
  }
  if (url.protocol !== 'postgres:' && url.protocol !== 'postgresql:') throw invalid('must be a postgres:// or postgresql:// URL');
  const host = url.hostname || url.searchParams.get('host') || '';
  if (host === '') throw invalid('must name a host (or a socket folder in ?host=)');
  let database: string;
  let user: string;
  try {
    database = decodeURIComponent(url.pathname.replace(/^\//, ''));
    user = decodeURIComponent(url.username);
  } catch {
    throw invalid('has a malformed %-escape');
  }
  if (database === '' || database.includes('/')) throw invalid('must name one database (postgres://host/database)');
  const sslmode = url.searchParams.get('sslmode') ?? undefined;
  if (sslmode !== undefined && !SSL_MODES.includes(sslmode)) throw invalid(`sslmode must be one of ${SSL_MODES.join(', ')}`);
  for (const name of ['sslrootcert', 'sslcert', 'sslkey']) {
    const file = url.searchParams.get(name);
    if (file !== null && !path.isAbsolute(file)) throw invalid(`${name} must be an absolute path`);
  }
  return {
    kind: 'postgres',
    url: value,
    poolSize,
    shown: {
      kind: 'postgres',
      location: `${host}:${url.port || '5432'}/${database}`,
      ...(user !== '' ? { user } : {}),
      ...(sslmode !== undefined ? { sslmode } : {}),
    },
  };
}

/**
 * `outpost migrate`: the SQLite file to copy (`--from sqlite:PATH`) and the
 * PostgreSQL to copy it to (`--to postgres://…`, or DATABASE_URL when
 * --to is left out, which keeps the password off the command line).
 */
export function migrateSettings(command: Extract<Command, { kind: 'migrate' }>, env: Env): { sqliteFile: string; target: Extract<DatabaseSetting, { kind: 'postgres' }>; replace: boolean } {
  const to = command.to ?? read(env, 'DATABASE_URL');
  if (to === undefined) throw new ConfigError('migrate needs the target: --to postgres://… or DATABASE_URL', EXIT_USAGE);
  return { sqliteFile: command.from, target: postgresSetting(command.to !== undefined ? '--to' : 'DATABASE_URL', to, 2), replace: command.replace };
}

/** Parses the environment for a mode; throws one ConfigError listing every bad value (its `problems`, one line each). */
export function configFromEnv(env: Env, mode: Mode, files: { checksFile?: string; resultsFile?: string } = {}): Config {
  const problems = new Problems();
  const int = (name: string, fallback: number, min: number, max: number) => problems.take(() => integer(env, name, fallback, min, max), fallback);
  const logLevelGiven = read(env, 'LOG_LEVEL') ?? 'info';
  let logLevelRaw = logLevelGiven.toLowerCase();
  if (!(LOG_LEVELS as readonly string[]).includes(logLevelRaw)) {
    problems.add(`LOG_LEVEL=${shown(logLevelGiven)} is invalid: must be one of ${LOG_LEVELS.join(', ')}`);
    logLevelRaw = 'info';
  }
  const observabilityGiven = read(env, 'EXTERNAL_OBSERVABILITY') ?? 'on';
  const observability = observabilityGiven.toLowerCase();
  if (!['on', 'off', 'true', 'false'].includes(observability)) {
    problems.add(`EXTERNAL_OBSERVABILITY=${shown(observabilityGiven)} is invalid: must be on or off`);
  }
  const diagnosticsGiven = read(env, 'DIAGNOSTICS') ?? 'on';
  if (!['on', 'off'].includes(diagnosticsGiven.toLowerCase())) {
    problems.add(`DIAGNOSTICS=${shown(diagnosticsGiven)} is invalid: must be on or off`);
  }
  const extraCaCerts = read(env, 'NODE_EXTRA_CA_CERTS');
  if (extraCaCerts !== undefined) problems.take(() => checkExtraCaCerts(extraCaCerts), undefined);
  const scriptIsolation = problems.take(() => scriptIsolationSetting(env), 'auto');
  const secretDetectionGiven = read(env, 'SECRET_DETECTION') ?? 'off';
  if (!['on', 'off'].includes(secretDetectionGiven.toLowerCase())) {
    problems.add(`SECRET_DETECTION=${shown(secretDetectionGiven)} is invalid: must be on or off`);
  }
  const noProxy = read(env, 'NO_PROXY') ?? read(env, 'no_proxy');
  const httpProxy = problems.take(() => proxyVariable(env, 'HTTP_PROXY'), undefined);
  const httpsProxy = problems.take(() => proxyVariable(env, 'HTTPS_PROXY'), undefined);
  const config: Config = {
    mode,
    ...files,
    jobConcurrency: int('JOB_CONCURRENCY', 1, 1, 1000),
    healthPort: int('AGENT_HEALTH_PORT', 8081, 0, 65535),
    logLevel: logLevelRaw as LogLevel,
    proxy: {
      ...(httpProxy ? { httpProxy } : {}),
      ...(httpsProxy ? { httpsProxy } : {}),
      ...(noProxy ? { noProxy } : {}),
    },
    ...(extraCaCerts ? { extraCaCerts } : {}),
    externalObservability: observability === 'on' || observability === 'true',
    stateDir: stateDirSetting(env),
    shutdownGraceSeconds: int('SHUTDOWN_GRACE_SECONDS', 280, 0, 3600),
    spoolMaxResults: int('SPOOL_MAX_RESULTS', 50_000, 1, 10_000_000),
    spoolMaxBytes: int('SPOOL_MAX_BYTES', GIB, 1024, 1024 * GIB),
    claimWaitSeconds: int('CLAIM_WAIT_SECONDS', 25, 0, 60),
    authRetrySeconds: int('AUTH_RETRY_SECONDS', 60, 1, 3600),
    controlPlaneTimeoutSeconds: int('CONTROL_PLANE_TIMEOUT_SECONDS', 30, 1, 600),
    responseBodyLimitBytes: int('RESPONSE_BODY_LIMIT_BYTES', 10 * 1024 * 1024, 0, 100 * 1024 * 1024),
    // A result is one line of a spool segment, which is one results call: keep it within a segment.
    maxResultBytes: int('MAX_RESULT_BYTES', DEFAULT_MAX_RESULT_BYTES, 64 * 1024, MAX_SEGMENT_BYTES),
    diagnostics: diagnosticsGiven.toLowerCase() === 'on',
    artifactUploadTimeoutSeconds: int('ARTIFACT_UPLOAD_TIMEOUT_SECONDS', 300, 10, 3600),
    scriptConcurrency: int('SCRIPT_CONCURRENCY', 2, 1, 100),
    scriptMemoryMb: int('SCRIPT_MEMORY_MB', 256, 32, 16_384),
    scriptIsolation,
    secretDetection: secretDetectionGiven.toLowerCase() === 'on',
    dependencies: dependencySettings(env, problems),
    tools: {},
    processSecrets: processSecrets(env),
    processEnv: Object.freeze({ ...env }),
  };
  const healthHost = read(env, 'AGENT_HEALTH_HOST');
  if (healthHost !== undefined) {
    if (isIP(healthHost) === 0) problems.add(`AGENT_HEALTH_HOST=${shown(healthHost)} is invalid: must be an IP address (0.0.0.0, ::, 127.0.0.1, a pod IP)`);
    else config.healthHost = healthHost;
  }
  if (read(env, 'CHECK_WORKERS') !== undefined) config.checkWorkers = int('CHECK_WORKERS', 1, 1, 256);
  if (read(env, 'BODY_MEMORY_BUDGET_MB') !== undefined) {
    config.bodyMemoryBudgetBytes = int('BODY_MEMORY_BUDGET_MB', 1, 1, 1024 * 1024) * MIB;
  }
  const runtimesDir = runtimesDirSetting(env);
  if (runtimesDir !== undefined) config.runtimesDir = runtimesDir;
  const browserPath = browserPathSetting(env);
  if (browserPath !== undefined) config.browserPath = browserPath;
  config.tools = problems.take(() => toolPaths(env), {});
  const checkProxy = problems.take(() => httpUrl('CHECK_PROXY', read(env, 'CHECK_PROXY')), undefined);
  if (checkProxy) config.checkProxy = checkProxy;
  // A test hook, and the only place it is read: inert unless set, and only to one of its values.
  const testFault = read(env, 'OUTPOST_TEST_FAULT');
  if (testFault !== undefined) {
    if (!(TEST_FAULTS as readonly string[]).includes(testFault)) {
      problems.add(`OUTPOST_TEST_FAULT=${shown(testFault)} is invalid: the test faults are ${TEST_FAULTS.join(', ')}`);
    } else {
      config.testFault = testFault as TestFault;
    }
  }
  if (mode === 'server') {
    const server = serverSettings(env, problems);
    if (server) config.server = server;
  }
  if (mode === 'local') config.local = localSettings(env, problems);
  const networkPolicy = problems.take(() => networkPolicySetting(env, config), undefined);
  if (networkPolicy) config.networkPolicy = networkPolicy;
  if (mode === 'agent') {
    const apiUrl = read(env, 'API_URL');
    if (apiUrl === undefined) problems.add('API_URL is not set: agent mode needs the control-plane base URL (https://…)');
    else config.apiUrl = problems.take(() => httpUrl('API_URL', apiUrl), undefined);
    const apiKey = read(env, 'API_KEY');
    if (apiKey === undefined) problems.add('API_KEY is not set: agent mode needs a private-location key');
    else if (/\s/.test(apiKey)) problems.add('API_KEY is invalid: must not contain whitespace');
    else config.apiKey = apiKey;
  }
  if (files.checksFile !== undefined && files.resultsFile !== undefined && sameFile(files.checksFile, files.resultsFile)) {
    problems.add(`--results ${files.resultsFile} is the checks file: results would be appended to it; name another file`);
  }
  problems.throwIfAny();
  return config;
}

/** Whether two paths name one file: the same path, or (both existing) the same inode through a link. */
function sameFile(a: string, b: string): boolean {
  if (path.resolve(a) === path.resolve(b)) return true;
  try {
    const [x, y] = [statSync(a), statSync(b)];
    return x.dev === y.dev && x.ino === y.ino;
  } catch {
    return false;
  }
}

export type Command =
  | { kind: 'help' }
  | { kind: 'version' }
  | { kind: 'runtimes' }
  | { kind: 'db-check' }
  | { kind: 'migrate'; from: string; to?: string; replace: boolean }
  | { kind: 'run'; mode: Mode; checksFile?: string; resultsFile?: string; uptimeOnly?: boolean };

export const USAGE = `Usage: outpost <command> [options]

Commands:
  agent                      pull jobs from the control plane (API_URL, API_KEY) and report results
  local <checks.json>        run the checks of a file on their frequency; results to stdout, kept in
                             STATE_DIR/outpost.db and read on 127.0.0.1:API_PORT (docs/server.md)
  once <checks.json>         run each check of a file once; exit 0 only if all passed
  server <checks.json>       the control plane: schedules the file's checks for private locations'
                             agents, stores results, serves the read API (OUTPOST_API_KEY, API_PORT)
  runtimes                   list the runtimes in RUNTIMES_DIR: stage, and whether installed
  db-check                   check the server's database (STATE_DIR/outpost.db) for corruption;
                             exit 0 when sound, 1 with what is wrong
  migrate --from sqlite:PATH [--to postgres://…] [--replace]
                             copy a server's SQLite database into PostgreSQL (--to, else DATABASE_URL)
                             and verify every table's row count (docs/postgres.md)

Options:
  --results <file.jsonl>     local and once: also append each result as one JSON line to this file
                             (not the checks file; the argument after --results is always its file)
  --uptime-only              run only URL, API, TCP, DNS and ICMP checks, as the uptime image does:
                             scripted types are neither advertised nor run
  -h, --help                 show this help
  -v, --version              print the version

Environment (docs/configuration.md): API_URL, API_KEY, JOB_CONCURRENCY, AGENT_HEALTH_PORT, AGENT_HEALTH_HOST, LOG_LEVEL,
HTTPS_PROXY, HTTP_PROXY, NO_PROXY, NODE_EXTRA_CA_CERTS, EXTERNAL_OBSERVABILITY, STATE_DIR,
SHUTDOWN_GRACE_SECONDS, SPOOL_MAX_RESULTS, SPOOL_MAX_BYTES, CLAIM_WAIT_SECONDS,
AUTH_RETRY_SECONDS, CONTROL_PLANE_TIMEOUT_SECONDS, RESPONSE_BODY_LIMIT_BYTES, BODY_MEMORY_BUDGET_MB,
MAX_RESULT_BYTES, CHECK_PROXY, PING_PATH, OUTPOST_SECRET_*,
DIAGNOSTICS, ARTIFACT_UPLOAD_TIMEOUT_SECONDS, TCPDUMP_PATH, TRACEPATH_PATH, TRACEROUTE_PATH,
RUNTIMES_DIR, CHECK_WORKERS, SCRIPT_CONCURRENCY, SCRIPT_MEMORY_MB, SCRIPT_ISOLATION, BROWSER_PATH, SECRET_DETECTION,
BLOCKED_NETWORKS, ALLOWED_NETWORKS, DEPENDENCY_CACHE_DIR, DEPENDENCY_CACHE_MAX_MB, DEPENDENCY_INSTALL_TIMEOUT_SECONDS,
DEPENDENCY_REGISTRY;
server mode: OUTPOST_API_KEY, API_PORT, API_HOST, RESULTS_RETENTION_DAYS, LEASE_SECONDS, API_MAX_CONNECTIONS_PER_ADDRESS,
LOCATION_WRITE_BYTES_PER_MINUTE (docs/server.md),
DATABASE_URL, DATABASE_POOL_SIZE, LEADER_LEASE_SECONDS (docs/postgres.md).
Bad values exit with code 78; bad usage with 64.`;

function migrateArgs(rest: readonly string[]): Command {
  let from: string | undefined;
  let to: string | undefined;
  let replace = false;
  for (let i = 0; i < rest.length; i++) {
    const arg = rest[i] as string;
    const [name, inline] = arg.startsWith('--') && arg.includes('=') ? [arg.slice(0, arg.indexOf('=')), arg.slice(arg.indexOf('=') + 1)] : [arg, undefined];
    if (name === '--replace' && inline === undefined) {
      replace = true;
    } else if (name === '--from' || name === '--to') {
      const value = inline ?? rest[++i];
      if (!value) throw new ConfigError(`${name} needs a value (see --help)`, EXIT_USAGE);
      if (name === '--from') from = value;
      else to = value;
    } else {
      throw new ConfigError(`unexpected argument ${shown(arg)} for migrate (see --help)`, EXIT_USAGE);
    }
  }
  if (from === undefined) throw new ConfigError('migrate needs --from sqlite:PATH (the server\'s STATE_DIR/outpost.db)', EXIT_USAGE);
  if (!from.startsWith('sqlite:') || from.length === 'sqlite:'.length) throw new ConfigError(`--from ${shown(from)} is invalid: must be sqlite:PATH`, EXIT_USAGE);
  return { kind: 'migrate', from: path.resolve(from.slice('sqlite:'.length)), ...(to !== undefined ? { to } : {}), replace };
}

/** The arguments that are options rather than an option's value: the one after `--results` is its file, whatever it looks like. */
function optionWords(argv: readonly string[]): string[] {
  const words: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    words.push(argv[i] as string);
    if (argv[i] === '--results') i++;
  }
  return words;
}

/** Parses argv (without node and script). Throws ConfigError(…, 64) on bad usage. */
export function parseArgs(argv: string[]): Command {
  const words = optionWords(argv);
  if (words.includes('-h') || words.includes('--help') || argv[0] === 'help') return { kind: 'help' };
  if (words.includes('-v') || words.includes('--version') || argv[0] === 'version') return { kind: 'version' };
  const [command, ...rest] = argv;
  if (command === undefined) throw new ConfigError('no command given: use agent, local <file>, once <file> or server <file> (see --help)', EXIT_USAGE);
  if (command === 'runtimes' || command === 'db-check') {
    if (rest.length > 0) throw new ConfigError(`unexpected argument ${shown(rest[0] as string)} (see --help)`, EXIT_USAGE);
    return { kind: command };
  }
  if (command === 'migrate') return migrateArgs(rest);
  if (command !== 'agent' && command !== 'local' && command !== 'once' && command !== 'server') {
    throw new ConfigError(`unknown command ${shown(command)}: use agent, local <file>, once <file> or server <file>; also runtimes, db-check and migrate (see --help)`, EXIT_USAGE);
  }
  let checksFile: string | undefined;
  let resultsFile: string | undefined;
  let uptimeOnly = false;
  for (let i = 0; i < rest.length; i++) {
    const arg = rest[i] as string;
    if (arg === '--uptime-only') {
      uptimeOnly = true;
    } else if (arg === '--results' || arg.startsWith('--results=')) {
      const value = arg.includes('=') ? arg.slice('--results='.length) : rest[++i];
      if (!value) throw new ConfigError('--results needs a file path', EXIT_USAGE);
      resultsFile = path.resolve(value);
    } else if (arg.startsWith('-')) {
      throw new ConfigError(`unknown option ${shown(arg)} (see --help)`, EXIT_USAGE);
    } else if (checksFile === undefined && command !== 'agent') {
      checksFile = path.resolve(arg);
    } else {
      throw new ConfigError(`unexpected argument ${shown(arg)} (see --help)`, EXIT_USAGE);
    }
  }
  if (command === 'agent') {
    if (resultsFile) throw new ConfigError('--results is for local and once modes; agent mode reports to the control plane', EXIT_USAGE);
    return { kind: 'run', mode: 'agent', ...(uptimeOnly ? { uptimeOnly } : {}) };
  }
  if (command === 'server' && (resultsFile || uptimeOnly)) {
    throw new ConfigError('--results and --uptime-only are for the modes that run checks; server mode only schedules them', EXIT_USAGE);
  }
  if (!checksFile) throw new ConfigError(`${command} needs a checks file: outpost ${command} <checks.json>`, EXIT_USAGE);
  return { kind: 'run', mode: command, checksFile, ...(resultsFile ? { resultsFile } : {}), ...(uptimeOnly ? { uptimeOnly } : {}) };
}

/** What executors need to know of the configuration. */
export function checkSettings(config: Config): CheckSettings {
  return {
    responseBodyLimitBytes: config.responseBodyLimitBytes,
    userAgent: `Outpost/${VERSION} (synthetic monitoring)`,
    ...(config.checkProxy ? { checkProxy: config.checkProxy } : {}),
    ...(config.proxy.noProxy ? { noProxy: config.proxy.noProxy } : {}),
    scriptConcurrency: config.scriptConcurrency,
    scriptMemoryMb: config.scriptMemoryMb,
    ...(config.secretDetection ? { secretDetection: true } : {}),
    ...(config.runtimesDir ? { runtimesDir: config.runtimesDir } : {}),
    ...(config.browserPath ? { browserPath: config.browserPath } : {}),
    // As the agent's own Node.js got it.
    ...(config.processEnv.NODE_EXTRA_CA_CERTS ? { extraCaCerts: config.processEnv.NODE_EXTRA_CA_CERTS } : {}),
    tools: config.tools,
    processSecrets: config.processSecrets,
    ...(config.networkPolicy ? { networkPolicy: config.networkPolicy } : {}),
    dependencies: {
      ...config.dependencies,
      // The installer goes out the way the agent does (its proxy), not the way checks do (CHECK_PROXY).
      ...(config.proxy.httpProxy ? { httpProxy: config.proxy.httpProxy } : {}),
      ...(config.proxy.httpsProxy ? { httpsProxy: config.proxy.httpsProxy } : {}),
      ...(config.proxy.noProxy ? { noProxy: config.proxy.noProxy } : {}),
    },
  };
}

/** The agent-wide memory budget for response bodies and results, logged once with where its size came from. */
export function bodyMemoryBudget(config: Config, logger: Logger, holders = 1): MemoryBudget {
  const size = bodyBudgetSize(config.bodyMemoryBudgetBytes);
  logger.info(
    { bodyMemoryBudgetMb: Math.round(size.bytes / MIB), from: size.basis, maxResultBytes: config.maxResultBytes },
    'memory budget for response bodies and results',
  );
  // One holder per check worker and one for the main thread: a worker that dies gives back what it held.
  return MemoryBudget.forHolders(size.bytes, holders);
}
