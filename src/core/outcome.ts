// What one attempt of a check measured, as every check type reports it.

export type ResultMemberName =
  | 'apiCheckResult'
  | 'tcpCheckResult'
  | 'dnsCheckResult'
  | 'icmpCheckResult'
  | 'multiStepCheckResult'
  | 'browserCheckResult';

/** What an executor measured. Target failures are outcomes with `error`, never exceptions. */
export interface Outcome {
  startedAt: Date;
  stoppedAt: Date;
  /** Milliseconds, as the check type defines it (e.g. request start → body end). */
  responseTime: number;
  /** Set when the request could not be completed (refused, timeout, TLS, DNS…). */
  error?: string;
  /** The errno-style code behind `error`, if any (ECONNREFUSED…); retry rules read it. */
  errorCode?: string;
  assertionsFailed: boolean;
  /** Degraded for a reason other than response time (e.g. ICMP packet loss). */
  degraded?: boolean;
  member: ResultMemberName;
  detail: Record<string, unknown>;
}
