// docker/kubernetes/server/: one server and the agents of two locations, and
// the alternative of three replicas on PostgreSQL, parsed as YAML (there is
// no cluster here) and checked against what server mode and the agents need
// (docs/server.md, docs/postgres.md).

import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { parseServerChecksFile } from '../../src/checks/checks-file.js';
import { definitionRegistry } from '../../src/checks/registry.js';
import { configFromEnv } from '../../src/config.js';
import { REPO } from '../support/agent-process.js';

const DIR = path.join(REPO, 'docker/kubernetes/server');

interface Manifest {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string };
  // biome-ignore lint/suspicious/noExplicitAny: manifests are free-form; the test reads them field by field.
  spec?: any;
  data?: Record<string, string>;
  stringData?: Record<string, string>;
}

function manifests(file: string): Manifest[] {
  return parseAllDocuments(readFileSync(path.join(DIR, file), 'utf8')).map((doc) => {
    if (doc.errors.length > 0) throw new Error(`${file}: ${doc.errors.map((e) => e.message).join('; ')}`);
    return doc.toJS() as Manifest;
  });
}

const server = manifests('server.yaml');
const replicas = manifests('server-replicas.yaml');
const agents = manifests('agents.yaml');
const one = (list: Manifest[], kind: string, namespace?: string) =>
  list.find((m) => m.kind === kind && (namespace === undefined || m.metadata.namespace === namespace)) as Manifest;

describe('Kubernetes example: one server, agents in two namespaces', () => {
  const statefulSet = one(server, 'StatefulSet');
  const container = statefulSet.spec.template.spec.containers[0];

  it('runs one server replica on a volume, with the checks file from a ConfigMap and the key from a Secret', () => {
    expect(statefulSet.spec.replicas).toBe(1);
    expect(container.args).toEqual(['server', '/etc/outpost/checks.json']);
    expect(statefulSet.spec.volumeClaimTemplates[0].metadata.name).toBe('state');
    expect(container.volumeMounts).toContainEqual({ name: 'state', mountPath: '/var/lib/outpost' });
    expect(container.env.find((e: { name: string }) => e.name === 'OUTPOST_API_KEY').valueFrom.secretKeyRef.name).toBe(
      one(server, 'Secret').metadata.name,
    );
    expect(container.readinessProbe.httpGet).toEqual({ path: '/-/readiness', port: 'health' });
    expect(one(server, 'Service').spec.ports).toEqual([{ name: 'api', port: 8080, targetPort: 'api' }]);
  });

  it("has a checks file the server accepts, whose locations are the agents' namespaces", () => {
    const text = one(server, 'ConfigMap').data?.['checks.json'] as string;
    const { checks, privateLocations } = parseServerChecksFile(text, 'checks.json', definitionRegistry());
    expect(privateLocations.map((l) => l.id)).toEqual(['lab', 'dmz']);
    expect(checks.map((c) => [c.check.id, c.locations])).toEqual([
      ['lab-intranet', ['lab']],
      ['dmz-gateway', ['dmz']],
      ['cluster-dns', ['lab', 'dmz']],
    ]);
    const namespaces = agents.filter((m) => m.kind === 'Namespace').map((m) => m.metadata.name);
    expect(namespaces).toEqual(privateLocations.map((l) => `outpost-${l.id}`));
  });

  it('gives each location its own key and points its agents at the server Service', () => {
    const service = one(server, 'Service');
    for (const location of ['lab', 'dmz']) {
      const namespace = `outpost-${location}`;
      const secret = one(agents, 'Secret', namespace);
      expect(secret.stringData?.API_KEY).toMatch(/^pl_REPLACE/);
      const agent = one(agents, 'Deployment', namespace).spec.template.spec.containers[0];
      expect(agent.args).toEqual(['agent']);
      const env = (name: string) => agent.env.find((e: { name: string }) => e.name === name);
      expect(env('API_URL').value).toBe(`http://${service.metadata.name}.${service.metadata.namespace}.svc.cluster.local:8080`);
      expect(env('API_KEY').valueFrom.secretKeyRef.name).toBe(secret.metadata.name);
    }
  });
});

describe('Kubernetes example: three server replicas on PostgreSQL', () => {
  const deployment = one(replicas, 'Deployment');
  const pod = deployment.spec.template.spec;
  const container = pod.containers[0];
  const env = (name: string) => container.env.find((e: { name: string }) => e.name === name);
  const labels = deployment.spec.template.metadata.labels;

  it('runs three replicas with DATABASE_URL from a Secret and readiness on the database', () => {
    expect(deployment.spec.replicas).toBe(3);
    expect(container.args).toEqual(['server', '/etc/outpost/checks.json']);
    const databaseSecret = replicas.find((m) => m.kind === 'Secret' && m.metadata.name === env('DATABASE_URL').valueFrom.secretKeyRef.name) as Manifest;
    const url = databaseSecret.stringData?.DATABASE_URL as string;
    // The example's URL is one the server accepts, with TLS verified against the mounted CA.
    const settings = configFromEnv({ OUTPOST_API_KEY: 'k'.repeat(32), DATABASE_URL: url, DATABASE_POOL_SIZE: env('DATABASE_POOL_SIZE').value }, 'server').server;
    expect(settings?.database).toMatchObject({ kind: 'postgres', poolSize: 10, shown: { sslmode: 'verify-full' } });
    const ca = new URL(url).searchParams.get('sslrootcert') as string;
    const caMount = container.volumeMounts.find((m: { name: string }) => m.name === 'database-ca');
    expect(path.dirname(ca)).toBe(caMount.mountPath);
    expect(pod.volumes.find((v: { name: string }) => v.name === 'database-ca').secret.secretName).toBe(databaseSecret.metadata.name);
    expect(container.readinessProbe.httpGet).toEqual({ path: '/-/readiness', port: 'health' });
    expect(env('LEADER_LEASE_SECONDS').value).toMatch(/^\d+$/);
  });

  it('keeps two replicas through a voluntary disruption, spread over nodes', () => {
    const budget = one(replicas, 'PodDisruptionBudget');
    expect(budget.apiVersion).toBe('policy/v1');
    expect(budget.spec.minAvailable).toBe(2);
    expect(budget.spec.selector.matchLabels).toEqual(labels);
    expect(deployment.spec.strategy.rollingUpdate.maxUnavailable).toBe(1);
    expect(pod.topologySpreadConstraints[0].labelSelector.matchLabels).toEqual(labels);
  });

  it('shares the artifacts volume, and has the same checks file and Service as the single server', () => {
    const claim = one(replicas, 'PersistentVolumeClaim');
    expect(claim.spec.accessModes).toEqual(['ReadWriteMany']);
    expect(pod.volumes.find((v: { name: string }) => v.name === 'state').persistentVolumeClaim.claimName).toBe(claim.metadata.name);
    expect(one(replicas, 'ConfigMap')).toEqual(one(server, 'ConfigMap'));
    expect(one(replicas, 'Service')).toEqual(one(server, 'Service'));
    expect(one(replicas, 'Service').spec.selector).toEqual(labels);
  });
});
