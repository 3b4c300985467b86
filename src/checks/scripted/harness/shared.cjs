// @ts-check
// What the agent (src/checks/scripted/runner.ts, through createRequire) and the harness in the run's
// process (harness.cjs) both need, written once. Plain CommonJS without dependencies: the harness runs
// it from the run's folder, where nothing else of the agent is.
'use strict';

/** A name a script may give a file of its artifacts (artifact(name)), and the only names the agent hands over. */
const SAFE_ARTIFACT = /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/;

/** Terminal colour codes (Playwright's reporters and expect print them). Global: reset lastIndex if used with test(). */
// biome-ignore lint/suspicious/noControlCharactersInRegex: the escape character is what is matched.
const ANSI_SGR = /\u001b\[[0-9;]*m/g;

/**
 * The processes below `root`, parents before their children, found by the parent links of
 * /proc/<pid>/stat: also those that left its process group and dropped its environment
 * (spawn(..., { detached: true, env: {} })). Reading /proc is the caller's (the agent reads it without
 * blocking, the harness at its exit cannot wait).
 * @param {Iterable<[pid: string, stat: string]>} stats each process and the text of its /proc/<pid>/stat
 * @param {string} root
 * @returns {string[]}
 */
function descendants(stats, root) {
  /** @type {Map<string, string[]>} */
  const children = new Map();
  for (const [pid, stat] of stats) {
    // "pid (comm) state ppid …": comm may hold spaces and parentheses.
    const ppid = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1] ?? '';
    const siblings = children.get(ppid);
    if (siblings) siblings.push(pid);
    else children.set(ppid, [pid]);
  }
  const found = [];
  const queue = [root];
  for (let next = queue.shift(); next !== undefined; next = queue.shift()) {
    for (const child of children.get(next) ?? []) {
      found.push(child);
      queue.push(child);
    }
  }
  return found;
}

/** The process entries of /proc (numeric names). */
const PID_NAME = /^\d+$/;

/** The harness's watchdog (watchdog.cjs) leaves this in the run's folder when the agent is gone (src/checks/scripted/isolation.ts acts on it). */
const AGENT_GONE_MARK = '.outpost-agent-gone';

module.exports = { AGENT_GONE_MARK, ANSI_SGR, PID_NAME, SAFE_ARTIFACT, descendants };
