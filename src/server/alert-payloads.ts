// What a notification says, and how each channel type is sent it
// (docs/server.md, "Alerts"). The outbox keeps the event (scrubbed, without
// any channel credential); the request for a channel is made from it at each
// attempt, so a routing key or webhook secret is never stored with it.

import { createHmac } from 'node:crypto';
import type { CheckResultEntry } from '../core/result-entry.js';
import { withoutTrailingSlashes } from '../core/text-scan.js';
import type { AlertChannel, CheckStatus, NotificationKind } from '../store/alerts.js';

export const PAGERDUTY_EVENTS_URL = 'https://events.pagerduty.com/v2/enqueue';
export const SIGNATURE_HEADER = 'x-outpost-signature';
const MAX_ERROR_MESSAGE = 1_000;

/** The event a notification carries; the WEBHOOK payload is this plus `notificationId`. */
export interface AlertEvent {
  event: NotificationKind;
  check: { id: string; name: string | null; checkType: string | null };
  location: string | null;
  status: { previous: CheckStatus; current: CheckStatus } | null;
  /** The worst status over the check's locations, after this change. */
  overallStatus: CheckStatus;
  result: {
    id: string;
    /** The result on this server's read API. */
    url: string;
    startedAt: string;
    stoppedAt: string;
    responseTime: number;
    errorMessage: string | null;
  } | null;
  certificate: { subject: string | null; issuer: string | null; validTo: string | null; daysToExpiry: number } | null;
  /** When the status changed (the result's stoppedAt) or the certificate was seen. */
  occurredAt: string;
}

export interface TlsSeen {
  subject: string | null;
  issuer: string | null;
  validTo: string | null;
  daysToExpiry: number;
}

const RESULT_MEMBERS = ['apiCheckResult', 'tcpCheckResult', 'dnsCheckResult', 'icmpCheckResult', 'multiStepCheckResult', 'browserCheckResult', 'heartbeatCheckResult'] as const;

function clip(text: string): string {
  return text.length > MAX_ERROR_MESSAGE ? `${text.slice(0, MAX_ERROR_MESSAGE)}…` : text;
}

/** The first error a result names: a request error, an error's message, or the response time over its maximum. */
export function errorMessage(entry: CheckResultEntry): string | null {
  for (const member of RESULT_MEMBERS) {
    // A heartbeat's result is the server's own (src/store/sqlite/heartbeats-store.ts), outside the agent's result type.
    const detail = (entry as CheckResultEntry & { heartbeatCheckResult?: unknown })[member];
    if (!detail || typeof detail !== 'object') continue;
    for (const key of ['requestError', 'errorMessage', 'error']) {
      const value = (detail as Record<string, unknown>)[key];
      if (typeof value === 'string' && value) return clip(value);
      if (value && typeof value === 'object' && typeof (value as { message?: unknown }).message === 'string') return clip((value as { message: string }).message);
    }
  }
  if (entry.overMaxResponseTime) return `response time ${entry.responseTime} ms is over the check's maximum`;
  if (entry.hasFailures) return 'the check failed (see the result for its assertions)';
  return null;
}

/** The certificate a URL or API result saw (apiCheckResult.response.tls), when it says how many days it has left. */
export function tlsOf(entry: CheckResultEntry): TlsSeen | undefined {
  const response = (entry.apiCheckResult as { response?: { tls?: unknown } } | undefined)?.response;
  const tls = response?.tls as Record<string, unknown> | null | undefined;
  if (!tls || typeof tls.daysToExpiry !== 'number') return undefined;
  const text = (v: unknown) => (typeof v === 'string' ? v : null);
  return { subject: text(tls.subject), issuer: text(tls.issuer), validTo: text(tls.validTo), daysToExpiry: tls.daysToExpiry };
}

export function resultLink(origin: string, checkId: string, resultId: string): string {
  return `${withoutTrailingSlashes(origin)}/v1/check-results/${encodeURIComponent(checkId)}/${encodeURIComponent(resultId)}`;
}

export interface OutgoingRequest {
  url: string;
  headers: Record<string, string>;
  body: string;
}

function headline(event: AlertEvent): string {
  const name = event.check.name ?? event.check.id;
  const where = event.location ? ` in ${event.location}` : '';
  switch (event.event) {
    case 'FAILURE':
      return `${name} is FAILING${where}`;
    case 'DEGRADED':
      return `${name} is DEGRADED${where}`;
    case 'RECOVERY':
      return `${name} recovered${where} (PASSING)`;
    case 'SSL_EXPIRY':
      return `The certificate of ${name} expires in ${event.certificate?.daysToExpiry ?? '?'} days`;
  }
}

