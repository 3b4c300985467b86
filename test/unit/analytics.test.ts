// The analytics figures (src/server/analytics/aggregate.ts, stats/percentile.ts)
// against a brute-force computation (support/analytics-reference.ts) on
// random data: every metric, several intervals, grouped by location or not,
// filtered by status; and the edges — empty windows, one value, ties,
// results without a response time. Then the query's parsing
// (analytics/query.ts): quick ranges, bounds, and the parameter each error names.

import { describe, expect, it } from 'vitest';
import { aggregate, type AggregateOptions, type StatusFilter, sortWholeMilliseconds } from '../../src/server/analytics/aggregate.js';
import { METRICS, type Metric, metricsFor } from '../../src/server/analytics/metrics.js';
import { MAX_BUCKETS, MAX_WINDOW_RESULTS, parseAnalyticsQuery, quickRangeWindow } from '../../src/server/analytics/query.js';
import { analyticsReport } from '../../src/server/analytics-api.js';
import { ApiError } from '../../src/server/http/api-error.js';
import { percentileCont } from '../../src/server/stats/percentile.js';
import { type AnalyticsStore, FLAG_DEGRADED, FLAG_FAILED, type LocationColumns, WindowTooLargeError } from '../../src/store/analytics.js';
import { closeTo, type ReferenceRow, referenceSeries } from '../support/analytics-reference.js';
import { mulberry32 } from '../support/random.js';

const HOUR = 3_600_000;
const T0 = Date.parse('2026-11-01T00:00:00.000Z');

function columnsOf(rows: readonly ReferenceRow[]): LocationColumns[] {
  const byLocation = new Map<string, ReferenceRow[]>();
  for (const row of rows) byLocation.set(row.location, [...(byLocation.get(row.location) ?? []), row]);
  return [...byLocation].map(([location, list]) => ({
    location,
    startedAt: Float64Array.from(list, (r) => r.startedAtMs),
    responseTime: Float64Array.from(list, (r) => (r.responseTime < 0 ? -1 : r.responseTime)),
    flags: Uint8Array.from(list, (r, i) => (r.failed ? FLAG_FAILED : 0) | (i % 7 === 0 ? FLAG_DEGRADED : 0)),
    attempts: Uint16Array.from(list, (r) => r.attempts),
  }));
}

function randomRows(seed: number, count: number, spanMs: number): ReferenceRow[] {
  const random = mulberry32(seed);
  const locations = ['lab', 'dmz', 'edge'];
  return Array.from({ length: count }, () => ({
    location: locations[Math.floor(random() * locations.length)] as string,
    startedAtMs: T0 + Math.floor(random() * spanMs),
    // Few distinct values, so that ties are common; some results have no response time.
    responseTime: random() < 0.03 ? -1 : Math.floor(random() * 40) * 25,
    failed: random() < 0.2,
    attempts: 1 + Math.floor(random() * random() * 3),
  }));
}

function expectMatches(rows: readonly ReferenceRow[], options: AggregateOptions): void {
  const actual = aggregate(columnsOf(rows), options);
  const { statuses, ...rest } = options;
  const expected = referenceSeries(rows, { ...rest, ...(statuses ? { statuses: [...statuses] } : {}) });
  expect(actual.map((s) => s.location)).toEqual(expected.map((s) => s.location));
  for (const [i, series] of expected.entries()) {
    const got = actual[i];
    expect(got?.buckets.map((b) => [b.startMs, b.results])).toEqual(series.points.map((p) => [p.startMs, p.results]));
    for (const [j, point] of series.points.entries()) {
      for (const metric of options.metrics) {
        const value = got?.buckets[j]?.values[metric];
        const want = point.values[metric] ?? null;
        if (!closeTo(value, want, metric)) {
          throw new Error(`${series.location ?? 'all'} bucket ${j} ${metric}: got ${value}, brute force ${want}`);
        }
      }
    }
  }
}

