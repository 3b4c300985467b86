import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { ClaimRefusals, describeRefusal, REFUSAL_REPEAT_MS } from '../../src/control-plane/claim-refusals.js';
import { ControlPlaneError } from '../../src/control-plane/client.js';

const ROUTE = '/v1/agent/claim';
const notFound = (path: string) => new ControlPlaneError('claim', 'fatal', `claim: HTTP 404 (Not Found: no route POST ${path})`, 404);

function capture() {
  const lines: Array<Record<string, unknown> & { msg: string; level: number }> = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => lines.push(JSON.parse(line) as (typeof lines)[number]) });
  return { logger, lines };
}

describe('describeRefusal', () => {
  it('names the claim URL and the base URL without the doubled /v1', () => {
    const refusal = describeRefusal(notFound('/v1/v1/agent/claim'), 'http://cp.example:8080/v1/v1/agent/claim', ROUTE, 5_000);
    expect(refusal.message).toBe(
      "the control plane has no claim route at http://cp.example:8080/v1/v1/agent/claim (HTTP 404 (Not Found: no route POST /v1/v1/agent/claim)): API_URL must be the control plane's base URL, without /v1 (http://cp.example:8080); retrying every 5 s",
    );
    expect(refusal.fields).not.toHaveProperty('err');
  });

  it('keeps user and password out of the line', () => {
    const refusal = describeRefusal(notFound('/x'), 'https://user:pw@cp.example/api/v1/agent/claim', ROUTE, 5_000);
    expect(refusal.message).not.toContain('pw');
    expect(refusal.message).toContain("at https://cp.example/api/v1/agent/claim (HTTP 404 (Not Found: no route POST /x)): API_URL must be the control plane's base URL (where its API listens, without /v1)");
  });

  it('takes 405 as no claim route, another refusal as a refusal, and a fault of the agent with its stack', () => {
    const wrongMethod = new ControlPlaneError('claim', 'fatal', 'claim: HTTP 405 (HTTP 405)', 405);
    expect(describeRefusal(wrongMethod, 'http://h/v1/agent/claim', ROUTE, 5_000).message).toContain('has no claim route at http://h/v1/agent/claim');
    const bad = new ControlPlaneError('claim', 'fatal', 'claim: HTTP 400 (bad_request: max must be 1-100)', 400);
    expect(describeRefusal(bad, 'http://h/v1/agent/claim', ROUTE, 5_000).message).toBe('claim refused (claim: HTTP 400 (bad_request: max must be 1-100)); retrying every 5 s');
    expect(describeRefusal(new TypeError('boom'), 'http://h/v1/agent/claim', ROUTE, 5_000).fields.err).toBeInstanceOf(TypeError);
  });
});

describe('ClaimRefusals', () => {
  it('says a lasting refusal once, then once per repeat interval with a count, and says when claims go through again', () => {
    let now = Date.UTC(2026, 0, 1);
    const { logger, lines } = capture();
    const refusals = new ClaimRefusals(logger, () => now);
    const refusal = describeRefusal(notFound('/v1/v1/agent/claim'), 'http://h/v1/v1/agent/claim', ROUTE, 5_000);
    // Every 5 s for just under the repeat interval: one line.
    for (let at = 0; at < REFUSAL_REPEAT_MS; at += 5_000) {
      refusals.refused(refusal);
      now += 5_000;
    }
    expect(lines).toHaveLength(1);
    refusals.refused(refusal);
    expect(lines).toHaveLength(2);
    const claims = REFUSAL_REPEAT_MS / 5_000 + 1;
    expect(lines[1]).toMatchObject({ level: 50, refusals: claims, since: '2026-01-01T00:00:00.000Z' });
    expect(lines[1]?.msg).toBe(`${refusal.message} (still: ${claims} claims refused since 2026-01-01T00:00:00.000Z)`);
    // Another refusal is new: said at once.
    refusals.refused(describeRefusal(new ControlPlaneError('claim', 'fatal', 'claim: HTTP 400 (x)', 400), 'http://h/v1/agent/claim', ROUTE, 5_000));
    expect(lines).toHaveLength(3);
    refusals.accepted();
    expect(lines[3]).toMatchObject({ level: 30, msg: 'claims accepted again after 1 refused' });
    refusals.accepted();
    expect(lines).toHaveLength(4);
  });
});
