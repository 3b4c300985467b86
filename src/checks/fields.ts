// Path-aware readers for untrusted JSON (a job from the control plane, a checks
// file). Every problem is recorded with its JSON path, so that an error result
// or a startup message can name the exact field.

import { keyStep, MAX_DEFINITION_DEPTH, nestedDeeperThan } from '../core/json-depth.js';

export interface FieldIssue {
  path: string;
  problem: string;
}

/** Problems a DefinitionError's message lists; the rest are counted (all stay in `issues`). */
export const MAX_LISTED_ISSUES = 20;
/** Longest problem in a DefinitionError's message, path included. */
const MAX_ISSUE_CHARS = 500;

function clip(text: string): string {
  return text.length > MAX_ISSUE_CHARS ? `${text.slice(0, MAX_ISSUE_CHARS - 3)}...` : text;
}

export class DefinitionError extends Error {
  constructor(readonly issues: FieldIssue[]) {
    // Thousands of bad assertions must not make an error result thousands of lines long.
    const listed = issues.slice(0, MAX_LISTED_ISSUES).map((i) => clip(`${i.path}: ${i.problem}`));
    const more = issues.length - listed.length;
    super(more > 0 ? `${listed.join('; ')}; and ${more} more problem${more === 1 ? '' : 's'}` : listed.join('; '));
    this.name = 'DefinitionError';
  }
}

type Json = unknown;

/** Characters of a value a problem shows. */
const DESCRIBED_CHARS = 60;

function describe(value: Json): string {
  if (value === undefined) return 'nothing';
  // JSON.stringify recurses: a value nested thousands deep would throw instead of being described.
  if (nestedDeeperThan(value, MAX_DEFINITION_DEPTH)) return `a value nested deeper than ${MAX_DEFINITION_DEPTH} levels`;
  const text = boundedJson(value, DESCRIBED_CHARS + 1);
  return text.length > DESCRIBED_CHARS ? `${text.slice(0, DESCRIBED_CHARS - 3)}...` : text;
}

/**
 * The start of a value's JSON, at least `limit` characters of it when it has
 * that many. Only what is shown is serialized: thousands of bad fields each
 * holding a large string or array must not copy all of it to show 57
 * characters of each.
 */
function boundedJson(value: Json, limit: number): string {
  let out = '';
  const write = (node: Json): void => {
    if (out.length >= limit) return;
    if (typeof node === 'string') {
      out += JSON.stringify(node.slice(0, limit - out.length));
    } else if (Array.isArray(node)) {
      out += '[';
      for (let i = 0; i < node.length && out.length < limit; i++) {
        if (i > 0) out += ',';
        write(node[i] === undefined ? null : node[i]);
      }
      out += ']';
    } else if (node !== null && typeof node === 'object') {
      out += '{';
      let first = true;
      for (const key in node) {
        if (out.length >= limit) break;
        if (!Object.hasOwn(node, key)) continue;
        const child = (node as Record<string, Json>)[key];
        if (child === undefined || typeof child === 'function') continue;
        out += `${first ? '' : ','}${JSON.stringify(key.slice(0, limit))}:`;
        first = false;
        write(child);
      }
      out += '}';
    } else {
      out += JSON.stringify(node) ?? String(node);
    }
  };
  write(value);
  return out;
}

/** A key of an object a reader opened that it never asked for. */
export interface UnreadField {
  /** The key's JSON path. */
  path: string;
  key: string;
  /** What the reader asked that object for: the names a misspelled key was meant to be. */
  asked: readonly string[];
}

/**
 * The objects a reader opened through Fields and the names it asked each of
 * them for, so that what it never asked for can be named (a misspelled field
 * of a checks file, docs/checks/README.md) without a second list of field
 * names. It holds one entry per object opened and looks at no key of an
 * object nobody opened: it grows with the reading, never with a walk of the
 * document.
 */
export class FieldReads {
  private readonly objects = new Map<object, { path: string; asked: Set<string> }>();

  opened(record: object, path: string): void {
    if (!this.objects.has(record)) this.objects.set(record, { path, asked: new Set() });
  }

  asked(record: object, name: string): void {
    this.objects.get(record)?.asked.add(name);
  }

  /** Whether a reader asked `record` for `name`; false for an object nobody opened. */
  wasAsked(record: object, name: string): boolean {
    return this.objects.get(record)?.asked.has(name) ?? false;
  }

  /** Every key nobody asked for, object by object in the order they were opened. */
  unread(): UnreadField[] {
    const found: UnreadField[] = [];
    for (const [record, { path, asked }] of this.objects) {
      for (const key of Object.keys(record)) {
        if (!asked.has(key)) found.push({ path: `${path}${keyStep(key)}`, key, asked: [...asked] });
      }
    }
    return found;
  }
}

export class Fields {
  private readonly record: Record<string, Json>;

  constructor(
    value: Json,
    readonly path: string,
    readonly issues: FieldIssue[] = [],
    private readonly reads?: FieldReads,
  ) {
    if (value === null || typeof value !== 'object' || Array.isArray(value)) {
      if (value !== undefined) this.fail(path, `must be an object (got ${describe(value)})`);
      this.record = {};
    } else {
      this.record = value as Record<string, Json>;
      reads?.opened(this.record, path);
    }
  }

