// A script must not read the agent's secrets nor another job's: the real
// agent (agent mode, the real server, API_KEY and OUTPOST_SECRET_* set)
// runs two MULTI_STEP jobs at once. The victim holds a secret variable and
// waits; the attacker scans /proc for every process's environment (the
// agent's API_KEY, the victim's secret), looks through the temporary
// directory for other runs' files, prints whatever it found hex-encoded (so
// that the scrubber cannot recognise it) and, with a key it found, claims jobs
// as another agent. (Its own environment holds the agent's OUTPOST_SECRET_*:
// they are every job's variables, by design.) The jobLog must hold none of it, in any encoding; the
// attacker must have seen no process but its own run's; the control plane
// must have heard from the real agent only. Twice: the agent as root (a uid
// and namespaces per run) and as an unprivileged user (user namespaces).
// Then the agent where nothing isolates scripts: they are refused, naming the
// reason and SCRIPT_ISOLATION=off, which runs them. (This file runs as root,
// as the CI does: it starts the agent as another user.)

import { chmodSync, chownSync, writeFileSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AgentProcess, cleanEnv, REPO, startAgent, tempDir } from '../support/agent-process.js';
import { ControlPlane } from '../support/control-plane.js';
import { installRuntime, RUNTIME } from '../support/scripted-run.js';

const API_KEY = 'pl_isolation-KEY-5a4b3c2d1e0f';
const AGENT_SECRET = 'agent-side-secret-31337';
const VICTIM_SECRET = 'victim-job-secret-27182';

/** Waits until the attacker has had its look (it says so in a file, if it can write there), at most 12 s. */
const VICTIM_SCRIPT = `await step('hold the secret', async () => {
  const deadline = Date.now() + 12_000;
  while (Date.now() < deadline && !require('node:fs').existsSync(environment.DONE_FILE)) await new Promise((r) => setTimeout(r, 100));
});`;

/**
 * Reads every visible process's environment and every other run folder it can reach, for a while (the
 * victim starts at about the same time), then prints what it found as hex, and claims with a found key.
 */
const ATTACK_SCRIPT = `const fs = require('node:fs');
const path = require('node:path');
const me = process.env.OUTPOST_SCRIPT_RUN;
const found = new Set();
const foreign = new Set();
const look = () => {
  for (const pid of fs.readdirSync('/proc').filter((n) => /^\\d+$/.test(n))) {
    let environ = '';
    let cmdline = '';
    try { cmdline = fs.readFileSync('/proc/' + pid + '/cmdline', 'latin1'); } catch {}
    try { environ = fs.readFileSync('/proc/' + pid + '/environ', 'latin1'); } catch {}
    // Its own processes (they carry its tag, or name its folder) hold its job's variables (the agent's
    // OUTPOST_SECRET_* among them, by design).
    if (environ.includes('OUTPOST_SCRIPT_RUN=' + me + '\\0') || cmdline.includes(me + '\\0')) continue;
    foreign.add(pid);
    for (const pair of environ.split('\\0')) if (/^(API_KEY|OUTPOST_SECRET_|VICTIM_)/.test(pair)) found.add(pair);
  }
  const root = path.dirname(me);
  let names = [];
  try { names = fs.readdirSync(root); } catch {}
  for (const name of names) {
    const dir = path.join(root, name);
    if (dir === me) continue;
    for (const file of ['input.json', 'output.json', 'script.js']) {
      try { found.add('file ' + name + '/' + file + ' ' + fs.readFileSync(path.join(dir, file), 'latin1')); } catch {}
    }
  }
};
await step('look around', async () => {
  const deadline = Date.now() + 8_000;
  while (Date.now() < deadline) {
    look();
    if ([...found].some((f) => f.includes('VICTIM_'))) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  try { fs.writeFileSync(environment.DONE_FILE, 'done'); } catch {}
});
console.log('foreign pids: ' + foreign.size);
for (const f of found) console.log('found ' + Buffer.from(f).toString('hex'));
const key = [...found].find((f) => f.startsWith('API_KEY='));
if (key) {
  const answer = await fetch(environment.CLAIM_URL, {
    method: 'POST',
    headers: { authorization: 'Bearer ' + key.slice(8), 'x-agent-id': environment.THIEF_ID, 'content-type': 'application/json', 'user-agent': 'outpost/thief' },
    body: JSON.stringify({ agent: { id: environment.THIEF_ID }, max: 5, waitSeconds: 0, checkTypes: ['URL'], runtimes: [] }),
  });
  console.log('claimed with the stolen key: HTTP ' + answer.status);
}`;

