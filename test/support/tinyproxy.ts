// A real forward proxy (tinyproxy) on loopback, whose log shows which
// requests went through it.

import { type ChildProcess, spawn } from 'node:child_process';
import { chmodSync, readFileSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { tempDir } from './agent-process.js';
import { READY_DEADLINE_MS } from './daemon.js';
import { findExecutable, freePort } from './nginx.js';

export interface Tinyproxy {
  url: string;
  log(): string;
  stop(): Promise<void>;
}

async function listening(port: number, deadline: number): Promise<void> {
  while (Date.now() < deadline) {
    const ok = await new Promise<boolean>((resolve) => {
      const socket = net.connect(port, '127.0.0.1', () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
    if (ok) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`tinyproxy did not listen on 127.0.0.1:${port}`);
}

export async function startTinyproxy(): Promise<Tinyproxy> {
  const binary = findExecutable('tinyproxy');
  if (!binary) throw new Error('tinyproxy is not installed: apt-get install -y tinyproxy (.ci/run installs it)');
  const dir = tempDir('outpost-tinyproxy-');
  // tinyproxy drops to `nobody` when started as root; it must still write its log.
  chmodSync(dir, 0o777);
  const port = await freePort();
  const logFile = path.join(dir, 'tinyproxy.log');
  writeFileSync(
    path.join(dir, 'tinyproxy.conf'),
    // No ConnectPort line: CONNECT is allowed to any port (the TLS targets use random ports).
    `Port ${port}\nListen 127.0.0.1\nTimeout 60\nLogFile "${logFile}"\nLogLevel Info\nMaxClients 50\nAllow 127.0.0.1\nDisableViaHeader No\n`,
  );
  const child: ChildProcess = spawn(binary, ['-d', '-c', path.join(dir, 'tinyproxy.conf')], { stdio: 'ignore' });
  await listening(port, Date.now() + READY_DEADLINE_MS);
  return {
    url: `http://127.0.0.1:${port}`,
    log: () => {
      try {
        return readFileSync(logFile, 'utf8');
      } catch {
        return '';
      }
    },
    stop: async () => {
      if (child.exitCode !== null) return;
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await exited;
    },
  };
}
