// The health server (src/health/server.ts): its error bodies never repeat
// what the request said, so a check aimed at the agent's own health port
// cannot have a secret in its URL echoed back into its result.

import http from 'node:http';
import { Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import { HEALTH_MAX_CONNECTIONS_PER_ADDRESS, startHealthServer } from '../../src/health/server.js';
import { idleConnections, rawRequest } from '../support/raw-request.js';

const source = {
  isReady: () => true,
  status: () => ({ version: 'test', mode: 'agent', ready: true, shuttingDown: false, inFlight: 0, queued: 0, spooled: 0, quarantined: 0, spoolDropped: 0, spoolWritable: true, uptime: 1, stuck: [], components: {} }),
  registry: new Registry(),
};

let close: (() => Promise<void>) | undefined;
afterEach(async () => {
  await close?.();
  close = undefined;
});

function request(port: number, method: string, path: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method, path }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('health server error bodies', () => {
  it('answers an unknown path with a fixed message that does not repeat the path', async () => {
    const server = await startHealthServer(0, source, '127.0.0.1');
    close = server.close;
    const path = '/x-tok:<s3cr3t-V4lue-in-the-path>?q=also-secret';
    const res = await request(server.port, 'GET', path);
    expect(res.status).toBe(404);
    expect(res.body).not.toContain('s3cr3t');
    expect(res.body).not.toContain('x-tok');
    expect(res.body).not.toContain('also-secret');
    expect(JSON.parse(res.body)).toMatchObject({ statusCode: 404, message: 'No such route' });
  });

  it('names only the method and the known route in a 405', async () => {
    const server = await startHealthServer(0, source, '127.0.0.1');
    close = server.close;
    const res = await request(server.port, 'DELETE', '/health?token=s3cr3t-V4lue');
    expect(res.status).toBe(405);
    expect(res.body).not.toContain('s3cr3t');
    expect(JSON.parse(res.body)).toMatchObject({ statusCode: 405, message: 'DELETE not allowed on /health' });
    expect((await request(server.port, 'GET', '/health')).status).toBe(200);
  });
});

describe('health server connections per address', () => {
  it('keeps room for a probe from another address while one address holds its share, and tells of the refusal', async () => {
    const refused: string[] = [];
    const server = await startHealthServer(0, { ...source, onRefusedConnection: (address) => refused.push(address) }, '127.0.0.1');
    close = server.close;
    const held = await idleConnections(server.port, '127.0.0.1', HEALTH_MAX_CONNECTIONS_PER_ADDRESS);
    try {
      const probe = 'GET /-/readiness HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n';
      // One more from the flooding address is closed at accept, unanswered (without the cap: 200).
      expect(await rawRequest(server.port, '127.0.0.1', probe)).toBe('');
      // The kubelet's address (another one) is served.
      expect(await rawRequest(server.port, '127.0.0.2', probe)).toMatch(/^HTTP\/1\.1 200 /);
      expect(refused).toEqual(['127.0.0.1']);
    } finally {
      for (const socket of held) socket.destroy();
    }
  });
});
