// The real CLI process: help, version, usage errors (64) and configuration
// errors (78), each one line on stderr and never a stack trace.

import { execFileSync } from 'node:child_process';
import { chmodSync, closeSync, constants, existsSync, mkdirSync, openSync, readFileSync, readSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { CHECK_TYPES, type CheckType } from '../../src/core/check-type.js';
import { defaultRegistry } from '../../src/checks/registry.js';
import { type AgentProcess, cleanEnv, exitWithin, REPO, startAgent, tempDir } from '../support/agent-process.js';
import { retryUntil } from '../support/daemon.js';

const running: AgentProcess[] = [];
const servers: net.Server[] = [];

afterEach(async () => {
  for (const agent of running.splice(0)) {
    agent.kill('SIGKILL');
    await agent.exit;
  }
  for (const server of servers.splice(0)) await new Promise((resolve) => server.close(resolve));
});

function run(args: string[], env: Record<string, string> = {}): AgentProcess {
  const proc = startAgent(args, cleanEnv({ STATE_DIR: tempDir(), ...env }));
  running.push(proc);
  return proc;
}

function stderrLines(proc: AgentProcess): string[] {
  return proc
    .stderr()
    .split('\n')
    .filter((l) => l.length > 0);
}

/** Exits with `code`, and stderr is exactly one `outpost: …` line without a stack trace. */
async function expectOneLineFailure(proc: AgentProcess, code: number): Promise<string> {
  const { code: exitCode } = await proc.exit;
  const lines = stderrLines(proc);
  expect(lines, proc.stderr()).toHaveLength(1);
  const [line] = lines as [string];
  expect(line.startsWith('outpost: ')).toBe(true);
  expect(line).not.toMatch(/\n\s+at /);
  expect(exitCode, proc.stderr()).toBe(code);
  return line;
}

function checksFile(content: unknown): string {
  const file = path.join(tempDir(), 'checks.json');
  writeFileSync(file, typeof content === 'string' ? content : JSON.stringify(content));
  return file;
}

const VALID = { checks: [{ id: 'ok', checkType: 'URL', frequency: 60, request: { url: 'http://127.0.0.1:9/' }, shouldFail: true }] };


/**
 * A folder and a checks file in it that uid 65534 may read but not write: EACCES needs a user other than root,
 * so the agent runs as that one (this suite runs as root, as CI does).
 */
function checksForNobody(): { dir: string; file: string } {
  expect(process.getuid?.(), 'this test starts the agent as uid 65534 and must run as root').toBe(0);
  const dir = tempDir();
  chmodSync(dir, 0o755);
  const file = path.join(dir, 'checks.json');
  writeFileSync(file, JSON.stringify(VALID));
  chmodSync(file, 0o644);
  return { dir, file };
}

describe('outpost CLI', () => {
  it('--help exits 0 and lists the commands', async () => {
    const proc = run(['--help']);
    expect((await proc.exit).code).toBe(0);
    const out = proc.stdout();
    expect(out).toContain('Usage: outpost <command> [options]');
    for (const command of ['agent', 'local <checks.json>', 'once <checks.json>', '--results <file.jsonl>']) expect(out).toContain(command);
    expect(proc.stderr()).toBe('');
  });

  it('--version prints the package.json version', async () => {
    const { version } = JSON.parse(readFileSync(path.join(REPO, 'package.json'), 'utf8')) as { version: string };
    const proc = run(['--version']);
    expect((await proc.exit).code).toBe(0);
    expect(proc.stdout()).toBe(`${version}\n`);
    expect(proc.stderr()).toBe('');
  });

  it('no command → exit 64, one line', async () => {
    const line = await expectOneLineFailure(run([]), 64);
    expect(line).toContain('no command given');
  });

  it('unknown command → exit 64, one line naming it', async () => {
    const line = await expectOneLineFailure(run(['frobnicate']), 64);
    expect(line).toContain('unknown command "frobnicate"');
  });

  it('unknown option → exit 64, one line naming it', async () => {
    const line = await expectOneLineFailure(run(['once', checksFile(VALID), '--fast']), 64);
    expect(line).toContain('unknown option "--fast"');
  });

  it('a checks file missing from local mode → exit 64', async () => {
    const line = await expectOneLineFailure(run(['local']), 64);
    expect(line).toContain('local needs a checks file');
  });

  const badEnv: Array<{ env: Record<string, string>; parts: string[] }> = [
    { env: { JOB_CONCURRENCY: '0' }, parts: ['JOB_CONCURRENCY="0"', '1 to 1000'] },
    { env: { AGENT_HEALTH_PORT: 'abc' }, parts: ['AGENT_HEALTH_PORT="abc"', '0 to 65535'] },
    { env: { API_URL: 'ftp://x' }, parts: ['API_URL="ftp://x"', 'http:// or https://'] },
    { env: { LOG_LEVEL: 'verbose' }, parts: ['LOG_LEVEL="verbose"'] },
    { env: { SHUTDOWN_GRACE_SECONDS: '-1' }, parts: ['SHUTDOWN_GRACE_SECONDS="-1"'] },
  ];
  for (const { env, parts } of badEnv) {
    it(`agent with ${JSON.stringify(env)} → exit 78, one line naming variable and value`, async () => {
      const proc = run(['agent'], { API_URL: 'http://127.0.0.1:9', API_KEY: 'pl_test_key', ...env });
      const line = await expectOneLineFailure(proc, 78);
      for (const part of parts) expect(line).toContain(part);
    });
  }

  it('several bad variables → exit 78 with one line for each', async () => {
    const proc = run(['once', checksFile(VALID)], { JOB_CONCURRENCY: '0', LOG_LEVEL: 'x', AGENT_HEALTH_PORT: '-1' });
    expect((await proc.exit).code).toBe(78);
    expect(stderrLines(proc)).toEqual([
      'outpost: LOG_LEVEL="x" is invalid: must be one of debug, info, warn, error',
      'outpost: JOB_CONCURRENCY="0" is invalid: must be an integer from 1 to 1000',
      'outpost: AGENT_HEALTH_PORT="-1" is invalid: must be an integer from 0 to 65535',
    ]);
  });

  it('--results naming the checks file → exit 78, and the file is left as it was', async () => {
    const file = checksFile(VALID);
    const line = await expectOneLineFailure(run(['once', file, '--results', file]), 78);
    expect(line).toBe(`outpost: --results ${file} is the checks file: results would be appended to it; name another file`);
    expect(readFileSync(file, 'utf8')).toBe(JSON.stringify(VALID));
  });

  it('--results naming a FIFO: exit 78 at once while nobody reads it; written like a pipe once a reader is there', async () => {
    const fifo = path.join(tempDir(), 'results.fifo');
    execFileSync('mkfifo', [fifo]);
    const line = await expectOneLineFailure(run(['once', checksFile(VALID), '--results', fifo]), 78);
    expect(line).toBe(`outpost: --results ${fifo} is a FIFO that no process is reading: start its reader first`);
    // This process is the reader: a non-blocking open is there at once, and a pipe's 64 KB hold one result.
    const reader = openSync(fifo, constants.O_RDONLY | constants.O_NONBLOCK);
    try {
      const proc = run(['once', checksFile(VALID), '--results', fifo]);
      expect((await proc.exit).code, proc.stderr()).toBe(0);
      const buffer = Buffer.alloc(65_536);
      const size = readSync(reader, buffer);
      expect(buffer.subarray(0, size).toString('utf8').trim().split('\n').map((l) => (JSON.parse(l) as { checkId: string }).checkId)).toEqual(['ok']);
    } finally {
      closeSync(reader);
    }
  });

  it('-v as the value of --results is a file name, not --version', async () => {
    const dir = tempDir();
    // Run in `dir`, where the relative file "-v" is written.
    const proc = startAgent(['once', checksFile(VALID), '--results', '-v'], cleanEnv({ STATE_DIR: dir }), ['sh', '-c', 'cd "$0" && exec "$@"', dir]);
    running.push(proc);
    expect((await proc.exit).code, proc.stderr()).toBe(0);
    expect(proc.stderr()).toContain('outpost once: 1 check: 1 passed');
    const written = readFileSync(path.join(dir, '-v'), 'utf8').trim().split('\n');
    expect(written.map((line) => (JSON.parse(line) as { checkId: string }).checkId)).toEqual(['ok']);
  });

  it('agent without API_KEY → exit 78 naming API_KEY', async () => {
    const line = await expectOneLineFailure(run(['agent'], { API_URL: 'http://127.0.0.1:9' }), 78);
    expect(line).toContain('API_KEY is not set');
  });

  it('a bad variable also stops local mode before anything runs', async () => {
    const line = await expectOneLineFailure(run(['local', checksFile(VALID)], { JOB_CONCURRENCY: '1001' }), 78);
    expect(line).toBe('outpost: JOB_CONCURRENCY="1001" is invalid: must be an integer from 1 to 1000');
  });

  it('a bad LOCATION_WRITE_BYTES_PER_MINUTE stops server mode → exit 78, one line', async () => {
    const proc = run(['server', checksFile(VALID)], { OUTPOST_API_KEY: 'a-long-enough-api-key', API_PORT: '0', LOCATION_WRITE_BYTES_PER_MINUTE: '64MB' });
    const line = await expectOneLineFailure(proc, 78);
    expect(line).toBe(`outpost: LOCATION_WRITE_BYTES_PER_MINUTE="64MB" is invalid: must be an integer from 0 to ${1024 ** 4}`);
  });

  it('a missing NODE_EXTRA_CA_CERTS file → exit 78 with one outpost line naming it', async () => {
    const proc = run(['once', checksFile(VALID)], { NODE_EXTRA_CA_CERTS: '/no/such/ca.pem' });
    expect((await proc.exit).code).toBe(78);
    // Node itself may print its own warning about the file first; ours is one line.
    const ours = stderrLines(proc).filter((l) => l.startsWith('outpost: '));
    expect(ours).toEqual(['outpost: NODE_EXTRA_CA_CERTS="/no/such/ca.pem" is invalid: must be a readable PEM file']);
    expect(proc.stderr()).not.toMatch(/\n\s+at /);
  });

  it('an invalid checks file → exit 78 naming the check and the JSON path', async () => {
    const file = checksFile({
      checks: [
        { id: 'good', checkType: 'URL', request: { url: 'http://127.0.0.1:9/' } },
        { id: 'broken', checkType: 'URL', request: { url: 'gopher://x' } },
      ],
    });
    const line = await expectOneLineFailure(run(['once', file]), 78);
    expect(line).toBe(`outpost: ${file}: check "broken" at $.checks[1].request.url: must use http or https (got gopher)`);
  });

  it('--uptime-only refuses a scripted check in a checks file, naming the uptime types', async () => {
    const file = checksFile({ checks: [{ id: 'steps', checkType: 'MULTI_STEP', script: 'await step("a", async () => {})' }] });
    const line = await expectOneLineFailure(run(['once', file, '--uptime-only']), 78);
    expect(line).toBe(
      `outpost: ${file}: check "steps" at $.checks[0].checkType: MULTI_STEP is not supported by this agent (supported: URL, API, TCP, ICMP, DNS): this agent runs with --uptime-only (URL, API, TCP, DNS and ICMP checks only)`,
    );
  });

  it('a checks file with several problems → exit 78 listing them all, no stack trace', async () => {
    const registry = defaultRegistry();
    const unsupported = CHECK_TYPES.find((t) => !registry.has(t)) as string;
    const reason = registry.whyUnsupported(unsupported as CheckType);
    const file = checksFile({ checks: [{ id: 'a', checkType: unsupported }, { id: 'b', checkType: 'URL', request: {} }] });
    // Once mode runs every check itself (local mode serves HEARTBEAT checks, which may be the unsupported type here).
    const proc = run(['once', file]);
    expect((await proc.exit).code).toBe(78);
    const lines = stderrLines(proc);
    expect(lines[0]).toBe(`outpost: ${file}: 2 problems:`);
    expect(lines.slice(1).map((l) => l.trim())).toEqual([
      `check "a" at $.checks[0].checkType: ${unsupported} is not supported by this agent (supported: ${registry.types().join(', ')}): ${reason}`,
      'check "b" at $.checks[1].request.url: is required',
    ]);
    expect(proc.stderr()).not.toMatch(/\n\s+at /);
  });

  it('a checks file nested 20,000 deep in a field nobody reads → exit 78 naming where, no stack trace', async () => {
    const deep = `${'['.repeat(20_000)}${']'.repeat(20_000)}`;
    const file = checksFile(`{"checks":[{"id":"a","checkType":"URL","request":{"url":"http://127.0.0.1:9/"},"unknownField":${deep}}]}`);
    const line = await expectOneLineFailure(run(['once', file]), 78);
    expect(line).toBe(`outpost: ${file}: $.checks[0].unknownField[0]…: is nested too deep (a checks file may nest 128 levels)`);
  });

  it('a misspelled field in a checks file → exit 78 naming it and the field meant, before anything runs', async () => {
    const file = checksFile({
      checks: [
        {
          id: 't',
          name: 'typo',
          checkType: 'URL',
          frequncy: 5,
          request: { url: 'http://127.0.0.1:9/' },
          assertion: [{ source: 'STATUS_CODE', comparison: 'EQUALS', target: '500' }],
        },
      ],
    });
    const proc = run(['once', file]);
    expect((await proc.exit).code).toBe(78);
    expect(stderrLines(proc)).toEqual([
      `outpost: ${file}: 2 problems:`,
      '  check "typo" at $.checks[0].frequncy: is not a field Outpost reads; did you mean "frequency"?',
      '  check "typo" at $.checks[0].assertion: is not a field Outpost reads; did you mean "assertions"?',
    ]);
    expect(proc.stdout()).toBe('');
  });

  it('a field Outpost does not read → one warning naming its JSON path, and the check runs', async () => {
    const file = checksFile({ checks: [{ ...VALID.checks[0], muted: false, request: { url: 'http://127.0.0.1:9/', bodyType: 'NONE' } }] });
    const proc = run(['once', file]);
    expect((await proc.exit).code, proc.stderr()).toBe(0);
    const warnings = proc.logs.filter((l) => l.msg.startsWith('checks file:'));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({
      level: 40,
      file,
      ignoredFields: ['$.checks[0].muted', '$.checks[0].request.bodyType'],
      msg: 'checks file: 2 fields Outpost does not read, ignored: $.checks[0].muted, $.checks[0].request.bodyType',
    });
  });

  it("assertions under request (the service's API check shape) decide the run: a failing one fails it, no warning", async () => {
    const target = createServer((_req, res) => res.end('ok'));
    servers.push(target);
    await new Promise<void>((resolve) => target.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(target.address() as net.AddressInfo).port}/`;
    const file = checksFile({ checks: [{ id: 'api', checkType: 'API', request: { method: 'GET', url, assertions: [{ source: 'STATUS_CODE', comparison: 'EQUALS', target: '500' }] } }] });
    const proc = run(['once', file]);
    expect((await proc.exit).code, proc.stderr()).toBe(1);
    expect(proc.stderr()).toContain('outpost once: 1 check: 0 passed, 0 degraded, 1 failed, 0 errors');
    expect(proc.logs.filter((l) => l.msg.startsWith('checks file:'))).toEqual([]);
    const both = checksFile({ checks: [{ id: 'api', checkType: 'API', assertions: [], request: { method: 'GET', url, assertions: [] } }] });
    const line = await expectOneLineFailure(run(['once', both]), 78);
    expect(line).toBe(`outpost: ${both}: check "api" at $.checks[0].request.assertions: is given as well as $.checks[0].assertions: give the check's assertions in one of them`);
  });

  it('a key given twice in one object of the checks file → exit 78 naming its JSON path', async () => {
    const file = checksFile('{"checks":[{"id":"a","id":"b","checkType":"URL","shouldFail":true,"request":{"url":"http://127.0.0.1:9/"}}]}');
    const line = await expectOneLineFailure(run(['once', file]), 78);
    expect(line).toBe(`outpost: ${file}: $.checks[0].id: is given more than once in its object (JSON keeps only the last; give it once)`);
  });

  it('a checks file that begins with a UTF-8 byte-order mark runs', async () => {
    const file = checksFile(`\uFEFF${JSON.stringify(VALID)}`);
    expect(readFileSync(file).subarray(0, 3)).toEqual(Buffer.from([0xef, 0xbb, 0xbf]));
    const proc = run(['once', file]);
    expect((await proc.exit).code, proc.stderr()).toBe(0);
    expect(proc.stderr()).toContain('1 passed');
  });

  it('invalid JSON in the checks file → exit 78', async () => {
    const file = checksFile('{ "checks": [ ');
    const line = await expectOneLineFailure(run(['once', file]), 78);
    expect(line).toContain(`${file}: not valid JSON`);
  });

  it('a missing checks file → exit 78 naming it', async () => {
    const file = path.join(tempDir(), 'nope.json');
    const line = await expectOneLineFailure(run(['local', file]), 78);
    expect(line).toBe(`outpost: ${file}: cannot be read (ENOENT)`);
  });

  it('a health port already in use → exit 78 naming AGENT_HEALTH_PORT', async () => {
    const blocker = net.createServer();
    servers.push(blocker);
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    const port = (blocker.address() as net.AddressInfo).port;
    const proc = run(['local', checksFile(VALID)], { AGENT_HEALTH_PORT: String(port) });
    const { code } = await proc.exit;
    expect(code, proc.stderr()).toBe(78);
    const ours = stderrLines(proc).filter((l) => l.startsWith('outpost: '));
    expect(ours).toEqual([`outpost: AGENT_HEALTH_PORT=${port} cannot be used (EADDRINUSE): choose a free port`]);
    expect(proc.stderr()).not.toMatch(/\n\s+at /);
    // Nothing ran: no results on stdout.
    expect(proc.stdout()).toBe('');
  });

  it('an unwritable --results path → exit 78 naming the path', async () => {
    const results = path.join(tempDir(), 'no-such-dir', 'out.jsonl');
    const line = await expectOneLineFailure(run(['once', checksFile(VALID), '--results', results]), 78);
    expect(line).toContain(results);
    expect(line).toContain('ENOENT');
  });
  it('a --results file the agent may not create (EACCES) → exit 78 naming the path, not the health port', async () => {
    const { dir, file } = checksForNobody();
    const results = path.join(dir, 'out.jsonl');
    const proc = startAgent(['once', file, '--results', results], cleanEnv({ STATE_DIR: dir }), ['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups']);
    running.push(proc);
    const line = await expectOneLineFailure(proc, 78);
    // Once mode keeps nothing in STATE_DIR.
    expect(line).toBe(`outpost: ${results}: EACCES (check --results)`);
  });
  it('server mode stopped by SIGTERM while its modules load finishes starting, then drains: the store closed, exit 0', async () => {
    const dir = tempDir();
    const file = checksFile({ privateLocations: [{ id: 'lab', name: 'Lab' }], checks: [{ id: 'c', checkType: 'URL', locations: ['lab'], request: { url: 'http://127.0.0.1:9/' } }] });
    const proc = startAgent(['server', file], cleanEnv({ STATE_DIR: dir, OUTPOST_API_KEY: 'signal-test-public-key-0123456789', API_PORT: '0' }));
    running.push(proc);
    // src/main.ts catches SIGHUP (with SIGTERM and SIGINT) before it loads the CLI; Node.js itself catches SIGTERM and
    // SIGINT from the start but not SIGHUP, so once the kernel says SIGHUP is caught the signal lands while src/cli.ts loads.
    const catchesHangUp = () => {
      try {
        const caught = /^SigCgt:\s*([0-9a-f]+)$/m.exec(readFileSync(`/proc/${proc.proc.pid}/status`, 'utf8'))?.[1];
        return caught !== undefined && (BigInt(`0x${caught}`) & 1n) !== 0n;
      } catch {
        return false;
      }
    };
    expect(await retryUntil(15_000, async () => catchesHangUp(), 5)).toBe(true);
    proc.kill('SIGTERM');
    const { code, signal } = await exitWithin(proc, 30_000, 'server mode after a SIGTERM while loading');
    // The documented stop (docs/configuration.md "Signals"), not Node.js's own exit 143 in the middle of the start.
    expect({ code, signal }, `${proc.stdout()}${proc.stderr()}`).toEqual({ code: 0, signal: null });
    const messages = proc.logs.map((l) => String(l.msg));
    expect(messages).toContain('SIGTERM while starting: stopping as soon as the start is done');
    const started = messages.indexOf('outpost server started');
    expect(started).toBeGreaterThanOrEqual(0);
    expect(messages.indexOf('outpost server stopped')).toBeGreaterThan(started);
    expect(messages.filter((m) => m.startsWith('closing the database failed'))).toEqual([]);
    // SQLite closed cleanly: the last connection's close checkpoints its write-ahead log and deletes it.
    if (existsSync(path.join(dir, 'outpost.db'))) expect(existsSync(path.join(dir, 'outpost.db-wal'))).toBe(false);
  });

  it('a checks file that is a FIFO → exit 78 at once, naming it (no hang)', async () => {
    const fifo = path.join(tempDir(), 'checks.json');
    execFileSync('mkfifo', [fifo]);
    const line = await expectOneLineFailure(run(['once', fifo]), 78);
    expect(line).toBe(`outpost: ${fifo}: is not a regular file (a FIFO, device or directory cannot be a checks file)`);
  });

  it('NODE_EXTRA_CA_CERTS naming a FIFO → exit 78 at once, naming it (no hang)', async () => {
    const fifo = path.join(tempDir(), 'ca.pem');
    execFileSync('mkfifo', [fifo]);
    // Node.js opens the setting on a thread of its own, blocked on a FIFO until a writer comes; exit waits for it.
    const proc = run(['once', checksFile(VALID)], { NODE_EXTRA_CA_CERTS: fifo });
    await exitWithin(proc, 20_000, 'a process whose NODE_EXTRA_CA_CERTS is a FIFO');
    const line = await expectOneLineFailure(proc, 78);
    expect(line).toBe(`outpost: NODE_EXTRA_CA_CERTS="${fifo}" is invalid: must be a readable PEM file`);
  });

  it('--results /dev/full → exit 78, one outpost line naming the file, no stack trace', async () => {
    const proc = run(['once', checksFile(VALID), '--results', '/dev/full']);
    expect((await proc.exit).code).toBe(78);
    const ours = stderrLines(proc).filter((l) => l.startsWith('outpost: '));
    expect(ours).toEqual(['outpost: --results /dev/full cannot be written (ENOSPC)']);
    expect(proc.stderr()).not.toMatch(/\n\s+at /);
  });

  it('STATE_DIR=/proc/self/x → exit 78 naming STATE_DIR (no hang)', async () => {
    const line = await expectOneLineFailure(run(['agent'], { API_URL: 'http://127.0.0.1:9', API_KEY: 'a-long-key', STATE_DIR: '/proc/self/x' }), 78);
    expect(line).toBe('outpost: STATE_DIR="/proc/self/x" must be a writable directory (ENOENT)');
  });

  it('STATE_DIR under /proc: once mode reports a refused connection as such (its artifacts folder fails at once)', async () => {
    // Node's recursive mkdir spins forever under /proc: the diagnostics' artifact folder held the check until its hard cap.
    const file = checksFile({ checks: [{ id: 'refused', checkType: 'URL', request: { url: 'http://127.0.0.1:9/' } }] });
    const proc = run(['once', file], { STATE_DIR: '/proc/outpost-test/state' });
    expect((await proc.exit).code, proc.stderr()).toBe(1);
    const [result] = proc.stdoutLines.map((line) => JSON.parse(line) as { apiCheckResult: { requestError: string; jobLog: string[] } });
    expect(result?.apiCheckResult.requestError).toContain('ECONNREFUSED');
    expect(result?.apiCheckResult.jobLog.join('\n')).not.toContain('Timed out');
  });

  it('STATE_DIR under /proc: local mode exits 78 naming STATE_DIR, as the other modes do', async () => {
    const line = await expectOneLineFailure(run(['local', checksFile(VALID)], { STATE_DIR: '/proc/outpost-test/state' }), 78);
    expect(line).toBe('outpost: STATE_DIR="/proc/outpost-test/state" must be a writable directory (ENOENT)');
  });

  it('STATE_DIR that is a file: local mode exits 78 naming STATE_DIR, runs no check', async () => {
    const file = path.join(tempDir(), 'state');
    writeFileSync(file, '');
    const proc = run(['local', checksFile(VALID)], { STATE_DIR: file });
    const line = await expectOneLineFailure(proc, 78);
    expect(line).toMatch(/^outpost: STATE_DIR=".*" must be a writable directory \((ENOTDIR|EEXIST)\)$/);
    expect(proc.stdout()).toBe('');
  });

  it('a store local mode cannot open → exit 78 naming it, runs no check', async () => {
    const stateDir = tempDir();
    mkdirSync(path.join(stateDir, 'outpost.db'));
    const proc = run(['local', checksFile(VALID)], { STATE_DIR: stateDir });
    const line = await expectOneLineFailure(proc, 78);
    expect(line).toMatch(new RegExp(`^outpost: STATE_DIR=${JSON.stringify(stateDir)}: local mode's store ${stateDir}/outpost.db cannot be opened \\(.+\\)$`));
    expect(proc.stdout()).toBe('');
  });

  it('a STATE_DIR local mode may not write (EACCES) → exit 78 in one line, no lock warning', async () => {
    const { dir, file } = checksForNobody();
    const stateDir = path.join(dir, 'state');
    const proc = startAgent(['local', file], cleanEnv({ STATE_DIR: stateDir }), ['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups']);
    running.push(proc);
    const line = await expectOneLineFailure(proc, 78);
    expect(line).toBe(`outpost: STATE_DIR=${JSON.stringify(stateDir)} must be a writable directory (EACCES)`);
    expect(proc.stdout()).toBe('');
  });

  it('STATE_DIR that is a file → exit 78 naming STATE_DIR', async () => {
    const file = path.join(tempDir(), 'state');
    writeFileSync(file, '');
    const line = await expectOneLineFailure(run(['agent'], { API_URL: 'http://127.0.0.1:9', API_KEY: 'a-long-key', STATE_DIR: file }), 78);
    expect(line).toMatch(/^outpost: STATE_DIR=".*" must be a writable directory \((ENOTDIR|EEXIST)\)$/);
  });

  it('a NODE_EXTRA_CA_CERTS file without a PEM certificate → exit 78 naming the variable', async () => {
    const garbage = path.join(tempDir(), 'ca.pem');
    writeFileSync(garbage, '-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\njunk\n');
    const proc = run(['once', checksFile(VALID)], { NODE_EXTRA_CA_CERTS: garbage });
    expect((await proc.exit).code).toBe(78);
    const ours = stderrLines(proc).filter((l) => l.startsWith('outpost: '));
    expect(ours).toEqual([`outpost: NODE_EXTRA_CA_CERTS=${JSON.stringify(garbage)} is invalid: holds no PEM certificate that parses`]);
  });
});