const hex = (text: string) => Buffer.from(text).toString('hex');

/** An unprivileged user for the agent: what the images' uid 10001 is. */
const NOBODY = 65534;
const AS_NOBODY = ['/usr/bin/setpriv', `--reuid=${NOBODY}`, `--regid=${NOBODY}`, '--clear-groups', '--'];

/** A folder the agent, whoever it runs as, may write. */
function agentDir(prefix: string): string {
  const dir = tempDir(prefix);
  chownSync(dir, NOBODY, NOBODY);
  return dir;
}

for (const variant of [
  { as: 'root', prefix: [] as string[], mechanism: 'uid-pidns' },
  { as: 'an unprivileged user', prefix: AS_NOBODY, mechanism: 'userns' },
]) {
  describe(`script isolation, the agent running as ${variant.as}: a script cannot read the agent's nor another job's secrets`, () => {
    let cp: ControlPlane;
    let agent: AgentProcess;
    const thiefId = randomUUID();
    let attackerId = '';
    let victimId = '';
    let attackLog: string[] = [];
    let overlapped = false;

    beforeAll(async () => {
      await installRuntime();
      cp = await ControlPlane.start({ apiKey: API_KEY, leaseMs: 120_000 });
      const doneDir = tempDir('outpost-isolation-done-');
      chmodSync(doneDir, 0o777);
      const doneFile = path.join(doneDir, 'done');
      const shared = [
        { key: 'DONE_FILE', value: doneFile, secret: false },
        { key: 'CLAIM_URL', value: `${cp.url}/v1/agent/claim`, secret: false },
        { key: 'THIEF_ID', value: thiefId, secret: false },
      ];
      victimId = await cp.addJob(
        { id: 'victim', name: 'victim', checkType: 'MULTI_STEP', runtimeId: RUNTIME, maxResponseTime: 90_000, script: VICTIM_SCRIPT },
        { environmentVariables: [...shared, { key: 'VICTIM_TOKEN', value: VICTIM_SECRET, secret: true }] },
      );
      attackerId = await cp.addJob(
        { id: 'attacker', name: 'attacker', checkType: 'MULTI_STEP', runtimeId: RUNTIME, maxResponseTime: 90_000, script: ATTACK_SCRIPT },
        { environmentVariables: shared },
      );
      agent = startAgent(
        ['agent'],
        cleanEnv({
          API_URL: cp.url,
          API_KEY,
          OUTPOST_SECRET_AGENT: AGENT_SECRET,
          STATE_DIR: agentDir('outpost-isolation-state-'),
          // A temporary directory of its own: userns hides the agent's TMPDIR from scripts, which it cannot do
          // when TMPDIR holds Node or the runtime (a checkout under /tmp, as CI's may be; docs/script-isolation.md).
          TMPDIR: agentDir('outpost-isolation-tmp-'),
          RUNTIMES_DIR: path.join(REPO, 'runtimes'),
          JOB_CONCURRENCY: '2',
          SCRIPT_CONCURRENCY: '2',
          CLAIM_WAIT_SECONDS: '1',
        }),
        variant.prefix,
      );
      await cp.waitFor(() => cp.resultsFor(attackerId).length > 0 && cp.resultsFor(victimId).length > 0, 150_000, 'both jobs to report');
      const detail = cp.resultsFor(attackerId)[0]?.result.multiStepCheckResult as { jobLog: string[] } | undefined;
      attackLog = detail?.jobLog ?? [];
      const [victim, attacker] = [cp.resultsFor(victimId)[0]?.result, cp.resultsFor(attackerId)[0]?.result];
      overlapped = !!victim && !!attacker && victim.startedAt < attacker.stoppedAt && attacker.startedAt < victim.stoppedAt;
    }, 180_000);

    afterAll(async () => {
      agent?.kill('SIGTERM');
      await agent?.exit;
      await cp?.close();
    });

    it(`isolates scripts with ${variant.mechanism}, and says so at start`, () => {
      expect(agent.logs.find((line) => line.scriptIsolation !== undefined)).toMatchObject({ scriptIsolation: variant.mechanism });
    });

    it('the attacker ran while the victim held its secret, and says what it saw', () => {
      expect(attackLog.filter((line) => line.startsWith('foreign pids: ')), attackLog.join('\n')).toHaveLength(1);
      expect(overlapped).toBe(true);
    });

    it("sees no process but its own run's", () => {
      expect(attackLog).toContain('foreign pids: 0');
    });

    it("finds not the agent's API_KEY, raw or hex-encoded, nor anything in another process or run folder", () => {
      const text = attackLog.join('\n');
      expect(text).not.toContain(API_KEY);
      expect(text).not.toContain(hex(API_KEY));
      expect(attackLog.filter((line) => line.startsWith('found '))).toEqual([]);
    });

    it("finds not the other job's secret", () => {
      const text = attackLog.join('\n');
      expect(text).not.toContain(VICTIM_SECRET);
      expect(text).not.toContain(hex(VICTIM_SECRET));
    });

    it('cannot act as the agent: the control plane hears from one agent only', () => {
      expect(attackLog.join('\n')).not.toContain('claimed with the stolen key');
      expect(cp.requests.filter((r) => r.agentId === thiefId)).toEqual([]);
    });
  });
}

