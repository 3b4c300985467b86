// A check worker thread: runs the jobs the pool (src/jobs/workers/pool.ts)
// hands it with its own JobRunner (src/jobs/run.ts), so attempts, retries,
// the hard cap, the abandon timer and the scrubbing happen here exactly as
// on the main thread. What leaves is plain data: results already scrubbed
// and size-capped, metric updates, artifact publish calls.

import { parentPort, workerData } from 'node:worker_threads';
import { notPublished } from '../../artifacts/store.js';
import { workerRegistry } from '../../checks/registry.js';
import { JobAbortedError } from '../../core/errors.js';
import { MemoryBudget } from '../../core/memory-budget.js';
import type { CheckResultEntry } from '../../core/result-entry.js';
import { createLogger } from '../../observability/logger.js';
import { SecretPolicy } from '../../secrets/policy.js';
import type { PreparedJob } from '../prepare.js';
import { JobRunner, type JobSlot } from '../run.js';
import { type FromWorker, fromWire, type ToWorker, type WireAbort, type WireJob, type WireError, WORKER_BEAT_MS, wireError } from './protocol.js';
import { flushOnUncaughtException, Outbox } from './outbox.js';
import { RemoteArtifacts } from './remote-artifacts.js';
import { RemoteMetrics } from './remote-metrics.js';
import type { WorkerSetup } from './protocol.js';

const port = parentPort;
if (!port) throw new Error('src/jobs/workers/worker.ts runs only as a worker thread');
const setup = workerData as WorkerSetup;
const outbox = new Outbox<FromWorker>(
  (messages) => port.postMessage(messages),
  (message, error) => unsendable(message, error),
);
const post = (message: FromWorker) => outbox.post(message);
flushOnUncaughtException(outbox);

const secrets = new SecretPolicy(setup.agentSecrets);
const { logger, flush: flushLogs } = createLogger(setup.logLevel, setup.logStream, secrets.scrubLogLine);
// The main thread has warned about short agent-wide secrets already: only jobs' own are warned about here.
secrets.attachLogger(logger.child({}, { level: 'silent' }));
secrets.attachLogger(logger);
const registry = workerRegistry();
const metrics = new RemoteMetrics((ops) => post({ type: 'metrics', ops }), setup.checkSeriesMinSeconds);
const artifacts = setup.artifactsRoot ? new RemoteArtifacts(setup.artifactsRoot, post) : undefined;
const runner = new JobRunner(metrics, setup.settings, {
  secrets,
  diagnostics: setup.diagnostics,
  ...(artifacts ? { artifacts } : {}),
  ...(setup.bodyMemory ? { bodyMemory: MemoryBudget.attach(setup.bodyMemory) } : {}),
  ...(setup.maxResultBytes !== undefined ? { maxResultBytes: setup.maxResultBytes } : {}),
  ...(setup.testFault ? { testFault: setup.testFault } : {}),
  onExecutorError: (error, job) => {
    // Scrubbed here with the job's scrubber: it knows what the executor registered at run time.
    const wire = wireError(error);
    const scrubbed: WireError = {
      name: wire.name,
      message: job.scrubber.scrubText(wire.message),
      ...(wire.stack ? { stack: job.scrubber.scrubText(wire.stack) } : {}),
    };
    post({ type: 'executor-error', error: scrubbed, checkType: job.checkType, check: job.check, variables: [...job.variables] });
  },
});

const running = new Map<string, AbortController>();
/** Per running job: aborted by its abort or by the main thread's drain starting (src/jobs/queue.ts). */
const noMoreAttempts = new Map<string, AbortController>();
/** Aborts that arrived for a job not started yet (none are expected: a job starts as its message is read). */
const early = new Map<string, JobAbortedError>();
const earlyNoMoreAttempts = new Map<string, JobAbortedError>();
const releases = new Map<string, () => void>();
const attemptWaits = new Map<string, { resolve: () => void; reject: (error: Error) => void }>();

const slot: JobSlot = {
  // The main thread decides that: a job it would end at once is never sent here.
  abortedWith: () => undefined,
  enter: (jobId) => {
    const controller = new AbortController();
    const attempts = new AbortController();
    running.set(jobId, controller);
    noMoreAttempts.set(jobId, attempts);
    const pending = early.get(jobId) ?? earlyNoMoreAttempts.get(jobId);
    earlyNoMoreAttempts.delete(jobId);
    if (early.has(jobId)) {
      early.delete(jobId);
      controller.abort(pending);
    }
    if (pending) attempts.abort(pending);
    return {
      signal: controller.signal,
      noMoreAttempts: attempts.signal,
      leave: () => {
        running.delete(jobId);
        noMoreAttempts.delete(jobId);
      },
    };
  },
};

