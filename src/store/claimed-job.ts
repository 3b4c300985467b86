// A leased job row as the protocol's Job, the same for both databases' stores.

import type { Job } from '../core/protocol.js';
import { json, num, type Row, str } from './rows.js';

/** `row` has the jobs columns id, session_id, location, check_run_id and payload. */
export function claimedJob(row: Row, leaseExpiresAt: string): Job {
  const payload = json<{ check: unknown; environmentVariables: Job['environmentVariables'] }>(row, 'payload');
  return {
    id: str(row, 'id'),
    leaseExpiresAt,
    checkRunId: num(row, 'check_run_id'),
    sequenceId: str(row, 'session_id'),
    triggerSource: 'SCHEDULER',
    runLocation: str(row, 'location'),
    check: payload.check,
    environmentVariables: payload.environmentVariables ?? [],
  };
}
