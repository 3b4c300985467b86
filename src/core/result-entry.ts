// The service's check result entry (the shape results are reported in) and
// the identities a result carries.

export type ResultType = 'FINAL' | 'ATTEMPT';

export interface TimingPhases {
  wait: number;
  dns: number;
  tcp: number;
  tls: number;
  firstByte: number;
  download: number;
  total: number;
}

export interface CheckResultEntry {
  resultType: ResultType;
  id: string;
  name: string | null;
  checkId: string | null;
  checkType: string | null;
  hasFailures: boolean;
  hasErrors: boolean;
  isDegraded: boolean;
  overMaxResponseTime: boolean;
  runLocation: string | null;
  startedAt: string;
  stoppedAt: string;
  created_at: string;
  responseTime: number;
  checkRunId: number | null;
  attempts: number;
  sequenceId: string | null;
  /** Set by the server when it stores the result: the error groups it joined ([] when it passed). */
  errorGroupIds?: string[];
  apiCheckResult?: Record<string, unknown>;
  tcpCheckResult?: Record<string, unknown>;
  dnsCheckResult?: Record<string, unknown>;
  icmpCheckResult?: Record<string, unknown>;
  multiStepCheckResult?: Record<string, unknown>;
  browserCheckResult?: Record<string, unknown>;
}

/**
 * A result ready to leave the queue (scrubbed, size-bounded) with its JSON:
 * `line` is exactly JSON.stringify(entry), serialized once and reused by
 * the spool and the local sink.
 */
export interface SerializedResult {
  entry: CheckResultEntry;
  line: string;
}

/** Where a job came from, as far as the result needs to know. */
export interface RunIdentity {
  checkRunId: number | null;
  sequenceId: string | null;
  runLocation: string | null;
}

/** What a result says about which check it belongs to; any part may be unknown for a malformed job. */
export interface CheckIdentity {
  id?: string | null;
  name?: string | null;
  checkType?: string | null;
}

export interface Thresholds {
  degradedResponseTime: number;
  maxResponseTime: number;
  shouldFail: boolean;
}
