// Per-check series (src/observability/check-metrics.ts): blackbox_exporter's
// names, snake_case labels, only FINAL results, and series that go away.

import { describe, expect, it } from 'vitest';
import type { CheckResultEntry } from '../../src/core/result-entry.js';
import { CHECK_METRIC_NAMES, CheckMetrics } from '../../src/observability/check-metrics.js';

function entry(over: Partial<CheckResultEntry>): CheckResultEntry {
  return {
    resultType: 'FINAL',
    id: 'r1',
    name: 'Shop',
    checkId: 'shop',
    checkType: 'URL',
    hasFailures: false,
    hasErrors: false,
    isDegraded: false,
    overMaxResponseTime: false,
    runLocation: 'lab',
    startedAt: '2026-11-24T00:00:00.000Z',
    stoppedAt: '2026-11-24T00:00:01.500Z',
    created_at: '2026-11-24T00:00:01.500Z',
    responseTime: 250,
    checkRunId: null,
    attempts: 1,
    sequenceId: null,
    ...over,
  };
}

const LABELS = 'check_id="shop",check_name="Shop",check_type="URL",location="lab"';

describe('CheckMetrics', () => {
  it('renders an HTTP result under blackbox_exporter names with snake_case labels', () => {
    const metrics = new CheckMetrics();
    metrics.record(
      entry({
        apiCheckResult: {
          assertions: [{ source: 'TEXT_BODY', comparison: 'CONTAINS', target: 'ok', passed: false }],
          response: {
            status: 503,
            redirects: 2,
            bodySize: 1234,
            tls: { protocol: 'TLSv1.3', validTo: 'Dec 31 00:00:00 2030 GMT', chainEarliestExpiry: '2027-01-01T00:00:00.000Z' },
          },
        },
        hasFailures: true,
      }),
    );
    const text = metrics.render();
    expect(text).toContain(`probe_success{${LABELS}} 0`);
    expect(text).toContain(`probe_duration_seconds{${LABELS}} 0.25`);
    expect(text).toContain(`probe_http_status_code{${LABELS}} 503`);
    expect(text).toContain(`probe_http_redirects{${LABELS}} 2`);
    expect(text).toContain(`probe_http_content_length{${LABELS}} 1234`);
    // The chain's earliest expiry, not the leaf's.
    expect(text).toContain(`probe_ssl_earliest_cert_expiry{${LABELS}} ${Date.parse('2027-01-01T00:00:00Z') / 1000}`);
    expect(text).toContain(`probe_tls_version_info{${LABELS},version="TLS 1.3"} 1`);
    expect(text).toContain(`probe_failed_due_to_regex{${LABELS}} 1`);
    expect(text).toContain(`outpost_check_degraded{${LABELS}} 0`);
    expect(text).toContain(`outpost_check_last_run_timestamp_seconds{${LABELS}} ${Date.parse('2026-11-24T00:00:01.500Z') / 1000}`);
    expect(text).toContain('# TYPE probe_success gauge');
    expect(text).not.toContain('probe_dns_');
  });

  it('takes the TLS version label from a fixed set, never from the result: a hostile protocol is "other"', () => {
    const metrics = new CheckMetrics();
    const hostile = `v${'x'.repeat(15 * 1024 * 1024)}"}\nprobe_success{x="y"} 1`;
    const protocols = ['TLSv1', 'TLSv1.1', 'TLSv1.2', 'SSLv3', 'unknown', '', hostile];
    for (const [i, protocol] of protocols.entries()) metrics.record(entry({ checkId: `c${i}`, apiCheckResult: { response: { status: 200, tls: { protocol } } } }));
    const text = metrics.render();
    expect(text.length).toBeLessThan(10_000);
    const versions = text.split('\n').filter((line) => line.startsWith('probe_tls_version_info{')).map((line) => /,version="([^"]*)"\} 1$/.exec(line)?.[1]);
    expect(versions).toEqual(['TLS 1', 'TLS 1.1', 'TLS 1.2', 'other', 'other', 'other', 'other']);
  });

  it('renders DNS and ICMP results', () => {
    const metrics = new CheckMetrics();
    metrics.record(entry({ checkId: 'dns', checkType: 'DNS', dnsCheckResult: { timings: { total: 12 }, response: { answer: [{}, {}] } } }));
    metrics.record(
      entry({ checkId: 'ping', checkType: 'ICMP', isDegraded: true, icmpCheckResult: { response: { timings: { dns: 3 }, latency: { avg: 20 } } } }),
    );
    const text = metrics.render();
    expect(text).toContain('probe_dns_lookup_time_seconds{check_id="dns",check_name="Shop",check_type="DNS",location="lab"} 0.012');
    expect(text).toContain('probe_dns_answer_rrs{check_id="dns",check_name="Shop",check_type="DNS",location="lab"} 2');
    expect(text).toContain('probe_icmp_duration_seconds{check_id="ping",check_name="Shop",check_type="ICMP",location="lab",phase="resolve"} 0.003');
    expect(text).toContain('probe_icmp_duration_seconds{check_id="ping",check_name="Shop",check_type="ICMP",location="lab",phase="rtt"} 0.02');
    expect(text).toContain('outpost_check_degraded{check_id="ping",check_name="Shop",check_type="ICMP",location="lab"} 1');
    expect(text).not.toContain('probe_http_status_code');
  });

  it('ignores ATTEMPT results and escapes label values', () => {
    const metrics = new CheckMetrics();
    metrics.record(entry({ resultType: 'ATTEMPT' }));
    expect(metrics.render()).toBe('');
    metrics.record(entry({ name: 'a "quoted"\\name\nx' }));
    expect(metrics.render()).toContain('check_name="a \\"quoted\\"\\\\name\\nx"');
  });

  it('drops a check that stopped reporting for three runs, and checks a new schedule leaves out', () => {
    let now = 0;
    const metrics = new CheckMetrics(() => now);
    metrics.record(entry({ checkId: 'a' }), { frequencySeconds: 60 });
    metrics.record(entry({ checkId: 'b' }), { frequencySeconds: 600 });
    metrics.record(entry({ checkId: 'c' }), { frequencySeconds: 600 });
    now = 181_000;
    const text = metrics.render();
    expect(text).not.toContain('check_id="a"');
    expect(text).toContain('check_id="b"');
    metrics.retain(['b']);
    expect(metrics.size).toBe(1);
    expect(metrics.render()).not.toContain('check_id="c"');
  });

  it('forgets a deleted check in every location', () => {
    const metrics = new CheckMetrics();
    metrics.record(entry({ checkId: 'a', runLocation: 'x' }));
    metrics.record(entry({ checkId: 'a', runLocation: 'y' }));
    metrics.record(entry({ checkId: 'b' }));
    expect(metrics.size).toBe(3);
    metrics.forget('a');
    expect(metrics.size).toBe(1);
    expect(metrics.render()).toContain('check_id="b"');
  });

  it('keeps series at least the floor it was given (agent mode: an hour)', () => {
    let now = 0;
    const metrics = new CheckMetrics(() => now, 3600);
    metrics.record(entry({ checkId: 'a' }), { frequencySeconds: 60 });
    now = 3_599_000;
    expect(metrics.render()).toContain('check_id="a"');
    now = 3_601_000;
    expect(metrics.render()).toBe('');
  });

  it('names every family it documents', () => {
    expect(CHECK_METRIC_NAMES).toEqual(
      expect.arrayContaining([
        'probe_success',
        'probe_duration_seconds',
        'probe_http_status_code',
        'probe_http_redirects',
        'probe_http_content_length',
        'probe_ssl_earliest_cert_expiry',
        'probe_tls_version_info',
        'probe_dns_lookup_time_seconds',
        'probe_dns_answer_rrs',
        'probe_icmp_duration_seconds',
        'probe_failed_due_to_regex',
        'outpost_check_degraded',
        'outpost_check_last_run_timestamp_seconds',
      ]),
    );
  });
});
