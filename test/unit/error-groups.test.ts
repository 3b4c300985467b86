// Error groups: the cleaning rules (what merges, what stays apart), which
// message a failing result is grouped by, the archive states, and the
// grouping through the real store's acceptResults.

import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { CheckResultEntry } from '../../src/core/result-entry.js';
import { cleanErrorMessage, errorHash, errorMessagesOf } from '../../src/store/error-groups.js';
import { nextArchiveState } from '../../src/store/feature-rows.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { claimAll, envelopeFor, queueSessions, storedCheck } from '../support/server-store.js';

const same = (a: string, b: string) => expect(cleanErrorMessage(a), `${a} vs ${b}`).toBe(cleanErrorMessage(b));
const apart = (a: string, b: string) => expect(cleanErrorMessage(a), `${a} vs ${b}`).not.toBe(cleanErrorMessage(b));

describe('cleanErrorMessage', () => {
  it('replaces each kind of detail by its placeholder', () => {
    expect(cleanErrorMessage('connect ECONNREFUSED 127.0.0.1:8080')).toBe('connect ECONNREFUSED <ip>:<port>');
    expect(cleanErrorMessage('connect ECONNREFUSED [::1]:8080')).toBe('connect ECONNREFUSED [<ip>]:<port>');
    expect(cleanErrorMessage('GET https://api.example.com:8443/v1/users/12345 answered 503')).toBe(
      'GET https://api.example.com:<port>/v1/users/<number> answered <number>',
    );
    expect(cleanErrorMessage('Timeout after 30000ms at 2026-11-24T01:18:11.123Z')).toBe('Timeout after <number>ms at <timestamp>');
    expect(cleanErrorMessage('run 550e8400-e29b-41d4-a716-446655440000 failed at 12:30:45')).toBe('run <uuid> failed at <timestamp>');
    expect(cleanErrorMessage('commit deadbeef1234, flags 0xFF00, request req_8f3k2l9x77')).toBe('commit <hex>, flags <hex>, request <id>');
    expect(cleanErrorMessage('fe80::1%eth0 and 2001:db8::42 and 10.0.0.255 unreachable')).toBe('<ip> and <ip> and <ip> unreachable');
    expect(cleanErrorMessage('Date: Tue, 24 Nov 2026 01:18:11 GMT')).toBe('Date: <timestamp>');
    expect(cleanErrorMessage('connect to localhost:5432 refused')).toBe('connect to localhost:<port> refused');
    expect(cleanErrorMessage('  two\n\tlines   here ')).toBe('two lines here');
  });

  it('keeps words that merely hold a digit, and what is not an address', () => {
    expect(cleanErrorMessage('HTTP/1.1 over IPv4 with sha256')).toBe('HTTP/<number> over IPv4 with sha256');
    expect(cleanErrorMessage('Error::parse failed')).toBe('Error::parse failed');
    expect(cleanErrorMessage('getaddrinfo ENOTFOUND api.example.com')).toBe('getaddrinfo ENOTFOUND api.example.com');
    // 999.1.1.1 is no IPv4 address; its numbers still become placeholders.
    expect(cleanErrorMessage('host 999.1.1.1')).toBe('host <number>');
  });

  it('merges messages that differ only in numbers, ids, addresses, ports, UUIDs, timestamps and hex', () => {
    same('Expected status 200, got 503', 'Expected status 200, got 500');
    same('connect ECONNREFUSED 10.0.0.1:443', 'connect ECONNREFUSED 192.168.17.254:8443');
    same('connect ECONNREFUSED [2001:db8::1]:443', 'connect ECONNREFUSED [fe80::abcd:1]:80');
    same('job 550e8400-e29b-41d4-a716-446655440000 timed out', 'job 6ba7b810-9dad-11d1-80b4-00c04fd430c8 timed out');
    same('at 2026-11-24T01:18:11Z: read ETIMEDOUT', 'at 2025-01-01T23:59:59.999+02:00: read ETIMEDOUT');
    same('object 5f2b8c9e1a3d4f6b7c8d9e0f missing', 'object 0a1b2c3d4e5f60718293a4b5 missing');
    same('trace id abc123def456ghi failed', 'trace id zz99yy88xx77 failed');
    same('Response time 20512 ms over maxResponseTime', 'Response time 31002 ms over maxResponseTime');
    same('pointer 0xdeadbeef', 'pointer 0x0');
  });

  it('splits different failures', () => {
    apart('connect ECONNREFUSED 10.0.0.1:443', 'connect ETIMEDOUT 10.0.0.1:443');
    apart('getaddrinfo ENOTFOUND api.example.com', 'getaddrinfo ENOTFOUND www.example.com');
    apart('Assertion failed: STATUS_CODE EQUALS 200 (actual: 503)', 'Assertion failed: JSON_BODY $.ok EQUALS true (actual: false)');
    apart('certificate has expired', 'self-signed certificate');
  });

  it('hashes the cleaned text with SHA-256', () => {
    expect(errorHash('x')).toBe('2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881');
    expect(errorHash(cleanErrorMessage('got 500'))).toBe(errorHash(cleanErrorMessage('got 502')));
  });

  it('cleans hostile messages quickly', () => {
    const hostile = [
      'a'.repeat(2_000),
      `${'a1'.repeat(999)}!`,
      ':'.repeat(2_000),
      '1:'.repeat(1_000),
      '1.'.repeat(1_000),
      'f'.repeat(2_000),
      `${'0-'.repeat(999)}x`,
      '[::1]:'.repeat(300),
      '2026-11-24T'.repeat(180),
    ];
    const started = performance.now();
    for (const message of hostile) cleanErrorMessage(message);
    expect(performance.now() - started).toBeLessThan(2_000);
  });

  it('cleans only the first 2,000 characters', () => {
    expect(cleanErrorMessage(`x${'a '.repeat(5_000)}`).length).toBeLessThanOrEqual(2_000);
  });
});