describe('percentileCont', () => {
  it('interpolates linearly between the closest ranks (numpy and percentile_cont agree)', () => {
    expect(percentileCont([1, 2, 3, 4], 0.5)).toBe(2.5);
    expect(percentileCont([15, 20, 35, 40, 50], 0.4)).toBe(29);
    expect(percentileCont([15, 20, 35, 40, 50], 0.9)).toBeCloseTo(46, 12);
    expect(percentileCont(new Float64Array([10, 20]), 0.95)).toBeCloseTo(19.5, 12);
    expect(percentileCont([7], 0.99)).toBe(7);
    expect(percentileCont([5, 5, 5, 9], 0.5)).toBe(5);
    expect(percentileCont([1, 2, 3], 0)).toBe(1);
    expect(percentileCont([1, 2, 3], 1)).toBe(3);
    expect(percentileCont([], 0.5)).toBeNaN();
    expect(percentileCont([1, 2], 1.5)).toBeNaN();
  });
});

describe('aggregate against brute force', () => {
  const rows = randomRows(20261124, 4000, 7 * 24 * HOUR);
  const window = { fromMs: T0 + 3 * HOUR, toMs: T0 + 6 * 24 * HOUR + 17 * 60_000 };
  const statusSets: Array<StatusFilter[] | undefined> = [undefined, ['success'], ['failure'], ['success', 'failure']];
  for (const intervalMs of [undefined, 60_000 * 37, HOUR, 24 * HOUR, 30 * 24 * HOUR]) {
    for (const groupByLocation of [false, true]) {
      for (const statuses of statusSets) {
        it(`interval ${intervalMs === undefined ? 'none' : `${intervalMs / 60_000} min`}, ${groupByLocation ? 'by location' : 'all locations'}, status ${statuses?.join('+') ?? 'any'}`, () => {
          expectMatches(rows, { ...window, ...(intervalMs ? { intervalMs } : {}), metrics: METRICS, groupByLocation, ...(statuses ? { statuses: new Set(statuses) } : {}) });
        });
      }
    }
  }

  it('wide-ranging and fractional response times (the comparison sort) match too', () => {
    const random = mulberry32(99);
    const wide = rows.map((r, i) => ({ ...r, responseTime: r.responseTime < 0 ? -1 : i % 2 ? Math.floor(random() * 1e7) : Math.floor(random() * 1e5) / 8 }));
    for (const intervalMs of [undefined, HOUR]) expectMatches(wide, { ...window, ...(intervalMs ? { intervalMs } : {}), metrics: METRICS, groupByLocation: true });
  });

  it('only the metrics asked for are computed', () => {
    const [series] = aggregate(columnsOf(rows), { ...window, metrics: ['responseTime_p95', 'availability'], groupByLocation: false });
    expect(Object.keys(series?.buckets[0]?.values ?? {}).sort()).toEqual(['availability', 'responseTime_p95']);
  });
});

describe('aggregate edges', () => {
  const options = { fromMs: T0, toMs: T0 + 4 * HOUR, intervalMs: HOUR, metrics: METRICS, groupByLocation: false };

  it('an empty window has every bucket, each with nothing but nulls', () => {
    const [series] = aggregate([], options);
    expect(series?.buckets).toHaveLength(4);
    for (const bucket of series?.buckets ?? []) {
      expect(bucket.results).toBe(0);
      expect(Object.values(bucket.values).every((v) => v === null)).toBe(true);
    }
    expect(aggregate([], { ...options, groupByLocation: true })).toEqual([]);
  });

  it('one value is every percentile, the min, the max and the mean; its deviation is 0', () => {
    const rows: ReferenceRow[] = [{ location: 'lab', startedAtMs: T0 + 90 * 60_000, responseTime: 123, failed: false, attempts: 2 }];
    expectMatches(rows, options);
    const bucket = aggregate(columnsOf(rows), options)[0]?.buckets[1];
    expect(bucket?.values).toMatchObject({ responseTime_p99: 123, responseTime_median: 123, responseTime_stddev: 0, availability: 100, retries: 1 });
  });

  it('ties, results at the window edges, and results without a response time', () => {
    const rows: ReferenceRow[] = [
      ...[5, 5, 5, 5, 9].map((responseTime, i) => ({ location: 'lab', startedAtMs: T0 + i, responseTime, failed: i === 4, attempts: 1 })),
      { location: 'lab', startedAtMs: T0 - 1, responseTime: 1000, failed: false, attempts: 1 },
      { location: 'lab', startedAtMs: T0 + 4 * HOUR, responseTime: 1000, failed: false, attempts: 1 },
      { location: 'dmz', startedAtMs: T0 + HOUR, responseTime: -1, failed: true, attempts: 3 },
    ];
    expectMatches(rows, options);
    expectMatches(rows, { ...options, groupByLocation: true });
    const [first, second] = aggregate(columnsOf(rows), options)[0]?.buckets ?? [];
    expect(first?.values).toMatchObject({ responseTime_p50: 5, responseTime_p95: 9 - 0.2 * 4, availability: 80 });
    // Counted for availability and retries, not for response times.
    expect(second).toMatchObject({ results: 1, values: { availability: 0, retries: 2, responseTime_avg: null } });
  });

  it('a heartbeat offers availability only; every other type every metric', () => {
    expect(metricsFor('HEARTBEAT')).toEqual(['availability']);
    expect(metricsFor('MULTI_STEP')).toEqual(METRICS);
  });
});

