// A script's captured output (src/checks/scripted/runner.ts OutputCapture): one UTF-8 stream across chunks, the
// byte limit, and a cut that never leaves part of a line (so never part of a secret) behind.

import { describe, expect, it } from 'vitest';
import { OutputCapture } from '../../src/checks/scripted/runner.js';

describe('OutputCapture', () => {
  it('decodes a character split between two chunks as one', () => {
    const capture = new OutputCapture(1024);
    const bytes = Buffer.from('a ä-geheim b\n');
    capture.push(bytes.subarray(0, 3)); // "a " and the first byte of "ä"
    capture.push(bytes.subarray(3));
    expect(capture.lines()).toEqual(['a ä-geheim b']);
  });

  it('cuts at the last full line when a chunk crosses the limit, counting what it cut', () => {
    const capture = new OutputCapture(25);
    capture.push(Buffer.from('first line\ntoken=sup'));
    capture.push(Buffer.from('ersecret\n'));
    expect(capture.lines()).toEqual(['first line', '[output truncated: 18 more bytes, cut at the last full line]']);
  });

  it('cuts at the last full line when the limit is reached exactly, then more comes', () => {
    const capture = new OutputCapture(20);
    capture.push(Buffer.from('first line\ntoken=sup'));
    capture.push(Buffer.from('ersecret\n'));
    const all = capture.all;
    expect(all).toBe('first line\n');
    expect(all).not.toContain('token');
  });

  it('keeps everything under the limit, and ends a last line without a newline', () => {
    const capture = new OutputCapture(100);
    capture.push(Buffer.from('one\ntwo'));
    expect(capture.lines()).toEqual(['one', 'two']);
  });

  it('drops a single line longer than the limit entirely', () => {
    const capture = new OutputCapture(10);
    capture.push(Buffer.from('x'.repeat(25)));
    expect(capture.lines()).toEqual(['[output truncated: 25 more bytes, cut at the last full line]']);
  });
});
