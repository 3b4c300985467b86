// A child process for test/integration/store-durability.test.ts: opens the
// built SQLite store (dist/store/sqlite/sqlite-store.js) on the file it is
// given and accepts results for ever, in batches, printing one line per batch
// only after acceptResults resolved: `accepted <id>,<id>,…`. The test kills it
// with SIGKILL at a random moment and checks that every printed id survived.
// Run by Node directly (type stripping), so it uses erasable TypeScript only.

import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { ResultEnvelope } from '../../src/core/protocol.js';
import type { CheckResultEntry } from '../../src/core/result-entry.js';
import type * as StoreModule from '../../src/store/sqlite/sqlite-store.js';
import type { StoredCheck } from '../../src/store/store.js';

const [file, repo, batchText] = process.argv.slice(2);
if (!file || !repo) throw new Error('usage: store-writer.ts <database file> <repository> [batch size]');
const batchSize = Number(batchText ?? 500);
const jobsPerBatch = Math.max(1, Math.floor(batchSize / 10));

const { SqliteStore } = (await import(pathToFileURL(path.join(repo, 'dist/store/sqlite/sqlite-store.js')).href)) as typeof StoreModule;
const store = await SqliteStore.open(file);

const check: StoredCheck = {
  id: 'durable',
  name: 'durable',
  checkType: 'API',
  frequencySeconds: 60,
  locations: ['loc-a'],
  definition: { id: 'durable', checkType: 'API', request: { method: 'GET', url: 'https://example.com' } },
  environmentVariables: [],
  runtimeId: null,
  capMs: 30_000,
};
await store.syncChecks([check], new Date());
process.stdout.write('ready\n');

function entry(resultType: 'FINAL' | 'ATTEMPT', now: Date): CheckResultEntry {
  return {
    resultType,
    id: randomUUID(),
    name: 'durable',
    checkId: 'durable',
    checkType: 'API',
    hasFailures: resultType === 'ATTEMPT',
    hasErrors: false,
    isDegraded: false,
    overMaxResponseTime: false,
    runLocation: 'loc-a',
    startedAt: now.toISOString(),
    stoppedAt: now.toISOString(),
    created_at: now.toISOString(),
    responseTime: 12,
    checkRunId: null,
    attempts: 1,
    sequenceId: null,
    apiCheckResult: { response: { status: 200, body: 'x'.repeat(300) } },
  };
}

for (;;) {
  const now = new Date();
  const batch: ResultEnvelope[] = [];
  for (let j = 0; j < jobsPerBatch; j++) {
    const sessionId = randomUUID();
    const jobId = randomUUID();
    await store.createSession(
      { id: sessionId, checkId: check.id, checkType: 'API', name: check.name, status: 'STARTED', runLocations: ['loc-a'], triggerSource: 'SCHEDULER', startedAt: now.toISOString(), stoppedAt: null, durationMs: null },
      [{ id: jobId, location: 'loc-a', deadlineAt: new Date(now.getTime() + 3_600_000).toISOString() }],
      check,
    );
    for (let k = 0; k < 10; k++) {
      const result = entry(k === 9 ? 'FINAL' : 'ATTEMPT', now);
      batch.push({ jobId, resultId: result.id, result });
    }
  }
  const outcome = await store.acceptResults('writer', 'loc-a', batch, now);
  if (outcome.rejected.length > 0) throw new Error(`rejected: ${JSON.stringify(outcome.rejected[0])}`);
  // A pipe write is synchronous on Linux: once this returns, the parent can read the line.
  process.stdout.write(`accepted ${outcome.accepted.join(',')}\n`);
}
