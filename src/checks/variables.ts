// `{{NAME}}` interpolation from a job's variables. An unknown
// name is an error naming the variable and the field, never a silent blank.

import type { EnvironmentVariable } from '../core/protocol.js';

const REFERENCE = /\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}/g;

export class UnknownVariableError extends Error {
  constructor(
    readonly variable: string,
    readonly field: string,
  ) {
    super(`Unknown variable {{${variable}}} in ${field}: define it in the check's, group's or global environment variables`);
    this.name = 'UnknownVariableError';
  }
}

export class Variables {
  private readonly own = new Map<string, string>();
  private readonly agent: ReadonlyMap<string, string>;

  /** `processSecrets`: the agent's OUTPOST_SECRET_* variables (src/config.ts reads them once). */
  constructor(variables: EnvironmentVariable[], processSecrets: ReadonlyMap<string, string> = new Map()) {
    this.agent = processSecrets;
    for (const { key, value } of variables) this.own.set(key, value);
  }

  /** The job's own variables win over the agent's, as check over group over global. */
  get(name: string): string | undefined {
    return this.own.get(name) ?? this.agent.get(name);
  }

  /** Every variable by name (the agent's OUTPOST_SECRET_* ones, overridden by the job's): a script's environment. */
  entries(): Record<string, string> {
    return { ...Object.fromEntries(this.agent), ...Object.fromEntries(this.own) };
  }

  /** Replaces every `{{NAME}}` in `text`; throws UnknownVariableError naming `field`. */
  interpolate(text: string, field: string): string {
    if (!text.includes('{{')) return text;
    return text.replace(REFERENCE, (_match, name: string) => {
      const value = this.get(name);
      if (value === undefined) throw new UnknownVariableError(name, field);
      return value;
    });
  }
}