function prepared(job: WireJob): PreparedJob | undefined {
  const executor = registry.get(job.check.checkType);
  if (!executor) return undefined;
  return {
    jobId: job.jobId,
    identity: job.identity,
    checkIdentity: job.checkIdentity,
    runnable: { check: job.check, executor, target: executor.target(job.check.request) },
    variables: job.variables,
    triggerSource: job.triggerSource,
    logger: logger.child(job.logBindings),
    ...(job.jobLogNotes ? { jobLogNotes: job.jobLogNotes } : {}),
  };
}

async function run(job: WireJob): Promise<void> {
  const ready = prepared(job);
  if (!ready) {
    post({ type: 'failed', jobId: job.jobId, error: { name: 'Error', message: `check type ${job.check.checkType} does not run on a check worker` } });
    return;
  }
  let seq = 0;
  const onAttempt = (result: CheckResultEntry, line: string | undefined) =>
    new Promise<void>((resolve, reject) => {
      seq += 1;
      attemptWaits.set(`${job.jobId}\u0000${seq}`, { resolve, reject });
      metrics.flush();
      post({ type: 'attempt', jobId: job.jobId, seq, result, line });
    });
  try {
    const completion = await runner.run(ready, slot, onAttempt);
    releases.set(job.jobId, completion.release);
    metrics.flush();
    post(completion.result === null ? { type: 'done', jobId: job.jobId, result: null } : { type: 'done', jobId: job.jobId, result: completion.result, line: completion.line });
  } catch (error) {
    metrics.flush();
    post({ type: 'failed', jobId: job.jobId, error: wireError(error) });
  }
}

/** A message that could not be cloned (a result holding something JSON has no word for) fails its own job only. */
function unsendable(message: FromWorker, error: unknown): void {
  switch (message.type) {
    case 'done':
      // The main thread makes the job's error result; what this result held is given back now, as no release will come.
      releases.get(message.jobId)?.();
      releases.delete(message.jobId);
      post({ type: 'failed', jobId: message.jobId, error: wireError(error), counted: true });
      return;
    case 'attempt': {
      const key = `${message.jobId}\u0000${message.seq}`;
      attemptWaits.get(key)?.reject(error instanceof Error ? error : new Error(String(error)));
      attemptWaits.delete(key);
      return;
    }
    case 'publish':
      artifacts?.published(message.callId, notPublished(error));
      return;
    default:
      logger.error({ err: error, message: message.type }, 'a message to the main thread could not be sent');
  }
}

function abort(jobId: string, error: WireAbort): void {
  const reason = new JobAbortedError(error.reason, error.message);
  const controller = running.get(jobId);
  if (controller) {
    controller.abort(reason);
    noMoreAttempts.get(jobId)?.abort(reason);
  } else if (!releases.has(jobId)) early.set(jobId, reason);
}

function stopAttempts(jobId: string, error: WireAbort): void {
  const reason = new JobAbortedError(error.reason, error.message);
  const controller = noMoreAttempts.get(jobId);
  if (controller) controller.abort(reason);
  else if (!releases.has(jobId)) earlyNoMoreAttempts.set(jobId, reason);
}

port.on('message', (messages: ToWorker[]) => {
  for (const message of messages) receive(message);
});

function receive(message: ToWorker): void {
  switch (message.type) {
    case 'run':
      void run(message.job);
      break;
    case 'abort':
      abort(message.jobId, message.error);
      break;
    case 'no-more-attempts':
      stopAttempts(message.jobId, message.error);
      break;
    case 'attempt-handled': {
      const key = `${message.jobId}\u0000${message.seq}`;
      const wait = attemptWaits.get(key);
      attemptWaits.delete(key);
      if (message.error) wait?.reject(fromWire(message.error));
      else wait?.resolve();
      break;
    }
    case 'published':
      artifacts?.published(message.callId, message.published);
      break;
    case 'release':
      releases.get(message.jobId)?.();
      releases.delete(message.jobId);
      early.delete(message.jobId);
      earlyNoMoreAttempts.delete(message.jobId);
      break;
    case 'stop':
      metrics.flush();
      outbox.flush();
      flushLogs();
      // Ends this thread only; idle keep-alive sockets of the checks' HTTP pools would otherwise hold it open.
      process.exit(0);
  }
}

// The pool ends a worker whose loop stops turning (a synchronous stall in a check): its jobs must not wait forever.
setInterval(() => post({ type: 'beat' }), WORKER_BEAT_MS).unref();
post({ type: 'ready' });
outbox.flush();
