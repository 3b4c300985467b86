// What the claim loop says when the control plane refuses claims for good
// (an answer the retries do not get past, such as a 404): said once, then
// at most every REFUSAL_REPEAT_MS while the same refusal lasts, with a count.
// A wrong API_URL refuses every 5 s for as long as the agent runs; a line
// (with a stack trace) each time would bury every other line.

import type { Logger } from '../observability/logger.js';
import { ControlPlaneError } from './client.js';

/** How often a refusal that lasts is said again. */
export const REFUSAL_REPEAT_MS = 5 * 60_000;

/** The line for one refusal, and what makes two refusals the same one. */
interface Refusal {
  key: string;
  message: string;
  fields: Record<string, unknown>;
}

/**
 * Statuses that say the URL is no claim route at all: not found, or a
 * method that path does not take (a web server, another service).
 */
const NO_ROUTE_STATUSES = new Set([404, 405]);

/** The URL without user and password, which a log line must not carry. */
function withoutCredentials(url: string): string {
  try {
    const parsed = new URL(url);
    parsed.username = '';
    parsed.password = '';
    return parsed.toString();
  } catch {
    return url;
  }
}

/** `claimUrl`: where the claim was sent (API_URL + the claim route); `retryMs`: the pause before the next claim. */
export function describeRefusal(error: unknown, claimUrl: string, route: string, retryMs: number): Refusal {
  const retry = `retrying every ${retryMs / 1000} s`;
  if (!(error instanceof ControlPlaneError)) {
    // Not an answer of the control plane's: a fault of the agent's own, whose stack says where.
    return { key: `error:${String((error as Error)?.message ?? error)}`, message: `claim failed; ${retry}`, fields: { err: error } };
  }
  const status = error.statusCode;
  if (status !== undefined && NO_ROUTE_STATUSES.has(status)) {
    const url = withoutCredentials(claimUrl);
    const base = url.endsWith(route) ? url.slice(0, -route.length) : url;
    // The usual slip: API_URL given with the /v1 the routes already start with.
    const doubled = route.startsWith('/v1/') && base.replace(/\/+$/, '').endsWith('/v1');
    const hint = doubled
      ? `API_URL must be the control plane's base URL, without /v1 (${base.replace(/\/+$/, '').slice(0, -'/v1'.length)})`
      : "API_URL must be the control plane's base URL (where its API listens, without /v1), not another service or port";
    return {
      key: `no-route:${status}`,
      message: `the control plane has no claim route at ${url} (${error.message.replace(`${error.route}: `, '')}): ${hint}; ${retry}`,
      fields: { route: error.route, status, url },
    };
  }
  return { key: `refused:${status}:${error.message}`, message: `claim refused (${error.message}); ${retry}`, fields: { route: error.route, status } };
}

export class ClaimRefusals {
  private current: { key: string; since: number; loggedAt: number; count: number } | undefined;

  constructor(
    private readonly logger: Logger,
    private readonly now: () => number = Date.now,
    private readonly repeatMs = REFUSAL_REPEAT_MS,
  ) {}

  /** One refused claim: logged when it is new, or when the same one has lasted repeatMs since it was last said. */
  refused(refusal: Refusal): void {
    const at = this.now();
    if (this.current?.key !== refusal.key) {
      this.current = { key: refusal.key, since: at, loggedAt: at, count: 1 };
      this.logger.error(refusal.fields, refusal.message);
      return;
    }
    const current = this.current;
    current.count++;
    if (at - current.loggedAt < this.repeatMs) return;
    current.loggedAt = at;
    const since = new Date(current.since).toISOString();
    this.logger.error({ ...refusal.fields, refusals: current.count, since }, `${refusal.message} (still: ${current.count} claims refused since ${since})`);
  }

  /** A claim went through: a refusal that was said is said to be over. */
  accepted(): void {
    if (!this.current) return;
    this.logger.info({ refusals: this.current.count }, `claims accepted again after ${this.current.count} refused`);
    this.current = undefined;
  }
}
