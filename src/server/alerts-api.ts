// The alerts' routes (docs/server.md, "Alerts"): alert channels (create,
// read, delete), a channel's notifications with their delivery attempts, and
// a check's status per location. Credentials in a channel's config (a
// webhook secret, a routing key, header values) are answered masked.

import { parseAlertChannel } from '../checks/alert-channel-fields.js';
import type { AlertChannel, AlertStore } from '../store/alerts.js';
import type { Store } from '../store/store.js';
import { undeliveredReason } from './alert-payloads.js';
import { overallStatus } from './alert-status.js';
import { ApiError, badRequest, notFound } from './http/api-error.js';
import { readRecordBody } from './http/record-body.js';
import type { Route } from './http/router.js';

export interface AlertsApiDeps {
  store: Store;
  alerts: AlertStore;
  /** A channel was made: its notifications start with the next results. */
  onChannelsChanged?: () => void;
  now?: () => Date;
}

export const MASK = '*****';
const DEFAULT_NOTIFICATIONS_LIMIT = 20;
const MAX_NOTIFICATIONS_LIMIT = 100;

/** The service's record, plus `source` and whether this release delivers it (`deliveryStatus`, with the reason when not). */
export function channelAnswer(channel: AlertChannel): Record<string, unknown> {
  const config: Record<string, unknown> = { ...channel.config };
  for (const name of ['secret', 'routingKey']) if (typeof config[name] === 'string') config[name] = MASK;
  if (config.headers && typeof config.headers === 'object') {
    config.headers = Object.fromEntries(Object.keys(config.headers as Record<string, unknown>).map((k) => [k, MASK]));
  }
  const reason = undeliveredReason(channel.type);
  return {
    id: channel.id,
    type: channel.type,
    config,
    subscriptions: channel.subscriptions.map((checkId) => ({ checkId })),
    sendRecovery: channel.sendRecovery,
    sendFailure: channel.sendFailure,
    sendDegraded: channel.sendDegraded,
    sslExpiry: channel.sslExpiry,
    sslExpiryThreshold: channel.sslExpiryThreshold,
    autoSubscribe: channel.autoSubscribe,
    source: channel.source,
    deliveryStatus: reason ? 'NOT_DELIVERED' : 'DELIVERED',
    deliveryStatusReason: reason ?? null,
    created_at: channel.created_at,
    updated_at: channel.updated_at,
  };
}

function channelId(raw: string): number {
  if (!/^\d{1,15}$/.test(raw) || Number(raw) < 1) throw new ApiError(404, `alert channel ${raw} does not exist`, { id: raw });
  return Number(raw);
}

function noQuery(query: URLSearchParams, known: readonly string[] = []): void {
  for (const name of query.keys()) if (!known.includes(name)) throw badRequest(`unknown query parameter ${name}`, { parameter: name });
}

export function alertsRoutes(deps: AlertsApiDeps): Route[] {
  const { alerts, store } = deps;
  const now = deps.now ?? (() => new Date());
  return [
    {
      method: 'POST',
      path: '/v1/alert-channels',
      auth: 'public',
      bodyLimit: 64 * 1024,
      async handle({ body, query }) {
        noQuery(query);
        const fields = readRecordBody(body, (item, value) => {
          // The server gives the next free id (a checks file's channel gives its own).
          if (item.has('id')) item.fail(item.at('id'), 'is chosen by the server: leave it out');
          return parseAlertChannel(item, value);
        });
        // readRecordBody threw for every problem parseAlertChannel found.
        if (!fields) throw badRequest('$: must be an alert channel object');
        const channel = await alerts.createChannel(fields, now());
        deps.onChannelsChanged?.();
        return { status: 201, body: channelAnswer(channel) };
      },
    },
    {
      method: 'GET',
      path: '/v1/alert-channels/:id',
      auth: 'public',
      bodyLimit: 0,
      async handle({ params, query }) {
        noQuery(query);
        const channel = await alerts.channel(channelId(params.id as string));
        if (!channel) throw notFound('alert channel', params.id as string);
        return { status: 200, body: channelAnswer(channel) };
      },
    },
    {
      method: 'DELETE',
      path: '/v1/alert-channels/:id',
      auth: 'public',
      bodyLimit: 0,
      async handle({ params, query }) {
        noQuery(query);
        if (!(await alerts.deleteChannel(channelId(params.id as string), now()))) throw notFound('alert channel', params.id as string);
        deps.onChannelsChanged?.();
        return { status: 204 };
      },
    },
    {
      method: 'GET',
      path: '/v1/alert-channels/:id/notifications',
      auth: 'public',
      bodyLimit: 0,
      async handle({ params, query }) {
        noQuery(query, ['limit']);
        const id = channelId(params.id as string);
        let limit = DEFAULT_NOTIFICATIONS_LIMIT;
        const raw = query.get('limit');
        if (raw !== null) {
          if (!/^\d{1,3}$/.test(raw) || Number(raw) < 1 || Number(raw) > MAX_NOTIFICATIONS_LIMIT) {
            throw badRequest(`limit must be an integer from 1 to ${MAX_NOTIFICATIONS_LIMIT}, not ${JSON.stringify(raw)}`, { parameter: 'limit' });
          }
          limit = Number(raw);
        }
        if (!(await alerts.channel(id))) throw notFound('alert channel', params.id as string);
        return { status: 200, body: await alerts.notifications(id, limit) };
      },
    },
    {
      method: 'GET',
      path: '/v1/checks/:checkId/status',
      auth: 'public',
      bodyLimit: 0,
      async handle({ params, query }) {
        noQuery(query);
        const checkId = params.checkId as string;
        if (!(await store.check(checkId))) throw notFound('check', checkId);
        const locations = await alerts.statuses(checkId);
        return {
          status: 200,
          body: {
            checkId,
            status: overallStatus(locations),
            locations: locations.map((s) => ({
              location: s.location,
              status: s.status,
              since: new Date(s.since).toISOString(),
              pending: s.candidate ? { status: s.candidate, results: s.streak } : null,
            })),
          },
        };
      },
    },
  ];
}
