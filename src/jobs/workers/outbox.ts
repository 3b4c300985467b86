// One postMessage per turn of the sender's event loop instead of one per
// message: every message a turn produces (jobs handed out, results, metric
// updates, releases) crosses the port as one array, in order. A message
// costs a serialization, a wake-up of the other thread and a dispatch
// there; per job that was five of each, a large share of the agent's CPU
// with check workers on (docs/development.md).

/** Messages an outbox holds at most before it sends them at once. */
export const OUTBOX_MAX_MESSAGES = 512;

export class Outbox<T> {
  private messages: T[] = [];
  private scheduled = false;

  constructor(
    private readonly send: (messages: T[]) => void,
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
    this.send(messages);
  }
}
