// Wakes claims waiting on every replica when any replica queues a job: the
// store sends NOTIFY outpost_jobs with the location in the transaction that
// queues it (delivered at COMMIT), and each replica LISTENs on a connection
// of its own and hands the location to its claims' signal
// (src/server/job-signal.ts). Without it, a claim held by one replica would
// see another replica's new job only when its wait ran out. A lost
// connection is made again after a pause that doubles up to RECONNECT_MAX_MS,
// until close(); meanwhile claims fall back to the end of their wait.

import pg from 'pg';

export const JOBS_CHANNEL = 'outpost_jobs';
const RECONNECT_MIN_MS = 500;
const RECONNECT_MAX_MS = 30_000;

export class JobNotifications {
  private client: pg.Client | undefined;
  private timer: NodeJS.Timeout | undefined;
  private closed = false;
  private pauseMs = RECONNECT_MIN_MS;

  constructor(
    private readonly url: string,
    private readonly onLocation: (location: string) => void,
    private readonly onProblem: (error: unknown) => void = () => undefined,
  ) {}

  /** Listens from now on; resolves once listening (or once the first attempt failed: it tries again later). */
  async start(): Promise<void> {
    await this.connect();
  }

  private async connect(): Promise<void> {
    if (this.closed) return;
    const client = new pg.Client({ connectionString: this.url, application_name: 'outpost server (job notifications)', connectionTimeoutMillis: 10_000 });
    let dropped = false;
    const again = (error: unknown) => {
      if (dropped) return;
      dropped = true;
      this.client = undefined;
      client.end().catch(() => undefined);
      if (this.closed) return;
      this.onProblem(error);
      this.timer = setTimeout(() => void this.connect(), this.pauseMs);
      this.pauseMs = Math.min(RECONNECT_MAX_MS, this.pauseMs * 2);
    };
    client.on('error', again);
    client.on('end', () => again(new Error('the connection ended')));
    client.on('notification', (message) => {
      if (message.channel === JOBS_CHANNEL && message.payload) this.onLocation(message.payload);
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${JOBS_CHANNEL}`);
      this.client = client;
      this.pauseMs = RECONNECT_MIN_MS;
      if (this.closed) await this.close();
    } catch (error) {
      again(error);
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.timer);
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => undefined);
  }
}
