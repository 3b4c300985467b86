// @ts-check
// The harness's watchdog (harness.cjs starts it as a worker thread): if the agent dies (kill -9),
// nobody kills the run at its limit or removes its folder (a HAR there may hold a secret). A thread of
// its own, which a busy script cannot starve, removes the folder and ends the run's process group (the
// harness's process leads it, unless an isolation wrapper does) once the agent is gone. It knows by the
// lifeline, descriptor 3, whose other end only the agent holds: it ends when the agent does. (In a PID
// namespace the parent is never the agent.) It watches the parent too. It marks the folder
// (AGENT_GONE_MARK) and empties it entry by entry: isolated, the folder is a mount point, which
// rmdir refuses, and a browser may still write there; the namespace's first process then kills what is
// left and removes the folder (src/checks/scripted/isolation.ts).
'use strict';
const fs = require('node:fs');
const net = require('node:net');
const path = require('node:path');
const { workerData } = require('node:worker_threads');
const { AGENT_GONE_MARK: GONE } = require('./shared.cjs');

/** @type {{ parent: number, group: number, dir: string, pollMs: number }} */
const { parent, group, dir, pollMs } = workerData;

function end() {
  const gone = path.join(dir, GONE);
  try { fs.writeFileSync(gone, ''); } catch {}
  try {
    for (const name of fs.readdirSync(dir)) if (name !== GONE) fs.rmSync(path.join(dir, name), { recursive: true, force: true });
  } catch {}
  try {
    fs.rmSync(gone);
    fs.rmdirSync(dir);
  } catch {
    try { fs.writeFileSync(gone, ''); } catch {}
  }
  try { process.kill(-group, 'SIGKILL'); } catch {}
  process.kill(group, 'SIGKILL');
}

/** @type {net.Socket | null} */
let lifeline = null;
try {
  if (fs.fstatSync(3).isSocket()) lifeline = new net.Socket({ fd: 3, readable: true, writable: false });
} catch {}
if (lifeline) {
  lifeline.on('end', end);
  lifeline.on('error', end);
  lifeline.resume();
  lifeline.unref();
}
setInterval(() => {
  if (process.ppid !== parent) end();
}, pollMs);
