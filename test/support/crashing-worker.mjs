// A check worker (dist/jobs/workers/worker.js) that dies, like a worker hit
// by a fatal bug, when it is handed a job whose check is named "crash":
// test/unit/check-workers.test.ts proves such jobs end as error results.
import { parentPort } from 'node:worker_threads';

// Registered before the worker's own listener, so it sees the job first.
parentPort.on('message', (message) => {
  if (message.type === 'run' && message.job.check.name === 'crash') process.exit(3);
});
await import('../../dist/jobs/workers/worker.js');
