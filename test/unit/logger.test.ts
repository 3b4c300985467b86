// prettyLine: the readable log line used when the log stream is a terminal.

import { describe, expect, it } from 'vitest';
import { LOG_LEVELS, prettyLine } from '../../src/observability/logger.js';

// biome-ignore lint/suspicious/noControlCharactersInRegex: stripping ANSI colour codes
const plain = (text: string) => text.replace(/\x1b\[[0-9;]*m/g, '');
const TIME = Date.parse('2026-03-01T12:34:56.789Z');

function line(record: Record<string, unknown>): string {
  return JSON.stringify({ level: 30, time: TIME, pid: 123, hostname: 'h', msg: 'hello', ...record });
}

describe('prettyLine', () => {
  it('formats time, level and message, hiding pino bookkeeping', () => {
    expect(plain(prettyLine(line({})))).toBe('12:34:56 INFO  hello\n');
  });

  it('appends the other fields as key=value, strings bare, others as JSON', () => {
    const out = plain(prettyLine(line({ jobId: 'j-1', checkType: 'URL', elapsedMs: 1503, ok: true, tags: ['a'], err: { message: 'x' } })));
    expect(out).toBe('12:34:56 INFO  hello jobId=j-1 checkType=URL elapsedMs=1503 ok=true tags=["a"] err={"message":"x"}\n');
  });

  it('names every level and pads it to one width', () => {
    const names: Record<number, string> = { 10: 'TRACE', 20: 'DEBUG', 30: 'INFO ', 40: 'WARN ', 50: 'ERROR', 60: 'FATAL' };
    for (const [level, name] of Object.entries(names)) {
      expect(plain(prettyLine(line({ level: Number(level) })))).toBe(`12:34:56 ${name} hello\n`);
    }
    expect(LOG_LEVELS).toEqual(['debug', 'info', 'warn', 'error']);
  });

  it('shows an unknown level as its number', () => {
    expect(plain(prettyLine(line({ level: 35 })))).toBe('12:34:56 35    hello\n');
  });

  it('colours the level', () => {
    expect(prettyLine(line({ level: 50 }))).toContain('\x1b[31mERROR');
    expect(prettyLine(line({ level: 40 }))).toContain('\x1b[33mWARN');
  });

  it('prints a line without a message', () => {
    expect(plain(prettyLine(JSON.stringify({ level: 30, time: TIME, port: 8081 })))).toBe('12:34:56 INFO   port=8081\n');
  });

  it('passes a line that is not JSON through unchanged', () => {
    expect(prettyLine('plain text').startsWith('plain text')).toBe(true);
  });

  it('ends every formatted line, JSON or not, with one newline', () => {
    // prettyStream joins formatted lines with '', so a line without its own
    // newline runs into the next one on the terminal.
    for (const input of [line({}), 'plain text', '{"level":30,"time":']) {
      const out = prettyLine(input);
      expect(out.endsWith('\n')).toBe(true);
      expect(out.endsWith('\n\n')).toBe(false);
    }
  });

  it('does not throw on a JSON line without a usable time or on a non-object', () => {
    // Writable.write must not throw for a line it cannot format; it should fall back to the raw text.
    for (const input of ['{"level":30,"msg":"no time"}', 'null', '42']) {
      expect(() => prettyLine(input)).not.toThrow();
      expect(prettyLine(input)).toContain(input === 'null' || input === '42' ? input : 'no time');
    }
  });
});
