#!/usr/bin/env node
// CLI entry: outpost agent | local <file> | once <file> | --help | --version.
// Configuration problems print one line and exit 78 (EX_CONFIG), usage
// problems 64 (EX_USAGE); never a stack trace.

import { runAgent } from './agent.js';
import { defaultRegistry } from './checks/registry.js';
import { ConfigError, configFromEnv, EXIT_CONFIG, parseArgs, USAGE } from './config.js';
import { ChecksFileError } from './local/checks-file.js';
import { runLocal } from './local/local-mode.js';
import { createLogger } from './observability/logger.js';
import { VERSION } from './version.js';

function fail(message: string, code: number): never {
  process.stderr.write(`outpost: ${message}\n`);
  process.exit(code);
}

async function main(): Promise<void> {
  let command: ReturnType<typeof parseArgs>;
  try {
    command = parseArgs(process.argv.slice(2));
  } catch (error) {
    if (error instanceof ConfigError) fail(error.message, error.exitCode);
    throw error;
  }
  if (command.kind === 'help') {
    process.stdout.write(`outpost ${VERSION}\n\n${USAGE}\n`);
    return;
  }
  if (command.kind === 'version') {
    process.stdout.write(`${VERSION}\n`);
    return;
  }
  let config: ReturnType<typeof configFromEnv>;
  try {
    config = configFromEnv(process.env, command.mode, {
      ...(command.checksFile ? { checksFile: command.checksFile } : {}),
      ...(command.resultsFile ? { resultsFile: command.resultsFile } : {}),
    });
  } catch (error) {
    if (error instanceof ConfigError) fail(error.message, error.exitCode);
    throw error;
  }
  // Local and once modes print results on stdout, so their logs go to stderr.
  const { logger, flush } = createLogger(config.logLevel, config.mode === 'agent' ? 'stdout' : 'stderr');
  const registry = defaultRegistry();
  process.on('uncaughtException', (error) => {
    logger.fatal({ err: error }, 'uncaught exception: exiting');
    flush();
    process.exit(70);
  });
  process.on('unhandledRejection', (reason) => {
    logger.error({ err: reason }, 'unhandled promise rejection');
  });
  let running: { done: Promise<number> };
  try {
    running = config.mode === 'agent' ? await runAgent(config, registry, logger, flush) : await runLocal(config, registry, logger, flush);
  } catch (error) {
    flush();
    if (error instanceof ChecksFileError) fail(error.message, EXIT_CONFIG);
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'EADDRINUSE' || code === 'EACCES') {
      fail(`AGENT_HEALTH_PORT=${config.healthPort} cannot be used (${code}): choose a free port`, EXIT_CONFIG);
    }
    if (code && (error as NodeJS.ErrnoException).path) {
      fail(`${(error as NodeJS.ErrnoException).path}: ${code} (check STATE_DIR and --results)`, EXIT_CONFIG);
    }
    throw error;
  }
  const exitCode = await running.done;
  flush();
  process.exit(exitCode);
}

main().catch((error: unknown) => {
  process.stderr.write(`outpost: unexpected error: ${(error as Error)?.stack ?? String(error)}\n`);
  process.exit(70);
});
