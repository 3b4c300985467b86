// docker/kubernetes/: parsed as YAML (there is no cluster or kubectl here) and
// checked against what the agent and the images need.

import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { REPO } from '../support/agent-process.js';

const DIR = path.join(REPO, 'docker/kubernetes');
const pkg = JSON.parse(readFileSync(path.join(REPO, 'package.json'), 'utf8')) as { version: string };

interface Manifest {
  apiVersion: string;
  kind: string;
  metadata: { name: string; labels?: Record<string, string> };
  // biome-ignore lint/suspicious/noExplicitAny: manifests are free-form; the test reads them field by field.
  spec?: any;
  stringData?: Record<string, string>;
}

const files = readdirSync(DIR).filter((f) => f.endsWith('.yaml'));
const manifests: Manifest[] = files.flatMap((file) => {
  const docs = parseAllDocuments(readFileSync(path.join(DIR, file), 'utf8'));
  const list = Array.isArray(docs) ? docs : [docs];
  for (const doc of list) {
    if (doc.errors.length > 0) throw new Error(`${file}: ${doc.errors.map((e) => e.message).join('; ')}`);
  }
  return list.map((doc) => doc.toJS() as Manifest).filter(Boolean);
});
const byKind = (kind: string) => manifests.filter((m) => m.kind === kind);
const deployment = byKind('Deployment')[0] as Manifest;
const pod = deployment?.spec?.template?.spec;
const container = pod?.containers?.[0];
const env = (name: string) => (container?.env as Array<{ name: string; value?: string; valueFrom?: unknown }>)?.find((e) => e.name === name);

describe('Kubernetes manifests', () => {
  it('are valid YAML: one Deployment, one NetworkPolicy, one Secret, one PodDisruptionBudget', () => {
    expect(files.sort()).toEqual(['deployment.yaml', 'networkpolicy.yaml', 'poddisruptionbudget.yaml', 'secret.yaml']);
    expect(manifests.map((m) => `${m.apiVersion} ${m.kind}`).sort()).toEqual([
      'apps/v1 Deployment',
      'networking.k8s.io/v1 NetworkPolicy',
      'policy/v1 PodDisruptionBudget',
      'v1 Secret',
    ]);
  });

  it('lock the agent down: BLOCKED_NETWORKS=default, and a NetworkPolicy on its pods keeping egress from link-local and metadata', () => {
    expect(env('BLOCKED_NETWORKS')?.value).toBe('default');
    const policy = byKind('NetworkPolicy')[0] as Manifest;
    expect(policy.spec.podSelector).toEqual(deployment.spec.selector);
    expect(policy.spec.policyTypes).toEqual(['Egress']);
    const blocks = (policy.spec.egress as Array<{ to: Array<{ ipBlock?: { cidr: string; except: string[] } }> }>).flatMap((rule) => rule.to.flatMap((to) => (to.ipBlock ? [to.ipBlock] : [])));
    expect(blocks).toEqual([
      { cidr: '0.0.0.0/0', except: ['169.254.0.0/16'] },
      { cidr: '::/0', except: ['fe80::/10', 'fd00:ec2::254/128'] },
    ]);
  });

  it('run 2 replicas of this version, with probes on the health port', () => {
    expect(deployment.spec.replicas).toBe(2);
    expect(container.image).toBe(`outpost:${pkg.version}`);
    expect(container.args).toEqual(['agent']);
    expect(container.ports).toEqual([{ name: 'health', containerPort: 8081 }]);
    expect(container.readinessProbe.httpGet).toEqual({ path: '/-/readiness', port: 'health' });
    expect(container.livenessProbe.httpGet).toEqual({ path: '/-/liveness', port: 'health' });
    expect(container.resources.requests).toMatchObject({ cpu: expect.any(String), memory: expect.any(String) });
    expect(container.resources.limits).toMatchObject({ memory: expect.any(String) });
  });

  it('give a stopping pod more time than the agent drains (SHUTDOWN_GRACE_SECONDS plus the spool flush)', () => {
    expect(pod.terminationGracePeriodSeconds).toBe(300);
    expect(Number(env('SHUTDOWN_GRACE_SECONDS')?.value) + 10).toBeLessThanOrEqual(pod.terminationGracePeriodSeconds);
  });

  it('take API_KEY from the Secret, which holds a placeholder', () => {
    const secret = byKind('Secret')[0] as Manifest;
    expect(env('API_KEY')?.valueFrom).toEqual({ secretKeyRef: { name: secret.metadata.name, key: 'API_KEY' } });
    expect(secret.stringData?.API_KEY).toMatch(/REPLACE/);
    expect(env('API_URL')?.value).toMatch(/^https:\/\//);
  });

  it('run as uid 10001 without root, with ALL capabilities dropped but NET_RAW, and the ping_group_range sysctl', () => {
    expect(pod.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: 10001, runAsGroup: 10001, fsGroup: 10001 });
    expect(pod.securityContext.sysctls).toEqual([{ name: 'net.ipv4.ping_group_range', value: '0 2147483647' }]);
    expect(container.securityContext.capabilities).toEqual({ drop: ['ALL'], add: ['NET_RAW'] });
    expect(container.securityContext.readOnlyRootFilesystem).toBe(true);
    // Writable: the spool (STATE_DIR of the image) and /tmp, nothing else.
    const mounts = (container.volumeMounts as Array<{ name: string; mountPath: string }>).map((m) => m.mountPath).sort();
    expect(mounts).toEqual(['/tmp', '/var/lib/outpost']);
    expect(pod.automountServiceAccountToken).toBe(false);
  });

  it('keep all but one agent up during voluntary disruptions, selecting the Deployment\'s pods', () => {
    const pdb = byKind('PodDisruptionBudget')[0] as Manifest;
    expect(pdb.spec.maxUnavailable).toBe(1);
    expect(pdb.spec.selector).toEqual(deployment.spec.selector);
    expect(deployment.spec.template.metadata.labels).toMatchObject(deployment.spec.selector.matchLabels);
  });
});
