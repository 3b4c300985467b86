// An alert channel's fields, as the checks file (`alertChannels`) and
// POST /v1/alert-channels give them: the service's record (service-api.md,
// "Alert channel") with each type's config. Every problem is named by its
// JSON path. Shared by checks-file.ts and the server's alerts route.

import type { NewAlertChannel } from '../store/alerts.js';
import { headerProblem } from '../core/http-header.js';
import { MAX_DEFINITION_DEPTH, pathPastDepth } from '../core/json-depth.js';

export const ALERT_CHANNEL_TYPES = ['EMAIL', 'SLACK', 'WEBHOOK', 'SMS', 'PAGERDUTY', 'OPSGENIE', 'CALL'] as const;
export type AlertChannelType = (typeof ALERT_CHANNEL_TYPES)[number];
/** The types this release delivers; the others are stored and refused for delivery. */
export const DELIVERED_CHANNEL_TYPES: readonly string[] = ['SLACK', 'WEBHOOK', 'PAGERDUTY'];

export const DEFAULT_SSL_EXPIRY_THRESHOLD = 30;
const MAX_SUBSCRIPTIONS = 10_000;
const MAX_HEADERS = 50;

/** What the store keeps of a new channel (src/store/alerts.ts), its type one this release knows. */
export interface AlertChannelFields extends NewAlertChannel {
  type: AlertChannelType;
}

/**
 * Headers fetch refuses at every attempt (expect, keep-alive, upgrade,
 * transfer-encoding) or that would contradict the body it sends
 * (content-length): a channel setting one could never be delivered, so it is
 * refused when it is made. Others fetch handles itself (host, connection)
 * are left to it.
 */
const SERVER_HEADERS = new Set(['content-length', 'transfer-encoding', 'expect', 'keep-alive', 'upgrade']);

/** What is wrong with a receiver's URL; undefined when it can be posted to. */
function urlProblem(value: unknown): string | undefined {
  if (typeof value !== 'string' || value.length > 2048) return 'an http or https URL';
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return 'an http or https URL';
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return 'an http or https URL';
  // fetch refuses such a URL at every attempt, and the password would sit in every attempt's error.
  if (url.username || url.password) return 'an http or https URL without a user name or password (send credentials in headers)';
  return undefined;
}

function configProblems(type: string, config: Record<string, unknown>, path: string, problems: string[]): void {
  if (type === 'WEBHOOK' || type === 'SLACK') {
    const problem = urlProblem(config.url);
    if (problem) problems.push(`${path}.url: is required: ${problem}`);
  }
  if (type === 'WEBHOOK') {
    const headers = config.headers;
    if (headers !== undefined) {
      if (headers === null || typeof headers !== 'object' || Array.isArray(headers)) {
        problems.push(`${path}.headers: must be an object of header names to string values`);
      } else {
        const entries = Object.entries(headers);
        if (entries.length > MAX_HEADERS) problems.push(`${path}.headers: must have at most ${MAX_HEADERS} headers`);
        for (const [name, value] of entries) {
          if (name.length > 100 || headerProblem(name, '')) problems.push(`${path}.headers.${name}: is not a valid header name`);
          else if (SERVER_HEADERS.has(name.toLowerCase())) problems.push(`${path}.headers.${name}: frames the request and cannot be given`);
          else if (typeof value !== 'string' || value.length > 4096) problems.push(`${path}.headers.${name}: must be a string of one line`);
          else {
            const found = headerProblem(name, value);
            if (found) problems.push(`${path}.headers.${name}: ${found.problem}`);
          }
        }
      }
    }
    if (config.secret !== undefined && (typeof config.secret !== 'string' || config.secret.length === 0 || config.secret.length > 1024)) {
      problems.push(`${path}.secret: must be a non-empty string`);
    }
  }
  if (type === 'PAGERDUTY') {
    if (typeof config.routingKey !== 'string' || config.routingKey.length === 0 || config.routingKey.length > 128) {
      problems.push(`${path}.routingKey: is required: the integration's routing key (Events API v2)`);
    }
    const problem = config.url === undefined ? undefined : urlProblem(config.url);
    if (problem) problems.push(`${path}.url: must be ${problem}`);
  }
}

function bool(raw: Record<string, unknown>, key: string, fallback: boolean, path: string, problems: string[]): boolean {
  const value = raw[key];
  if (value === undefined || value === null) return fallback;
  if (typeof value !== 'boolean') {
    problems.push(`${path}.${key}: must be true or false`);
    return fallback;
  }
  return value;
}

/**
 * Reads one channel; problems go to `problems` (path-prefixed) and the
 * answer is undefined when there is any. sendFailure and sendRecovery
 * default to true, sendDegraded to false (the service does not show its defaults).
 */