  /** `reads`: where the names asked for are noted, for a checks file to name the fields it ignores. */
  static root(value: Json, path: string, reads?: FieldReads): Fields {
    return new Fields(value, path, [], reads);
  }

  /** A child reader sharing this one's problems and reads. */
  private child(value: Json, path: string): Fields {
    return new Fields(value, path, this.issues, this.reads);
  }

  /**
   * A reader of a value this one holds that `object` and `list` cannot open:
   * an object in a list that mixes ids and records, a config whose fields
   * depend on a sibling. It shares this reader's problems and reads.
   */
  nested(value: Json, path: string): Fields {
    return this.child(value, path);
  }

  private ask(name: string): void {
    this.reads?.asked(this.record, name);
  }

  /** Fields this reader knows and leaves to another (or to no) reader: not reported as unread. */
  ignore(...names: string[]): void {
    for (const name of names) this.ask(name);
  }

  at(name: string): string {
    return `${this.path}.${name}`;
  }

  fail(path: string, problem: string): void {
    this.issues.push({ path, problem });
  }

  has(name: string): boolean {
    this.ask(name);
    return this.record[name] !== undefined && this.record[name] !== null;
  }

  raw(name: string): Json {
    this.ask(name);
    return this.record[name];
  }

  /** Throws a DefinitionError when any problem was recorded on this tree. */
  assertValid(): void {
    if (this.issues.length > 0) throw new DefinitionError(this.issues);
  }

  string(name: string, opts: { required: true; maxLength?: number; minLength?: number }): string;
  string(name: string, opts?: { default?: string; maxLength?: number; minLength?: number }): string | undefined;
  string(
    name: string,
    opts: { required?: boolean; default?: string; maxLength?: number; minLength?: number } = {},
  ): string | undefined {
    this.ask(name);
    const value = this.record[name];
    if (value === undefined || value === null) {
      if (opts.required) this.fail(this.at(name), 'is required');
      return opts.default;
    }
    if (typeof value !== 'string') {
      this.fail(this.at(name), `must be a string (got ${describe(value)})`);
      return opts.default;
    }
    if (opts.minLength !== undefined && value.length < opts.minLength) {
      this.fail(this.at(name), opts.minLength === 1 ? 'must not be empty' : `must be at least ${opts.minLength} characters`);
    }
    if (opts.maxLength !== undefined && value.length > opts.maxLength) {
      this.fail(this.at(name), `must be at most ${opts.maxLength} characters (got ${value.length})`);
    }
    return value;
  }

  integer(name: string, opts: { min: number; max: number; default: number; unit?: string }): number {
    this.ask(name);
    const value = this.record[name];
    if (value === undefined || value === null) return opts.default;
    const unit = opts.unit ? ` ${opts.unit}` : '';
    if (typeof value !== 'number' || !Number.isInteger(value)) {
      this.fail(this.at(name), `must be ${opts.unit ? `a whole number of ${opts.unit}` : 'an integer'} (got ${describe(value)})`);
      return opts.default;
    }
    if (value < opts.min || value > opts.max) {
      this.fail(this.at(name), `must be between ${opts.min} and ${opts.max}${unit} (got ${value})`);
      return opts.default;
    }
    return value;
  }

  boolean(name: string, fallback: boolean): boolean {
    this.ask(name);
    const value = this.record[name];
    if (value === undefined || value === null) return fallback;
    if (typeof value !== 'boolean') {
      this.fail(this.at(name), `must be true or false (got ${describe(value)})`);
      return fallback;
    }
    return value;
  }

  oneOf<T extends string>(name: string, allowed: readonly T[], opts: { required: true }): T;
  oneOf<T extends string>(name: string, allowed: readonly T[], opts: { default: T }): T;
  oneOf<T extends string>(name: string, allowed: readonly T[]): T | undefined;
  oneOf<T extends string>(name: string, allowed: readonly T[], opts: { required?: boolean; default?: T } = {}): T | undefined {
    this.ask(name);
    const value = this.record[name];
    if (value === undefined || value === null) {
      if (opts.required) this.fail(this.at(name), `is required (one of ${allowed.join(', ')})`);
      return opts.default;
    }
    if (typeof value !== 'string' || !(allowed as readonly string[]).includes(value)) {
      this.fail(this.at(name), `must be one of ${allowed.join(', ')} (got ${describe(value)})`);
      return opts.default;
    }
    return value as T;
  }

  object(name: string): Fields {
    this.ask(name);
    return this.child(this.record[name], this.at(name));
  }

  /** Each element of an optional array as Fields; a non-array is recorded as a problem. */
  list(name: string): Fields[] {
    this.ask(name);
    const value = this.record[name];
    if (value === undefined || value === null) return [];
    if (!Array.isArray(value)) {
      this.fail(this.at(name), `must be an array (got ${describe(value)})`);
      return [];
    }
    return value.map((item, index) => this.child(item, `${this.at(name)}[${index}]`));
  }
}
