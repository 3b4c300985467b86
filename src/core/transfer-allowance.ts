// The time a request body is given to cross the network, on top of a request's
// own deadline. A fixed deadline alone means a link too slow for the largest
// batch (an 8 MiB results batch needs 280 KB/s to fit in 30 s) is refused the
// same batch on every retry: delivery stops for good. The agent's results
// requests and the server's body reader grant the same allowance, so neither
// cuts what the other still waits for.

/** The slowest rate a body is expected to keep: 32 KiB/s, about 260 kbit/s. */
export const MIN_BODY_BYTES_PER_SECOND = 32 * 1024;

/** Milliseconds a body of `bytes` may take at MIN_BODY_BYTES_PER_SECOND. */
export function transferAllowanceMs(bytes: number): number {
  return Math.ceil((Math.max(0, bytes) * 1000) / MIN_BODY_BYTES_PER_SECOND);
}
