// Per-check series on /metrics, named after blackbox_exporter's so that its
// dashboards and alert rules carry over: the newest FINAL result of each check
// (probe_success, probe_duration_seconds, probe_http_*, probe_ssl_*, probe_dns_*,
// probe_icmp_*), labelled check_id, check_name, check_type, location.
//
// The text is rendered by hand rather than through prom-client gauges: a
// checks file of 10,000 checks makes over 100,000 series, and building
// label objects for each on every scrape is what makes a scrape slow.
// A check's series go when it has not reported for STALE_RUNS times its
// frequency, or at once through retain() when a schedule drops it.

import type { CheckResultEntry } from '../core/result-entry.js';

/** Runs a check may miss before its series are dropped. */
export const STALE_RUNS = 3;
/** A check whose frequency is unknown keeps its series this long without a result. */
export const DEFAULT_STALE_SECONDS = 3600;
/** The shortest time a check's series outlive its newest result. */
export const MIN_STALE_SECONDS = 60;

interface Family {
  name: string;
  help: string;
}

const FAMILIES = {
  success: { name: 'probe_success', help: 'Whether the newest final run of the check passed (1) or not (0); a degraded run counts as passed' },
  duration: { name: 'probe_duration_seconds', help: 'Response time of the newest final run, in seconds' },
  status: { name: 'probe_http_status_code', help: 'HTTP status of the newest run\'s final response (0 without one)' },
  redirects: { name: 'probe_http_redirects', help: 'Redirects followed in the newest run' },
  contentLength: { name: 'probe_http_content_length', help: 'Bytes of the final response body in the newest run' },
  sslExpiry: {
    name: 'probe_ssl_earliest_cert_expiry',
    help: 'Earliest expiry of any certificate in the served chain, in Unix seconds',
  },
  tlsVersion: { name: 'probe_tls_version_info', help: 'TLS version of the newest run\'s connection, in the version label' },
  regex: { name: 'probe_failed_due_to_regex', help: 'Whether a TEXT_BODY assertion failed in the newest run (HTTP checks that have one)' },
  dnsLookup: { name: 'probe_dns_lookup_time_seconds', help: 'Time of the DNS query in the newest run, in seconds' },
  dnsAnswers: { name: 'probe_dns_answer_rrs', help: 'Records in the answer section of the newest run\'s DNS response' },
  icmpDuration: { name: 'probe_icmp_duration_seconds', help: 'Phases of the newest ICMP run, in seconds (resolve, rtt)' },
  degraded: { name: 'outpost_check_degraded', help: 'Whether the newest final run of the check was degraded (1) or not (0)' },
  lastRun: { name: 'outpost_check_last_run_timestamp_seconds', help: 'When the newest final run of the check finished, in Unix seconds' },
} satisfies Record<string, Family>;

type FamilyKey = keyof typeof FAMILIES;

/** One sample: its extra labels (already rendered, e.g. `,phase="rtt"`) and value. */
interface Sample {
  extra: string;
  value: number;
}

/** One check's series as seriesFor() computes them (structured-cloneable). */
export interface RecordedSeries {
  key: string;
  labels: string;
  samples: Partial<Record<FamilyKey, Sample[]>>;
  staleAfterMs: number;
}

interface CheckSeries {
  /** `check_id="…",check_name="…",check_type="…",location="…"` */
  labels: string;
  samples: Partial<Record<FamilyKey, Sample[]>>;
  updatedAt: number;
  staleAfterMs: number;
}

export interface RecordOptions {
  /** The check's frequency in seconds, when known: its series expire after STALE_RUNS of them. */
  frequencySeconds?: number;
  /** Where it ran, when the result does not say (local mode). */
  location?: string;
  /**
   * The labels' values when they differ from the result's (scrubbed of secrets): the series stays keyed by
   * the check's own id, so that retain() and forget() with the ids of a checks file still find it.
   */
  shown?: { checkId: string; name: string; location?: string };
}

