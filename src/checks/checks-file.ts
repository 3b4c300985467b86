// Reads a local checks file: `{ "environmentVariables": [...], "checks": [...] }`,
// each check the same definition a job carries. Every problem names the check
// and the JSON path; nothing runs until the whole file is valid.

import { constants } from 'node:fs';
import { open } from 'node:fs/promises';
import { alertAfterProblem, type FileAlertChannel, parseAlertChannels } from './alert-channel-fields.js';
import { parseCheck, parseEnvironmentVariables } from './parse-definition.js';
import type { CheckDefinition } from './definition.js';
import type { Executor } from './executor.js';
import type { ExecutorRegistry } from './executor-registry.js';
import { DefinitionError, FieldReads, Fields } from './fields.js';
import { type HeartbeatCheck, isHeartbeatItem, parseHeartbeatCheck } from './heartbeat-check.js';
import { parseMaintenanceWindows, parseTags } from './maintenance-windows.js';
import type { MaintenanceWindowDefinition } from '../core/maintenance-window.js';
import type { IncidentDefinition } from '../core/dashboard.js';
import { type ParsedDashboard, parseDashboards, parseIncidents } from './dashboard-fields.js';
import type { EnvironmentVariable } from '../core/protocol.js';
import { MAX_DEFINITION_DEPTH, nestedDeeperThan, pathPastDepth } from '../core/json-depth.js';
import { duplicateKeys } from '../core/json-duplicate-keys.js';
import type { Logger } from '../observability/logger.js';
import { misspelledProblem, sortUnread } from './unread-fields.js';
import { withRequiredHint } from './required-hints.js';

export interface LocalCheck {
  check: CheckDefinition;
  executor: Executor;
  /** The file's variables, overridden by the check's own (check over global). */
  variables: EnvironmentVariable[];
}

