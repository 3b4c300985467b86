// The scheduler's missed slots, logged by streak: a check every 10 s whose run
// stays open for an hour misses 360 slots, and a line for each would bury the
// log. The first missed slot of a streak is one warning; the slots after it
// are counted; the slot that runs again (or the end of the streak for any
// other reason: the check or location gone, the scheduler stopped) is one
// line with how many were missed, from which slot to which.

import type { Logger } from '../observability/logger.js';

/** What a streak is about, as it appears on both of its lines. */
export interface MissedSlotSubject {
  checkId: string;
  /** Absent when the whole check missed the slot (its previous session was still being made). */
  location?: string;
}

interface Streak {
  subject: MissedSlotSubject;
  firstSlotMs: number;
  lastSlotMs: number;
  slots: number;
}

export type StreakEnd = 'ran' | 'check gone' | 'location gone' | 'scheduler stopped';

const END_MESSAGE: Readonly<Record<StreakEnd, string>> = {
  ran: 'missed slots ended: a slot ran again',
  'check gone': 'missed slots ended: the check is no longer scheduled',
  'location gone': 'missed slots ended: the check no longer runs in this location',
  'scheduler stopped': 'missed slots ended: this server stopped scheduling',
};

function keyOf(subject: MissedSlotSubject): string {
  return subject.location === undefined ? subject.checkId : `${subject.checkId}\u0000${subject.location}`;
}

const iso = (ms: number): string => new Date(ms).toISOString();

export class MissedSlots {
  private readonly streaks = new Map<string, Streak>();

  constructor(private readonly logger: Logger) {}

  /** A slot of `subject` was skipped because of `why`: a warning if it starts a streak, else only counted. */
  missed(subject: MissedSlotSubject, slotMs: number, why: string): void {
    const key = keyOf(subject);
    const streak = this.streaks.get(key);
    if (streak) {
      streak.slots++;
      streak.lastSlotMs = Math.max(streak.lastSlotMs, slotMs);
      return;
    }
    this.streaks.set(key, { subject, firstSlotMs: slotMs, lastSlotMs: slotMs, slots: 1 });
    this.logger.warn({ ...subject, slot: iso(slotMs) }, `missed slot: ${why} (the next missed slots are counted, and logged in one line when a slot runs again)`);
  }

  /** A slot of `subject` was not missed: the streak it ends, if any, is logged. */
  ran(subject: MissedSlotSubject): void {
    this.end(keyOf(subject), 'ran');
  }

  /** Ends the streaks of `checkId` whose location is not in `locations` (every streak of it when omitted). */
  endCheck(checkId: string, why: 'check gone' | 'location gone', locations?: readonly string[]): void {
    for (const [key, streak] of this.streaks) {
      if (streak.subject.checkId !== checkId) continue;
      if (locations && (streak.subject.location === undefined || locations.includes(streak.subject.location))) continue;
      this.end(key, why);
    }
  }

  /** Ends every streak (the scheduler stops: another server may take over and count its own). */
  endAll(): void {
    for (const key of [...this.streaks.keys()]) this.end(key, 'scheduler stopped');
  }

  /** Streaks going on now, for tests. */
  get open(): number {
    return this.streaks.size;
  }

  private end(key: string, why: StreakEnd): void {
    const streak = this.streaks.get(key);
    if (!streak) return;
    this.streaks.delete(key);
    this.logger.warn(
      { ...streak.subject, missedSlots: streak.slots, firstSlot: iso(streak.firstSlotMs), lastSlot: iso(streak.lastSlotMs) },
      END_MESSAGE[why],
    );
  }
}
