// One DNS exchange over UDP (a connected socket, so an ICMP port unreachable
// comes back as ECONNREFUSED) or TCP (RFC 1035 §4.2.2: a 2-byte length
// prefix). Never throws: every ending is an ExchangeResult.

import dgram from 'node:dgram';
import net from 'node:net';
import { performance } from 'node:perf_hooks';

/** What the caller makes of one message that arrived. */
export type Verdict<T> = { kind: 'accept'; value: T } | { kind: 'ignore'; reason: string } | { kind: 'fail'; error: string; code: string };

export type ExchangeResult<T> =
  | { ok: true; value: T; size: number; elapsedMs: number; connectMs?: number }
  | { ok: false; error: string; code: string; elapsedMs: number; aborted?: boolean };

export interface ExchangeOptions<T> {
  address: string;
  family: 4 | 6;
  port: number;
  query: Buffer;
  /** Aborts the exchange (the check's cap, its own deadline, a lost lease, shutdown). */
  signal: AbortSignal;
  inspect(message: Buffer): Verdict<T>;
  /** For the jobLog. */
  log(line: string): void;
}

export const displayServer = (address: string, port: number): string => (address.includes(':') ? `[${address}]:${port}` : `${address}:${port}`);

const round = (ms: number) => Math.round(ms * 100) / 100;

/** The errno code of a socket error, if any. */
const codeOf = (error: unknown): string => (error as NodeJS.ErrnoException)?.code ?? 'EIO';

function socketError(error: unknown, server: string, transport: 'UDP' | 'TCP'): { error: string; code: string } {
  const code = codeOf(error);
  const message = (error as Error)?.message ?? String(error);
  switch (code) {
    case 'ECONNREFUSED':
      return {
        code,
        error:
          transport === 'UDP'
            ? `refused: ${server} answered with ICMP port unreachable (nothing listens there over UDP; ECONNREFUSED)`
            : `connection refused (ECONNREFUSED) at ${server} over TCP`,
      };
    case 'ECONNRESET':
      return { code, error: `connection reset by peer (ECONNRESET) at ${server} over ${transport}` };
    case 'EHOSTUNREACH':
      return { code, error: `host unreachable (EHOSTUNREACH): ${server} over ${transport}` };
    case 'ENETUNREACH':
      return { code, error: `network unreachable (ENETUNREACH): ${server} over ${transport}` };
    default:
      return { code, error: `${message} at ${server} over ${transport}` };
  }
}

/**
 * UDP: sends the query, re-sends it (same id) every `resendMs` while nothing
 * matching arrives, at most `maxSends` times; datagrams the inspector ignores
 * (another id, another question) are logged and skipped.
 */
/** Ignored datagrams a UDP exchange names in the jobLog, one line each; the rest are counted in one line. */
export const MAX_IGNORED_LOGGED = 10;

export function udpExchange<T>(options: ExchangeOptions<T> & { resendMs: number; maxSends: number }): Promise<ExchangeResult<T>> {
  const { address, family, port, query, signal, inspect, log } = options;
  const server = displayServer(address, port);
  const start = performance.now();
  return new Promise((resolve) => {
    const socket = dgram.createSocket(family === 6 ? 'udp6' : 'udp4');
    let sends = 0;
    let ignored = 0;
    let resendTimer: NodeJS.Timeout | undefined;
    let settled = false;
    const finish = (result: ExchangeResult<T>) => {
      if (settled) return;
      settled = true;
      clearTimeout(resendTimer);
      if (ignored > MAX_IGNORED_LOGGED) log(`Ignored ${ignored - MAX_IGNORED_LOGGED} more datagrams from ${server} (${ignored} in all)`);
      signal.removeEventListener('abort', onAbort);
      try {
        socket.close();
      } catch {
        // Already closed.
      }
      resolve(result);
    };
    const fail = (error: string, code: string) => finish({ ok: false, error, code, elapsedMs: round(performance.now() - start) });
    const onAbort = () =>
      finish({
        ok: false,
        aborted: true,
        code: 'ETIMEDOUT',
        error: `no answer from ${server} over UDP within ${Math.round(performance.now() - start)} ms (${sends} ${sends === 1 ? 'query' : 'queries'} sent)`,
        elapsedMs: round(performance.now() - start),
      });
    const send = () => {
      if (settled) return;
      sends++;
      if (sends > 1) log(`No answer after ${Math.round(performance.now() - start)} ms; re-sent the query (${sends} of ${options.maxSends})`);
      try {
        socket.send(query, (error) => {
          if (error) fail(socketError(error, server, 'UDP').error, codeOf(error));
        });
      } catch (error) {
        return fail(socketError(error, server, 'UDP').error, codeOf(error));
      }
      if (sends < options.maxSends) resendTimer = setTimeout(send, options.resendMs);
    };
    if (signal.aborted) return onAbort();
    signal.addEventListener('abort', onAbort, { once: true });
    socket.on('error', (error) => {
      const { error: text, code } = socketError(error, server, 'UDP');
      fail(text, code);
    });
    socket.on('message', (message) => {
      if (settled) return;
      const verdict = inspect(message);
      if (verdict.kind === 'ignore') {
        // A peer may flood mismatched datagrams: the jobLog names the first few and counts the rest.
        ignored++;
        if (ignored <= MAX_IGNORED_LOGGED) log(`Ignored a datagram from ${server}: ${verdict.reason}`);
        return;
      }
      if (verdict.kind === 'fail') return fail(verdict.error, verdict.code);
      finish({ ok: true, value: verdict.value, size: message.length, elapsedMs: round(performance.now() - start) });
    });
    // Node passes a failed connect (e.g. an unknown IPv6 zone) to this callback, not to 'error'.
    const onConnect = (error?: Error) => {
      if (error) fail(socketError(error, server, 'UDP').error, codeOf(error));
      else send();
    };
    try {
      socket.connect(port, address, onConnect as () => void);
    } catch (error) {
      fail(socketError(error, server, 'UDP').error, codeOf(error));
    }
  });
}