export class ChecksFileError extends Error {
  constructor(
    file: string,
    readonly problems: string[],
  ) {
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
  return readChecksFile(text, file, registry).checks;
}

/** The sections of a server's checks file, and the fields of its checks, that once mode reads past (docs/server.md, "The checks file"). */
const SERVER_SECTIONS = ['privateLocations', 'maintenanceWindows', 'alertChannels', 'dashboards', 'incidents'];
export const SERVER_CHECK_FIELDS = ['locations', 'tags', 'alertAfter'];

/**
 * A checks file as once mode reads it: its checks, and the JSON paths of the
 * fields nobody reads, which are ignored (a misspelled one is a problem
 * instead: unread-fields.ts).
 */
export function readChecksFile(text: string, file: string, registry: ExecutorRegistry): { checks: LocalCheck[]; ignoredFields: string[] } {
  const source = parseJson(text, file);
  const reads = new FieldReads();
  const problems: string[] = [];
  let read: ReturnType<typeof readChecks> | undefined;
  try {
    read = readChecks(source, file, registry, reads, { serverFields: 'past' });
  } catch (error) {
    if (!(error instanceof ChecksFileError)) throw error;
    problems.push(...error.problems);
  }
  const unread = unreadFields(reads, source.json);
  problems.push(...unread.problems);
  if (problems.length > 0 || !read) throw new ChecksFileError(file, problems);
  return { checks: read.checks, ignoredFields: unread.ignored };
}

/** Ignored fields a log line names; the rest are counted. */
const MAX_NAMED_IGNORED = 20;

/** One warning naming the ignored fields of a checks file, when it has any. */
export function logIgnoredFields(logger: Logger, file: string, ignored: readonly string[]): void {
  if (ignored.length === 0) return;
  const named = ignored.slice(0, MAX_NAMED_IGNORED);
  const more = ignored.length - named.length;
  logger.warn(
    { file, ignoredFields: named, ...(more > 0 ? { moreIgnoredFields: more } : {}) },
    `checks file: ${ignored.length} field${ignored.length === 1 ? '' : 's'} Outpost does not read, ignored: ${named.join(', ')}${more > 0 ? ` and ${more} more` : ''}`,
  );
}

/** A check's label in a problem, as readChecks gives it: `check "name" at `, or nothing. */
function checkPrefix(item: unknown): string {
  const label = (item as { name?: unknown; id?: unknown } | null)?.name ?? (item as { id?: unknown } | null)?.id;
  return typeof label === 'string' ? `check "${label}" at ` : '';
}

/** The fields of a file nobody asked `reads` for: misspellings as problems, the others' paths as ignored. */
function unreadFields(reads: FieldReads, json: unknown): { problems: string[]; ignored: string[] } {
  const { misspelled, ignored } = sortUnread(reads.unread());
  const checks = (json as { checks?: unknown } | null)?.checks;
  const problems = misspelled.map(({ path, meant }) => {
    const index = /^\$\.checks\[(\d+)\]/.exec(path)?.[1];
    const prefix = index !== undefined && Array.isArray(checks) ? checkPrefix(checks[Number(index)]) : '';
    return `${prefix}${path}: ${misspelledProblem(meant)}`;
  });
  return { problems, ignored };
}

/** A UTF-8 byte-order mark, which some editors put first: not part of the JSON (RFC 8259 section 8.1 lets a reader ignore it). */
const BYTE_ORDER_MARK = '\uFEFF';
/** Repeated keys a file's problems name; the rest are counted. */
const MAX_NAMED_DUPLICATES = 20;

interface ChecksJson {
  json: unknown;
  /** Keys given twice in one object, as problems. */
  duplicates: string[];
}

/** The one place a checks file's text becomes JSON (once, local and server modes, and reloads). */
function parseJson(text: string, file: string): ChecksJson {
  const body = text.startsWith(BYTE_ORDER_MARK) ? text.slice(BYTE_ORDER_MARK.length) : text;
  let json: unknown;
  try {
    json = JSON.parse(body);
  } catch (error) {
    throw new ChecksFileError(file, [`not valid JSON (${(error as Error).message})`]);
  }
  const { paths, count } = duplicateKeys(body, MAX_NAMED_DUPLICATES);
  const duplicates = paths.map((path) => `${path}: is given more than once in its object (JSON keeps only the last; give it once)`);
  if (count > paths.length) duplicates.push(`and ${count - paths.length} more keys given more than once`);
  return { json, duplicates };
}

/** A private location of a server's checks file. */
export interface PrivateLocation {
  id: string;
  name: string;
}

/** A check as the server schedules it: in which private locations it runs. */
export interface ServerCheck extends LocalCheck {
  locations: string[];
  /** The check as the file has it (without `locations`): what an agent gets as a job's `check`. */
  definition: unknown;
}

/** Private locations one server may have. */
const MAX_PRIVATE_LOCATIONS = 1_000;
/** Deepest nesting anywhere in a checks file: room for a check's values (MAX_DEFINITION_DEPTH) and the file around them. */
export const MAX_CHECKS_FILE_DEPTH = 2 * MAX_DEFINITION_DEPTH;

/** Locations one check may name (each run makes one job per location). */
const MAX_LOCATIONS_PER_CHECK = 100;

const LOCATION_ID = /^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$/;

/**
 * A server's checks file: the checks, plus `privateLocations: [{id, name}]`
 * at the top and `locations: [ids]` in each check (default: every location
 * of the file). Every problem is listed, as for any checks file.
 * `implied` (local mode): a location that exists without being declared;
 * `privateLocations` may then be left out, and a check without `locations`
 * runs there only.
 */
export function parseServerChecksFile(
  text: string,
  file: string,
  registry: ExecutorRegistry,
  implied?: PrivateLocation,
): {
  checks: ServerCheck[];
  privateLocations: PrivateLocation[];
  heartbeats: HeartbeatCheck[];
  maintenanceWindows: MaintenanceWindowDefinition[];
  alertChannels: FileAlertChannel[];
  dashboards: ParsedDashboard[];
  incidents: IncidentDefinition[];
  /** JSON paths of the fields nobody reads, which are ignored (logIgnoredFields). */
  ignoredFields: string[];
} {
  const source = parseJson(text, file);
  const { json } = source;
  const reads = new FieldReads();
  const problems: string[] = [];
  let read: ReturnType<typeof readChecks> | undefined;
  const heartbeats: HeartbeatCheck[] = [];
  try {
    read = readChecks(source, file, registry, reads, { serverFields: 'read', heartbeats });
  } catch (error) {
    if (!(error instanceof ChecksFileError)) throw error;
    problems.push(...error.problems);
  }
  // readChecks said so: nothing below may walk it.
  if (nestedDeeperThan(json, MAX_CHECKS_FILE_DEPTH)) throw new ChecksFileError(file, problems);
  const root = Fields.root(json, '$', reads);
  const privateLocations: PrivateLocation[] = [];
  const ids = new Set<string>();
  const declared = root.raw('privateLocations');
  if (Array.isArray(declared) && declared.length > MAX_PRIVATE_LOCATIONS) {
    root.fail('$.privateLocations', `must have at most ${MAX_PRIVATE_LOCATIONS} locations (got ${declared.length})`);
  }
  root.list('privateLocations').slice(0, MAX_PRIVATE_LOCATIONS).forEach((item, index) => {
    const id = item.string('id', { required: true, minLength: 1, maxLength: 64 });
    const name = item.string('name', { required: true, minLength: 1, maxLength: 200 });
    if (id === undefined || name === undefined) return;
    if (!LOCATION_ID.test(id)) {
      item.fail(`$.privateLocations[${index}].id`, 'must be lowercase letters, digits and dashes, starting and ending with a letter or digit');
    } else if (ids.has(id)) {
      item.fail(`$.privateLocations[${index}].id`, `"${id}" is already used by another location`);
    } else {
      ids.add(id);
      privateLocations.push({ id, name });
    }
  });
  if (implied && !ids.has(implied.id)) {
    ids.add(implied.id);
    privateLocations.push(implied);
  }
  if (privateLocations.length === 0 && root.issues.length === 0) {
    root.fail('$.privateLocations', 'is required in server mode: at least one private location ({"id": "lab", "name": "Lab network"})');
  }
  const maintenanceWindows = parseMaintenanceWindows(root);
  // The file's variables, for dashboard keys; their own problems are readChecks' to report.
  const dashboards = parseDashboards(root, parseEnvironmentVariables(Fields.root(json, '$')));
  const incidents = parseIncidents(root, new Set(dashboards.map((d) => d.definition.dashboardId)));
  const raw = Array.isArray(root.raw('checks')) ? (root.raw('checks') as unknown[]) : [];
  const locationsOf = new Map<string, string[]>();
  const definitions = new Map<string, unknown>();
  raw.forEach((item, index) => {
    if (item === null || typeof item !== 'object') return;
    const fields = Array.isArray(item) ? undefined : new Fields(item, `$.checks[${index}]`, root.issues, reads);
    // Tags stay in the definition (maintenance windows match them); only their shape is checked here.
    if (fields) parseTags(fields);
    const { locations: value, ...definition } = item as Record<string, unknown>;
    fields?.ignore('locations');
    const checkId = (item as { id?: unknown }).id;
    if (typeof checkId === 'string' || typeof checkId === 'number') definitions.set(String(checkId), definition);
    const alertAfter = alertAfterProblem(fields?.raw('alertAfter'));
    if (alertAfter) root.fail(`$.checks[${index}].alertAfter`, alertAfter);
    if (value === undefined) return;
    const path = `$.checks[${index}].locations`;
    if (isHeartbeatItem(item)) {
      root.fail(path, 'must be left out of a HEARTBEAT check: its pings come to the server, not to a location');
      return;
    }
    if (!Array.isArray(value) || value.length === 0 || value.length > MAX_LOCATIONS_PER_CHECK) {
      root.fail(path, `must be an array of 1 to ${MAX_LOCATIONS_PER_CHECK} location ids, or left out to run in every location`);
      return;
    }
    const locations: string[] = [];
    value.forEach((id: unknown, at) => {
      if (typeof id !== 'string' || !ids.has(id)) {
        root.fail(`${path}[${at}]`, `must be the id of a location in $.privateLocations (${[...ids].join(', ') || 'none'})`);
      } else if (!locations.includes(id)) {
        locations.push(id);
      }
    });
    if (typeof checkId === 'string' || typeof checkId === 'number') locationsOf.set(String(checkId), locations);
  });
  const alertChannels = parseAlertChannels(root);
  problems.push(...root.issues.map((i) => `${i.path}: ${i.problem}`));
  const unread = unreadFields(reads, json);
  problems.push(...unread.problems);
  if (problems.length > 0 || !read) throw new ChecksFileError(file, problems);
  const every = implied ? [implied.id] : privateLocations.map((l) => l.id);
  return {
    checks: read.checks.map((local) => ({
      ...local,
      locations: locationsOf.get(local.check.id) ?? every,
      definition: definitions.get(local.check.id),
    })),
    privateLocations,
    heartbeats,
    maintenanceWindows,
    alertChannels,
    dashboards,
    incidents,
    ignoredFields: unread.ignored,
  };
}

/**
 * The checks of a file. `reads` notes every field asked for. `serverFields`:
 * `read` when the caller reads the server's sections and check fields itself,
 * `past` when nothing does (once mode). `heartbeats`: a server's file, whose
 * HEARTBEAT checks are read into it (heartbeat-check.ts) instead of being refused.
 */
function readChecks(
  source: ChecksJson,
  file: string,
  registry: ExecutorRegistry,
  reads: FieldReads,
  options: { serverFields: 'read' | 'past'; heartbeats?: HeartbeatCheck[] },
): { checks: LocalCheck[] } {
  const { json } = source;
  const { heartbeats } = options;
  const root = Fields.root(json, '$', reads);
  if (options.serverFields === 'past') root.ignore(...SERVER_SECTIONS);
  const globals = parseEnvironmentVariables(root);
  if (!Array.isArray(root.raw('checks'))) {
    root.fail('$.checks', 'is required: an array of check definitions');
  }
  const problems = [...source.duplicates, ...root.issues.map((i) => `${i.path}: ${i.problem}`)];
  const checks: LocalCheck[] = [];
  const seen = new Map<string, number>();
  const raw = Array.isArray(root.raw('checks')) ? (root.raw('checks') as unknown[]) : [];
  raw.forEach((item, index) => {
    const prefix = checkPrefix(item);
    if (options.serverFields === 'past' && item !== null && typeof item === 'object' && !Array.isArray(item)) {
      new Fields(item, `$.checks[${index}]`, [], reads).ignore(...SERVER_CHECK_FIELDS);
    }
    try {
      if (heartbeats && isHeartbeatItem(item)) {
        const heartbeat = parseHeartbeatCheck(item, `$.checks[${index}]`, globals, reads);
        const previous = seen.get(heartbeat.id);
        const sameToken = heartbeats.findIndex((h) => h.token === heartbeat.token);
        if (previous !== undefined) {
          problems.push(`${prefix}$.checks[${index}].id: "${heartbeat.id}" is already used by $.checks[${previous}]`);
        } else if (sameToken >= 0) {
          problems.push(`${prefix}$.checks[${index}].heartbeat.token: is the token of $.checks[${seen.get((heartbeats[sameToken] as HeartbeatCheck).id)}]; each heartbeat check needs its own`);
        } else {
          seen.set(heartbeat.id, index);
          heartbeats.push(heartbeat);
        }
        return;
      }
      const { check, executor } = parseCheck(item, `$.checks[${index}]`, registry, reads);
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
      for (const found of error.issues) {
        const issue = withRequiredHint(found, `$.checks[${index}]`, item, reads);
        problems.push(`${prefix}${issue.path}: ${issue.problem}`);
      }
    }
  });
  if (problems.length > 0) throw new ChecksFileError(file, problems);
  // The fields read say where a value is too deep (Fields bounds them); parts nobody reads (an unknown
  // field, a channel's extra config key) are stored and serialized too, so the whole file is bounded as well.
  const tooDeep = pathPastDepth(json, MAX_CHECKS_FILE_DEPTH);
  if (tooDeep) throw new ChecksFileError(file, [`${tooDeep}: is nested too deep (a checks file may nest ${MAX_CHECKS_FILE_DEPTH} levels)`]);
  if (checks.length === 0 && (heartbeats?.length ?? 0) === 0) throw new ChecksFileError(file, ['$.checks is empty: nothing to run']);
  return { checks };
}

/** A checks file holds definitions, not data: far below this. */
export const MAX_CHECKS_FILE_BYTES = 10 * 1024 * 1024;

/** `logger`: where the fields the file has and nobody reads are named (logIgnoredFields). */
export async function loadChecksFile(file: string, registry: ExecutorRegistry, logger?: Logger): Promise<LocalCheck[]> {
  const { checks, ignoredFields } = readChecksFile(await readChecksFileText(file), file, registry);
  if (logger) logIgnoredFields(logger, file, ignoredFields);
  return checks;
}

/** Reads a checks file's text: a regular file of at most MAX_CHECKS_FILE_BYTES, never blocking on a FIFO. */
export async function readChecksFileText(file: string): Promise<string> {
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
  return text;
}
