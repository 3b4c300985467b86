// The IPv6 addresses agents report with their claims (docs/analytics.md,
// "Static IPv6 addresses"), kept in the store with when each was last seen
// and served by GET /v1/static-ipv6s.txt. Claims come every few seconds per
// agent; an unchanged list is written again only once REFRESH_MS has passed,
// so claiming does not become a stream of writes.

import type { AnalyticsStore } from '../store/analytics.js';
import { badRequest } from './http/api-error.js';
import type { Route } from './http/router.js';

/** An address not reported for this long is no longer listed (and is forgotten). */
export const ADDRESS_RETENTION_MS = 7 * 24 * 60 * 60 * 1000;
/** An unchanged list is written again after this long: last-seen times are this precise. */
export const REFRESH_MS = 60 * 60 * 1000;
/** Agents remembered in memory; past this the oldest are forgotten (their next claim writes again). */
const MAX_REMEMBERED = 10_000;

export class AgentAddressBook {
  /** agentId → the list last written and when. */
  private readonly written = new Map<string, { key: string; at: number }>();
  /** location → when a full list was last told of (locations come from the checks file: few). */
  private readonly fullWarnedAt = new Map<string, number>();

  constructor(
    private readonly store: Pick<AnalyticsStore, 'reportAddresses' | 'addressesSince'>,
    private readonly now: () => Date = () => new Date(),
  ) {}

  /**
   * Records an agent's addresses. Answers how many a location already full
   * (MAX_ADDRESSES_PER_LOCATION) could not keep, at most once an hour per
   * location, so that the caller's warning is not repeated at every claim.
   */
  async report(location: string, agentId: string, addresses: readonly string[]): Promise<number> {
    const now = this.now();
    const key = `${location} ${[...addresses].sort().join(' ')}`;
    const last = this.written.get(agentId);
    if (last && last.key === key && now.getTime() - last.at < REFRESH_MS) return 0;
    const dropped = await this.store.reportAddresses(location, agentId, addresses, now, new Date(now.getTime() - ADDRESS_RETENTION_MS));
    this.written.delete(agentId);
    this.written.set(agentId, { key, at: now.getTime() });
    if (this.written.size > MAX_REMEMBERED) {
      const oldest = this.written.keys().next();
      if (!oldest.done) this.written.delete(oldest.value);
    }
    if (dropped === 0) return 0;
    const warned = this.fullWarnedAt.get(location);
    if (warned !== undefined && now.getTime() - warned < REFRESH_MS) return 0;
    this.fullWarnedAt.set(location, now.getTime());
    return dropped;
  }

  /** The addresses seen within ADDRESS_RETENTION_MS, one per line, sorted. */
  async text(): Promise<string> {
    const since = new Date(this.now().getTime() - ADDRESS_RETENTION_MS);
    return (await this.store.addressesSince(since)).map((a) => `${a.address}\n`).join('');
  }
}

export function staticIpv6Routes(deps: { book: AgentAddressBook }): Route[] {
  return [
    {
      method: 'GET',
      path: '/v1/static-ipv6s.txt',
      auth: 'public',
      bodyLimit: 0,
      async handle({ query, res }) {
        for (const name of query.keys()) throw badRequest(`unknown query parameter ${name}`, { parameter: name });
        const text = await deps.book.text();
        res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8', 'content-length': Buffer.byteLength(text), 'cache-control': 'no-store' });
        res.end(text);
        return 'streamed';
      },
    },
  ];
}
