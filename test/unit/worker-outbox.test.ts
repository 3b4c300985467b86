// Outbox (src/jobs/workers/outbox.ts): what one turn of a thread's loop posts
// to the other thread crosses as one array, in order.

import { setImmediate as nextTurn } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { Outbox } from '../../src/jobs/workers/outbox.js';

describe('Outbox', () => {
  it('sends every message of one turn as one array, in the order posted', async () => {
    const sent: number[][] = [];
    const outbox = new Outbox<number>((messages) => sent.push(messages));
    for (let i = 0; i < 100; i++) outbox.post(i);
    expect(sent).toEqual([]);
    await nextTurn();
    expect(sent).toEqual([Array.from({ length: 100 }, (_, i) => i)]);
  });

  it('starts a new array for the next turn', async () => {
    const sent: string[][] = [];
    const outbox = new Outbox<string>((messages) => sent.push(messages));
    outbox.post('a');
    await nextTurn();
    outbox.post('b');
    outbox.post('c');
    await nextTurn();
    expect(sent).toEqual([['a'], ['b', 'c']]);
  });

  it('sends at once when it holds its most messages, and the rest with the turn', async () => {
    const sent: number[][] = [];
    const outbox = new Outbox<number>((messages) => sent.push(messages), 3);
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
    const outbox = new Outbox<string>((messages) => sent.push(messages));
    outbox.post('result');
    outbox.post('stop');
    outbox.flush();
    expect(sent).toEqual([['result', 'stop']]);
    await nextTurn();
    outbox.flush();
    expect(sent).toEqual([['result', 'stop']]);
  });
});
