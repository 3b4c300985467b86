// Bearer tokens: the public API's key (OUTPOST_API_KEY) and the private
// locations' agent keys. Keys are compared as SHA-256 digests in constant
// time; agent keys are stored only as their digest.

import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

/** The token of `Authorization: Bearer <token>`, or undefined. */
export function bearerToken(header: string | undefined): string | undefined {
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header ?? '');
  return match?.[1];
}

export function keyHash(key: string): string {
  return createHash('sha256').update(key, 'utf8').digest('hex');
}

/** Whether `given` is `expected`, in a time that does not depend on where they differ (nor on their lengths). */
export function sameKey(given: string, expected: string): boolean {
  const a = createHash('sha256').update(given, 'utf8').digest();
  const b = createHash('sha256').update(expected, 'utf8').digest();
  return timingSafeEqual(a, b);
}

/** Agent keys: a prefix that says what they are, then 256 random bits. */
export const AGENT_KEY_PREFIX = 'pl_';

export function newAgentKey(): { rawKey: string; maskedKey: string; hash: string } {
  const rawKey = `${AGENT_KEY_PREFIX}${randomBytes(32).toString('base64url')}`;
  return { rawKey, maskedKey: maskKey(rawKey), hash: keyHash(rawKey) };
}

/** What a key record shows of a key: its prefix and last four characters. */
export function maskKey(rawKey: string): string {
  return `${AGENT_KEY_PREFIX}${'*'.repeat(8)}${rawKey.slice(-4)}`;
}
