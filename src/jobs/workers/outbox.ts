// One postMessage per turn of the sender's event loop instead of one per
// message: every message a turn produces (jobs handed out, results, metric
// updates, releases) crosses the port as one array, in order. A message
// costs a serialization, a wake-up of the other thread and a dispatch
// there; per job that was five of each, a large share of the agent's CPU
// with check workers on (docs/development.md).
//
// Sending later must not lose what sending at once guaranteed: a message
// that cannot be cloned fails alone (the others of its turn still go, and
// the sender hears which one failed, as a throwing postMessage told it), and
// a thread dying of an uncaught exception still sends what its last turn
// queued (flushOnUncaughtException).

/** Messages an outbox holds at most before it sends them at once. */
export const OUTBOX_MAX_MESSAGES = 512;

export class Outbox<T> {
  private messages: T[] = [];
  private scheduled = false;

  /**
   * `send` posts an array (it throws as postMessage does, e.g. a DataCloneError);
   * `onUnsendable` hears of each message that could not be sent even alone.
   */
  constructor(
    private readonly send: (messages: T[]) => void,
    private readonly onUnsendable: (message: T, error: unknown) => void,
    private readonly maxMessages = OUTBOX_MAX_MESSAGES,
  ) {}

  /** Queues `message`; it is sent with the rest of this turn's, or at once when the outbox is full. */
  post(message: T): void {
    this.messages.push(message);
    if (this.messages.length >= this.maxMessages) {
      this.flush();
      return;
    }
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.flush();
    });
  }

  /** Sends what is queued now (before the thread exits, or ahead of a message that must follow them). */
  flush(): void {
    if (this.messages.length === 0) return;
    const messages = this.messages;
    this.messages = [];
    try {
      this.send(messages);
    } catch {
      // One of them cannot be cloned: each goes alone, in order, so only that one fails.
      for (const message of messages) {
        try {
          this.send([message]);
        } catch (error) {
          this.onUnsendable(message, error);
        }
      }
    }
  }
}

/** Sends what `outbox` holds when this thread is about to die of an uncaught exception. */
export function flushOnUncaughtException<T>(outbox: Outbox<T>): void {
  process.on('uncaughtExceptionMonitor', () => {
    try {
      outbox.flush();
    } catch {
      // Dying already: what cannot be sent is lost with the thread, as before.
    }
  });
}
