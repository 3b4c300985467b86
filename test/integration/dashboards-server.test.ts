// Dashboards in the built `outpost server`: a checks file's dashboards and
// incidents are in the store at start and follow the file on a reload
// (POST /-/reload); PUT-created dashboards persist across a restart.

import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AgentProcess, cleanEnv, startAgent, tempDir } from '../support/agent-process.js';
import { READY_DEADLINE_MS } from '../support/daemon.js';

const API_KEY = 'dashboards-server-api-key-01';
const HEARTBEAT_TOKEN = 'nightly-backup-token-4Tq9Wm2';
let stateDir: string;
let file: string;
let server: AgentProcess;
let port: number;

function checksFile(header: string, resolved: boolean) {
  return {
    privateLocations: [{ id: 'lab', name: 'Lab' }],
    checks: [
      { id: 'web', name: 'Web page', checkType: 'API', frequency: 10, tags: ['web'], request: { method: 'GET', url: 'http://127.0.0.1:9/' } },
      { id: 'nightly', name: 'Nightly backup', checkType: 'HEARTBEAT', tags: ['web'], heartbeat: { period: 3600, grace: 60, token: HEARTBEAT_TOKEN } },
    ],
    dashboards: [{ dashboardId: 'wall', customUrl: 'status', header, tags: ['web'], enableIncidents: true }],
    incidents: [
      {
        id: 'incident-1',
        name: 'Web page down',
        impact: 'MAJOR',
        dashboard: 'wall',
        incidentUpdates: [
          { status: 'INVESTIGATING', description: 'Looking.', created_at: new Date(Date.now() - 60_000).toISOString() },
          ...(resolved ? [{ status: 'RESOLVED', description: 'Fixed.', created_at: new Date().toISOString() }] : []),
        ],
      },
    ],
  };
}

async function start(): Promise<void> {
  server = startAgent(['server', file], cleanEnv({ OUTPOST_API_KEY: API_KEY, API_HOST: '127.0.0.1', STATE_DIR: stateDir }));
  const started = await server.waitForLog((l) => l.msg === 'outpost server started', READY_DEADLINE_MS, 'the server to start');
  port = Number(started.apiPort);
}

async function stop(): Promise<void> {
  server.kill('SIGTERM');
  await server.exit;
}

async function get(route: string, init: RequestInit = {}) {
  const response = await fetch(`http://127.0.0.1:${port}${route}`, { ...init, headers: { authorization: `Bearer ${API_KEY}`, ...(init.headers ?? {}) } });
  return { status: response.status, text: await response.text() };
}

/** The status a page shows for a check. */
function statusOf(html: string, checkId: string): string | undefined {
  return new RegExp(`data-check="${checkId}"[\\s\\S]*?data-status="([a-z ]+)"`).exec(html)?.[1];
}

beforeAll(async () => {
  stateDir = tempDir('outpost-dashboards-server-');
  file = path.join(stateDir, 'checks.json');
  writeFileSync(file, JSON.stringify(checksFile('Lab status', false)));
  await start();
});

afterAll(async () => {
  if (server) await stop();
});

describe('dashboards in outpost server', () => {
  it('serves the file’s dashboard and incident, follows a reload, and keeps a PUT dashboard across a restart', { timeout: 120_000 }, async () => {
    const first = await get('/dashboards/status');
    expect(first.status).toBe(200);
    expect(first.text).toContain('<h1>Lab status</h1>');
    expect(first.text).toContain('Web page');
    expect(first.text).toContain('data-active="true"');
    const incident = JSON.parse((await get('/v1/incidents/incident-1')).text);
    expect(incident).toMatchObject({ id: 'incident-1', impact: 'MAJOR', incidentUpdates: [{ status: 'INVESTIGATING' }] });
    // A heartbeat check's status comes from its pings.
    expect(statusOf(first.text, 'nightly')).toBe('no data');
    expect((await fetch(`http://127.0.0.1:${port}/ping/${HEARTBEAT_TOKEN}`)).status).toBe(200);
    const pinged = await get('/dashboards/status');
    expect(statusOf(pinged.text, 'nightly')).toBe('passing');
    expect(pinged.text).toContain('data-location="heartbeat"');
    expect((await get('/v1/dashboards/wall', { method: 'PUT', body: '{}', headers: { 'content-type': 'application/json' } })).status).toBe(409);

    writeFileSync(file, JSON.stringify(checksFile('Lab status, renamed', true)));
    const health = await server.healthPort();
    const reload = await fetch(`http://127.0.0.1:${health}/-/reload`, { method: 'POST' });
    expect(reload.status).toBe(200);
    const second = await get('/dashboards/status');
    expect(second.text).toContain('<h1>Lab status, renamed</h1>');
    expect(second.text).not.toContain('data-active="true"');
    expect(JSON.parse((await get('/v1/incidents/incident-1')).text).incidentUpdates[0].status).toBe('RESOLVED');

    const put = await get('/v1/dashboards/team', { method: 'PUT', body: JSON.stringify({ header: 'Team board', isPrivate: true }), headers: { 'content-type': 'application/json' } });
    expect(put.status).toBe(201);
    const rawKey = JSON.parse(put.text).keys[0].rawKey as string;
    await stop();
    await start();
    expect((await get('/dashboards/team')).status).toBe(401);
    const opened = await get(`/dashboards/team?key=${encodeURIComponent(rawKey)}`);
    expect(opened.status).toBe(200);
    expect(opened.text).toContain('Team board');
    expect((await get('/dashboards/status')).text).toContain('Lab status, renamed');
  });
});