function entry(overrides: Partial<CheckResultEntry>): CheckResultEntry {
  return {
    resultType: 'FINAL',
    id: 'r',
    name: 'c',
    checkId: 'c',
    checkType: 'API',
    hasFailures: true,
    hasErrors: false,
    isDegraded: false,
    overMaxResponseTime: false,
    runLocation: 'loc',
    startedAt: '2026-11-24T00:00:00.000Z',
    stoppedAt: '2026-11-24T00:00:00.010Z',
    created_at: '2026-11-24T00:00:00.010Z',
    responseTime: 10,
    checkRunId: 1,
    attempts: 1,
    sequenceId: null,
    ...overrides,
  };
}

describe('errorMessagesOf', () => {
  it('has none for a passing result', () => {
    expect(errorMessagesOf(entry({ hasFailures: false, apiCheckResult: { requestError: 'stale' } }))).toEqual([]);
  });

  it('takes requestError first, from whichever detail member the type has', () => {
    const assertions = [{ source: 'STATUS_CODE', property: '', comparison: 'EQUALS', target: '200', actual: 503, passed: false }];
    expect(errorMessagesOf(entry({ hasErrors: true, apiCheckResult: { requestError: 'connect ECONNREFUSED', assertions } }))).toEqual(['connect ECONNREFUSED']);
    expect(errorMessagesOf(entry({ tcpCheckResult: { requestError: 'read ECONNRESET' } }))).toEqual(['read ECONNRESET']);
  });

  it('else one message per failed assertion: its own error, or what it compared and got', () => {
    const assertions = [
      { source: 'STATUS_CODE', property: '', comparison: 'EQUALS', target: '200', actual: 503, passed: false },
      { source: 'JSON_BODY', property: '$.ok', comparison: 'EQUALS', target: 'true', actual: true, passed: true },
      { source: 'TEARDOWN_SCRIPT', property: '', comparison: '', target: '', actual: null, passed: false, error: 'expect(x).toBe(1)' },
    ];
    expect(errorMessagesOf(entry({ apiCheckResult: { requestError: null, assertions } }))).toEqual([
      'Assertion failed: STATUS_CODE EQUALS 200 (actual: 503)',
      'expect(x).toBe(1)',
    ]);
  });

  it('else the response time, else a fixed message', () => {
    expect(errorMessagesOf(entry({ overMaxResponseTime: true, apiCheckResult: { assertions: [] } }))).toEqual(['Response time over maxResponseTime']);
    expect(errorMessagesOf(entry({ apiCheckResult: {} }))).toEqual(['The run failed without an error message']);
  });
});

describe('archive states', () => {
  it('archives until the next event, for ever, and reopens', () => {
    expect(nextArchiveState('OPEN', { archivedUntilNextEvent: true })).toBe('UNTIL_NEXT_EVENT');
    expect(nextArchiveState('OPEN', { archiveForEver: true })).toBe('FOREVER');
    expect(nextArchiveState('OPEN', { archiveForEver: true, archivedUntilNextEvent: true })).toBe('FOREVER');
    expect(nextArchiveState('UNTIL_NEXT_EVENT', { archivedUntilNextEvent: false })).toBe('OPEN');
    expect(nextArchiveState('FOREVER', { archivedUntilNextEvent: false })).toBe('OPEN');
    expect(nextArchiveState('FOREVER', { archiveForEver: false })).toBe('OPEN');
    expect(nextArchiveState('UNTIL_NEXT_EVENT', { archiveForEver: false })).toBe('UNTIL_NEXT_EVENT');
    expect(nextArchiveState('FOREVER', { archiveForEver: false, archivedUntilNextEvent: true })).toBe('UNTIL_NEXT_EVENT');
  });
});

