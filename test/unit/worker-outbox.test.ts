// Outbox (src/jobs/workers/outbox.ts): what one turn of a thread's loop posts
// to the other thread crosses as one array, in order; a message that cannot
// be cloned fails alone; a thread dying of an uncaught exception still sends
// what it queued (a real worker thread and a real MessagePort).

import { once } from 'node:events';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { MessageChannel, Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { Outbox } from '../../src/jobs/workers/outbox.js';

const ignore = () => undefined;

describe('Outbox', () => {
  it('sends every message of one turn as one array, in the order posted', async () => {
    const sent: number[][] = [];
    const outbox = new Outbox<number>((messages) => sent.push(messages), ignore);
    for (let i = 0; i < 100; i++) outbox.post(i);
    expect(sent).toEqual([]);
    await nextTurn();
    expect(sent).toEqual([Array.from({ length: 100 }, (_, i) => i)]);
  });

  it('starts a new array for the next turn', async () => {
    const sent: string[][] = [];
    const outbox = new Outbox<string>((messages) => sent.push(messages), ignore);
    outbox.post('a');
    await nextTurn();
    outbox.post('b');
    outbox.post('c');
    await nextTurn();
    expect(sent).toEqual([['a'], ['b', 'c']]);
  });

  it('sends at once when it holds its most messages, and the rest with the turn', async () => {
    const sent: number[][] = [];
    const outbox = new Outbox<number>((messages) => sent.push(messages), ignore, 3);
    for (let i = 0; i < 7; i++) outbox.post(i);
    expect(sent).toEqual([
      [0, 1, 2],
      [3, 4, 5],
    ]);
    await nextTurn();
    expect(sent).toEqual([[0, 1, 2], [3, 4, 5], [6]]);
  });

  it('flush() sends what is queued now, and the scheduled turn then sends nothing empty', async () => {
    const sent: string[][] = [];
    const outbox = new Outbox<string>((messages) => sent.push(messages), ignore);
    outbox.post('result');
    outbox.post('stop');
    outbox.flush();
    expect(sent).toEqual([['result', 'stop']]);
    await nextTurn();
    outbox.flush();
    expect(sent).toEqual([['result', 'stop']]);
  });

  it('a message that cannot be cloned fails alone: the rest of its turn still crosses, in order', async () => {
    const { port1, port2 } = new MessageChannel();
    const received: unknown[] = [];
    port2.on('message', (messages: unknown[]) => received.push(...messages));
    const failed: Array<{ message: unknown; error: unknown }> = [];
    const outbox = new Outbox<unknown>(
      (messages) => port1.postMessage(messages),
      (message, error) => failed.push({ message, error }),
    );
    const uncloneable = { id: 'b', result: () => 'a function cannot be cloned' };
    outbox.post({ id: 'a' });
    outbox.post(uncloneable);
    outbox.post({ id: 'c' });
    await nextTurn();
    const deadline = Date.now() + 10_000;
    while (received.length < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    port1.close();
    expect(received).toEqual([{ id: 'a' }, { id: 'c' }]);
    expect(failed).toHaveLength(1);
    expect(failed[0]?.message).toBe(uncloneable);
    expect((failed[0]?.error as Error | undefined)?.name).toBe('DataCloneError');
  });

  it('a worker thread dying of an uncaught exception still sends what its outbox held', async () => {
    // The compiled module (dist/, so `npm run build` first), as the agent's workers load it.
    const outboxModule = new URL('../../dist/jobs/workers/outbox.js', import.meta.url).href;
    const source = `
      import { parentPort } from 'node:worker_threads';
      const { Outbox, flushOnUncaughtException } = await import(${JSON.stringify(outboxModule)});
      const outbox = new Outbox((messages) => parentPort.postMessage(messages), () => undefined);
      flushOnUncaughtException(outbox);
      outbox.post({ type: 'done', jobId: 'finished-before-the-crash' });
      throw new Error('a bug elsewhere in the worker');
    `;
    const worker = new Worker(new URL(`data:text/javascript,${encodeURIComponent(source)}`));
    const received: unknown[] = [];
    worker.on('message', (messages: unknown[]) => received.push(...messages));
    // Both listeners before either event: on a busy machine 'exit' can follow 'error' before a
    // continuation of the first wait runs. Not events.once for 'exit': it rejects on 'error'.
    const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
    const [error] = (await once(worker, 'error')) as [Error];
    await exited;
    expect(error.message).toBe('a bug elsewhere in the worker');
    expect(received).toEqual([{ type: 'done', jobId: 'finished-before-the-crash' }]);
  });
});