const NEEDS_ESCAPE = /[\\\n"]/;

function escapeLabel(value: string): string {
  // Most names need nothing: one test instead of three replacements per label, per result.
  if (!NEEDS_ESCAPE.test(value)) return value;
  return value.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');
}

function obj(value: unknown): Record<string, unknown> | undefined {
  return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
}

function num(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isFinite(value) ? value : undefined;
}

/** The samples most results share (passed, not degraded, no redirect…): one frozen pair, not two arrays per result. */
const ZERO: Sample[] = Object.freeze([Object.freeze({ extra: '', value: 0 })]) as Sample[];
const ONE: Sample[] = Object.freeze([Object.freeze({ extra: '', value: 1 })]) as Sample[];

function one(value: number): Sample[] {
  if (value === 0) return ZERO;
  if (value === 1) return ONE;
  return [{ extra: '', value }];
}

/**
 * probe_tls_version_info's version label, from the protocols Node.js names (tls.TLSSocket.getProtocol()).
 * The label is one of these or "other", never the result's text: on the server that text is what an agent
 * sent, and two results with a 15 MB `protocol` made /metrics 30 MB (docs/configuration.md).
 */
const TLS_VERSION_SAMPLES: ReadonlyMap<string, Sample[]> = new Map(
  [
    ['TLSv1', 'TLS 1'],
    ['TLSv1.1', 'TLS 1.1'],
    ['TLSv1.2', 'TLS 1.2'],
    ['TLSv1.3', 'TLS 1.3'],
  ].map(([protocol, version]) => [protocol as string, Object.freeze([Object.freeze({ extra: `,version="${version}"`, value: 1 })]) as Sample[]]),
);
const OTHER_TLS_VERSION: Sample[] = Object.freeze([Object.freeze({ extra: ',version="other"', value: 1 })]) as Sample[];

/** The series a FINAL result gives; what a check type does not report is left out. */
export function seriesOf(entry: CheckResultEntry): Partial<Record<FamilyKey, Sample[]>> {
  const passed = !entry.hasFailures && !entry.hasErrors;
  const samples: Partial<Record<FamilyKey, Sample[]>> = {
    success: one(passed ? 1 : 0),
    duration: one(entry.responseTime / 1000),
    degraded: one(entry.isDegraded ? 1 : 0),
    lastRun: one(Date.parse(entry.stoppedAt) / 1000),
  };
  const api = obj(entry.apiCheckResult);
  if (api) {
    const response = obj(api.response);
    samples.status = one(num(response?.status) ?? 0);
    if (response) {
      samples.redirects = one(num(response.redirects) ?? 0);
      const size = num(response.bodySize);
      if (size !== undefined) samples.contentLength = one(size);
      const tls = obj(response.tls);
      if (tls) {
        const expiry = typeof tls.chainEarliestExpiry === 'string' ? tls.chainEarliestExpiry : typeof tls.validTo === 'string' ? tls.validTo : null;
        const at = expiry ? Date.parse(expiry) : Number.NaN;
        if (!Number.isNaN(at)) samples.sslExpiry = one(at / 1000);
        if (typeof tls.protocol === 'string') samples.tlsVersion = TLS_VERSION_SAMPLES.get(tls.protocol) ?? OTHER_TLS_VERSION;
      }
    }
    const assertions = Array.isArray(api.assertions) ? (api.assertions as unknown[]).map(obj) : [];
    const body = assertions.filter((a) => a?.source === 'TEXT_BODY');
    if (body.length > 0) samples.regex = one(body.some((a) => a?.passed === false) ? 1 : 0);
  }
  const dns = obj(entry.dnsCheckResult);
  if (dns) {
    const total = num(obj(dns.timings)?.total);
    if (total !== undefined) samples.dnsLookup = one(total / 1000);
    const answer = obj(dns.response)?.answer;
    samples.dnsAnswers = one(Array.isArray(answer) ? answer.length : 0);
  }
  const icmp = obj(entry.icmpCheckResult);
  if (icmp) {
    const response = obj(icmp.response);
    const phases: Sample[] = [];
    const resolve = num(obj(response?.timings)?.dns);
    if (resolve !== undefined) phases.push({ extra: ',phase="resolve"', value: resolve / 1000 });
    const rtt = num(obj(response?.latency)?.avg);
    if (rtt !== undefined) phases.push({ extra: ',phase="rtt"', value: rtt / 1000 });
    if (phases.length > 0) samples.icmpDuration = phases;
  }
  return samples;
}

function formatValue(value: number): string {
  if (Number.isNaN(value)) return 'NaN';
  if (value === Number.POSITIVE_INFINITY) return '+Inf';
  if (value === Number.NEGATIVE_INFINITY) return '-Inf';
  return String(value);
}

export class CheckMetrics {
  private readonly checks = new Map<string, CheckSeries>();

  /**
   * `minStaleSeconds` raises the floor: in agent mode the control plane decides
   * when a check runs, and a job's `frequency` may not say (it defaults), so
   * the agent keeps series an hour rather than lose them between runs.
   */
  constructor(
    private readonly now: () => number = Date.now,
    private readonly minStaleSeconds = MIN_STALE_SECONDS,
  ) {}

  /** Takes the series of a FINAL result; ATTEMPT results and results without a check id change nothing. */
  record(entry: CheckResultEntry, options: RecordOptions = {}): void {
    const series = this.seriesFor(entry, options);
    if (series) this.put(series);
  }

  /**
   * The series `record` would take, as plain data: a check worker
   * (src/jobs/workers/) computes them next to the result and hands them to
   * the main thread's put(), so the whole result need not cross.
   */
  seriesFor(entry: CheckResultEntry, options: RecordOptions = {}): RecordedSeries | undefined {
    if (entry.resultType !== 'FINAL' || !entry.checkId) return undefined;
    const location = entry.runLocation ?? options.location ?? '';
    const key = `${entry.checkId}\u0000${location}`;
    const { shown } = options;
    const labels =
      `check_id="${escapeLabel(shown?.checkId ?? entry.checkId)}",check_name="${escapeLabel(shown?.name ?? entry.name ?? '')}",` +
      `check_type="${escapeLabel(entry.checkType ?? '')}",location="${escapeLabel(shown?.location ?? location)}"`;
    const frequency = options.frequencySeconds;
    const staleAfterMs = (frequency && frequency > 0 ? Math.max(STALE_RUNS * frequency, this.minStaleSeconds) : Math.max(DEFAULT_STALE_SECONDS, this.minStaleSeconds)) * 1000;
    return { key, labels, samples: seriesOf(entry), staleAfterMs };
  }

  /** Takes series from seriesFor(), as of now. */
  put(series: RecordedSeries): void {
    // A renamed check keeps its id: the old name's series go with the old entry.
    this.checks.set(series.key, { labels: series.labels, samples: series.samples, updatedAt: this.now(), staleAfterMs: series.staleAfterMs });
  }

  /** Drops the series of every check whose id is not in `ids` (a new schedule). */
  retain(ids: Iterable<string>): void {
    const keep = new Set(ids);
    for (const key of this.checks.keys()) if (!keep.has(key.slice(0, key.indexOf('\u0000')))) this.checks.delete(key);
  }

  /** Drops one check's series in every location (the check was deleted). */
  forget(checkId: string): void {
    for (const key of this.checks.keys()) if (key.slice(0, key.indexOf('\u0000')) === checkId) this.checks.delete(key);
  }

  /** Checks with series now. */
  get size(): number {
    return this.checks.size;
  }

  /** The Prometheus text of every family, after dropping stale checks. */
  render(): string {
    const now = this.now();
    for (const [key, series] of this.checks) if (now - series.updatedAt > series.staleAfterMs) this.checks.delete(key);
    if (this.checks.size === 0) return '';
    const out: string[] = [];
    for (const key of Object.keys(FAMILIES) as FamilyKey[]) {
      const family = FAMILIES[key];
      const lines: string[] = [];
      for (const series of this.checks.values()) {
        const samples = series.samples[key];
        if (!samples) continue;
        for (const s of samples) lines.push(`${family.name}{${series.labels}${s.extra}} ${formatValue(s.value)}`);
      }
      if (lines.length === 0) continue;
      out.push(`# HELP ${family.name} ${family.help}`, `# TYPE ${family.name} gauge`, ...lines);
    }
    return `${out.join('\n')}\n`;
  }
}

/** Every metric name the per-check families use, for docs and tests. */
export const CHECK_METRIC_NAMES: readonly string[] = Object.values(FAMILIES).map((f) => f.name);