describe('sortWholeMilliseconds', () => {
  it('sorts as the comparison sort does, by counting or not', () => {
    const random = mulberry32(5);
    for (const [n, range] of [
      [10, 5],
      [1000, 50],
      [1000, 10_000_000],
      [100_000, 3000],
    ] as const) {
      const values = Float64Array.from({ length: n }, () => 7 + Math.floor(random() * range));
      const expected = Float64Array.from(values).sort();
      sortWholeMilliseconds(values, expected[0] as number, expected[n - 1] as number);
      expect(values).toEqual(expected);
    }
    const fractions = Float64Array.from({ length: 200 }, (_, i) => (i * 37) % 101 + (i % 3) / 2);
    const sortedFractions = Float64Array.from(fractions).sort();
    sortWholeMilliseconds(fractions, 0, 101);
    expect(fractions).toEqual(sortedFractions);
  });
});

describe('parseAnalyticsQuery', () => {
  const now = new Date('2026-11-25T15:30:00.000Z'); // a Wednesday
  const parse = (query: string, checkType: 'API' | 'HEARTBEAT' = 'API') => parseAnalyticsQuery(new URLSearchParams(query), checkType, now);
  const refused = (query: string, checkType: 'API' | 'HEARTBEAT' = 'API'): ApiError => {
    try {
      parse(query, checkType);
    } catch (error) {
      if (error instanceof ApiError) return error;
      throw error;
    }
    throw new Error(`${query} was accepted`);
  };

  it('quick ranges are UTC windows; calendar weeks start on Monday', () => {
    const iso = (w: { fromMs: number; toMs: number }) => [new Date(w.fromMs).toISOString(), new Date(w.toMs).toISOString()];
    expect(iso(quickRangeWindow('last24Hours', now))).toEqual(['2026-11-24T15:30:00.000Z', now.toISOString()]);
    expect(iso(quickRangeWindow('last7Days', now))).toEqual(['2026-11-18T15:30:00.000Z', now.toISOString()]);
    expect(iso(quickRangeWindow('last30Days', now))).toEqual(['2026-10-26T15:30:00.000Z', now.toISOString()]);
    expect(iso(quickRangeWindow('thisWeek', now))).toEqual(['2026-11-23T00:00:00.000Z', now.toISOString()]);
    expect(iso(quickRangeWindow('lastWeek', now))).toEqual(['2026-11-16T00:00:00.000Z', '2026-11-23T00:00:00.000Z']);
    expect(iso(quickRangeWindow('thisMonth', now))).toEqual(['2026-11-01T00:00:00.000Z', now.toISOString()]);
    expect(iso(quickRangeWindow('lastMonth', now))).toEqual(['2026-10-01T00:00:00.000Z', '2026-11-01T00:00:00.000Z']);
    expect(iso(quickRangeWindow('thisWeek', new Date('2026-11-29T23:00:00.000Z')))[0]).toBe('2026-11-23T00:00:00.000Z');
    expect(iso(quickRangeWindow('lastMonth', new Date('2026-01-10T00:00:00.000Z')))).toEqual(['2025-12-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z']);
  });

  it('defaults: last 24 hours, one bucket, every status, one series, page 1 of 10', () => {
    expect(parse('metrics=responseTime_p95,availability,responseTime_p95')).toEqual({
      metrics: ['responseTime_p95', 'availability'],
      fromMs: now.getTime() - 24 * HOUR,
      toMs: now.getTime(),
      groupByLocation: false,
      limit: 10,
      page: 1,
    });
  });

  it('from and to (UNIX seconds) override the quick range; from alone ends now', () => {
    expect(parse('metrics=retries&quickRange=lastMonth&from=1764000000&to=1764003600')).toMatchObject({ fromMs: 1764000000000, toMs: 1764003600000 });
    expect(parse('metrics=retries&from=1764000000')).toMatchObject({ fromMs: 1764000000000, toMs: now.getTime() });
    expect(parse('metrics=retries&aggregationInterval=43200&filterByStatus=failure&groupBy=runLocation&limit=2&page=3')).toMatchObject({
      intervalMs: 43_200 * 60_000,
      statuses: new Set(['failure']),
      groupByLocation: true,
      limit: 2,
      page: 3,
    });
  });

  it('each bad parameter is a 400 that names it', () => {
    const cases: Array<[string, string]> = [
      ['', 'metrics'],
      ['metrics=', 'metrics'],
      ['metrics=responseTime_p42', 'metrics'],
      ['metrics=availability&nope=1', 'nope'],
      ['metrics=availability&metrics=retries', 'metrics'],
      ['metrics=availability&quickRange=yesterday', 'quickRange'],
      ['metrics=availability&from=-5', 'from'],
      ['metrics=availability&to=1764000000', 'to'],
      ['metrics=availability&from=1764003600&to=1764000000', 'from'],
      ['metrics=availability&from=1700000000&to=1764000000', 'from'],
      ['metrics=availability&aggregationInterval=0', 'aggregationInterval'],
      ['metrics=availability&aggregationInterval=43201', 'aggregationInterval'],
      ['metrics=availability&aggregationInterval=1&quickRange=last30Days', 'aggregationInterval'],
      ['metrics=availability&aggregationInterval=5&quickRange=last7Days&groupBy=runLocation&limit=100', 'aggregationInterval'],
      ['metrics=availability&filterByStatus=degraded', 'filterByStatus'],
      ['metrics=availability&groupBy=location', 'groupBy'],
      ['metrics=availability&limit=101', 'limit'],
      ['metrics=availability&page=0', 'page'],
    ];
    for (const [query, parameter] of cases) {
      const error = refused(query);
      expect(error.statusCode, query).toBe(400);
      expect(error.attributes.parameter, query).toBe(parameter);
    }
    const heartbeat = refused('metrics=availability,responseTime_p95', 'HEARTBEAT');
    expect(heartbeat.attributes).toMatchObject({ parameter: 'metrics', metric: 'responseTime_p95' });
    expect(heartbeat.message).toContain('HEARTBEAT');
  });

  it('a week at one minute is the most buckets one series may have', () => {
    expect(parse('metrics=availability&aggregationInterval=1&quickRange=last7Days')).toMatchObject({ intervalMs: 60_000 });
    expect(MAX_BUCKETS).toBe(7 * 24 * 60);
  });
});

