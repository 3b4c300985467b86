// Retry strategy: which failed attempts are retried, and how long
// to wait before the next. Each retried attempt is reported as an ATTEMPT
// result; the last one as FINAL with `attempts`.

import { MAX_RETRIES } from '../core/protocol.js';
import { Fields } from './fields.js';

export const RETRY_TYPES = ['FIXED', 'LINEAR', 'EXPONENTIAL', 'NO_RETRIES'] as const;
export type RetryType = (typeof RETRY_TYPES)[number];

/** Error codes that count as NETWORK_ERROR for `onlyOn`. */
export const NETWORK_ERROR_CODES = new Set(['ECONNRESET', 'ENOTFOUND', 'ETIMEDOUT', 'EAI_AGAIN', 'ECONNREFUSED']);

export interface RetryStrategy {
  type: RetryType;
  baseBackoffSeconds: number;
  maxRetries: number;
  maxDurationSeconds: number;
  onlyOn: 'NETWORK_ERROR' | null;
}

export const NO_RETRIES: RetryStrategy = { type: 'NO_RETRIES', baseBackoffSeconds: 0, maxRetries: 0, maxDurationSeconds: 0, onlyOn: null };

export function parseRetryStrategy(fields: Fields): RetryStrategy {
  if (!fields.has('retryStrategy')) return NO_RETRIES;
  const f = fields.object('retryStrategy');
  const type = f.oneOf('type', RETRY_TYPES, { default: 'NO_RETRIES' });
  const onlyOn = f.oneOf('onlyOn', ['NETWORK_ERROR'] as const);
  const strategy: RetryStrategy = {
    type,
    baseBackoffSeconds: f.integer('baseBackoffSeconds', { min: 0, max: 600, default: 60, unit: 'seconds' }),
    maxRetries: f.integer('maxRetries', { min: 1, max: MAX_RETRIES, default: 2 }),
    maxDurationSeconds: f.integer('maxDurationSeconds', { min: 0, max: 600, default: 600, unit: 'seconds' }),
    onlyOn: onlyOn ?? null,
  };
  return type === 'NO_RETRIES' ? NO_RETRIES : strategy;
}

/**
 * The ATTEMPT results one run of a check definition (raw, as a job carries it) can send: its maxRetries, as
 * src/jobs/run.ts retries while shouldRetry says so and that is false once `attempt` passes maxRetries. A
 * strategy that does not parse makes the agent refuse the job (no ATTEMPT at all); the protocol's maximum is
 * answered then, so that a server never refuses an agent that reads it otherwise.
 */
export function attemptsPerRun(definition: unknown): number {
  const fields = new Fields(definition, 'check');
  const strategy = parseRetryStrategy(fields);
  return fields.issues.length > 0 ? MAX_RETRIES : strategy.maxRetries;
}

/** Wait before retry number `retry` (1 = the first retry). */
export function backoffMs(strategy: RetryStrategy, retry: number): number {
  const base = strategy.baseBackoffSeconds * 1000;
  switch (strategy.type) {
    case 'FIXED':
      return base;
    case 'LINEAR':
      return base * retry;
    case 'EXPONENTIAL':
      return base * 2 ** (retry - 1);
    case 'NO_RETRIES':
      return 0;
  }
}

/**
 * Whether a failed attempt is retried: retries left, the error qualifies
 * (`onlyOn`), and the next attempt would start within maxDurationSeconds of
 * the first attempt's start.
 */
export function shouldRetry(strategy: RetryStrategy, attempt: number, errorCode: string | undefined, elapsedMs: number): boolean {
  if (strategy.type === 'NO_RETRIES' || attempt > strategy.maxRetries) return false;
  if (strategy.onlyOn === 'NETWORK_ERROR' && !(errorCode && NETWORK_ERROR_CODES.has(errorCode))) return false;
  return elapsedMs + backoffMs(strategy, attempt) <= strategy.maxDurationSeconds * 1000;
}
