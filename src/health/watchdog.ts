// Whether the agent's loops are still making progress, for readiness and
// /health. Each loop beats with a promise ("my next beat comes within N ms")
// or says it is idle on purpose (no free slot, nothing to send); a loop that
// misses its promise, or whose promise rejected, is stuck. The event loop is
// watched by the drift of a timer: a tick that comes much later than asked
// means the whole process stood still.

/** Added to every promised beat: a busy machine, a slow disk. */
export const BEAT_MARGIN_MS = 15_000;
/** Event-loop lag above this counts as stuck. */
export const EVENT_LOOP_LAG_BOUND_MS = 5_000;
/** After lag over the bound, the event loop counts as stuck for this long: one that stalls now and then is not healthy. */
export const EVENT_LOOP_LAG_HOLD_MS = 30_000;
/** How often the event loop's drift is measured. */
export const WATCHDOG_TICK_MS = 500;

export const EVENT_LOOP = 'event-loop';

export type ComponentState = 'ok' | 'idle' | 'stuck' | 'crashed';

export interface ComponentReport {
  state: ComponentState;
  /** Milliseconds since the last beat; for the event loop, since the last lag over the bound (null: none yet). */
  sinceBeatMs: number | null;
  /** The event loop only: the largest lag seen, in ms. */
  maxLagMs?: number;
  /** The crash, when the loop's promise rejected. */
  error?: string;
}

export interface WatchdogReport {
  stuck: string[];
  components: Record<string, ComponentReport>;
}

interface Component {
  lastBeat: number;
  /** When the next beat is due; undefined while idle on purpose. */
  dueBy: number | undefined;
  crash: string | undefined;
}

/** What one loop holds: its own name, bound to the watchdog. */
export interface Heartbeat {
  /** Alive; the next beat (or `idle`) comes within `withinMs` (plus a margin), else the loop counts as stuck. */
  beat(withinMs: number): void;
  /** Waiting on purpose, for as long as it takes (no free slot, nothing to send): never stuck while idle. */
  idle(): void;
  /** The loop's promise rejected: stuck until it beats again. */
  crashed(error: unknown): void;
}

/** For loops nobody watches (tests, the shutdown flush). */
export const NO_HEARTBEAT: Heartbeat = { beat: () => undefined, idle: () => undefined, crashed: () => undefined };

export interface WatchdogOptions {
  now?: () => number;
  marginMs?: number;
  lagBoundMs?: number;
  lagHoldMs?: number;
  tickMs?: number;
}

export class Watchdog {
  private readonly components = new Map<string, Component>();
  private readonly now: () => number;
  private readonly marginMs: number;
  private readonly lagBoundMs: number;
  private readonly lagHoldMs: number;
  private readonly tickMs: number;
  private lastTick: number;
  private lagSeenAt: number | undefined;
  private timer: NodeJS.Timeout | undefined;
  private maxLagMs = 0;

  constructor(options: WatchdogOptions = {}) {
    this.now = options.now ?? Date.now;
    this.marginMs = options.marginMs ?? BEAT_MARGIN_MS;
    this.lagBoundMs = options.lagBoundMs ?? EVENT_LOOP_LAG_BOUND_MS;
    this.lagHoldMs = options.lagHoldMs ?? EVENT_LOOP_LAG_HOLD_MS;
    this.tickMs = options.tickMs ?? WATCHDOG_TICK_MS;
    this.lastTick = this.now();
  }

  /** A loop to watch; it starts idle until its first beat. */
  heart(name: string): Heartbeat {
    if (name === EVENT_LOOP || this.components.has(name)) throw new Error(`${name} is watched already`);
    const component: Component = { lastBeat: this.now(), dueBy: undefined, crash: undefined };
    this.components.set(name, component);
    return {
      beat: (withinMs) => {
        const now = this.now();
        component.lastBeat = now;
        component.dueBy = now + Math.max(0, withinMs) + this.marginMs;
        component.crash = undefined;
      },
      idle: () => {
        component.lastBeat = this.now();
        component.dueBy = undefined;
        component.crash = undefined;
      },
      crashed: (error) => {
        component.crash = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
      },
    };
  }

  /** Measures the event loop's drift; called every `tickMs` by `start`, or by a test with a fake clock. */
  tick(): void {
    const now = this.now();
    const lag = now - this.lastTick - this.tickMs;
    this.lastTick = now;
    if (lag > this.lagBoundMs) {
      this.lagSeenAt = now;
      this.maxLagMs = Math.max(this.maxLagMs, lag);
    }
  }

  start(): void {
    this.lastTick = this.now();
    this.timer ??= setInterval(() => this.tick(), this.tickMs);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  healthy(): boolean {
    return this.stuck().length === 0;
  }

  stuck(): string[] {
    return this.report().stuck;
  }

  report(): WatchdogReport {
    const now = this.now();
    const components: Record<string, ComponentReport> = {};
    const lagStuck = this.lagSeenAt !== undefined && now - this.lagSeenAt < this.lagHoldMs;
    components[EVENT_LOOP] = {
      state: lagStuck ? 'stuck' : 'ok',
      sinceBeatMs: this.lagSeenAt === undefined ? null : now - this.lagSeenAt,
      maxLagMs: this.maxLagMs,
    };
    for (const [name, c] of this.components) {
      const state: ComponentState = c.crash ? 'crashed' : c.dueBy === undefined ? 'idle' : now > c.dueBy ? 'stuck' : 'ok';
      components[name] = { state, sinceBeatMs: now - c.lastBeat, ...(c.crash ? { error: c.crash } : {}) };
    }
    const stuck = Object.entries(components)
      .filter(([, c]) => c.state === 'stuck' || c.state === 'crashed')
      .map(([name]) => name);
    return { stuck, components };
  }
}
