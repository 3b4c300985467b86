// Which values are secrets, and which scrubber applies where (docs/secrets.md):
//
// - agent-wide secrets (API_KEY, every OUTPOST_SECRET_* process variable, the
//   credentials in API_URL, HTTPS_PROXY / HTTP_PROXY / CHECK_PROXY) are compiled once,
//   at start;
// - each job gets its own scrubber, built once from the agent-wide one plus
//   its variables marked `secret`; executors add what they discover at run
//   time (`ctx.secrets.add(value)`: a basic-auth password after variables
//   were filled in, a proxy URL's password);
// - log lines are scrubbed with a live scrubber holding the agent-wide
//   secrets and those of every job that is running (or finished less than
//   RELEASE_DELAY_MS ago), so a secret logged by any child logger is caught.

import { PROCESS_SECRET_PREFIX } from '../core/process-secrets.js';
import type { EnvironmentVariable } from '../core/protocol.js';
import type { Logger } from '../observability/logger.js';
import type { CheckResultEntry, SerializedResult } from '../core/result-entry.js';
import { isScrubbable, MIN_SECRET_LENGTH, Scrubber, scrubJsonLine } from './scrubber.js';
import { redactSensitiveHeaders } from './sensitive-headers.js';

/** How long a finished job's secrets stay in the log scrubber (lines about a job may come just after it). */
export const RELEASE_DELAY_MS = 10_000;

export interface NamedSecret {
  /** What the secret is called in a warning: a variable's key, never its value. */
  name: string;
  value: string;
}

/** What executors see as `ctx.secrets`. */
export interface SecretRegistry {
  /** Registers a value discovered at run time as a secret of this job (ignored when empty; warned about when short). */
  add(value: string, name?: string): void;
}

/**
 * The secrets a URL carries in its userinfo: the password (decoded and as
 * written) and `user:password` (what Basic auth encodes); a user name alone
 * (`https://TOKEN@host`) counts as the secret when there is no password.
 */
export function urlCredentials(raw: string | undefined): string[] {
  if (!raw) return [];
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return [];
  }
  const decode = (s: string) => {
    try {
      return decodeURIComponent(s);
    } catch {
      return s;
    }
  };
  const user = decode(url.username);
  const password = decode(url.password);
  if (password) return [password, url.password, `${user}:${password}`];
  if (user) return [user, url.username];
  return [];
}

/** Variables holding URLs whose userinfo is a secret: the proxies, API_URL, and the server's DATABASE_URL. */
const URL_VARIABLES = ['API_URL', 'HTTPS_PROXY', 'https_proxy', 'HTTP_PROXY', 'http_proxy', 'CHECK_PROXY', 'DATABASE_URL'];

/** The secrets found in the agent's environment: API_KEY, OUTPOST_SECRET_* and the credentials in its URL variables. */
export function secretsInAgentEnv(env: Record<string, string | undefined>): NamedSecret[] {
  const secrets: NamedSecret[] = [];
  const apiKey = env.API_KEY?.trim();
  if (apiKey) secrets.push({ name: 'API_KEY', value: apiKey });
  for (const [key, value] of Object.entries(env)) {
    if (key.startsWith(PROCESS_SECRET_PREFIX) && value) secrets.push({ name: key, value });
  }
  for (const name of URL_VARIABLES) {
    for (const value of urlCredentials(env[name]?.trim())) secrets.push({ name: `${name} credentials`, value });
  }
  return secrets;
}

/** A result as it may leave the agent: every secret form scrubbed, sensitive headers redacted. */
export function scrubResult(entry: CheckResultEntry, scrubber: Scrubber): CheckResultEntry {
  // With no secrets at all the copy is skipped; the headers rule applies regardless.
  return redactSensitiveHeaders(scrubber.patternCount === 0 ? entry : scrubber.scrubValue(entry));
}

/**
 * Could a serialized result hold a sensitive header's name, in any case as
 * isSensitiveHeader compares them? The Kelvin sign is the one non-ASCII
 * character that toLowerCase turns into one of their letters (`k`); any line
 * holding it takes the slow path. (Without the `u` flag: twice as fast.)
 */
const SENSITIVE_NAME = /authorization|x-api-key|cookie|\u212a/i;

/**
 * What scrubResult gives, and its JSON, with one serialization and one scan
 * of that line in the usual case: the result is serialized as it is; when
 * the line holds no form of any secret (Scrubber.mayHoldSecret) and no
 * sensitive header's name, that line is the answer — no copy, no walk.
 * Otherwise (a secret, or a header to redact) the result goes through
 * scrubResult and is serialized again, so the line is always exactly
 * JSON.stringify(scrubResult(entry)).
 */
