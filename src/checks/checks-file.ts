// Reads a local checks file: `{ "environmentVariables": [...], "checks": [...] }`,
// each check the same definition a job carries. Every problem names the check
// and the JSON path; nothing runs until the whole file is valid.

import { constants } from 'node:fs';
import { open } from 'node:fs/promises';
import { parseCheck, parseEnvironmentVariables } from './parse-definition.js';
import type { CheckDefinition } from './definition.js';
import type { Executor } from './executor.js';
import type { ExecutorRegistry } from './executor-registry.js';
import { DefinitionError, Fields } from './fields.js';
import type { EnvironmentVariable } from '../core/protocol.js';

export interface LocalCheck {
  check: CheckDefinition;
  executor: Executor;
  /** The file's variables, overridden by the check's own (check over global). */
  variables: EnvironmentVariable[];
}

export class ChecksFileError extends Error {
  constructor(file: string, problems: string[]) {
    super(`${file}: ${problems.length === 1 ? problems[0] : `${problems.length} problems:\n  ${problems.join('\n  ')}`}`);
    this.name = 'ChecksFileError';
  }
}

function mergeVariables(global: EnvironmentVariable[], own: EnvironmentVariable[]): EnvironmentVariable[] {
  const merged = new Map(global.map((v) => [v.key, v]));
  for (const v of own) merged.set(v.key, v);
  return [...merged.values()];
}

export function parseChecksFile(text: string, file: string, registry: ExecutorRegistry): LocalCheck[] {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw new ChecksFileError(file, [`not valid JSON (${(error as Error).message})`]);
  }
  const root = Fields.root(json, '$');
  const globals = parseEnvironmentVariables(root);
  if (!Array.isArray(root.raw('checks'))) {
    root.fail('$.checks', 'is required: an array of check definitions');
  }
  const problems = root.issues.map((i) => `${i.path}: ${i.problem}`);
  const checks: LocalCheck[] = [];
  const seen = new Map<string, number>();
  const raw = Array.isArray(root.raw('checks')) ? (root.raw('checks') as unknown[]) : [];
  raw.forEach((item, index) => {
    const label = (item as { name?: unknown; id?: unknown })?.name ?? (item as { id?: unknown })?.id;
    const prefix = typeof label === 'string' ? `check "${label}" at ` : '';
    try {
      const { check, executor } = parseCheck(item, `$.checks[${index}]`, registry);
      const previous = seen.get(check.id);
      if (previous !== undefined) {
        problems.push(`${prefix}$.checks[${index}].id: "${check.id}" is already used by $.checks[${previous}]`);
        return;
      }
      seen.set(check.id, index);
      checks.push({ check, executor, variables: mergeVariables(globals, check.environmentVariables) });
    } catch (error) {
      if (!(error instanceof DefinitionError)) {
        // A check that breaks the parser is still one problem in the file, not a crash with a stack trace.
        problems.push(`${prefix}$.checks[${index}]: cannot be read (${error instanceof Error ? `${error.name}: ${error.message}` : String(error)})`);
        return;
      }
      for (const issue of error.issues) problems.push(`${prefix}${issue.path}: ${issue.problem}`);
    }
  });
  if (problems.length > 0) throw new ChecksFileError(file, problems);
  if (checks.length === 0) throw new ChecksFileError(file, ['$.checks is empty: nothing to run']);
  return checks;
}

/** A checks file holds definitions, not data: far below this. */
export const MAX_CHECKS_FILE_BYTES = 10 * 1024 * 1024;

export async function loadChecksFile(file: string, registry: ExecutorRegistry): Promise<LocalCheck[]> {
  let text: string;
  const cannotRead = (error: unknown) => new ChecksFileError(file, [`cannot be read (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`]);
  // Non-blocking, so that opening a FIFO with no writer returns at once instead of waiting forever.
  const handle = await open(file, constants.O_RDONLY | constants.O_NONBLOCK).catch((error: unknown) => {
    throw cannotRead(error);
  });
  try {
    const stat = await handle.stat();
    if (!stat.isFile()) throw new ChecksFileError(file, ['is not a regular file (a FIFO, device or directory cannot be a checks file)']);
    if (stat.size > MAX_CHECKS_FILE_BYTES) throw new ChecksFileError(file, [`is larger than ${MAX_CHECKS_FILE_BYTES} bytes`]);
    text = await handle.readFile('utf8').catch((error: unknown) => {
      throw cannotRead(error);
    });
  } finally {
    await handle.close().catch(() => undefined);
  }
  return parseChecksFile(text, file, registry);
}
