// The types of shared.cjs for the agent's TypeScript (src/checks/scripted/harness.ts loads it).
export declare const AGENT_GONE_MARK: string;
export declare const ANSI_SGR: RegExp;
export declare const PID_NAME: RegExp;
export declare const SAFE_ARTIFACT: RegExp;
export declare function descendants(stats: Iterable<[pid: string, stat: string]>, root: string): string[];
