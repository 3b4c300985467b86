// What the real agent offers and says at start, against the real server
// (test/support/control-plane.ts): the check types and runtimes it claims for
// (--uptime-only, no Chromium, runtimes without their packages), and the one
// line for an API_URL that is no control plane's. Start-up behaviour, so these
// run once, not again with check workers or on PostgreSQL as agent-mode.test.ts does.

import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { probe, tempDir } from '../support/agent-process.js';
import { useHarness } from '../support/harness.js';

const h = useHarness();

function urlCheck(url: string) {
  return { id: `check-${Math.random().toString(36).slice(2, 8)}`, name: 'test check', checkType: 'URL', request: { url } };
}

/** A RUNTIMES_DIR holding each runtime's record only: one naming no packages counts as installed, one naming some is not installed. */
function runtimesDirWith(runtimes: Array<{ name: string; dependencies: Record<string, string> }>): string {
  const dir = tempDir('outpost-runtimes-');
  for (const { name, dependencies } of runtimes) {
    mkdirSync(path.join(dir, name));
    const record = { name, multiStepSupport: true, nodeJsVersion: '24', stage: 'CURRENT', runtimeEndOfLife: '04/30/2099', description: 'test', dependencies };
    writeFileSync(path.join(dir, name, 'runtime.json'), JSON.stringify(record));
  }
  return dir;
}

