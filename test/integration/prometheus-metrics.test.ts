// A real Prometheus scrapes a local-mode Outpost running a passing, a failing
// and a TLS check: PromQL through its HTTP API sees probe_success per check_id
// and the served chain's earliest expiry (the CA's, which ends before the
// leaf's); promtool finds nothing to say about Outpost's own series.

import { execFileSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHECK_METRIC_NAMES } from '../../src/observability/check-metrics.js';
import { probe, REPO, tempDir } from '../support/agent-process.js';
import { retryUntil } from '../support/daemon.js';
import { useHarness } from '../support/harness.js';
import { type Nginx, startNginx } from '../support/nginx.js';
import { type Prometheus, promtool, startPrometheus } from '../support/prometheus.js';

const h = useHarness();
const RULES = path.join(REPO, 'docs/prometheus/alert-rules.yml');
const DASHBOARD = path.join(REPO, 'docs/prometheus/grafana-dashboard.json');

interface Dashboard {
  panels: { title: string; targets?: { expr: string }[] }[];
  templating: { list: { query?: unknown; definition?: string }[] };
}

/** The metric names a PromQL expression reads (names of functions, labels and keywords left out). */
function metricNames(expr: string): string[] {
  const withoutStrings = expr.replace(/"[^"]*"/g, '""').replace(/\{[^}]*\}/g, '{}');
  const words = withoutStrings.match(/[a-zA-Z_:][a-zA-Z0-9_:]*(?=\s*(\{|\[|\)|$|\s*[-+*/<>=!]))/g) ?? [];
  return words.filter((w) => /^(probe|outpost|nodejs|process)_/.test(w) || w === 'up');
}

/** A CA that expires in 10 days and a localhost leaf it signed for 30: nginx serves both. */
function chainPki(): { caCert: string; chain: { cert: string; key: string }; caExpiry: number; leafExpiry: number } {
  const dir = tempDir('outpost-chain-pki-');
  const openssl = (args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  openssl(['req', '-x509', ...ec, '-keyout', 'ca.key', '-out', 'ca.crt', '-days', '10', '-subj', '/CN=Outpost Metrics CA']);
  openssl(['req', ...ec, '-keyout', 'leaf.key', '-out', 'leaf.csr', '-subj', '/CN=localhost']);
  writeFileSync(path.join(dir, 'ext.cnf'), 'subjectAltName = DNS:localhost,IP:127.0.0.1\n');
  openssl(['x509', '-req', '-in', 'leaf.csr', '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-days', '30', '-extfile', 'ext.cnf', '-out', 'leaf.crt']);
  const ca = readFileSync(path.join(dir, 'ca.crt'), 'utf8');
  const leaf = readFileSync(path.join(dir, 'leaf.crt'), 'utf8');
  writeFileSync(path.join(dir, 'chain.crt'), leaf + ca);
  return {
    caCert: path.join(dir, 'ca.crt'),
    chain: { cert: path.join(dir, 'chain.crt'), key: path.join(dir, 'leaf.key') },
    caExpiry: Date.parse(new X509Certificate(ca).validTo) / 1000,
    leafExpiry: Date.parse(new X509Certificate(leaf).validTo) / 1000,
  };
}

let nginx: Nginx | undefined;
let prometheus: Prometheus | undefined;
let pki: ReturnType<typeof chainPki>;

beforeAll(async () => {
  pki = chainPki();
  nginx = await startNginx({ tls: pki.chain, serverConfig: 'location = /ok { return 200 "ok"; }' });
});

afterAll(async () => {
  await prometheus?.stop();
  await nginx?.stop();
});

describe('per-check metrics scraped by Prometheus', () => {
  it('reports probe_success per check and the chain\'s earliest expiry, and promtool is satisfied', async () => {
    const dir = tempDir();
    const file = path.join(dir, 'checks.json');
    const checks = [
      { id: 'passing', name: 'Passing', checkType: 'URL', frequency: 1, request: { url: `${h.target.url}/ok` } },
      { id: 'failing', name: 'Failing', checkType: 'URL', frequency: 1, request: { url: `${h.target.url}/status/418` } },
      { id: 'tls', name: 'TLS', checkType: 'URL', frequency: 1, request: { url: `https://localhost:${nginx?.port}/ok` } },
    ];
    writeFileSync(file, JSON.stringify({ checks }));
    const proc = h.start(['local', file], { NODE_EXTRA_CA_CERTS: pki.caCert });
    const port = await proc.healthPort();
    prometheus = await startPrometheus(`127.0.0.1:${port}`, [RULES]);
    const p = prometheus;

    let success: Awaited<ReturnType<Prometheus['query']>> = [];
    const seen = await retryUntil(
      90_000,
      async () => {
        success = await p.query('probe_success');
        return success.length === 3;
      },
      500,
    );
    expect(seen, `probe_success: ${JSON.stringify(success)}; outpost: ${proc.stderr().slice(-2000)}`).toBe(true);
    const byId = Object.fromEntries(success.map((s) => [s.metric.check_id, s]));
    expect(byId.passing?.value[1]).toBe('1');
    expect(byId.failing?.value[1]).toBe('0');
    expect(byId.tls?.value[1]).toBe('1');
    expect(byId.passing?.metric).toMatchObject({ check_name: 'Passing', check_type: 'URL', location: 'local', job: 'outpost' });

    const expiry = await p.query('probe_ssl_earliest_cert_expiry{check_id="tls"}');
    expect(expiry).toHaveLength(1);
    expect(pki.caExpiry).toBeLessThan(pki.leafExpiry);
    expect(Number(expiry[0]?.value[1])).toBe(pki.caExpiry);
    const status = await p.query('probe_http_status_code{check_id="failing"}');
    expect(status[0]?.value[1]).toBe('418');

    // promtool's only complaints are about prom-client's own nodejs_* series.
    const text = (await probe(port, '/metrics')).text;
    for (const name of CHECK_METRIC_NAMES.filter((n) => !n.startsWith('probe_dns') && !n.startsWith('probe_icmp') && n !== 'probe_failed_due_to_regex')) {
      expect(text).toContain(`# TYPE ${name} gauge`);
    }
    // Every metric the example dashboard and alert rules read is one Outpost serves (up is Prometheus's own).
    const served = new Set([...text.matchAll(/^# TYPE (\S+) (\S+)$/gm)].flatMap(([, name, type]) => (type === 'histogram' ? [name, `${name}_bucket`, `${name}_sum`, `${name}_count`] : [name])));
    // Per-check families appear once a check of their type has run: DNS and ICMP ones are known by name.
    for (const name of CHECK_METRIC_NAMES) served.add(name);
    served.add('up');
    const dashboard = JSON.parse(readFileSync(DASHBOARD, 'utf8')) as Dashboard;
    const exprs = dashboard.panels.flatMap((panel) => (panel.targets ?? []).map((t) => t.expr));
    exprs.push(...dashboard.templating.list.flatMap((v) => (v.definition ? [v.definition] : [])));
    exprs.push(...[...readFileSync(RULES, 'utf8').matchAll(/^\s+expr: (.+)$/gm)].map((m) => m[1] ?? ''));
    expect(exprs.length).toBeGreaterThan(10);
    const names = new Set(exprs.flatMap(metricNames));
    expect([...names].filter((n) => !served.has(n))).toEqual([]);
    for (const name of ['probe_success', 'probe_ssl_earliest_cert_expiry', 'outpost_jobs_total', 'outpost_job_duration_seconds_bucket']) expect(names).toContain(name);

    // The rules load into Prometheus and the failing check's alert is pending (it fires after 2 m).
    let alerts: Awaited<ReturnType<Prometheus['query']>> = [];
    const pending = await retryUntil(
      30_000,
      async () => {
        alerts = await p.query('ALERTS{alertname="OutpostCheckFailing"}');
        return alerts.length > 0;
      },
      500,
    );
    expect(pending).toBe(true);
    expect(alerts.map((a) => a.metric.check_id)).toEqual(['failing']);
    expect(alerts[0]?.metric.alertstate).toBe('pending');

    const lint = promtool(['check', 'metrics'], text);
    const problems = `${lint.stdout}${lint.stderr}`
      .split('\n')
      .filter((line) => line.trim() !== '' && !/^(nodejs|process)_/.test(line));
    expect(problems).toEqual([]);
  }, 180_000);

  it('ships alert rules that promtool accepts', () => {
    const check = promtool(['check', 'rules', RULES]);
    expect(check.status, `${check.stdout}${check.stderr}`).toBe(0);
    expect(check.stdout).toMatch(/SUCCESS: \d+ rules found/);
  });
});
