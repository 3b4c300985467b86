// The health server and what it says: credentials in API_URL never shown.

import { describe, expect, it } from 'vitest';
import { probe } from '../support/agent-process.js';
import { useHarness } from '../support/harness.js';

const h = useHarness();

describe('API_URL credentials', () => {
  it('are masked in every log line and absent from /health', async () => {
    const cp = await h.controlPlane();
    const apiUrl = cp.url.replace('http://', 'http://cp-user:cp-pass-5ecret@');
    const proc = h.start(['agent'], { API_URL: apiUrl, API_KEY: cp.apiKey, CLAIM_WAIT_SECONDS: '1' });
    const port = await proc.healthPort();
    const started = await proc.waitForLog((l) => l.msg === 'outpost agent started', 15_000, 'the start line');
    // The URL stays useful in the log: scheme, host and port, with the userinfo masked.
    expect(started.apiUrl).toBe(cp.url.replace('http://', 'http://*****@'));
    await cp.waitFor(() => cp.claims.length > 0, 15_000, 'a claim through the URL with credentials');
    const health = await probe(port, '/health');
    expect(health.status).toBe(200);
    for (const text of [proc.stdout(), proc.stderr(), health.text]) {
      expect(text).not.toContain('cp-pass-5ecret');
      expect(text).not.toContain('cp-user');
    }
  });
});
