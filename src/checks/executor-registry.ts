// The check types an agent runs (an executor each), and why it does not run
// the others. Built by src/checks/registry.ts; this module knows no check type.

import type { CheckType } from '../core/check-type.js';
import type { Executor } from './executor.js';

export class ExecutorRegistry {
  private readonly executors = new Map<CheckType, Executor>();
  private readonly reasons: ReadonlyMap<CheckType, string>;

  /**
   * `executors`: what this agent runs, one per check type (each executor's
   * own checkType); `reasons`: why a type it does not run is missing, for the
   * error a job of that type gets.
   */
  constructor(executors: Iterable<Executor>, reasons: ReadonlyMap<CheckType, string> = new Map()) {
    for (const executor of executors) this.executors.set(executor.checkType, executor);
    this.reasons = reasons;
  }

  get(type: CheckType): Executor | undefined {
    return this.executors.get(type);
  }

  has(type: CheckType): boolean {
    return this.executors.has(type);
  }

  /** The check types this agent runs, in the order they were registered (as advertised and listed in errors). */
  types(): CheckType[] {
    return [...this.executors.keys()];
  }

  /** Why this agent does not run `type` (no Chromium, no runtime, --uptime-only, …), when known; undefined for a type it runs. */
  whyUnsupported(type: CheckType): string | undefined {
    return this.executors.has(type) ? undefined : this.reasons.get(type);
  }

  /** This registry with `executor` added (replacing one of its type). */
  with(executor: Executor): ExecutorRegistry {
    return new ExecutorRegistry([...this.executors.values(), executor], this.reasons);
  }

  /** Only the executors of `types`; the others are unsupported for the reasons given. */
  only(types: readonly CheckType[], reasons: ReadonlyMap<CheckType, string>): ExecutorRegistry {
    return new ExecutorRegistry(
      [...this.executors.values()].filter((executor) => types.includes(executor.checkType)),
      reasons,
    );
  }
}
