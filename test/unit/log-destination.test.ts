// LogDestination on real file descriptors: lines in order to a file; a stream
// that fails (/dev/full: ENOSPC) ends logging to it once, never throws, and a
// synchronous flush on it returns (pino's own destination retried it for ever).

import { closeSync, mkdtempSync, openSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { LogDestination } from '../../src/observability/log-destination.js';

const opened: number[] = [];
afterEach(() => {
  for (const fd of opened.splice(0)) closeSync(fd);
});

function open(file: string): number {
  const fd = openSync(file, 'w');
  opened.push(fd);
  return fd;
}

async function until(condition: () => boolean, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe('LogDestination', () => {
  it('writes lines in order, and a flushSync after them writes nothing twice', async () => {
    const file = path.join(mkdtempSync(path.join(tmpdir(), 'log-destination-')), 'log');
    const destination = new LogDestination(open(file));
    const lines = Array.from({ length: 200 }, (_, i) => `line ${i}\n`);
    for (const line of lines.slice(0, 100)) destination.write(line);
    await until(() => readFileSync(file, 'utf8').length === lines.slice(0, 100).join('').length);
    for (const line of lines.slice(100)) destination.write(line);
    // The first of these went to the thread pool at once; the flush writes the rest behind it once it is out
    // (a write still waiting for the pool when the flush runs lands after: flushSync's known limit).
    await until(() => !destination.writing);
    destination.flushSync();
    await until(() => readFileSync(file, 'utf8').length === lines.join('').length);
    expect(readFileSync(file, 'utf8')).toBe(lines.join(''));
    expect(destination.failed).toBeUndefined();
  });

  it('a stream that fails asynchronously ends logging to it once; later lines are dropped and counted', async () => {
    const failures: string[] = [];
    const destination = new LogDestination(open('/dev/full'), (error) => failures.push(String(error.code)));
    destination.write('one\n');
    await until(() => destination.failed !== undefined);
    expect(failures).toEqual(['ENOSPC']);
    destination.write('two\n');
    destination.write('three\n');
    destination.flushSync();
    expect(destination.dropped).toBe(2);
    expect(failures).toEqual(['ENOSPC']);
  });

  it('flushSync on a stream that fails returns at once, the failure recorded', () => {
    const destination = new LogDestination(open('/dev/full'));
    // The first line is in flight; the others wait and are written by flushSync, which meets ENOSPC.
    for (let i = 0; i < 10; i++) destination.write(`line ${i}\n`);
    const started = Date.now();
    destination.flushSync();
    expect(Date.now() - started).toBeLessThan(900);
    expect(destination.failed?.code).toBe('ENOSPC');
  });
});
