// The one signature every check type implements.

import type { ArtifactWriter } from '../artifacts/writer.js';
import type { DiagnosticsHooks } from '../diagnostics/hooks.js';
import type { Logger } from '../observability/logger.js';
import type { ToolPaths } from '../net/tool-process.js';
import type { NetworkPolicy } from '../net/network-policy.js';
import type { MemoryLease } from '../core/memory-budget.js';
import type { SecretRegistry } from '../secrets/policy.js';
import type { Variables } from './variables.js';
import type { CheckType } from '../core/check-type.js';
import type { CheckDefinition } from './definition.js';
import type { Fields } from './fields.js';
import type { Outcome, ResultMemberName } from '../core/outcome.js';

export interface ExecutionContext {
  /** Aborted at the check type's hard cap, on a lost lease, or at the end of the shutdown grace. */
  signal: AbortSignal;
  logger: Logger;
  /** Short human-readable lines for the result's jobLog. */
  jobLog: string[];
  /** The job's variables (and OUTPOST_SECRET_* process variables) for `{{NAME}}`. */
  variables: Variables;
  settings: CheckSettings;
  /**
   * The job's secrets: register values discovered at run time that must be
   * scrubbed like secret variables (a basic-auth password after interpolation,
   * a proxy URL's password): `ctx.secrets?.add(value, 'request.basicAuth.password')`.
   * The JobQueue always sets it; it is optional only so that executor unit
   * tests can build a context by hand.
   */
  secrets?: SecretRegistry;
  /**
   * The service environment for scripted runs (src/jobs/service-env.ts):
   * `OUTPOST=true` always, `CI=true` for test-triggered runs. Always set by
   * the JobQueue; optional for the same reason as `secrets`.
   */
  serviceEnv?: Readonly<Record<string, string>>;
  /**
   * The attempt's artifact directory and diagnostics window, for
   * diagnosing network failures (src/diagnostics/). Absent when diagnostics
   * are off (DIAGNOSTICS=off) and in executor unit tests.
   */
  diagnostics?: DiagnosticsHooks;
  /**
   * The attempt's artifact directory, for files a check produces itself (a
   * BROWSER script's screenshots). Set by the JobQueue whenever it has an
   * artifact store, diagnostics on or off; absent in executor unit tests.
   */
  artifacts?: ArtifactWriter;
  /**
   * The job's part of the agent-wide memory budget for response bodies: a
   * reader takes from it what it keeps, and keeps no more than it was given.
   * Set by the JobQueue when it has a budget; absent in executor unit tests.
   */
  bodyMemory?: MemoryLease;
}

/** Agent-wide settings that shape how checks run (docs/configuration.md). */
export interface CheckSettings {
  /** Response bytes kept for assertions and the result (RESPONSE_BODY_LIMIT_BYTES). */
  responseBodyLimitBytes: number;
  /** Proxy for check traffic (CHECK_PROXY), unless a check names its own. */
  checkProxy?: string;
  /** Hosts that bypass CHECK_PROXY (NO_PROXY syntax). */
  noProxy?: string;
  userAgent: string;
  /** Scripts run at once, agent-wide (SCRIPT_CONCURRENCY, default 2). */
  scriptConcurrency?: number;
  /** V8 heap limit of a script's process in MB (SCRIPT_MEMORY_MB, default 256). */
  scriptMemoryMb?: number;
  /** Where runtimes are installed (RUNTIMES_DIR); default <package root>/runtimes. */
  runtimesDir?: string;
  /** BROWSER_PATH as given: the Chromium of BROWSER and PLAYWRIGHT scripts (src/checks/scripted/runtimes.ts browserPath). */
  browserPath?: string;
  /** SECRET_DETECTION: search scripted checks' outputs for undeclared credentials (a check's `secretDetection` overrides it). */
  secretDetection?: boolean;
  /** NODE_EXTRA_CA_CERTS: handed on to scripts' processes. */
  extraCaCerts?: string;
  /** Where ping, tcpdump and traceroute are found (PING_PATH, TCPDUMP_PATH…, PATH). */
  tools?: ToolPaths;
  /** The OUTPOST_SECRET_* variables the agent holds: every job's variables include them. */
  processSecrets?: ReadonlyMap<string, string>;
  /** BLOCKED_NETWORKS / ALLOWED_NETWORKS (src/net/network-policy.ts); absent: every address may be reached. */
  networkPolicy?: NetworkPolicy;
  /** PLAYWRIGHT suites' own dependencies: cache, bounds, registry and the agent's proxy. */
  dependencies?: DependencySettings;
}

/** How a suite's package.json and lockfile are installed (src/checks/scripted/dependencies/; docs/configuration.md). */
export interface DependencySettings {
  /** DEPENDENCY_CACHE_DIR. */
  cacheDir: string;
  /** DEPENDENCY_CACHE_MAX_MB in bytes: least recently used entries go beyond it. */
  maxBytes: number;
  /** DEPENDENCY_INSTALL_TIMEOUT_SECONDS in milliseconds. */
  installTimeoutMs: number;
  /** DEPENDENCY_REGISTRY; unset: the package manager's default. */
  registry?: string;
  /** The agent's HTTP_PROXY, HTTPS_PROXY and NO_PROXY: the installer goes out the way the agent does. */
  httpProxy?: string;
  httpsProxy?: string;
  noProxy?: string;
}

export interface CheckLimits {
  degradedMs: number;
  maxMs: number;
  /** Hard per-job timeout; also the upper bound for maxResponseTime unless maxResponseTimeLimitMs is set. */
  capMs: number;
  /** The largest maxResponseTime a check may set, where that is below capMs (scripts: capMs leaves room for their teardown). */
  maxResponseTimeLimitMs?: number;
}

export interface Executor<Request = unknown> {
  readonly checkType: CheckType;
  readonly member: ResultMemberName;
  readonly limits: CheckLimits;
  readonly assertionSources: readonly string[];
  /**
   * Validates `check.request` (`fields`), recording problems there. `check`
   * gives the whole definition, for type-specific check-level fields.
   */
  parseRequest(fields: Fields, check: Fields): Request;
  /** How long a run is expected to take, for the hanging-job watch; maxResponseTime when absent. */
  expectedMs?(check: CheckDefinition<Request>): number;
  /** A short description of what is checked, for logs (never secrets: URLs are shown without credentials). */
  target(request: Request): string;
  /**
   * Secrets written as they are in the definition (a client certificate's
   * key), scrubbed from the job's first log line on; values with `{{…}}` are
   * registered by `run` once filled in.
   */
  definitionSecrets?(request: Request): Array<{ name: string; value: string }>;
  run(check: CheckDefinition<Request>, ctx: ExecutionContext): Promise<Outcome>;
}
