// GET /v1/static-ipv6s.txt end to end: the built `outpost server` on this
// host, and the built agent in a network namespace whose interface has a
// unique-local and a global (documentation-range) IPv6 address besides its
// link-local one. The agent reports its host's addresses with its claims;
// the server lists the two that can be a source of check traffic, and not
// the link-local one. Needs root (ip netns).

import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type AgentProcess, cleanEnv, startAgent, tempDir } from '../support/agent-process.js';
import { READY_DEADLINE_MS, retryUntil } from '../support/daemon.js';
import { HOST, NetLab, type Netns } from '../support/netns.js';
import { apiCall, serverReady, startServerProcess } from '../support/server-process.js';

const API_KEY = 'static-ipv6s-test-public-key';
const ULA = 'fd7e:5a17:1::2';
const GLOBAL = '2001:db8:5a17::2';

let lab: NetLab;
let ns: Netns;
let subnet: string;
let agentSide: string;
let server: AgentProcess | undefined;
let agent: AgentProcess | undefined;

beforeAll(() => {
  lab = new NetLab();
  ns = lab.namespace();
  subnet = lab.subnet();
  agentSide = lab.link(HOST, `${subnet}.1/24`, ns, `${subnet}.2/24`).b;
  ns.addAddress(agentSide, `${ULA}/64`);
  ns.addAddress(agentSide, `${GLOBAL}/64`);
});

afterAll(async () => {
  for (const proc of [agent, server]) {
    if (!proc) continue;
    proc.kill('SIGKILL');
    await proc.exit;
  }
  lab?.destroy();
});

it('lists the IPv6 addresses an agent in another network reports with its claims', async () => {
  const dir = tempDir('outpost-static-ipv6s-');
  const checksFile = path.join(dir, 'checks.json');
  writeFileSync(
    checksFile,
    JSON.stringify({
      privateLocations: [{ id: 'lab', name: 'Lab' }],
      checks: [{ id: 'tcp', checkType: 'TCP', frequency: 86_400, request: { hostname: '127.0.0.1', port: 9 } }],
    }),
  );
  // On every address, so that the agent reaches it over the veth and the test over loopback.
  server = startServerProcess({ checksFile, stateDir: path.join(dir, 'state'), apiKey: API_KEY, env: { API_HOST: '0.0.0.0' } });
  const port = await serverReady(server);
  const empty = await apiCall(port, API_KEY, 'GET', '/v1/static-ipv6s.txt');
  expect(empty.status).toBe(200);
  const key = await apiCall(port, API_KEY, 'POST', '/v1/private-locations/lab/keys');
  expect(key.status).toBe(201);
  const rawKey = (key.body as { rawKey: string }).rawKey;

  agent = startAgent(
    ['agent'],
    cleanEnv({ API_URL: `http://${subnet}.1:${port}`, API_KEY: rawKey, STATE_DIR: path.join(dir, 'agent'), CLAIM_WAIT_SECONDS: '1' }),
    ns.argv([]),
  );
  let text = '';
  const listed = await retryUntil(READY_DEADLINE_MS, async () => {
    const response = await fetch(`http://127.0.0.1:${port}/v1/static-ipv6s.txt`, { headers: { authorization: `Bearer ${API_KEY}` } });
    text = await response.text();
    return text.includes(ULA) && text.includes(GLOBAL);
  });
  expect(listed, `the list stayed ${JSON.stringify(text)}; agent stderr: ${agent.stderr().slice(-2000)}`).toBe(true);
  expect(text).toBe(`${GLOBAL}\n${ULA}\n`);
});
