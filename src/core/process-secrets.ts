// Secrets the agent holds itself, as OUTPOST_SECRET_* process variables.

/** Process variables with this prefix are secrets the agent holds itself; checks may use them by name. */
export const PROCESS_SECRET_PREFIX = 'OUTPOST_SECRET_';

/** The OUTPOST_SECRET_* variables of an environment. */
export function processSecrets(env: NodeJS.ProcessEnv): ReadonlyMap<string, string> {
  const found = new Map<string, string>();
  for (const [key, value] of Object.entries(env)) {
    if (key.startsWith(PROCESS_SECRET_PREFIX) && value !== undefined) found.set(key, value);
  }
  return found;
}
