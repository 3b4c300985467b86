// What the store tests share: a fixed clock, a check, a session started by
// hand, FINAL results of the service's shape and a dashboard with every field
// (test/unit/store-conformance, sqlite-store, postgres-store, migrate).

import { randomUUID } from 'node:crypto';
import type { DashboardDefinition } from '../../src/core/dashboard.js';
import type { ResultEnvelope } from '../../src/core/protocol.js';
import type { CheckResultEntry } from '../../src/core/result-entry.js';
import type { SessionRecord, Store, StoredCheck } from '../../src/store/store.js';

export const T0 = new Date('2026-11-24T00:00:00.000Z');
export const at = (ms: number) => new Date(T0.getTime() + ms);
export const LEASE = 60_000;

export function check(id: string, overrides: Partial<StoredCheck> = {}): StoredCheck {
  return {
    id,
    name: `check ${id}`,
    checkType: 'API',
    frequencySeconds: 60,
    locations: ['loc-a', 'loc-b'],
    definition: { id, name: `check ${id}`, checkType: 'API', request: { method: 'GET', url: 'https://example.com' } },
    environmentVariables: [{ key: 'K', value: 'v' }],
    runtimeId: null,
    capMs: 30_000,
    ...overrides,
  };
}

/** A session of `c` started at `startMs` with one QUEUED job per location; returns the job ids by location. */
export async function startSession(store: Store, c: StoredCheck, startMs = 0, locations = c.locations, attemptsPerRun?: number) {
  const session: SessionRecord = {
    id: randomUUID(),
    checkId: c.id,
    checkType: c.checkType,
    name: c.name,
    status: 'STARTED',
    runLocations: [...locations],
    triggerSource: 'SCHEDULER',
    startedAt: at(startMs).toISOString(),
    stoppedAt: null,
    durationMs: null,
  };
  const jobs = locations.map((location) => ({
    id: randomUUID(),
    location,
    deadlineAt: at(startMs + c.capMs + 2 * LEASE).toISOString(),
    ...(attemptsPerRun === undefined ? {} : { attemptsPerRun }),
  }));
  await store.createSession(session, jobs, c);
  return { session, jobs: Object.fromEntries(jobs.map((j) => [j.location, j.id])) as Record<string, string> };
}

export function entry(overrides: Partial<CheckResultEntry> = {}): CheckResultEntry {
  return {
    resultType: 'FINAL',
    id: randomUUID(),
    name: 'c',
    checkId: 'c1',
    checkType: 'API',
    hasFailures: false,
    hasErrors: false,
    isDegraded: false,
    overMaxResponseTime: false,
    runLocation: 'loc-a',
    startedAt: T0.toISOString(),
    stoppedAt: at(100).toISOString(),
    created_at: at(100).toISOString(),
    responseTime: 100,
    checkRunId: 1,
    attempts: 1,
    sequenceId: null,
    ...overrides,
  };
}

export function envelope(jobId: string, overrides: Partial<CheckResultEntry> = {}): ResultEnvelope {
  const result = entry(overrides);
  return { jobId, resultId: result.id, result };
}

/** A dashboard definition with every field at the reference's default, but incidents enabled. */
export function dashboard(dashboardId: string, overrides: Partial<DashboardDefinition> = {}): DashboardDefinition {
  return {
    dashboardId,
    customUrl: null,
    customDomain: null,
    logo: null,
    favicon: null,
    link: null,
    description: null,
    header: null,
    width: 'FULL',
    refreshRate: 60,
    paginate: true,
    paginationRate: 60,
    checksPerPage: 15,
    useTagsAndOperator: false,
    hideTags: false,
    enableIncidents: true,
    expandChecks: false,
    tags: [],
    showHeader: true,
    showCheckRunLinks: false,
    showGroupNames: true,
    customCSS: '',
    isPrivate: false,
    showP95: true,
    showP99: true,
    ...overrides,
  };
}