/** TCP: one connection, one query, one length-prefixed answer. An answer that does not match fails. */
export function tcpExchange<T>(options: ExchangeOptions<T>): Promise<ExchangeResult<T>> {
  const { address, family, port, query, signal, inspect } = options;
  const server = displayServer(address, port);
  const start = performance.now();
  return new Promise((resolve) => {
    let settled = false;
    let connectMs: number | undefined;
    let received = Buffer.alloc(0);
    let socket: net.Socket;
    try {
      socket = net.connect({ host: address, port, family });
    } catch (error) {
      const { error: text, code } = socketError(error, server, 'TCP');
      resolve({ ok: false, error: text, code, elapsedMs: 0 });
      return;
    }
    const finish = (result: ExchangeResult<T>) => {
      if (settled) return;
      settled = true;
      signal.removeEventListener('abort', onAbort);
      socket.destroy();
      resolve(result);
    };
    const fail = (error: string, code: string) => finish({ ok: false, error, code, elapsedMs: round(performance.now() - start) });
    const onAbort = () =>
      finish({
        ok: false,
        aborted: true,
        code: 'ETIMEDOUT',
        error:
          connectMs === undefined
            ? `no answer from ${server} over TCP within ${Math.round(performance.now() - start)} ms (the connection was not established)`
            : `no answer from ${server} over TCP within ${Math.round(performance.now() - start)} ms (connected after ${Math.round(connectMs)} ms, received ${received.length} bytes)`,
        elapsedMs: round(performance.now() - start),
      });
    if (signal.aborted) {
      onAbort();
      return;
    }
    signal.addEventListener('abort', onAbort, { once: true });
    socket.setNoDelay(true);
    socket.on('connect', () => {
      connectMs = round(performance.now() - start);
      const prefix = Buffer.alloc(2);
      prefix.writeUInt16BE(query.length);
      socket.write(Buffer.concat([prefix, query]));
    });
    socket.on('data', (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      if (received.length < 2) return;
      const length = received.readUInt16BE(0);
      if (length === 0) return fail(`malformed answer from ${server} over TCP: a zero-length message`, 'EBADRESP');
      if (received.length < 2 + length) return;
      const message = received.subarray(2, 2 + length);
      const verdict = inspect(message);
      if (verdict.kind === 'accept') {
        finish({
          ok: true,
          value: verdict.value,
          size: length,
          elapsedMs: round(performance.now() - start),
          ...(connectMs !== undefined ? { connectMs } : {}),
        });
      } else if (verdict.kind === 'fail') {
        fail(verdict.error, verdict.code);
      } else {
        fail(`the answer from ${server} over TCP does not match the query: ${verdict.reason}`, 'EBADRESP');
      }
    });
    socket.on('error', (error) => {
      const { error: text, code } = socketError(error, server, 'TCP');
      fail(text, code);
    });
    socket.on('close', () => {
      const expected = received.length >= 2 ? ` of ${received.readUInt16BE(0) + 2}` : '';
      fail(`${server} closed the TCP connection before a complete answer (received ${received.length}${expected} bytes)`, 'ECONNRESET');
    });
  });
}
