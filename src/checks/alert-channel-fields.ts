// An alert channel's fields, as the checks file (`alertChannels`) and
// POST /v1/alert-channels give them: the service's record with each type's
// config (docs/server.md, "Alert channels"). Every problem is named by its
// JSON path, and every field is read through Fields, so that one nobody asked
// for is named as a checks file's are (unread-fields.ts). Shared by
// checks-file.ts and the server's alerts route.

import type { NewAlertChannel } from '../store/alerts.js';
import { headerProblem } from '../core/http-header.js';
import { MAX_DEFINITION_DEPTH, pathPastDepth } from '../core/json-depth.js';
import type { Fields } from './fields.js';

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

/**
 * The config of a type this release delivers, read through `config` so that
 * a key it does not read (`heders`) is named like any other field. The config
 * of a type it only stores is taken whole: its keys are the service's, and
 * nothing here reads them.
 */
function readConfig(type: string, config: Fields): void {
  if (type === 'WEBHOOK' || type === 'SLACK') {
    const problem = urlProblem(config.raw('url'));
    if (problem) config.fail(config.at('url'), `is required: ${problem}`);
  }
  if (type === 'WEBHOOK') {
    const headers = config.raw('headers');
    if (headers !== undefined) {
      if (headers === null || typeof headers !== 'object' || Array.isArray(headers)) {
        config.fail(config.at('headers'), 'must be an object of header names to string values');
      } else {
        const entries = Object.entries(headers);
        if (entries.length > MAX_HEADERS) config.fail(config.at('headers'), `must have at most ${MAX_HEADERS} headers`);
        for (const [name, value] of entries) {
          const path = `${config.at('headers')}.${name}`;
          if (name.length > 100 || headerProblem(name, '')) config.fail(path, 'is not a valid header name');
          else if (SERVER_HEADERS.has(name.toLowerCase())) config.fail(path, 'frames the request and cannot be given');
          else if (typeof value !== 'string' || value.length > 4096) config.fail(path, 'must be a string of one line');
          else {
            const found = headerProblem(name, value);
            if (found) config.fail(path, found.problem);
          }
        }
      }
    }
    const secret = config.raw('secret');
    if (secret !== undefined && (typeof secret !== 'string' || secret.length === 0 || secret.length > 1024)) {
      config.fail(config.at('secret'), 'must be a non-empty string');
    }
  }
  if (type === 'PAGERDUTY') {
    const routingKey = config.raw('routingKey');
    if (typeof routingKey !== 'string' || routingKey.length === 0 || routingKey.length > 128) {
      config.fail(config.at('routingKey'), "is required: the integration's routing key (Events API v2)");
    }
    const url = config.raw('url');
    const problem = url === undefined ? undefined : urlProblem(url);
    if (problem) config.fail(config.at('url'), `must be ${problem}`);
  }
}

function bool(item: Fields, name: string, fallback: boolean): boolean {
  const value = item.raw(name);
  if (value === undefined || value === null) return fallback;
  if (typeof value !== 'boolean') {
    item.fail(item.at(name), 'must be true or false');
    return fallback;
  }
  return value;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/**
 * Reads one channel at `item` (`value` is its JSON); problems are recorded
 * there, by JSON path, and the answer is undefined when there is any.
 * sendFailure and sendRecovery default to true, sendDegraded to false (the
 * service does not show its defaults).
 */
export function parseAlertChannel(item: Fields, value: unknown): AlertChannelFields | undefined {
  // Not an object: `item` said so when it was made.
  if (!isRecord(value)) return undefined;
  const before = item.issues.length;
  const type = item.raw('type');
  if (typeof type !== 'string' || !(ALERT_CHANNEL_TYPES as readonly string[]).includes(type)) {
    item.fail(item.at('type'), `is required: one of ${ALERT_CHANNEL_TYPES.join(', ')}`);
  }
  const config = item.raw('config');
  const tooDeep = pathPastDepth(config, MAX_DEFINITION_DEPTH, item.at('config'));
  if (!isRecord(config)) {
    item.fail(item.at('config'), 'is required: an object (its fields depend on the type)');
  } else if (tooDeep) {
    // Kept as given and stored as JSON: refused here, not by a stack overflow later.
    item.fail(tooDeep, `is nested deeper than ${MAX_DEFINITION_DEPTH} levels`);
  } else if (typeof type === 'string' && DELIVERED_CHANNEL_TYPES.includes(type)) {
    readConfig(type, item.nested(config, item.at('config')));
  }
  let threshold = DEFAULT_SSL_EXPIRY_THRESHOLD;
  const thresholdValue = item.raw('sslExpiryThreshold');
  if (thresholdValue !== undefined && thresholdValue !== null) {
    if (typeof thresholdValue !== 'number' || !Number.isInteger(thresholdValue) || thresholdValue < 1 || thresholdValue > 30) {
      item.fail(item.at('sslExpiryThreshold'), 'must be an integer from 1 to 30');
    } else {
      threshold = thresholdValue;
    }
  }
  const subscriptions: string[] = [];
  const listed = item.raw('subscriptions');
  if (listed !== undefined && listed !== null) {
    if (!Array.isArray(listed) || listed.length > MAX_SUBSCRIPTIONS) {
      item.fail(item.at('subscriptions'), 'must be an array of check ids (or {"checkId": id} objects)');
    } else {
      listed.forEach((element: unknown, index) => {
        const path = `${item.at('subscriptions')}[${index}]`;
        const id = isRecord(element) ? item.nested(element, path).raw('checkId') : element;
        if ((typeof id === 'string' && id.length > 0) || typeof id === 'number') subscriptions.push(String(id));
        else item.fail(path, 'must be a check id or {"checkId": id}');
      });
    }
  }
  const fields = {
    autoSubscribe: bool(item, 'autoSubscribe', false),
    sendRecovery: bool(item, 'sendRecovery', true),
    sendFailure: bool(item, 'sendFailure', true),
    sendDegraded: bool(item, 'sendDegraded', false),
    sslExpiry: bool(item, 'sslExpiry', false),
  };
  if (item.issues.length > before || !isRecord(config)) return undefined;
  return { type: type as AlertChannelType, config, subscriptions: [...new Set(subscriptions)], sslExpiryThreshold: threshold, ...fields };
}

/** A checks file's channel: the fields plus its `id` (a positive integer, unique in the file). */
export interface FileAlertChannel extends AlertChannelFields {
  id: number;
}

/** `$.alertChannels` of a checks file, problems recorded on `root`. */
export function parseAlertChannels(root: Fields): FileAlertChannel[] {
  const declared = root.raw('alertChannels');
  if (declared !== undefined && !Array.isArray(declared)) {
    root.fail(root.at('alertChannels'), 'must be an array of alert channels');
    return [];
  }
  const channels: FileAlertChannel[] = [];
  const seen = new Set<number>();
  root.list('alertChannels').forEach((item, index) => {
    const value = (declared as unknown[])[index];
    // Not an object: `item` said so when it was made.
    if (!isRecord(value)) return;
    const id = item.raw('id');
    if (typeof id !== 'number' || !Number.isSafeInteger(id) || id < 1) {
      item.fail(item.at('id'), 'is required: a positive integer');
    } else if (seen.has(id)) {
      item.fail(item.at('id'), `${id} is already used by another channel`);
    }
    const fields = parseAlertChannel(item, value);
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
