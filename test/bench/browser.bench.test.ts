// `npm run bench`: what Outpost's script runner costs a BROWSER
// check. The same page script (launch Chromium, open a page served here,
// click, read the text, close) runs ROUNDS times each way, alternating:
//
//   bare:  `node script.cjs` with the runtime's playwright-core, launching
//          /usr/bin/chromium with the same flags: the peer;
//   agent: runScript({kind: 'BROWSER'}) as the executor calls it: a fresh
//          temporary folder, the harness, its watchdog thread, every context
//          recording a HAR, the scan for the run's leftover processes, the
//          folder removed;
//   agent, failing: the same script failing its last check, so the harness
//          also screenshots the page and keeps the HAR.
//
// It prints the median and spread of each (wall clock, spawn to exit) and the
// ratio agent / bare. It asserts only that each run did what it should.

import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { cpus, loadavg } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { expect, test } from 'vitest';
import { ArtifactWriter } from '../../src/artifacts/writer.js';
import type { ExecutionContext } from '../../src/checks/executor.js';
import { runScript } from '../../src/checks/scripted/runner.js';
import { Variables } from '../../src/checks/variables.js';
import type { Logger } from '../../src/observability/logger.js';
import { browserPath, readRuntime, type Runtime } from '../../src/checks/scripted/runtimes.js';
import { REPO, tempDir } from '../support/agent-process.js';

const ROUNDS = 8;
const FLAGS = ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'];
const PAGE = `<!doctype html><title>bench</title><p id="status">Waiting</p>
<button id="go" onclick="document.getElementById('status').textContent = 'Clicked'">Go</button>`;

const log = (line: string) => process.stdout.write(`[bench browser] ${line}\n`);

/**
 * The script body both sides run. The agent's differs in `launch` (the harness supplies its defaults)
 * and in running the work as a step(), as checks do, so that a failure is screenshotted before the
 * finally block closes the browser.
 */
const body = (launch: string, expected: string, inStep: boolean) => `const { chromium } = require('playwright-core');
const browser = await chromium.launch(${launch});
try {
  const page = await browser.newPage();
  const work = async () => {
    await page.goto(process.env.PAGE);
    await page.click('#go');
    const text = await page.textContent('#status');
    if (text !== ${JSON.stringify(expected)}) throw new Error('expected ${expected}, got ' + text);
  };
  ${inStep ? "await step('click', work);" : 'await work();'}
} finally {
  await browser.close();
}`;

function runtime(): Runtime {
  const found = readRuntime(path.join(REPO, 'runtimes', '2026-04'));
  if (typeof found === 'string' || !found.installed) throw new Error('runtime 2026-04 is not installed: cd runtimes/2026-04 && npm ci --ignore-scripts');
  return found;
}

function bare(scriptFile: string, rt: Runtime, pageUrl: string): Promise<number> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [scriptFile], {
      env: { NODE_PATH: rt.nodeModules, PAGE: pageUrl, HOME: path.dirname(scriptFile), TMPDIR: path.dirname(scriptFile) },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk;
    });
    child.on('exit', (code) => (code === 0 ? resolve(performance.now() - started) : reject(new Error(`bare script exit ${code}: ${stderr}`))));
  });
}

async function agent(rt: Runtime, pageUrl: string, expected: string, artifactsRoot: string, n: number) {
  const ctx: ExecutionContext = {
    signal: new AbortController().signal,
    logger: console as unknown as Logger,
    jobLog: [],
    variables: new Variables([]),
    settings: { responseBodyLimitBytes: 0, userAgent: 'bench', scriptConcurrency: 1 },
    artifacts: new ArtifactWriter(path.join(artifactsRoot, String(n))),
  };
  const started = performance.now();
  const run = await runScript({ kind: 'BROWSER', code: body('', expected, true), runtime: rt, timeoutMs: 60_000, environment: { PAGE: pageUrl } }, ctx);
  return { ms: performance.now() - started, run, files: ctx.artifacts?.files.map((f) => f.name) ?? [] };
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? (s[mid] as number) : ((s[mid - 1] as number) + (s[mid] as number)) / 2;
};
const spread = (xs: number[]) => `${Math.round(Math.min(...xs))}–${Math.round(Math.max(...xs))}`;

test('BROWSER check: the script runner against the same script run bare', async () => {
  const chromium = browserPath(process.env.BROWSER_PATH);
  if (!chromium) throw new Error('no Chromium: install Debian chromium (.ci/run does) or set BROWSER_PATH');
  const rt = runtime();
  const server = createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/html' }).end(PAGE));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const pageUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  const dir = tempDir('outpost-bench-browser-');
  const scriptFile = path.join(dir, 'bare.cjs');
  writeFileSync(scriptFile, `(async () => {\n${body(JSON.stringify({ headless: true, executablePath: chromium, args: FLAGS }), 'Clicked', false)}\n})().catch((e) => { console.error(e); process.exit(1); });\n`);
  const load = loadavg()[0] ?? 0;
  const times = { bare: [] as number[], agent: [] as number[], failing: [] as number[] };
  try {
    // One of each first, unmeasured: the page cache and Chromium's first start.
    await bare(scriptFile, rt, pageUrl);
    await agent(rt, pageUrl, 'Clicked', dir, 0);
    for (let round = 1; round <= ROUNDS; round++) {
      const order = round % 2 ? ['bare', 'agent', 'failing'] : ['failing', 'agent', 'bare'];
      for (const side of order) {
        if (side === 'bare') times.bare.push(await bare(scriptFile, rt, pageUrl));
        else {
          const failing = side === 'failing';
          const { ms, run, files } = await agent(rt, pageUrl, failing ? 'Done' : 'Clicked', dir, round * 10 + (failing ? 1 : 0));
          expect(run.ok, run.error).toBe(!failing);
          if (failing) expect(files).toEqual(['failure-1.png', 'failure-network-1.har']);
          (failing ? times.failing : times.agent).push(ms);
        }
      }
    }
  } finally {
    server.close();
  }
  const b = median(times.bare);
  const a = median(times.agent);
  const f = median(times.failing);
  log(`${ROUNDS} rounds, alternating order, ${cpus().length} cores, load average ${load.toFixed(2)} before; wall clock from spawn to exit:`);
  log(`  bare script (node + playwright-core)   median ${Math.round(b)} ms  (${spread(times.bare)})`);
  log(`  agent BROWSER run                      median ${Math.round(a)} ms  (${spread(times.agent)})   ratio ${(a / b).toFixed(2)}, +${Math.round(a - b)} ms`);
  log(`  agent BROWSER run, failing             median ${Math.round(f)} ms  (${spread(times.failing)})   +${Math.round(f - a)} ms for the screenshot and the HAR`);
});
