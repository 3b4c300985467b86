// The watchdog's judgement with a fake clock, and the loop supervisor.

import { Writable } from 'node:stream';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { Backoff } from '../../src/core/backoff.js';
import { superviseLoop } from '../../src/health/supervise.js';
import { EVENT_LOOP, type Heartbeat, Watchdog } from '../../src/health/watchdog.js';

function capture() {
  const lines: Array<Record<string, unknown>> = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(JSON.parse(chunk.toString('utf8')) as Record<string, unknown>);
      done();
    },
  });
  return { logger: pino({ level: 'debug' }, stream), lines };
}

function clock(start = 1_000_000) {
  let t = start;
  return { now: () => t, advance: (ms: number) => (t += ms) };
}

const OPTIONS = { marginMs: 1_000, lagBoundMs: 5_000, lagHoldMs: 30_000, tickMs: 500 };

describe('Watchdog', () => {
  it('a loop is ok until it misses the beat it promised (plus the margin), then stuck until it beats again', () => {
    const c = clock();
    const dog = new Watchdog({ now: c.now, ...OPTIONS });
    const claims = dog.heart('claim-loop');
    claims.beat(10_000);
    c.advance(11_000);
    expect(dog.healthy()).toBe(true);
    c.advance(1);
    expect(dog.stuck()).toEqual(['claim-loop']);
    expect(dog.report().components['claim-loop']).toEqual({ state: 'stuck', sinceBeatMs: 11_001 });
    claims.beat(10_000);
    expect(dog.healthy()).toBe(true);
  });

  it('a loop that is idle on purpose is never stuck, however long', () => {
    const c = clock();
    const dog = new Watchdog({ now: c.now, ...OPTIONS });
    const sink = dog.heart('sink-loop');
    expect(dog.report().components['sink-loop']?.state).toBe('idle');
    sink.beat(100);
    sink.idle();
    c.advance(3_600_000);
    expect(dog.healthy()).toBe(true);
  });

  it('a crashed loop is stuck with its error until it beats again', () => {
    const c = clock();
    const dog = new Watchdog({ now: c.now, ...OPTIONS });
    const claims = dog.heart('claim-loop');
    claims.beat(60_000);
    claims.crashed(new TypeError('boom'));
    expect(dog.stuck()).toEqual(['claim-loop']);
    expect(dog.report().components['claim-loop']).toMatchObject({ state: 'crashed', error: 'TypeError: boom' });
    claims.beat(60_000);
    expect(dog.report().components['claim-loop']?.state).toBe('ok');
  });

  it('watches each name once', () => {
    const dog = new Watchdog(OPTIONS);
    dog.heart('claim-loop');
    expect(() => dog.heart('claim-loop')).toThrow(/claim-loop is watched already/);
    expect(() => dog.heart(EVENT_LOOP)).toThrow(/event-loop is watched already/);
  });

  it('names every stuck part, each loop on its own', () => {
    const c = clock();
    const dog = new Watchdog({ now: c.now, ...OPTIONS });
    const a = dog.heart('claim-loop');
    const b = dog.heart('sink-loop');
    a.beat(1_000);
    b.beat(5_000);
    c.advance(3_000);
    expect(dog.stuck()).toEqual(['claim-loop']);
    c.advance(5_000);
    expect(dog.stuck()).toEqual(['claim-loop', 'sink-loop']);
  });

  it('event loop: a tick later than the bound makes it stuck for the hold time, then well again', () => {
    const c = clock();
    const dog = new Watchdog({ now: c.now, ...OPTIONS });
    for (let i = 0; i < 10; i++) {
      c.advance(500 + 100);
      dog.tick();
    }
    expect(dog.healthy()).toBe(true);
    // The process stood still for 6 s: the next tick comes 6 s late.
    c.advance(500 + 6_000);
    dog.tick();
    expect(dog.stuck()).toEqual([EVENT_LOOP]);
    expect(dog.report().components[EVENT_LOOP]).toMatchObject({ state: 'stuck', maxLagMs: 6_000 });
    for (let t = 0; t < 30_000 - 500; t += 500) {
      c.advance(500);
      dog.tick();
    }
    expect(dog.healthy()).toBe(false);
    c.advance(500);
    dog.tick();
    expect(dog.healthy()).toBe(true);
    expect(dog.report().components[EVENT_LOOP]).toMatchObject({ state: 'ok', maxLagMs: 6_000 });
  });

  it('lag at the bound is not stuck', () => {
    const c = clock();
    const dog = new Watchdog({ now: c.now, ...OPTIONS });
    c.advance(500 + 5_000);
    dog.tick();
    expect(dog.healthy()).toBe(true);
  });
});

describe('superviseLoop', () => {
  function recorder() {
    const calls: string[] = [];
    const heartbeat: Heartbeat = {
      beat: () => calls.push('beat'),
      idle: () => calls.push('idle'),
      crashed: (error) => calls.push(`crashed: ${(error as Error).message}`),
    };
    return { calls, heartbeat };
  }

  it('logs a crash, reports it, and restarts the loop until it ends normally', async () => {
    const { calls, heartbeat } = recorder();
    const { logger, lines } = capture();
    let runs = 0;
    await superviseLoop(
      'claim-loop',
      async () => {
        runs++;
        heartbeat.beat(1);
        if (runs < 3) throw new Error(`crash ${runs}`);
      },
      { logger, signal: new AbortController().signal, heartbeat, backoff: new Backoff(1, 1) },
    );
    expect(runs).toBe(3);
    expect(calls).toEqual(['beat', 'crashed: crash 1', 'beat', 'crashed: crash 2', 'beat']);
    expect(lines.map((l) => [l.msg, l.loop, (l.err as { message: string }).message])).toEqual([
      ['claim-loop crashed; restarting it', 'claim-loop', 'crash 1'],
      ['claim-loop crashed; restarting it', 'claim-loop', 'crash 2'],
    ]);
  });

  it('stops restarting once the signal aborts', async () => {
    const { calls, heartbeat } = recorder();
    const { logger } = capture();
    const controller = new AbortController();
    let runs = 0;
    await superviseLoop(
      'sink-loop',
      async () => {
        runs++;
        controller.abort();
        throw new Error('while stopping');
      },
      { logger, signal: controller.signal, heartbeat, backoff: new Backoff(1, 1) },
    );
    expect(runs).toBe(1);
    expect(calls).toEqual(['crashed: while stopping']);
  });
});