describe('analyticsReport', () => {
  it('a window with more results than one answer may read is a 400 on from', async () => {
    const store: AnalyticsStore = {
      window: async (_id, _from, _to, max) => {
        throw new WindowTooLargeError(max + 1, max);
      },
      reportAddresses: async () => 0,
      addressesSince: async () => [],
    };
    const check = { id: 'web', name: 'web', checkType: 'API' as const, frequencySeconds: 60, locations: [], definition: {}, environmentVariables: [], runtimeId: null, capMs: 1, removedAt: null };
    const query = parseAnalyticsQuery(new URLSearchParams('metrics=availability'), 'API', new Date());
    await expect(analyticsReport(store, check, query)).rejects.toMatchObject({ statusCode: 400, attributes: { parameter: 'from', limit: MAX_WINDOW_RESULTS } });
  });
});

describe('metric names', () => {
  it('are the reference list', () => {
    const expected: Metric[] = [
      'responseTime',
      'availability',
      'retries',
      'responseTime_avg',
      'responseTime_max',
      'responseTime_median',
      'responseTime_min',
      'responseTime_p50',
      'responseTime_p90',
      'responseTime_p95',
      'responseTime_p99',
      'responseTime_stddev',
      'responseTime_sum',
    ];
    expect([...METRICS]).toEqual(expected);
  });
});
