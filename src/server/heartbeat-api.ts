// Heartbeat routes: `/ping/{token}` (GET, POST or HEAD, no credentials; rate
// limited per client address by the router) records a ping, and
// `GET /v1/checks/heartbeats/{checkId}/events/{id}` (public key) answers the
// event with the check's success ratios (heartbeats.ts). A token is looked up
// by its SHA-256, never compared as text, and never logged.

import type { Logger } from '../observability/logger.js';
import type { HeartbeatStore } from '../store/heartbeats.js';
import { type HeartbeatResultListener, windowStats } from './heartbeats.js';
import { ApiError, notFound } from './http/api-error.js';
import { keyHash } from './http/credentials.js';
import type { Route } from './http/router.js';

const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;
/** A User-Agent header longer than this is cut (the event keeps what identifies the client). */
const MAX_USER_AGENT = 512;

export interface HeartbeatApiDeps {
  heartbeats: HeartbeatStore;
  logger: Logger;
  now?: () => Date;
  onResult?: HeartbeatResultListener;
}

export function heartbeatRoutes(deps: HeartbeatApiDeps): Route[] {
  const now = deps.now ?? (() => new Date());
  const ping: Route['handle'] = async ({ params, req }) => {
    const token = params.token ?? '';
    const outcome = await deps.heartbeats.ping(
      keyHash(token),
      { source: `${req.method} ${req.socket.remoteAddress ?? 'unknown'}`, userAgent: String(req.headers['user-agent'] ?? '').slice(0, MAX_USER_AGENT) },
      now(),
    );
    // The token is not echoed: a 404 says nothing about which tokens exist.
    if (!outcome) throw new ApiError(404, 'no heartbeat check has this token');
    deps.onResult?.(outcome.checkId, outcome.result);
    if (outcome.previous === 'FAILING') deps.logger.info({ checkId: outcome.checkId, eventId: outcome.event.id }, 'heartbeat check pinged again: PASSING');
    return { status: 200, body: { id: outcome.event.id }, headers: { 'cache-control': 'no-store' } };
  };
  const routes: Route[] = (['GET', 'POST', 'HEAD'] as const).map((method) => ({ method, path: '/ping/:token', auth: 'none', budget: 'ping', bodyLimit: 0, handle: ping }));
  routes.push({
    method: 'GET',
    path: '/v1/checks/heartbeats/:checkId/events/:id',
    auth: 'public',
    bodyLimit: 0,
    handle: async ({ params, query }) => {
      const checkId = params.checkId ?? '';
      const id = params.id ?? '';
      const unknown = [...query.keys()][0];
      if (unknown !== undefined) throw new ApiError(400, `unknown query parameter ${unknown}`, { parameter: unknown });
      const state = await deps.heartbeats.state(checkId);
      if (!state) throw notFound('heartbeat check', checkId);
      const event = await deps.heartbeats.event(checkId, id);
      if (!event) throw notFound('heartbeat event', id);
      const at = now().getTime();
      const first = await deps.heartbeats.firstEventMs(checkId);
      const trackedSince = Math.min(state.createdMs, first ?? state.createdMs);
      const pings = await deps.heartbeats.pingTimes(checkId, at - 14 * DAY_MS, at);
      return {
        status: 200,
        body: {
          event,
          stats: {
            last24Hours: windowStats(pings, at, DAY_MS, state.periodMs, trackedSince),
            last7Days: windowStats(pings, at, 7 * DAY_MS, state.periodMs, trackedSince),
          },
        },
      };
    },
  });
  return routes;
}
