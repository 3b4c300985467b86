// The check types of the service's API; an agent runs those its registry has
// an executor for (src/checks/registry.ts).

export const CHECK_TYPES = ['URL', 'API', 'TCP', 'DNS', 'ICMP', 'MULTI_STEP', 'BROWSER', 'PLAYWRIGHT', 'HEARTBEAT'] as const;
export type CheckType = (typeof CHECK_TYPES)[number];