/**
 * Text as Slack shows it, not as markup: an error message comes from the
 * target (a TLS name, a body), and `<!channel>` or `<https://…|label>` in it
 * would ping a channel or disguise a link.
 */
function slackText(text: string): string {
  return text.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;');
}

/** An incoming-webhook message: `text` for notifications and clients without blocks, blocks for the details. */
export function slackPayload(event: AlertEvent): Record<string, unknown> {
  const title = slackText(headline(event));
  const lines: string[] = [];
  if (event.status) lines.push(`*Status:* ${event.status.previous} → ${event.status.current}`);
  if (event.result?.errorMessage) lines.push(`*Error:* ${slackText(event.result.errorMessage)}`);
  if (event.certificate) lines.push(`*Certificate:* ${slackText(event.certificate.subject ?? 'unknown subject')}, valid to ${slackText(event.certificate.validTo ?? 'unknown')}`);
  lines.push(`*At:* ${slackText(event.occurredAt)}`);
  if (event.result) lines.push(`<${slackText(event.result.url).replaceAll('|', '%7C')}|The result>`);
  return {
    text: title,
    blocks: [
      { type: 'section', text: { type: 'mrkdwn', text: `*${title}*` } },
      { type: 'section', text: { type: 'mrkdwn', text: lines.join('\n') } },
    ],
  };
}

/** The dedup key of a check's incident (per location, so that locations open and resolve their own). */
export function pagerDutyDedupKey(event: AlertEvent): string {
  const base = `outpost:${event.check.id}${event.location ? `:${event.location}` : ''}`;
  return event.event === 'SSL_EXPIRY' ? `${base}:ssl:${event.certificate?.validTo ?? ''}` : base;
}

/** Events API v2: trigger on FAILING/DEGRADED (and certificates), resolve on recovery. */
export function pagerDutyPayload(event: AlertEvent, routingKey: string): Record<string, unknown> {
  const dedup_key = pagerDutyDedupKey(event);
  if (event.event === 'RECOVERY') return { routing_key: routingKey, event_action: 'resolve', dedup_key };
  return {
    routing_key: routingKey,
    event_action: 'trigger',
    dedup_key,
    payload: {
      summary: headline(event).slice(0, 1024),
      source: event.location ?? 'outpost',
      severity: event.event === 'FAILURE' ? 'critical' : 'warning',
      timestamp: event.occurredAt,
      component: event.check.id,
      class: event.event,
      custom_details: {
        check: event.check,
        status: event.status,
        errorMessage: event.result?.errorMessage ?? null,
        certificate: event.certificate,
      },
    },
    ...(event.result ? { links: [{ href: event.result.url, text: 'Check result' }] } : {}),
  };
}

export function signature(body: string, secret: string): string {
  return `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
}

/** The request for one attempt; undefined for a type this release does not deliver. */
export function channelRequest(channel: AlertChannel, event: AlertEvent, notificationId: number): OutgoingRequest | undefined {
  const config = channel.config;
  const json = { 'content-type': 'application/json' };
  if (channel.type === 'WEBHOOK') {
    const body = JSON.stringify({ notificationId, ...event });
    const headers: Record<string, string> = { ...((config.headers as Record<string, string> | undefined) ?? {}), ...json };
    if (typeof config.secret === 'string') headers[SIGNATURE_HEADER] = signature(body, config.secret);
    return { url: String(config.url), headers, body };
  }
  if (channel.type === 'SLACK') return { url: String(config.url), headers: json, body: JSON.stringify(slackPayload(event)) };
  if (channel.type === 'PAGERDUTY') {
    const url = typeof config.url === 'string' ? config.url : PAGERDUTY_EVENTS_URL;
    return { url, headers: json, body: JSON.stringify(pagerDutyPayload(event, String(config.routingKey))) };
  }
  return undefined;
}

/** Why a channel of this type gets nothing; undefined when it is delivered. */
export function undeliveredReason(type: string): string | undefined {
  return ['WEBHOOK', 'SLACK', 'PAGERDUTY'].includes(type) ? undefined : `channels of type ${type} are stored but not delivered by this release (WEBHOOK, SLACK and PAGERDUTY are)`;
}
