// A check's status from its FINAL results, with flap damping: a result's
// status counts only once it has held for `alertAfter` FINAL results in a
// row in that location. A check never seen counts as PASSING, so a check
// that fails from its first result alerts.

import type { CheckResultEntry } from '../core/result-entry.js';
import type { CheckStatus, LocationStatus } from '../store/alerts.js';

/** What one FINAL result says: failures (or errors) FAILING, degraded DEGRADED, otherwise PASSING. */
export function resultStatus(entry: Pick<CheckResultEntry, 'hasFailures' | 'hasErrors' | 'isDegraded'>): CheckStatus {
  if (entry.hasFailures || entry.hasErrors) return 'FAILING';
  if (entry.isDegraded) return 'DEGRADED';
  return 'PASSING';
}

const RANK: Record<CheckStatus, number> = { PASSING: 0, DEGRADED: 1, FAILING: 2 };

/** The check's overall status: the worst of its locations' (PASSING when it has none yet). */
export function overallStatus(statuses: readonly Pick<LocationStatus, 'status'>[]): CheckStatus {
  let worst: CheckStatus = 'PASSING';
  for (const s of statuses) if (RANK[s.status] > RANK[worst]) worst = s.status;
  return worst;
}

export interface Transition {
  from: CheckStatus;
  to: CheckStatus;
}

/**
 * The next state of a location after one FINAL result observed `observed`
 * at `at` (ms), and the transition it confirms, if any.
 */
export function step(
  previous: LocationStatus | undefined,
  key: { checkId: string; location: string },
  observed: CheckStatus,
  alertAfter: number,
  at: number,
): { next: LocationStatus; transition?: Transition } {
  const current: LocationStatus = previous ?? { ...key, status: 'PASSING', since: at, candidate: null, streak: 0, updatedAt: at, announced: 'PASSING' };
  if (observed === current.status) return { next: { ...current, candidate: null, streak: 0, updatedAt: at } };
  const streak = current.candidate === observed ? current.streak + 1 : 1;
  if (streak >= Math.max(1, alertAfter)) {
    return {
      next: { ...current, status: observed, since: at, candidate: null, streak: 0, updatedAt: at },
      transition: { from: current.status, to: observed },
    };
  }
  return { next: { ...current, candidate: observed, streak, updatedAt: at } };
}

export interface ChannelFlags {
  sendFailure: boolean;
  sendRecovery: boolean;
  sendDegraded: boolean;
}

/**
 * A status as a channel with these flags sees it. Without sendDegraded,
 * DEGRADED looks like PASSING, so a failure that ends in DEGRADED is its
 * recovery; without sendFailure, FAILING looks like DEGRADED (at least
 * degraded), so a channel told of DEGRADED hears the recovery that follows
 * even when the check failed in between.
 */
function seenBy(channel: ChannelFlags, status: CheckStatus): CheckStatus {
  if (status === 'FAILING' && !channel.sendFailure) return seenBy(channel, 'DEGRADED');
  if (status === 'DEGRADED' && !channel.sendDegraded) return 'PASSING';
  return status;
}

/**
 * What a channel with these flags is told of `transition`: the event, or
 * nothing when the change does not show in what it sees (or it is a
 * recovery and the channel takes none).
 */
export function notice(channel: ChannelFlags, transition: Transition): 'FAILURE' | 'DEGRADED' | 'RECOVERY' | undefined {
  const from = seenBy(channel, transition.from);
  const to = seenBy(channel, transition.to);
  if (from === to) return undefined;
  if (to === 'FAILING') return 'FAILURE';
  if (to === 'DEGRADED') return 'DEGRADED';
  return channel.sendRecovery ? 'RECOVERY' : undefined;
}
