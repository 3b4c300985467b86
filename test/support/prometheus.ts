// A real Prometheus server (Debian's `prometheus` package) scraping one
// target every second, with its storage in a temporary directory, and
// promtool for checking metrics text and rule files.

import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { tempDir } from './agent-process.js';
import { onFreePort, READY_DEADLINE_MS, retryUntil, stopEscalating, watchExit } from './daemon.js';
import { findExecutable } from './nginx.js';

export interface Prometheus {
  url: string;
  /** The vector a PromQL instant query returns. */
  query(promql: string): Promise<{ metric: Record<string, string>; value: [number, string] }[]>;
  stop(): Promise<void>;
}

export function promtool(args: string[], input?: string): { status: number | null; stdout: string; stderr: string } {
  const bin = findExecutable('promtool');
  if (!bin) throw new Error('promtool is missing: test/setup/provision.sh installs Debian\'s prometheus package');
  const run = spawnSync(bin, args, { input, encoding: 'utf8', timeout: 60_000 });
  return { status: run.status, stdout: run.stdout, stderr: run.stderr };
}

/** Scrapes `target` (host:port) every second and evaluates `ruleFiles` every second. */
export async function startPrometheus(target: string, ruleFiles: string[] = []): Promise<Prometheus> {
  const bin = findExecutable('prometheus');
  if (!bin) throw new Error('prometheus is missing: test/setup/provision.sh installs Debian\'s prometheus package');
  const dir = tempDir('outpost-prometheus-');
  const config = path.join(dir, 'prometheus.yml');
  writeFileSync(
    config,
    `global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files: ${JSON.stringify(ruleFiles)}
scrape_configs:
  - job_name: outpost
    static_configs:
      - targets: ['${target}']
`,
  );
  return onFreePort(
    async (port) => {
      const child: ChildProcess = spawn(
        bin,
        [`--config.file=${config}`, `--storage.tsdb.path=${path.join(dir, 'data')}`, `--web.listen-address=127.0.0.1:${port}`],
        { stdio: ['ignore', 'ignore', 'pipe'] },
      );
      let log = '';
      child.stderr?.on('data', (chunk: Buffer) => {
        log = (log + chunk.toString('utf8')).slice(-20_000);
      });
      const exit = watchExit(child, 'prometheus', (code, signal) => `prometheus exited (${signal ?? code}): ${log.slice(-2000)}`);
      const url = `http://127.0.0.1:${port}`;
      const ready = await retryUntil(READY_DEADLINE_MS, async () => {
        const ended = exit.description();
        if (ended) throw new Error(ended);
        try {
          return (await fetch(`${url}/-/ready`)).ok;
        } catch {
          return false;
        }
      });
      const stop = () => stopEscalating([['SIGTERM', 10_000], ['SIGKILL', 5_000]], (s) => child.kill(s), exit.exited);
      if (!ready) {
        await stop();
        throw new Error(`prometheus was not ready in time: ${log.slice(-2000)}`);
      }
      return {
        url,
        async query(promql) {
          const res = await fetch(`${url}/api/v1/query?query=${encodeURIComponent(promql)}`);
          const body = (await res.json()) as { status: string; data?: { result: { metric: Record<string, string>; value: [number, string] }[] } };
          if (body.status !== 'success' || !body.data) throw new Error(`query ${promql} failed: ${JSON.stringify(body)}`);
          return body.data.result;
        },
        stop,
      };
    },
    /address already in use/,
    'prometheus',
  );
}
