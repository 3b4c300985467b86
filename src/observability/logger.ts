// pino, JSON lines by default; a compact readable line when the stream is a
// terminal. Job lines carry jobId, checkId and checkType via child loggers.

import { Writable } from 'node:stream';
import { isMainThread } from 'node:worker_threads';
import pino from 'pino';
import { LogDestination } from './log-destination.js';

export type Logger = pino.Logger;
export const LOG_LEVELS = ['debug', 'info', 'warn', 'error'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

const LEVEL_NAMES: Record<number, string> = { 10: 'TRACE', 20: 'DEBUG', 30: 'INFO', 40: 'WARN', 50: 'ERROR', 60: 'FATAL' };
const LEVEL_COLOURS: Record<number, string> = { 20: '\x1b[90m', 30: '\x1b[36m', 40: '\x1b[33m', 50: '\x1b[31m', 60: '\x1b[41m' };
const HIDDEN = new Set(['level', 'time', 'msg', 'pid', 'hostname', 'v']);

/** Formats one pino JSON line as `12:00:01 INFO  message key=value …`. */
export function prettyLine(json: string): string {
  let parsed: unknown;
  try {
    parsed = JSON.parse(json);
  } catch {
    return `${json}\n`;
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) return `${json}\n`;
  const record = parsed as Record<string, unknown>;
  const level = Number(record.level);
  const stamp = Number(record.time);
  const time = Number.isFinite(stamp) && Math.abs(stamp) < 8.64e15 ? new Date(stamp).toISOString().slice(11, 19) : '--:--:--';
  const extras = Object.entries(record)
    .filter(([key]) => !HIDDEN.has(key))
    .map(([key, value]) => `${key}=${typeof value === 'string' ? value : JSON.stringify(value)}`)
    .join(' ');
  const name = (LEVEL_NAMES[level] ?? String(level)).padEnd(5);
  return `\x1b[2m${time}\x1b[0m ${LEVEL_COLOURS[level] ?? ''}${name}\x1b[0m ${String(record.msg ?? '')}${extras ? ` \x1b[2m${extras}\x1b[0m` : ''}\n`;
}

function prettyStream(target: NodeJS.WriteStream): Writable {
  return new Writable({
    write(chunk: Buffer, _encoding, done) {
      const text = chunk
        .toString('utf8')
        .split('\n')
        .filter((line) => line.length > 0)
        .map(prettyLine)
        .join('');
      target.write(text, () => done());
    },
  });
}

export interface LoggerHandle {
  logger: Logger;
  /** Writes out what is buffered; call before process.exit. Bounded, never throws. */
  flush(): void;
}

/**
 * `scrub` sees every serialized line, of the root logger and of every child,
 * before it is written (the secrets scrubber: docs/secrets.md).
 *
 * A log stream that fails is never a crash nor a hang: logging to it stops,
 * the process goes on (src/observability/log-destination.ts).
 */
export function createLogger(level: LogLevel, stream: 'stdout' | 'stderr', scrub?: (line: string) => string): LoggerHandle {
  const target = stream === 'stdout' ? process.stdout : process.stderr;
  const options: pino.LoggerOptions = {
    level,
    base: { pid: process.pid },
    timestamp: pino.stdTimeFunctions.epochTime,
    ...(scrub ? { hooks: { streamWrite: scrub } } : {}),
  };
  if (isMainThread) {
    // Lines written straight to the streams (a one-line failure, local mode's summary, a terminal's log lines)
    // would otherwise turn a closed stream into an uncaught 'error' event: a crash. Nothing more can be said on a
    // stream that failed; other listeners (local mode's results on stdout) still hear it.
    for (const std of [process.stdout, process.stderr]) std.on('error', () => undefined);
  }
  if (target.isTTY) {
    const logger = pino(options, prettyStream(target));
    return { logger, flush: () => undefined };
  }
  const destination = new LogDestination(stream === 'stdout' ? 1 : 2);
  const logger = pino(options, destination);
  // pino flushes its own destination at exit; this one is flushed here, bounded, for exits that skip flush().
  if (isMainThread) process.once('exit', () => destination.flushSync());
  return { logger, flush: () => destination.flushSync() };
}