describe('grouping through acceptResults', () => {
  let dir: string;
  let store: SqliteStore;
  const check = storedCheck({ id: 'grouped', locations: ['loc-a'] });
  const other = storedCheck({ id: 'other', locations: ['loc-a'] });
  const at = (ms: number) => new Date(Date.UTC(2026, 10, 24) + ms);

  beforeEach(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'outpost-error-groups-'));
    store = await SqliteStore.open(path.join(dir, 'outpost.db'));
    await store.syncLocations([{ id: 'loc-a', name: 'A' }]);
    await store.syncChecks([check, other], at(0));
  });
  afterEach(async () => {
    await store.close();
    await rm(dir, { recursive: true, force: true });
  });

  /** Runs one session of the check with a FINAL whose apiCheckResult is `detail`; returns the stored result. */
  async function report(c: typeof check, detail: Record<string, unknown>, failing: boolean, ms: number): Promise<CheckResultEntry> {
    await queueSessions(store, c, ['loc-a'], 1, at(ms));
    const [job] = await claimAll(store, 'loc-a', ['API'], at(ms));
    if (!job) throw new Error('no job');
    const envelope = envelopeFor(job, c, { hasFailures: failing, startedAt: at(ms) });
    envelope.result.apiCheckResult = detail;
    expect((await store.acceptResults('agent-a', 'loc-a', [envelope], at(ms))).accepted).toEqual([envelope.resultId]);
    const stored = await store.result(c.id, envelope.resultId);
    if (!stored) throw new Error('not stored');
    return stored;
  }

  it('merges messages that differ in numbers and addresses, splits others, per check; sets errorGroupIds', async () => {
    const a = await report(check, { requestError: 'connect ECONNREFUSED 10.0.0.1:8080' }, true, 1_000);
    const b = await report(check, { requestError: 'connect ECONNREFUSED 10.0.0.2:9090' }, true, 2_000);
    const c = await report(check, { requestError: 'getaddrinfo ENOTFOUND api.example.com' }, true, 3_000);
    const passed = await report(check, { requestError: null }, false, 4_000);
    const elsewhere = await report(other, { requestError: 'connect ECONNREFUSED 10.0.0.1:8080' }, true, 5_000);

    expect(a.errorGroupIds).toHaveLength(1);
    expect(b.errorGroupIds).toEqual(a.errorGroupIds);
    expect(c.errorGroupIds).toHaveLength(1);
    expect(c.errorGroupIds).not.toEqual(a.errorGroupIds);
    expect(passed.errorGroupIds).toEqual([]);
    expect(elsewhere.errorGroupIds).toHaveLength(1);
    expect(elsewhere.errorGroupIds).not.toEqual(a.errorGroupIds);

    const group = await store.errorGroups.group(a.errorGroupIds?.[0] ?? '');
    expect(group).toEqual({
      id: a.errorGroupIds?.[0],
      checkId: 'grouped',
      errorHash: errorHash('connect ECONNREFUSED <ip>:<port>'),
      rawErrorMessage: 'connect ECONNREFUSED 10.0.0.2:9090',
      cleanedErrorMessage: 'connect ECONNREFUSED <ip>:<port>',
      firstSeen: at(1_000).toISOString(),
      lastSeen: at(2_000).toISOString(),
      archivedUntilNextEvent: false,
      archivedForEver: false,
    });
    expect((await store.errorGroups.groupsOf('grouped')).map((g) => g.id)).toEqual([c.errorGroupIds?.[0], a.errorGroupIds?.[0]]);
  });

  it('reopens a group archived until the next event; one archived for ever stays archived', async () => {
    const first = await report(check, { requestError: 'read ETIMEDOUT after 5000 ms' }, true, 1_000);
    const id = first.errorGroupIds?.[0] ?? '';
    expect((await store.errorGroups.patch(id, { archivedUntilNextEvent: true }, at(1_500)))?.archivedUntilNextEvent).toBe(true);
    await report(check, { requestError: 'read ETIMEDOUT after 7000 ms' }, true, 2_000);
    expect(await store.errorGroups.group(id)).toMatchObject({ archivedUntilNextEvent: false, archivedForEver: false, lastSeen: at(2_000).toISOString() });

    expect(await store.errorGroups.patch(id, { archiveForEver: true }, at(2_500))).toMatchObject({ archivedUntilNextEvent: true, archivedForEver: true });
    await report(check, { requestError: 'read ETIMEDOUT after 9000 ms' }, true, 3_000);
    expect(await store.errorGroups.group(id)).toMatchObject({ archivedUntilNextEvent: true, archivedForEver: true, lastSeen: at(3_000).toISOString() });
    expect(await store.errorGroups.patch('no-such-group', { archiveForEver: true }, at(3_000))).toBeUndefined();
  });

  it('groups each failed assertion; prunes groups last seen before the cutoff', async () => {
    const assertions = [
      { source: 'STATUS_CODE', property: '', comparison: 'EQUALS', target: '200', actual: 503, passed: false },
      { source: 'JSON_BODY', property: '$.ok', comparison: 'EQUALS', target: 'true', actual: false, passed: false },
    ];
    const result = await report(check, { requestError: null, assertions }, true, 1_000);
    expect(result.errorGroupIds).toHaveLength(2);
    await report(check, { requestError: 'late' }, true, 10_000);
    expect(await store.errorGroups.prune(at(5_000), 100)).toBe(2);
    expect(await store.errorGroups.groupsOf('grouped')).toHaveLength(1);
  });
});
