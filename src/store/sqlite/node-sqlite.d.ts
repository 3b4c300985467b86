// The part of `node:sqlite` (Node 22.5+, unflagged from 22.13 and in 24) that
// the store uses. @types/node is pinned to v20, the oldest Node the agent
// runs on, and has no declarations for it; the module is only loaded with a
// dynamic import by the server, so the agent still starts on Node 20.

declare module 'node:sqlite' {
  export type SQLInputValue = null | number | bigint | string | Uint8Array;
  export type SQLOutputValue = null | number | bigint | string | Uint8Array;

  export interface StatementResultingChanges {
    changes: number | bigint;
    lastInsertRowid: number | bigint;
  }

  export interface DatabaseSyncOptions {
    open?: boolean;
    readOnly?: boolean;
    enableForeignKeyConstraints?: boolean;
    timeout?: number;
  }

  export class StatementSync {
    run(...params: SQLInputValue[]): StatementResultingChanges;
    get(...params: SQLInputValue[]): Record<string, SQLOutputValue> | undefined;
    all(...params: SQLInputValue[]): Array<Record<string, SQLOutputValue>>;
    iterate(...params: SQLInputValue[]): IterableIterator<Record<string, SQLOutputValue>>;
    readonly sourceSQL: string;
  }

  export class DatabaseSync {
    constructor(path: string, options?: DatabaseSyncOptions);
    exec(sql: string): void;
    prepare(sql: string): StatementSync;
    close(): void;
    readonly isOpen: boolean;
    readonly isTransaction: boolean;
  }
}
