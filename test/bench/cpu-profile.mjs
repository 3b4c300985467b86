// Preloaded into the agent by `npm run bench` when BENCH_AGENT_CPU_PROFILE=<dir>
// is set (Node 20 refuses --cpu-prof in NODE_OPTIONS, but allows --import).
// Profiles the whole process and writes <dir>/agent-<pid>.cpuprofile when the
// bench stops the agent (SIGTERM), or at exit. Open it in Chrome DevTools, or
// summarise it with `node test/bench/cpu-profile.mjs <file>`.

import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { isMainThread, threadId } from 'node:worker_threads';

const dir = process.env.OUTPOST_BENCH_CPU_PROFILE_DIR;

function summarise(file, top = 25) {
  const profile = JSON.parse(readFileSync(file, 'utf8'));
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const self = new Map();
  const byArea = new Map();
  const intervals = profile.timeDeltas;
  let total = 0;
  for (let i = 0; i < profile.samples.length; i++) {
    const node = byId.get(profile.samples[i]);
    const dt = (intervals[i] ?? 0) / 1000;
    total += dt;
    const f = node.callFrame;
    const where = f.url ? `${f.url.replace(/^file:\/\//, '').replace(/^.*\/node_modules\//, '')}:${f.lineNumber + 1}` : '';
    const key = `${f.functionName || '(anonymous)'} ${where}`.trim();
    self.set(key, (self.get(key) ?? 0) + dt);
    const area = !f.url
      ? f.functionName || '(native)'
      : f.url.includes('/node_modules/')
        ? f.url.replace(/^.*\/node_modules\/((@[^/]+\/)?[^/]+).*$/, '$1')
        : f.url.startsWith('node:')
          ? 'node internals'
          : f.url.includes('/dist/')
            ? `outpost ${f.url.replace(/^.*\/dist\//, '')}`
            : f.url;
    byArea.set(area, (byArea.get(area) ?? 0) + dt);
  }
  const pct = (ms) => `${((ms / total) * 100).toFixed(1).padStart(5)} %`;
  const lines = [`${file}: ${(total / 1000).toFixed(2)} s sampled`, '', 'self time by area:'];
  for (const [k, v] of [...byArea].sort((a, b) => b[1] - a[1]).slice(0, 15)) lines.push(`  ${pct(v)}  ${k}`);
  lines.push('', `top ${top} functions by self time:`);
  for (const [k, v] of [...self].sort((a, b) => b[1] - a[1]).slice(0, top)) lines.push(`  ${pct(v)}  ${k}`);
  return lines.join('\n');
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  for (const file of process.argv.slice(2)) process.stdout.write(`${summarise(file)}\n\n`);
} else if (dir) {
  const session = new Session();
  session.connect();
  session.post('Profiler.enable');
  session.post('Profiler.setSamplingInterval', { interval: 500 });
  session.post('Profiler.start');
  let written = false;
  const write = () => {
    if (written) return;
    written = true;
    // The in-process session answers synchronously, so this works inside 'exit' too.
    session.post('Profiler.stop', (error, result) => {
      if (error) return;
      mkdirSync(dir, { recursive: true });
      // Check worker threads load this too (NODE_OPTIONS): each thread writes its own file.
      const name = isMainThread ? `agent-${process.pid}` : `agent-${process.pid}-worker-${threadId}`;
      writeFileSync(path.join(dir, `${name}.cpuprofile`), JSON.stringify(result.profile));
    });
  };
  process.once('SIGTERM', write);
  process.once('exit', write);
}
