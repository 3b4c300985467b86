// A check worker (dist/jobs/workers/worker.js) that fails like a worker hit
// by a fatal bug when it is handed a job whose check is named "crash" (the
// thread exits), or like a check stuck in synchronous code when it is named
// "stall" (the event loop stops), and whose result cannot be cloned (as a
// result holding a function could not) when it is named "unclonable":
// test/unit/check-workers.test.ts proves such jobs end as error results and
// the worker comes back or goes on.
import { parentPort } from 'node:worker_threads';

const unclonable = new Set();
const postMessage = parentPort.postMessage.bind(parentPort);
parentPort.postMessage = (messages, ...rest) => {
  if (Array.isArray(messages) && messages.some((m) => m.type === 'done' && unclonable.has(m.jobId))) {
    throw new DOMException('function Object() { [native code] } could not be cloned.', 'DataCloneError');
  }
  return postMessage(messages, ...rest);
};

// Registered before the worker's own listener, so it sees the job first.
// Messages arrive as arrays, one per turn of the pool's loop (src/jobs/workers/outbox.ts).
parentPort.on('message', (messages) => {
  for (const message of messages) {
    if (message.type !== 'run') continue;
    if (message.job.check.name === 'crash') process.exit(3);
    if (message.job.check.name === 'unclonable') unclonable.add(message.job.jobId);
    if (message.job.check.name === 'stall') {
      // Bounded like everything else: longer than the test's stall limit, and the pool terminates it well before.
      const until = Date.now() + 60_000;
      while (Date.now() < until) {
        // Spinning, as a runaway synchronous loop would.
      }
    }
  }
});
await import('../../dist/jobs/workers/worker.js');
