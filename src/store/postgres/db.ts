// The PostgreSQL connection pool as the stores use it: queries on the pool,
// and transactions on one client that commit before their promise resolves
// (what lets a route answer "accepted": ../store.ts). A transaction that
// loses a deadlock or a serialization conflict to another replica is run
// again, a bounded number of times. BIGINT columns come back as numbers
// (milliseconds and sequence values stay far below 2^53).

import pg from 'pg';

import type { Row } from '../rows.js';
import { WriteHealth } from '../write-health.js';

export type { Row };

/** What a statement runs on: the pool, or one transaction's client. */
export interface Sql {
  rows(sql: string, params?: readonly unknown[]): Promise<Row[]>;
  row(sql: string, params?: readonly unknown[]): Promise<Row | undefined>;
  /** Rows changed. */
  run(sql: string, params?: readonly unknown[]): Promise<number>;
}

export interface PgOptions {
  /** postgres://user:password@host:port/database?sslmode=… (node-postgres reads the TLS parameters). */
  url: string;
  poolSize: number;
  /** For the server's logs: why the pool exists. */
  applicationName?: string;
}

const INT8_OID = 20;
/** Deadlock, serialization failure: the transaction is safe to run again. */
const RETRYABLE = new Set(['40P01', '40001']);
const TX_ATTEMPTS = 5;
const CONNECT_TIMEOUT_MS = 10_000;
const STATEMENT_TIMEOUT_MS = 30_000;

const types = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === INT8_OID ? (value: string) => Number(value) : pg.types.getTypeParser(oid, format ?? 'text')) as typeof pg.types.getTypeParser,
};

function on(client: pg.Pool | pg.PoolClient, onError?: (error: unknown) => void): Sql {
  const query = async (sql: string, params: readonly unknown[]) => {
    try {
      return await client.query(sql, params as unknown[]);
    } catch (error) {
      onError?.(error);
      throw error;
    }
  };
  return {
    async rows(sql, params = []) {
      return (await query(sql, params)).rows as Row[];
    },
    async row(sql, params = []) {
      return (await query(sql, params)).rows[0] as Row | undefined;
    },
    async run(sql, params = []) {
      return (await query(sql, params)).rowCount ?? 0;
    },
  };
}

export class PgDatabase implements Sql {
  readonly pool: pg.Pool;
  /** Whether writes work: every statement and transaction that fails for the storage reports here (readiness, /health, the API's 503). */
  readonly writes = new WriteHealth();
  private readonly sql: Sql;

  constructor(options: PgOptions) {
    this.pool = new pg.Pool({
      connectionString: options.url,
      max: options.poolSize,
      connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
      // A statement stuck behind a lock fails rather than holding a request for ever.
      statement_timeout: STATEMENT_TIMEOUT_MS,
      application_name: options.applicationName ?? 'outpost',
      types,
    });
    // An idle client whose server went away emits here; the next query gets a fresh one.
    this.pool.on('error', () => undefined);
    // A statement outside a transaction that fails for the storage says so too (a transaction's failure is reported by tx).
    this.sql = on(this.pool, (error) => this.writes.failed(error));
  }

  rows(sql: string, params?: readonly unknown[]): Promise<Row[]> {
    return this.sql.rows(sql, params);
  }
  row(sql: string, params?: readonly unknown[]): Promise<Row | undefined> {
    return this.sql.row(sql, params);
  }
  run(sql: string, params?: readonly unknown[]): Promise<number> {
    return this.sql.run(sql, params);
  }

  /** Runs `work` in one transaction on one client; resolves after COMMIT. */
  async tx<T>(work: (sql: Sql) => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      const client = await this.pool.connect();
      let broken: Error | undefined;
      // A checked-out client's connection errors are emitted on the client, not the pool: unheard, one (the
      // ECONNRESET after the server ended the connection, as a failover or pg_terminate_backend does) would be
      // an uncaught exception that stops the server.
      const onConnectionError = (error: Error) => {
        broken ??= error;
      };
      client.on('error', onConnectionError);
      let begun = false;
      try {
        await client.query('BEGIN');
        begun = true;
        const value = await work(on(client));
        await client.query('COMMIT');
        return value;
      } catch (error) {
        await client.query('ROLLBACK').catch((rollback: Error) => {
          broken ??= rollback;
        });
        const code = (error as { code?: string }).code;
        // A BEGIN that failed ran nothing: the pool handed out a connection the server had ended; another is tried.
        const retryable = !begun || (code !== undefined && RETRYABLE.has(code));
        if (!retryable || attempt >= TX_ATTEMPTS) {
          this.writes.failed(error);
          throw error;
        }
      } finally {
        // A broken client is not handed out again, and keeps the listener: its socket may still report an error.
        if (!broken) client.removeListener('error', onConnectionError);
        client.release(broken);
      }
    }
  }

  /** One small write (a counter nobody reads), to learn whether writes work again while nothing else writes. */
  async probeWrite(): Promise<boolean> {
    try {
      await this.tx((sql) => sql.run("INSERT INTO counters (name, value) VALUES ('write_probe', 1) ON CONFLICT (name) DO UPDATE SET value = counters.value + 1"));
      this.writes.recovered();
      return true;
    } catch {
      return false;
    }
  }

  /** True when the database answers a query now. */
  async ping(): Promise<boolean> {
    try {
      await this.pool.query('SELECT 1');
      return true;
    } catch {
      return false;
    }
  }

  async close(): Promise<void> {
    await this.pool.end();
  }
}

export { json, num, numOrNull, str, strOrNull } from '../rows.js';
