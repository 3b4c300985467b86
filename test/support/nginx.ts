// A real nginx on loopback for tests and the benchmark: its own temporary
// prefix (config, pid, logs, temp paths), a free port, `daemon off;`, no root
// paths. It does not install nginx: .ci/run and `npm run bench` do that
// (Debian's nginx-light); here a missing binary is a clear error.

import { type ChildProcess, spawn } from 'node:child_process';
import { accessSync, chmodSync, constants, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net, { type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { onFreePort, READY_DEADLINE_MS, stopEscalating, watchExit } from './daemon.js';

export interface Nginx {
  /** Base URL, e.g. http://127.0.0.1:41234 (no trailing slash). */
  url: string;
  port: number;
  /** The temporary prefix holding nginx.conf, the logs and temp paths. */
  dir: string;
  /** Access log (buffered; flushed within 1 s and on stop). */
  accessLog: string;
  pid: number | undefined;
  stop(): Promise<void>;
}

export interface NginxOptions {
  /** Extra directives placed inside the `server { }` block. */
  serverConfig?: string;
  /** Write an access log (default true). */
  accessLog?: boolean;
  /** worker_processes (default 2). */
  workers?: number;
  /** Serve HTTPS with this certificate and key (PEM files). */
  tls?: { cert: string; key: string };
}

const SEARCH_DIRS = ['/usr/sbin', '/usr/local/sbin', '/sbin'];

/** The first executable named `name` on PATH (or in the sbin directories), like `command -v`. */
export function findExecutable(name: string): string | undefined {
  const dirs = [...(process.env.PATH ?? '').split(path.delimiter).filter(Boolean), ...SEARCH_DIRS];
  for (const dir of dirs) {
    const file = path.join(dir, name);
    try {
      accessSync(file, constants.X_OK);
      return file;
    } catch {
      // Not here.
    }
  }
  return undefined;
}

/** A port that was free a moment ago on 127.0.0.1 (the caller retries if it is taken meanwhile). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

function config(dir: string, port: number, options: NginxOptions): string {
  const p = (name: string) => path.join(dir, name);
  return `# Written by test/support/nginx.ts
daemon off;
master_process on;
worker_processes ${options.workers ?? 2};
pid ${p('nginx.pid')};
error_log ${p('error.log')} warn;
events {
  worker_connections 4096;
}
http {
  ${options.accessLog === false ? 'access_log off;' : `access_log ${p('access.log')} combined buffer=64k flush=1s;`}
  client_body_temp_path ${p('tmp/body')};
  proxy_temp_path ${p('tmp/proxy')};
  fastcgi_temp_path ${p('tmp/fastcgi')};
  uwsgi_temp_path ${p('tmp/uwsgi')};
  scgi_temp_path ${p('tmp/scgi')};
  default_type text/plain;
  server {
    listen 127.0.0.1:${port}${options.tls ? ' ssl' : ''};
    server_name localhost;${options.tls ? `
    ssl_certificate ${options.tls.cert};
    ssl_certificate_key ${options.tls.key};` : ''}
    location = /health { return 200 "ok"; }
${options.serverConfig ?? ''}
    location / { return 200 "ok"; }
  }
}
`;
}

/** Resolves once GET /health answers 200, rejects if nginx exits first or `timeoutMs` passes. */
function tcpOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

async function waitUntilServing(port: number, exited: () => string | undefined, timeoutMs: number, tls = false): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let lastError = '';
  while (Date.now() < deadline) {
    const exit = exited();
    if (exit !== undefined) throw new Error(exit);
    try {
      if (tls) {
        // Any TLS certificate will do here; the tests judge the certificate, this only waits for the port.
        if (await tcpOpen(port)) return;
        lastError = 'port not open';
      } else {
        const response = await fetch(`http://127.0.0.1:${port}/health`, { signal: AbortSignal.timeout(1_000) });
        await response.arrayBuffer();
        if (response.status === 200) return;
        lastError = `status ${response.status}`;
      }
    } catch (error) {
      lastError = (error as Error).message;
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`nginx did not answer on 127.0.0.1:${port} within ${timeoutMs} ms (${lastError})`);
}

const running = new Set<ChildProcess>();
let exitHookInstalled = false;

/** The master and its workers (the workers are the master's children). */
function nginxPids(master: number): number[] {
  try {
    const children = readFileSync(`/proc/${master}/task/${master}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
    return [...children, master];
  } catch {
    return [master];
  }
}

function killAll(master: number, signal: NodeJS.Signals): void {
  for (const pid of nginxPids(master)) {
    try {
      process.kill(pid, signal);
    } catch {
      // Already gone.
    }
  }
}

/** A test runner that exits must not leave nginx behind. */
function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once('exit', () => {
    for (const child of running) if (child.pid) killAll(child.pid, 'SIGKILL');
  });
}

async function startOnce(binary: string, port: number, options: NginxOptions): Promise<Nginx> {
  const dir = mkdtempSync(path.join(tmpdir(), 'outpost-nginx-'));
  // Run as root, nginx's workers drop to `nobody`; let them reach the prefix.
  chmodSync(dir, 0o755);
  mkdirSync(path.join(dir, 'tmp'));
  const confFile = path.join(dir, 'nginx.conf');
  writeFileSync(confFile, config(dir, port, options));
  // Not detached: a Ctrl-C to the terminal's process group reaches nginx too.
  const child = spawn(binary, ['-p', `${dir}/`, '-c', confFile], { stdio: ['ignore', 'ignore', 'pipe'] });
  running.add(child);
  installExitHook();
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-4000);
  });
  const { exited, description: exitDescription } = watchExit(
    child,
    'nginx',
    (code, signal) => `nginx exited (code ${code}, signal ${signal}) during start: ${stderr.trim()}`,
    () => running.delete(child),
  );

  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    if (exitDescription() === undefined && child.pid) {
      const pid = child.pid;
      // SIGQUIT: graceful (workers finish their requests, logs are flushed); then harder.
      await stopEscalating(
        [['SIGQUIT', 5_000], ['SIGTERM', 2_000], ['SIGKILL', 2_000]],
        (signal) => (signal === 'SIGKILL' ? killAll(pid, signal) : process.kill(pid, signal)),
        exited,
      );
    }
    rmSync(dir, { recursive: true, force: true });
  };

  try {
    await waitUntilServing(port, exitDescription, READY_DEADLINE_MS, options.tls !== undefined);
  } catch (error) {
    await stop();
    throw error;
  }
  return { url: `${options.tls ? 'https' : 'http'}://127.0.0.1:${port}`, port, dir, accessLog: path.join(dir, 'access.log'), pid: child.pid, stop };
}

/**
 * Starts nginx on 127.0.0.1 at a free port, serving `GET /health` (and every
 * other path) with 200 "ok". Throws if nginx is not installed.
 */
export async function startNginx(options: NginxOptions = {}): Promise<Nginx> {
  const binary = findExecutable('nginx');
  if (!binary) {
    throw new Error('nginx is not installed: apt-get install -y nginx-light (the bench and .ci/run install it; tests do not)');
  }
  // A free port can be taken between the probe and nginx's bind.
  return onFreePort((port) => startOnce(binary, port, options), /Address already in use/i, 'nginx');
}