describe('what the agent offers and says at start', () => {
  it('advertises and runs only the uptime types with --uptime-only', async () => {
    const cp = await h.server();
    const url = await cp.addJob(urlCheck(`${h.target.url}/ok`));
    const proc = h.start(['agent', '--uptime-only'], { API_URL: cp.url, API_KEY: cp.apiKey, CLAIM_WAIT_SECONDS: '1' });
    await cp.waitFor(() => cp.resultsFor(url).length === 1, 15_000, 'the URL result');
    for (const claim of cp.claims) {
      expect(claim.checkTypes).toEqual(['URL', 'API', 'TCP', 'ICMP', 'DNS']);
      expect(claim.runtimes).toEqual([]);
    }
    // A scripted job is never handed to it; a control plane that did would get an error result naming the types.
    const scripted = await cp.addJob({ id: 'ms', checkType: 'MULTI_STEP', script: 'x' });
    await new Promise((r) => setTimeout(r, 1_500));
    expect(cp.jobs.get(scripted)?.claims).toBe(0);
    cp.handsOutUnadvertisedTypes = true;
    await cp.waitFor(() => cp.resultsFor(scripted).length === 1, 15_000, 'the error result of the scripted job');
    const [stored] = cp.resultsFor(scripted);
    expect(stored?.result.hasErrors).toBe(true);
    expect(JSON.stringify(stored?.result)).toContain(
      'MULTI_STEP is not supported by this agent (supported: URL, API, TCP, ICMP, DNS): this agent runs with --uptime-only (URL, API, TCP, DNS and ICMP checks only)',
    );
    expect(proc.proc.exitCode).toBeNull();
  });

  it('answers a BROWSER job with a clear error result when it has no Chromium', async () => {
    const cp = await h.server();
    cp.handsOutUnadvertisedTypes = true;
    const proc = h.agent(cp, { BROWSER_PATH: '/nonexistent/chromium', RUNTIMES_DIR: runtimesDirWith([{ name: 'bare', dependencies: {} }]) });
    const browser = await cp.addJob({ id: 'page', checkType: 'BROWSER', script: 'x' });
    await cp.waitFor(() => cp.resultsFor(browser).length === 1, 15_000, 'the error result');
    const [stored] = cp.resultsFor(browser);
    expect(stored?.result.hasErrors).toBe(true);
    expect(JSON.stringify(stored?.result)).toMatch(/BROWSER is not supported by this agent \(supported: [A-Z_, ]+\): no Chromium to run it: BROWSER_PATH \(\/nonexistent\/chromium\) does not exist/);
    expect(cp.claims.every((c) => !c.checkTypes.includes('BROWSER') && !c.checkTypes.includes('PLAYWRIGHT'))).toBe(true);
    expect(proc.proc.exitCode).toBeNull();
  });

  it('offers no scripted type for a runtime whose packages are not installed, and says so once', async () => {
    const cp = await h.server();
    // A Chromium is "there" (any existing file will do: nothing is launched), so only the runtime decides.
    const proc = h.agent(cp, { RUNTIMES_DIR: runtimesDirWith([{ name: 'unpacked', dependencies: { 'left-pad': '1.3.0' } }]), BROWSER_PATH: process.execPath });
    const url = await cp.addJob(urlCheck(`${h.target.url}/ok`));
    await cp.waitFor(() => cp.resultsFor(url).length === 1, 15_000, 'the URL result');
    expect(cp.claims.length).toBeGreaterThan(0);
    for (const claim of cp.claims) {
      expect(claim.checkTypes).toEqual(['URL', 'API', 'TCP', 'ICMP', 'DNS']);
      expect(claim.runtimes).toEqual([]);
    }
    const said = proc.logs.filter((l) => String(l.msg).includes('present but its packages are not installed'));
    expect(said).toHaveLength(1);
    expect(said[0]?.level).toBe(40);
    expect(said[0]?.msg).toContain('runtime unpacked in');
    expect(said[0]?.msg).toContain('MULTI_STEP, BROWSER and PLAYWRIGHT checks are not offered in claims');
    expect(said[0]?.notInstalled).toEqual([expect.objectContaining({ runtime: 'unpacked', missing: ['left-pad'] })]);
    // A control plane that hands one out all the same gets an error result saying why.
    cp.handsOutUnadvertisedTypes = true;
    const scripted = await cp.addJob({ id: 'ms', checkType: 'MULTI_STEP', script: 'x' });
    await cp.waitFor(() => cp.resultsFor(scripted).length === 1, 15_000, 'the error result of the scripted job');
    expect(JSON.stringify(cp.resultsFor(scripted)[0]?.result)).toContain('has its packages installed (unpacked: run npm ci --ignore-scripts');
    expect(proc.proc.exitCode).toBeNull();
  });

  it('offers the scripted types and only the installed runtimes when one of several is installed', async () => {
    const cp = await h.server();
    const dir = runtimesDirWith([
      { name: 'bare', dependencies: {} },
      { name: 'unpacked', dependencies: { 'left-pad': '1.3.0' } },
    ]);
    const proc = h.agent(cp, { RUNTIMES_DIR: dir, BROWSER_PATH: process.execPath });
    const url = await cp.addJob(urlCheck(`${h.target.url}/ok`));
    await cp.waitFor(() => cp.resultsFor(url).length === 1, 15_000, 'the URL result');
    for (const claim of cp.claims) {
      expect(claim.checkTypes).toEqual(expect.arrayContaining(['MULTI_STEP', 'BROWSER']));
      expect(claim.runtimes).toEqual(['bare']);
    }
    const said = proc.logs.filter((l) => String(l.msg).includes('present but its packages are not installed'));
    expect(said.map((l) => l.msg)).toEqual([expect.stringContaining('so it is not offered in claims (offered: bare)')]);
  });

  it('says once, without a stack trace, that an API_URL ending in /v1 has no claim route, and keeps trying', async () => {
    const cp = await h.server();
    const proc = h.agent(cp, { API_URL: `${cp.url}/v1` });
    const port = await proc.healthPort();
    const noRoute = (l: { msg?: unknown }) => String(l.msg).includes('has no claim route');
    const line = await proc.waitForLog(noRoute, 15_000, 'the no-claim-route line');
    expect(line.level).toBe(50);
    expect(line.msg).toBe(
      `the control plane has no claim route at ${cp.url}/v1/v1/agent/claim (HTTP 404 (Not Found: no route POST /v1/v1/agent/claim)): API_URL must be the control plane's base URL, without /v1 (${cp.url}); retrying every 5 s`,
    );
    expect(JSON.stringify(line)).not.toContain('stack');
    // Another refused claim (5 s later) adds no line, and the agent stays up but not ready.
    await cp.waitFor(() => cp.requests.filter((r) => r.status === 404).length >= 2, 30_000, 'a second refused claim');
    expect(proc.logs.filter(noRoute)).toHaveLength(1);
    expect(proc.logs.filter((l) => l.level !== undefined && Number(l.level) >= 50)).toHaveLength(1);
    expect((await probe(port, '/-/readiness')).status).toBe(503);
    expect(proc.proc.exitCode).toBeNull();
  });

  it('says the health port is no claim route either, naming the base URL it needs', async () => {
    const cp = await h.server();
    const healthPort = await (async () => {
      const other = h.agent(cp);
      return other.healthPort();
    })();
    const proc = h.agent(cp, { API_URL: `http://127.0.0.1:${healthPort}` });
    const line = await proc.waitForLog((l) => String(l.msg).includes('has no claim route'), 15_000, 'the no-claim-route line');
    expect(line.msg).toContain(`has no claim route at http://127.0.0.1:${healthPort}/v1/agent/claim (HTTP 404 (`);
    expect(line.msg).toContain("API_URL must be the control plane's base URL (where its API listens, without /v1), not another service or port");
  });
});
