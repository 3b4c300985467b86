// What the analytics routes read from the store (docs/analytics.md): the
// FINAL results of one check in a time window, as columns per location, and
// the IPv6 addresses agents report. The store only selects and transfers;
// every figure (buckets, percentiles, availability) is computed by
// src/server/analytics/, the same way for every store.

/** One location's FINAL results in a window, in no particular order; index i of every column is one result. */
export interface LocationColumns {
  location: string;
  /** The result's startedAt, in ms since the epoch. */
  startedAt: Float64Array;
  /** Whole milliseconds; -1 for a result that has no response time. */
  responseTime: Float64Array;
  /** Bit 0 (FLAG_FAILED): hasFailures; bit 1 (FLAG_DEGRADED): isDegraded. */
  flags: Uint8Array;
  /** The result's attempts, 1 or more. */
  attempts: Uint16Array;
}

export const FLAG_FAILED = 1;

/**
 * The IPv6 addresses one location keeps listed. Far more than a location's
 * agents have (each reports at most 32 with a claim), and a bound on what one
 * location's key can make the server store and serve: without it an agent
 * reporting new addresses at every claim grew the table by millions of rows
 * a day, and GET /v1/static-ipv6s.txt then held the server's thread for
 * seconds.
 */
export const MAX_ADDRESSES_PER_LOCATION = 1_024;
export const FLAG_DEGRADED = 2;

/** Thrown when a window holds more results than one answer may read (the route answers 400). */
export class WindowTooLargeError extends Error {
  constructor(
    readonly results: number,
    readonly limit: number,
  ) {
    super(`the window holds more than ${limit} results of this check; ask for a shorter one`);
    this.name = 'WindowTooLargeError';
  }
}

export interface ReportedAddress {
  address: string;
  location: string;
  agentId: string;
  lastSeen: Date;
}

export interface AnalyticsStore {
  /**
   * The check's FINAL results with fromMs <= startedAt < toMs, one entry per
   * location that has any (sorted by location id). Throws
   * WindowTooLargeError past `maxResults` results in all.
   */
  window(checkId: string, fromMs: number, toMs: number, maxResults: number): Promise<LocationColumns[]>;
  /**
   * Records that an agent of `location` has these IPv6 addresses now; forgets addresses not seen since `forgetBefore`.
   * A location keeps at most MAX_ADDRESSES_PER_LOCATION: addresses new to it beyond that are not recorded, and
   * their count is the answer.
   */
  reportAddresses(location: string, agentId: string, addresses: readonly string[], now: Date, forgetBefore: Date): Promise<number>;
  /** Addresses reported at or after `since`, sorted. */
  addressesSince(since: Date): Promise<ReportedAddress[]>;
}