export function parseAlertChannel(raw: unknown, path: string, problems: string[]): AlertChannelFields | undefined {
  const before = problems.length;
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) {
    problems.push(`${path}: must be an object`);
    return undefined;
  }
  const record = raw as Record<string, unknown>;
  const type = record.type;
  if (typeof type !== 'string' || !(ALERT_CHANNEL_TYPES as readonly string[]).includes(type)) {
    problems.push(`${path}.type: is required: one of ${ALERT_CHANNEL_TYPES.join(', ')}`);
  }
  const config = record.config;
  const tooDeep = pathPastDepth(config, MAX_DEFINITION_DEPTH, `${path}.config`);
  if (config === null || typeof config !== 'object' || Array.isArray(config)) {
    problems.push(`${path}.config: is required: an object (its fields depend on the type)`);
  } else if (tooDeep) {
    // Kept as given and stored as JSON: refused here, not by a stack overflow later.
    problems.push(`${tooDeep}: is nested deeper than ${MAX_DEFINITION_DEPTH} levels`);
  } else if (typeof type === 'string') {
    configProblems(type, config as Record<string, unknown>, `${path}.config`, problems);
  }
  let threshold = DEFAULT_SSL_EXPIRY_THRESHOLD;
  if (record.sslExpiryThreshold !== undefined && record.sslExpiryThreshold !== null) {
    const value = record.sslExpiryThreshold;
    if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > 30) {
      problems.push(`${path}.sslExpiryThreshold: must be an integer from 1 to 30`);
    } else {
      threshold = value;
    }
  }
  const subscriptions: string[] = [];
  if (record.subscriptions !== undefined && record.subscriptions !== null) {
    if (!Array.isArray(record.subscriptions) || record.subscriptions.length > MAX_SUBSCRIPTIONS) {
      problems.push(`${path}.subscriptions: must be an array of check ids (or {"checkId": id} objects)`);
    } else {
      record.subscriptions.forEach((item: unknown, index) => {
        const id = item !== null && typeof item === 'object' ? (item as { checkId?: unknown }).checkId : item;
        if ((typeof id === 'string' && id.length > 0) || typeof id === 'number') subscriptions.push(String(id));
        else problems.push(`${path}.subscriptions[${index}]: must be a check id or {"checkId": id}`);
      });
    }
  }
  const fields = {
    autoSubscribe: bool(record, 'autoSubscribe', false, path, problems),
    sendRecovery: bool(record, 'sendRecovery', true, path, problems),
    sendFailure: bool(record, 'sendFailure', true, path, problems),
    sendDegraded: bool(record, 'sendDegraded', false, path, problems),
    sslExpiry: bool(record, 'sslExpiry', false, path, problems),
  };
  if (problems.length > before) return undefined;
  return { type: type as AlertChannelType, config: config as Record<string, unknown>, subscriptions: [...new Set(subscriptions)], sslExpiryThreshold: threshold, ...fields };
}

/** A checks file's channel: the fields plus its `id` (a positive integer, unique in the file). */
export interface FileAlertChannel extends AlertChannelFields {
  id: number;
}

/** `alertChannels` of a checks file; problems are appended. */
export function parseAlertChannels(raw: unknown, problems: string[]): FileAlertChannel[] {
  if (raw === undefined) return [];
  if (!Array.isArray(raw)) {
    problems.push('$.alertChannels: must be an array of alert channels');
    return [];
  }
  const channels: FileAlertChannel[] = [];
  const seen = new Set<number>();
  raw.forEach((item: unknown, index) => {
    const path = `$.alertChannels[${index}]`;
    const id = item !== null && typeof item === 'object' ? (item as { id?: unknown }).id : undefined;
    if (typeof id !== 'number' || !Number.isSafeInteger(id) || id < 1) {
      problems.push(`${path}.id: is required: a positive integer`);
    } else if (seen.has(id)) {
      problems.push(`${path}.id: ${id} is already used by another channel`);
    }
    const fields = parseAlertChannel(item, path, problems);
    if (fields && typeof id === 'number' && !seen.has(id)) channels.push({ id, ...fields });
    if (typeof id === 'number') seen.add(id);
  });
  return channels;
}

/** A check's `alertAfter`: FINAL results in a row a new status must hold before it counts (flap damping). */
export const MAX_ALERT_AFTER = 100;

export function alertAfterProblem(value: unknown): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > MAX_ALERT_AFTER) {
    return `must be an integer from 1 to ${MAX_ALERT_AFTER} (FINAL results in a row a new status must hold before it alerts)`;
  }
  return undefined;
}