describe('where nothing isolates scripts (an unprivileged agent without unshare)', () => {
  // unshare replaced by /bin/false in a mount namespace of the agent's own: user namespaces cannot be made.
  const WITHOUT_UNSHARE = ['/usr/bin/unshare', '--mount', '--', '/bin/sh', '-c', 'mount --bind /bin/false /usr/bin/unshare && exec "$@"', 'sh', ...AS_NOBODY];
  const runOnce = async (checks: unknown[], extra: Record<string, string> = {}) => {
    const dir = agentDir('outpost-isolation-none-');
    const file = path.join(dir, 'checks.json');
    writeFileSync(file, JSON.stringify({ checks }));
    const proc = startAgent(['once', file], cleanEnv({ STATE_DIR: path.join(dir, 'state'), RUNTIMES_DIR: path.join(REPO, 'runtimes'), ...extra }), WITHOUT_UNSHARE);
    const { code } = await proc.exit;
    const results = proc.stdoutLines.filter((line) => line.startsWith('{"resultType":"FINAL"')).map((line) => JSON.parse(line) as Record<string, unknown>);
    return { code, stderr: proc.stderr(), results };
  };
  const multiStep = { id: 'multi', checkType: 'MULTI_STEP', runtimeId: RUNTIME, script: "await step('one', async () => {});" };

  it('refuses a MULTI_STEP check at start, naming the reason and the opt-in', async () => {
    const { code, stderr } = await runOnce([multiStep]);
    expect(code).toBe(78);
    expect(stderr).toContain('scripts cannot be isolated from the agent here');
    expect(stderr).toContain('SCRIPT_ISOLATION=off');
    expect(stderr).toContain('userns: ');
  }, 60_000);

  it("refuses an API check's setup script with an error result naming the reason and the opt-in", async () => {
    const api = { id: 'api', checkType: 'API', request: { url: 'http://127.0.0.1:9/' }, setupScript: "request.headers['X'] = '1';" };
    const { results } = await runOnce([api]);
    const detail = results[0]?.apiCheckResult as { requestError: string } | undefined;
    expect(results[0]).toMatchObject({ hasErrors: true });
    expect(detail?.requestError).toMatch(/^setupScript was not run: scripts cannot be isolated from the agent here.*SCRIPT_ISOLATION=off/);
  }, 60_000);

  it('runs scripts when the operator opts in with SCRIPT_ISOLATION=off', async () => {
    const { code, results, stderr } = await runOnce([multiStep], { SCRIPT_ISOLATION: 'off' });
    expect(stderr).toContain('SCRIPT_ISOLATION=off: scripts can read');
    expect(results[0]).toMatchObject({ hasErrors: false, hasFailures: false });
    expect(code).toBe(0);
  }, 60_000);
});
