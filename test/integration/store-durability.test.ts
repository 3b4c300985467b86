// What the store promises in src/store/store.ts: a result whose acceptResults
// resolved survives a kill -9. A child process (test/support/store-writer.ts,
// on the built store in dist/) accepts results in batches and prints each
// batch's ids once the call resolved; the test kills it with SIGKILL at a
// random moment, several times on the same file, and after each kill reopens
// the database: every printed id is there exactly once, every DONE job's
// FINAL is there, and integrity_check is ok.

import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { REPO } from '../support/agent-process.js';

const WRITER = path.join(REPO, 'test/support/store-writer.ts');
const KILLS = 5;

const dir = mkdtempSync(path.join(tmpdir(), 'outpost-durability-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

interface Run {
  printed: string[];
  batches: number;
}

/** Starts the writer, waits for its first accepted batch, lets it run `runMs` more, kills it with SIGKILL. */
function runAndKill(file: string, runMs: number, batchSize: number): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [WRITER, file, REPO, String(batchSize)], { stdio: ['ignore', 'pipe', 'pipe'] });
    const run: Run = { printed: [], batches: 0 };
    let buffered = '';
    let stderr = '';
    let timer: NodeJS.Timeout | undefined;
    const giveUp = setTimeout(() => child.kill('SIGKILL'), 45_000);
    child.stdout.setEncoding('utf8');
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (chunk: string) => {
      stderr += chunk;
    });
    child.stdout.on('data', (chunk: string) => {
      buffered += chunk;
      const lines = buffered.split('\n');
      buffered = lines.pop() ?? '';
      for (const line of lines) {
        if (!line.startsWith('accepted ')) continue;
        run.printed.push(...line.slice('accepted '.length).split(','));
        run.batches++;
        timer ??= setTimeout(() => child.kill('SIGKILL'), runMs);
      }
    });
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(giveUp);
      clearTimeout(timer);
      if (signal !== 'SIGKILL' || run.batches === 0) reject(new Error(`writer ended with ${code ?? signal} after ${run.batches} batches: ${stderr}`));
      else resolve(run);
    });
  });
}

describe('store durability', () => {
  it('every result whose acceptance was reported survives SIGKILL of the writer', { timeout: 240_000 }, async () => {
    expect(existsSync(path.join(REPO, 'dist/store/sqlite/sqlite-store.js')), 'the writer runs the built store: npm run build').toBe(true);
    const file = path.join(dir, 'outpost.db');
    const everPrinted = new Set<string>();
    let batches = 0;
    for (let kill = 0; kill < KILLS; kill++) {
      // A random moment after the first batch; small batches on odd rounds, so kills land in many places of a transaction.
      const run = await runAndKill(file, 50 + Math.floor(Math.random() * 400), kill % 2 === 0 ? 500 : 50);
      batches += run.batches;
      for (const id of run.printed) everPrinted.add(id);

      const store = await SqliteStore.open(file);
      try {
        expect(await store.integrityCheck()).toEqual(['ok']);
        const { DatabaseSync } = await import('node:sqlite');
        const db = new DatabaseSync(file, { readOnly: true });
        try {
          const stored = new Map<string, number>();
          for (const row of db.prepare('SELECT id, COUNT(*) AS n FROM results GROUP BY id').all()) stored.set(String(row.id), Number(row.n));
          const missing = [...everPrinted].filter((id) => stored.get(id) !== 1);
          expect(missing, `printed ids not stored exactly once after kill ${kill + 1}`).toEqual([]);
          const orphanDone = db
            .prepare("SELECT COUNT(*) AS n FROM jobs j WHERE j.status = 'DONE' AND NOT EXISTS (SELECT 1 FROM results r WHERE r.id = j.final_result_id)")
            .get();
          expect(Number(orphanDone?.n)).toBe(0);
          const unfinished = db.prepare("SELECT COUNT(*) AS n FROM sessions s JOIN jobs j ON j.session_id = s.id WHERE j.status = 'DONE' AND s.status = 'STARTED'").get();
          expect(Number(unfinished?.n)).toBe(0);
        } finally {
          db.close();
        }
      } finally {
        await store.close();
      }
    }
    expect(everPrinted.size).toBeGreaterThan(0);
    console.log(`store durability: ${KILLS} SIGKILLs, ${batches} reported batches, ${everPrinted.size} reported results, all present once`);
  });
});