export function scrubResultLine(entry: CheckResultEntry, scrubber: Scrubber): SerializedResult {
  let line: string | undefined;
  try {
    line = JSON.stringify(entry);
  } catch {
    // A cycle: scrubValue cuts it.
  }
  if (line !== undefined && !scrubber.mayHoldSecret(line)) {
    if (!SENSITIVE_NAME.test(line)) return { entry, line };
    const redacted = redactSensitiveHeaders(entry);
    return { entry: redacted, line: JSON.stringify(redacted) };
  }
  const scrubbed = scrubResult(entry, scrubber);
  return { entry: scrubbed, line: JSON.stringify(scrubbed) };
}

export class SecretPolicy {
  private readonly agent = new Scrubber();
  /** Agent-wide secrets plus those of running jobs: for log lines. */
  private readonly live: Scrubber;
  private logger: Logger | undefined;
  private readonly warned = new Set<string>();
  private readonly pending: string[] = [];

  constructor(
    secrets: NamedSecret[] = [],
    private readonly releaseDelayMs = RELEASE_DELAY_MS,
  ) {
    for (const { name, value } of secrets) if (!this.agent.add(value)) this.short(name, value);
    this.live = new Scrubber(this.agent);
  }

  /** The agent-wide secrets, compiled once. */
  get agentScrubber(): Scrubber {
    return this.agent;
  }

  /** For pino's `hooks.streamWrite`: one serialized line in, the same line scrubbed out. */
  readonly scrubLogLine = (line: string): string => scrubJsonLine(line, this.live);

  /** Scrubs free text (a crash message written straight to stderr) with everything currently known. */
  scrubText(text: string): string {
    return this.live.scrubText(text);
  }

  /** Where short-secret warnings go; warnings found before this are written now. */
  attachLogger(logger: Logger): void {
    this.logger = logger;
    for (const name of this.pending.splice(0)) this.warn(name);
  }

  /** A job's scrubber: the agent-wide secrets plus the job's variables marked secret. */
  forJob(variables: readonly EnvironmentVariable[]): JobSecrets {
    const job = new JobSecrets(this);
    for (const variable of variables) if (variable.secret === true) job.add(variable.value, variable.key);
    return job;
  }

  /** @internal Registers a job secret with the log scrubber. */
  retain(value: string): void {
    this.live.add(value);
  }

  /** @internal Drops a finished job's secret from the log scrubber, after the release delay. */
  release(values: readonly string[]): void {
    if (values.length === 0) return;
    const drop = () => {
      for (const value of values) this.live.remove(value);
    };
    if (this.releaseDelayMs <= 0) drop();
    else setTimeout(drop, this.releaseDelayMs).unref();
  }

  /** @internal */
  short(name: string, value: string): void {
    if (value.length === 0) return;
    if (this.warned.has(name)) return;
    this.warned.add(name);
    if (this.logger) this.warn(name);
    else this.pending.push(name);
  }

  private warn(name: string): void {
    this.logger?.warn(
      { variable: name, minLength: MIN_SECRET_LENGTH },
      `secret ${name} is shorter than ${MIN_SECRET_LENGTH} characters: it is NOT scrubbed from results, logs and events; use a longer secret`,
    );
  }
}

/**
 * One job's secrets (`ctx.secrets`): its scrubber, and what to release from
 * the log scrubber when it ends. A job without secrets of its own shares the
 * agent-wide scrubber (copied on the first `add`), so it costs nothing.
 */
export class JobSecrets implements SecretRegistry {
  private own: Scrubber | undefined;
  private readonly retained: string[] = [];
  private released = false;

  constructor(private readonly policy: SecretPolicy) {}

  /** Agent-wide secrets plus this job's. */
  get scrubber(): Scrubber {
    return this.own ?? this.policy.agentScrubber;
  }

  add(value: string, name = 'a secret found at run time'): void {
    if (typeof value !== 'string' || value.length === 0 || this.scrubber.has(value)) return;
    if (!isScrubbable(value)) {
      this.policy.short(name, value);
      return;
    }
    this.own ??= new Scrubber(this.policy.agentScrubber);
    this.own.add(value);
    if (!this.released) {
      this.policy.retain(value);
      this.retained.push(value);
    }
  }

  /** The whole result, scrubbed (see scrubResult). */
  scrubResult(entry: CheckResultEntry): CheckResultEntry {
    return scrubResult(entry, this.scrubber);
  }

  /** The whole result, scrubbed, and its JSON line (see scrubResultLine). */
  scrubResultLine(entry: CheckResultEntry): SerializedResult {
    return scrubResultLine(entry, this.scrubber);
  }

  /** The job is over: its secrets leave the log scrubber after the release delay. */
  release(): void {
    if (this.released) return;
    this.released = true;
    this.policy.release(this.retained.splice(0));
  }
}
