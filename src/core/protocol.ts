// Wire types of the agent ↔ control-plane protocol, v1 (docs/protocol.md).
// Both the agent and the fake control plane in test/support import these, so
// a change here is a protocol change.

import type { CheckResultEntry } from './result-entry.js';

export const PROTOCOL_ROUTES = {
  claim: '/v1/agent/claim',
  leases: '/v1/agent/leases',
  results: '/v1/agent/results',
  artifacts: '/v1/agent/artifacts',
  events: '/v1/agent/events',
} as const;

export type RouteName = keyof typeof PROTOCOL_ROUTES;

/**
 * The most retries a check's retryStrategy may ask for (src/checks/retry.ts): a run of a job sends at most
 * this many ATTEMPT results, one per retried attempt, then its FINAL.
 */
export const MAX_RETRIES = 10;

/** Most results one `results` call may carry. */
export const MAX_RESULTS_PER_BATCH = 500;
/** Agent routes allow this many requests per 60 s per key. */
export const AGENT_ROUTE_LIMIT_PER_MINUTE = 3000;

export interface EnvironmentVariable {
  key: string;
  value: string;
  secret?: boolean;
}

export type TriggerSource =
  | 'SCHEDULER'
  | 'API'
  | 'DEPLOYMENT'
  | 'TEST_NO_RECORD'
  | 'TEST_RECORD'
  | 'MANUAL'
  | 'TRIGGER';

/** A job as the control plane hands it out. `check` is validated by the agent, not trusted. */
export interface Job {
  id: string;
  leaseExpiresAt: string;
  checkRunId?: number;
  sequenceId?: string;
  triggerSource?: TriggerSource | string;
  runLocation?: string;
  attempt?: number;
  check: unknown;
  environmentVariables?: EnvironmentVariable[];
}

export interface AgentDescriptor {
  id: string;
  version: string;
  checkTypes: string[];
  runtimes: string[];
  /**
   * The global and unique-local IPv6 addresses of the agent's interfaces
   * (docs/protocol.md); optional: agents before it omit the field.
   */
  ipv6Addresses?: string[];
}

export interface ClaimRequest {
  max: number;
  waitSeconds: number;
  agent: AgentDescriptor;
  /**
   * Names this claim, the same on each retry of it (docs/protocol.md): jobs leased by an earlier try
   * whose answer was lost come back in the answer instead of waiting out their lease. Optional.
   */
  claimId?: string;
}
export interface ClaimResponse {
  jobs: Job[];
}

export interface LeasesRequest {
  jobIds: string[];
}
export interface LeasesResponse {
  extended: Array<{ jobId: string; leaseExpiresAt: string }>;
  lost: string[];
}

export interface ResultEnvelope {
  jobId: string;
  resultId: string;
  result: CheckResultEntry;
}
export interface ResultsRequest {
  results: ResultEnvelope[];
}
export interface ResultRejection {
  resultId: string;
  statusCode: number;
  message: string;
}
export interface ResultsResponse {
  accepted: string[];
  rejected: ResultRejection[];
}

export interface ArtifactRequest {
  jobId: string;
  name: string;
  contentType: string;
  size: number;
}
export interface ArtifactResponse {
  uploadUrl: string;
  url: string;
}

/** An error event of the agent itself (docs/events.md lists exactly what is sent). */
export interface AgentEvent {
  level: 'error' | 'warn';
  /** The error's name (TypeError, …), or EventsDropped. */
  name: string;
  /** Sanitized: no secrets, URLs, host names, IP addresses, header values or bodies. */
  message: string;
  /** Sanitized like `message`; frames keep function names and file positions. */
  stack?: string;
  agentVersion: string;
  /** `process.version` of the agent (an Outpost addition to the protocol). */
  nodeVersion?: string;
  /** Where in the agent it happened: executor, spool, results-batch, uncaught-exception, … (an Outpost addition). */
  origin?: string;
  checkType?: string;
}
export interface EventsRequest {
  events: AgentEvent[];
}

/** The service's error body. */
export interface ErrorBody {
  statusCode: number;
  error: string;
  message: string;
  attributes?: Record<string, unknown>;
}
