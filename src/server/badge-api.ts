// GET /v1/badges/checks/{checkId}: a check's status as an SVG badge for a
// README or a wall screen. No credentials (the service lists no account
// header for it; the router still limits it per client address). The status
// is the worst of the latest FINAL result of each of the check's locations;
// `responseTime=true` adds the newest of those results' response time.
// Answers may be cached for BADGE_MAX_AGE_SECONDS, so a README badge follows
// the check within a minute; an ETag lets a cache revalidate for free. A bad
// parameter or an unknown check is the service's JSON error body, as on
// every other route (docs/server.md, Badges).

import { createHash } from 'node:crypto';
import type { CheckResultEntry } from '../core/result-entry.js';
import { finalOutcome } from '../store/session-status.js';
import type { Store } from '../store/store.js';
import { BADGE_STYLES, BADGE_THEMES, type BadgeStatus, type BadgeStyle, type BadgeTheme, renderBadge } from './badge.js';
import { badRequest, notFound } from './http/api-error.js';
import type { Route } from './http/router.js';
import { resultLocations } from '../store/heartbeats.js';
import { latestFinals } from './latest-finals.js';

export const BADGE_MAX_AGE_SECONDS = 30;

const BADGE_PARAMETERS = ['style', 'theme', 'responseTime'] as const;

export interface BadgeApiDeps {
  store: Store;
}

export interface BadgeQuery {
  style: BadgeStyle;
  theme: BadgeTheme;
  responseTime: boolean;
}

const badParameter = (parameter: string, message: string) => badRequest(message, { parameter });

function oneOf<T extends string>(query: URLSearchParams, name: string, allowed: readonly T[], fallback: T): T {
  const raw = query.get(name);
  if (raw === null) return fallback;
  if (!(allowed as readonly string[]).includes(raw)) throw badParameter(name, `${name} must be one of ${allowed.join(', ')}, not ${JSON.stringify(raw)}`);
  return raw as T;
}

/** The badge's query, parameter by parameter: an unknown or repeated one is a 400 naming it, as on the read API. */
export function parseBadgeQuery(query: URLSearchParams): BadgeQuery {
  const seen = new Set<string>();
  for (const name of query.keys()) {
    if (!(BADGE_PARAMETERS as readonly string[]).includes(name)) throw badParameter(name, `unknown query parameter ${name}`);
    if (seen.has(name)) throw badParameter(name, `query parameter ${name} is given more than once`);
    seen.add(name);
  }
  return {
    style: oneOf(query, 'style', BADGE_STYLES, 'flat'),
    theme: oneOf(query, 'theme', BADGE_THEMES, 'default'),
    responseTime: oneOf(query, 'responseTime', ['true', 'false'], 'false') === 'true',
  };
}

/** Worst first: one failing location makes the check failing. */
export function badgeStatus(latest: readonly CheckResultEntry[]): BadgeStatus {
  if (latest.length === 0) return 'no data';
  const outcomes = latest.map((entry) => finalOutcome(entry));
  if (outcomes.some((o) => o === 'failed' || o === 'error')) return 'failing';
  if (outcomes.includes('degraded')) return 'degraded';
  return 'passing';
}

function etagMatches(header: string | undefined, etag: string): boolean {
  if (header === undefined) return false;
  return header.split(',').some((tag) => {
    const t = tag.trim();
    return t === '*' || t === etag || t === `W/${etag}`;
  });
}

export function badgeRoutes(deps: BadgeApiDeps): Route[] {
  const { store } = deps;
  return [
    {
      method: 'GET',
      path: '/v1/badges/checks/:checkId',
      auth: 'none',
      bodyLimit: 0,
      async handle({ params, query, req, res }) {
        const parsed = parseBadgeQuery(query);
        const checkId = params.checkId as string;
        const check = await store.check(checkId);
        // A deleted check is no longer watched: a badge still saying "passing" would mislead.
        if (!check || check.removedAt !== null) throw notFound('check', checkId);
        const latest = [...(await latestFinals(store, checkId, resultLocations(check))).values()];
        const newest = latest.reduce<CheckResultEntry | undefined>((a, b) => (a === undefined || b.stoppedAt > a.stoppedAt ? b : a), undefined);
        const badge = renderBadge({
          label: check.name,
          status: badgeStatus(latest),
          style: parsed.style,
          theme: parsed.theme,
          // A heartbeat is a ping received, not a request timed: its results' responseTime is always 0.
          ...(parsed.responseTime && newest && check.checkType !== 'HEARTBEAT' ? { responseTimeMs: newest.responseTime } : {}),
        });
        const etag = `"${createHash('sha256').update(badge.svg).digest('base64url').slice(0, 27)}"`;
        const headers: Record<string, string> = {
          'cache-control': `public, max-age=${BADGE_MAX_AGE_SECONDS}`,
          etag,
          'x-content-type-options': 'nosniff',
          // The SVG is data: opened on its own it may run nothing and load nothing.
          'content-security-policy': "default-src 'none'; style-src 'unsafe-inline'; sandbox",
        };
        if (etagMatches(req.headers['if-none-match'], etag)) {
          res.writeHead(304, headers);
          res.end();
          return 'streamed';
        }
        res.writeHead(200, { ...headers, 'content-type': 'image/svg+xml; charset=utf-8', 'content-length': Buffer.byteLength(badge.svg) });
        res.end(badge.svg);
        return 'streamed';
      },
    },
  ];
}
