// Debian's prometheus-blackbox-exporter on loopback, as the peer the agent is
// measured against: a temporary config with `http_2xx`, `tcp_connect` and `dns`
// modules, a free port, stopped (and its directory removed) by `stop()`.
//
// Its HTTP prober builds a new client per probe with keep-alives disabled, so
// every probe opens a fresh connection to the target, as the agent's URL check
// does. Its TCP prober connects and, with no query_response, closes: the
// agent's connect-only TCP check. Its DNS prober sends one query (the target is
// host:port) and passes on the rcodes listed, as the agent's DNS check without
// assertions passes on NOERROR only.

import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { onFreePort, stopEscalating, watchExit } from '../support/daemon.js';

export interface Blackbox {
  url: string;
  port: number;
  pid: number;
  /** Exits (or fails to start) are described here once they happen. */
  exited(): string | undefined;
  stop(): Promise<void>;
}

export interface BlackboxOptions {
  /** query_name of the `dns` module (an A query over UDP, NOERROR expected). */
  dnsQueryName?: string;
}

/**
 * The same semantics the agent's checks have. http_2xx: GET, IPv4, 2xx, redirects followed, 10 s
 * timeout (ours: 30 s cap). tcp_connect: connect only, IPv4. dns: one A query over UDP, IPv4, NOERROR.
 */
const config = (options: BlackboxOptions) => `modules:
  http_2xx:
    prober: http
    timeout: 10s
    http:
      method: GET
      valid_status_codes: []
      preferred_ip_protocol: ip4
      ip_protocol_fallback: false
      follow_redirects: true
  tcp_connect:
    prober: tcp
    timeout: 10s
    tcp:
      preferred_ip_protocol: ip4
      ip_protocol_fallback: false
  dns:
    prober: dns
    timeout: 5s
    dns:
      query_name: ${JSON.stringify(options.dnsQueryName ?? 'www.outpost.test')}
      query_type: A
      transport_protocol: udp
      valid_rcodes: [NOERROR]
      preferred_ip_protocol: ip4
      ip_protocol_fallback: false
`;

async function waitUntilServing(port: number, exited: () => string | undefined, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let lastError = '';
  while (Date.now() < deadline) {
    const exit = exited();
    if (exit !== undefined) throw new Error(exit);
    try {
      const response = await fetch(`http://127.0.0.1:${port}/metrics`, { signal: AbortSignal.timeout(1_000) });
      await response.arrayBuffer();
      if (response.status === 200) return;
      lastError = `status ${response.status}`;
    } catch (error) {
      lastError = (error as Error).message;
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`blackbox exporter did not answer on 127.0.0.1:${port} within ${timeoutMs} ms (${lastError})`);
}

export async function startBlackbox(binary: string, options: BlackboxOptions = {}): Promise<Blackbox> {
  return onFreePort((port) => startOnce(binary, port, options), /address already in use/i, 'blackbox exporter');
}

async function startOnce(binary: string, port: number, options: BlackboxOptions): Promise<Blackbox> {
  const dir = mkdtempSync(path.join(tmpdir(), 'outpost-blackbox-'));
  const configFile = path.join(dir, 'blackbox.yml');
  writeFileSync(configFile, config(options));
  const child: ChildProcess = spawn(
    binary,
    [`--config.file=${configFile}`, `--web.listen-address=127.0.0.1:${port}`, '--log.level=warn', '--history.limit=10'],
    { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-4000);
  });
  const { exited, description: exitDescription } = watchExit(
    child,
    'blackbox exporter',
    (code, signal) => `blackbox exporter exited (code ${code}, signal ${signal}): ${stderr.trim()}`,
  );
  const killOnExit = () => child.kill('SIGKILL');
  process.once('exit', killOnExit);
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    process.removeListener('exit', killOnExit);
    if (exitDescription() === undefined) {
      await stopEscalating([['SIGTERM', 5_000], ['SIGKILL', 2_000]], (signal) => child.kill(signal), exited);
    }
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await waitUntilServing(port, exitDescription, 10_000);
  } catch (error) {
    await stop();
    throw error;
  }
  return { url: `http://127.0.0.1:${port}`, port, pid: child.pid as number, exited: exitDescription, stop };
}
