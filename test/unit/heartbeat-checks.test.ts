// Heartbeat checks: how a server's checks file reads them (every problem by
// JSON path, the token never quoted), agents' refusal kept, the success ratio
// of the events route (src/server/heartbeats.ts), and the scheduler leaving
// them alone.

import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { ChecksFileError, parseChecksFile, parseServerChecksFile } from '../../src/checks/checks-file.js';
import { definitionRegistry } from '../../src/checks/registry.js';
import { heartbeatSyncs, storedHeartbeatChecks, successRatio, windowStats } from '../../src/server/heartbeats.js';
import { keyHash } from '../../src/server/http/credentials.js';
import { SessionScheduler } from '../../src/server/scheduler.js';
import { openTestStore, storedCheck } from '../support/server-store.js';

const registry = definitionRegistry();
const TOKEN = 'a-secret-token-0123456789';
const locations = [{ id: 'lab', name: 'Lab' }];
const heartbeat = (id: string, hb: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({ id, checkType: 'HEARTBEAT', heartbeat: hb, ...extra });

function problems(file: unknown): string[] {
  try {
    parseServerChecksFile(JSON.stringify(file), 'checks.json', registry);
  } catch (error) {
    if (error instanceof ChecksFileError) return error.problems;
    throw error;
  }
  throw new Error('the file was accepted');
}

describe('HEARTBEAT checks in a checks file', () => {
  it("are read in a server's file, the token filled in from the file's variables and hidden in the stored definition", () => {
    const parsed = parseServerChecksFile(
      JSON.stringify({
        environmentVariables: [{ key: 'HB_TOKEN', value: TOKEN, secret: true }],
        privateLocations: locations,
        checks: [heartbeat('backup', { period: 60, grace: 30, token: '{{HB_TOKEN}}' }, { name: 'Nightly backup' }), { id: 'web', checkType: 'URL', request: { url: 'http://127.0.0.1:9/' } }],
      }),
      'checks.json',
      registry,
    );
    expect(parsed.checks.map((c) => c.check.id)).toEqual(['web']);
    expect(parsed.heartbeats).toEqual([
      { id: 'backup', name: 'Nightly backup', periodSeconds: 60, graceSeconds: 30, token: TOKEN, definition: expect.any(Object) },
    ]);
    const [stored] = storedHeartbeatChecks(parsed.heartbeats);
    expect(stored).toMatchObject({ id: 'backup', checkType: 'HEARTBEAT', frequencySeconds: 60, locations: [], environmentVariables: [] });
    expect(JSON.stringify(stored)).not.toContain(TOKEN);
    expect(heartbeatSyncs(parsed.heartbeats)).toEqual([{ checkId: 'backup', tokenHash: keyHash(TOKEN), periodMs: 60_000, graceMs: 30_000 }]);
  });

  it('a file of heartbeat checks only is not empty', () => {
    const parsed = parseServerChecksFile(JSON.stringify({ privateLocations: locations, checks: [heartbeat('a', { period: 1, grace: 0, token: TOKEN })] }), 'c.json', registry);
    expect(parsed.heartbeats).toHaveLength(1);
  });

  it('lists every problem by JSON path, never quoting a token', () => {
    const found = problems({
      environmentVariables: [{ key: 'SHORT', value: 'short-secret' }],
      privateLocations: locations,
      checks: [
        heartbeat('a', { period: 0, grace: -1, token: '{{SHORT}}' }),
        heartbeat('b', { grace: 90_000, token: '{{MISSING}}' }),
        { id: 'c', checkType: 'HEARTBEAT' },
        heartbeat('d', { period: 10, grace: 0, token: 'has spaces in it, not a path segment' }),
        heartbeat('e', { period: 10, grace: 0, token: TOKEN }),
        heartbeat('f', { period: 10, grace: 0, token: TOKEN }),
        heartbeat('e', { period: 10, grace: 0, token: `${TOKEN}-other` }),
        heartbeat('g', { period: 10, grace: 0, token: `${TOKEN}-g` }, { locations: ['lab'] }),
        heartbeat('h', { period: 1.5, grace: '3', token: 7 }),
      ],
    });
    // Each problem is prefixed with the check's name or id (checks-file.ts); the paths are what this test is about.
    expect(found.map((p) => p.replace(/^check "[^"]*" at /, ''))).toEqual(
      expect.arrayContaining([
        '$.checks[0].heartbeat.period: must be between 1 and 86400 seconds (got 0)',
        '$.checks[0].heartbeat.grace: must be between 0 and 86400 seconds (got -1)',
        '$.checks[0].heartbeat.token: must be 16 to 256 characters once its variables are filled in (it is 12)',
        '$.checks[1].heartbeat.period: is required: whole seconds from 1 to 86400',
        '$.checks[1].heartbeat.grace: must be between 0 and 86400 seconds (got 90000)',
        "$.checks[1].heartbeat.token: uses the unknown variable {{MISSING}}: define it in $.environmentVariables or the check's environmentVariables",
        '$.checks[2].heartbeat: is required: {"period": seconds, "grace": seconds, "token": "{{A_SECRET_VARIABLE}}"}',
        '$.checks[3].heartbeat.token: must be letters, digits and . _ ~ - only once its variables are filled in (it is a path segment of /ping/{token})',
        "$.checks[5].heartbeat.token: is the token of $.checks[4]; each heartbeat check needs its own",
        '$.checks[6].id: "e" is already used by $.checks[4]',
        "$.checks[7].locations: must be left out of a HEARTBEAT check: its pings come to the server, not to a location",
        '$.checks[8].heartbeat.period: must be a whole number of seconds (got 1.5)',
        '$.checks[8].heartbeat.grace: must be a whole number of seconds (got "3")',
        '$.checks[8].heartbeat.token: must be a string (got 7)',
      ]),
    );
    expect(found.join('\n')).not.toContain('short-secret');
    expect(found.join('\n')).not.toContain(TOKEN);
  });

  it('stay refused where checks are run: an agent or once mode gets the reason', () => {
    expect(() => parseChecksFile(JSON.stringify({ checks: [heartbeat('a', { period: 60, grace: 0, token: TOKEN })] }), 'c.json', registry)).toThrow(
      /heartbeats are received by the service, not run by agents/,
    );
  });
});

describe('the success ratio', () => {
  const P = 1_000;
  it('is the share of whole period-long slots, ending at the window end, that had a ping', () => {
    // Window [0, 10 s): slots [9,10), [8,9) … [0,1). Pings in 4 distinct slots, one slot twice.
    expect(successRatio([500, 1_500, 1_700, 5_000, 9_999], 0, 10_000, P, -Infinity)).toBe(4 / 10);
    // Outside the window: ignored.
    expect(successRatio([-1, 10_000, 20_000], 0, 10_000, P, -Infinity)).toBe(0);
    // A partial slot at the window's start is not expected.
    expect(successRatio([9_500], 0, 10_500, P, -Infinity)).toBe(1 / 10);
  });

  it('counts only slots that end after tracking began; 1 when none is expected', () => {
    expect(successRatio([8_500], 0, 10_000, P, 7_200)).toBe(1 / 3);
    expect(successRatio([], 0, 10_000, P, 10_000)).toBe(1);
  });

  it('has a current and a previous window, and counts the pings of the current one', () => {
    expect(windowStats([500, 1_500, 6_000, 6_100], 10_000, 5_000, P, 0)).toEqual({
      successRatio: { previousPeriod: 2 / 5, currentPeriod: 1 / 5 },
      totalEntitiesCurrentPeriod: 2,
    });
  });
});

describe('the session scheduler', () => {
  it('never schedules a HEARTBEAT check', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'outpost-hb-sched-'));
    const store = await openTestStore(dir);
    try {
      await store.syncLocations(locations);
      await store.syncChecks(
        [storedCheck({ id: 'web', locations: ['lab'] }), { ...storedCheck({ id: 'hb', locations: [] }), checkType: 'HEARTBEAT', capMs: 0 }],
        new Date(),
      );
      const scheduler = new SessionScheduler({ store, logger: pino({ level: 'silent' }), stateDir: dir, retentionDays: 0, startupSpreadMs: 0 });
      await scheduler.start();
      expect(scheduler.scheduled).toEqual(['web']);
      await scheduler.stop();
    } finally {
      await store.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
