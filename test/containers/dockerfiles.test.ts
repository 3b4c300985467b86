// The four Dockerfiles, read as text (no podman needed): the shared stages are
// word for word the same (one layer cache serves all images), and what the
// images promise — Node options, version label, user, probes, runtimes — agrees
// with the code and the repository. images.test.ts checks the built images.

import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { RECOMMENDED_NODE_OPTIONS } from '../../src/node-options.js';
import { REPO } from '../support/agent-process.js';
import { IMAGES, type ImageKey } from './support/images.js';

const read = (file: string) => readFileSync(path.join(REPO, file), 'utf8');
const pkg = JSON.parse(read('package.json')) as { version: string; engines: { node: string } };

/** Instructions with line continuations joined and comments dropped. */
function instructions(text: string): string[] {
  return text
    .replace(/\\\n/g, ' ')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'))
    .map((l) => l.replace(/\s+/g, ' '));
}

interface Stage {
  name: string | undefined;
  from: string;
  lines: string[];
}

function stages(text: string): Stage[] {
  const out: Stage[] = [];
  for (const line of instructions(text)) {
    const from = /^FROM (\S+)(?: AS (\S+))?$/i.exec(line);
    if (from) out.push({ name: from[2], from: from[1] as string, lines: [] });
    else out.at(-1)?.lines.push(line);
  }
  return out;
}

const keys = Object.keys(IMAGES) as ImageKey[];
const parsed = Object.fromEntries(keys.map((k) => [k, { text: read(IMAGES[k].dockerfile), stages: stages(read(IMAGES[k].dockerfile)) }])) as Record<
  ImageKey,
  { text: string; stages: Stage[] }
>;
const stage = (key: ImageKey, name: string) => parsed[key].stages.find((s) => s.name === name);
const final = (key: ImageKey) => parsed[key].stages.at(-1) as Stage;
const runtimeNames = readdirSync(path.join(REPO, 'runtimes')).sort();
/** A Dockerfile variable reference, `${NAME}`. */
const ref = (name: string) => `$${'{'}${name}}`;

describe('Dockerfiles', () => {
  it('share the build and deps stages word for word', () => {
    for (const name of ['build', 'deps']) {
      const reference = stage('full', name);
      expect(reference, `Dockerfile has a ${name} stage`).toBeDefined();
      for (const key of keys) expect(stage(key, name), `${IMAGES[key].dockerfile}: stage ${name}`).toEqual(reference);
    }
  });

  it('install each runtime the same way, from its lockfile with npm ci, and only where the image says so', () => {
    const template = stage('full', 'runtime-2026-04') as Stage;
    expect(template.lines).toContain('RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund --loglevel=warn');
    for (const key of keys) {
      const expected = IMAGES[key].runtimes;
      const built = parsed[key].stages.filter((s) => s.name?.startsWith('runtime-')).map((s) => s.name?.slice('runtime-'.length));
      expect(built, IMAGES[key].dockerfile).toEqual(expected);
      for (const runtime of expected) {
        expect(stage(key, `runtime-${runtime}`), `${key}: runtime-${runtime}`).toEqual(
          JSON.parse(JSON.stringify(template).replaceAll('2026-04', runtime)),
        );
        expect(final(key).lines).toContain(`COPY --from=runtime-${runtime} /runtimes/${runtime} ./runtimes/${runtime}`);
        expect(runtimeNames).toContain(runtime);
      }
      expect(parsed[key].text).toContain(`io.outpost.runtimes="${expected.join(',')}"`);
    }
  });

  it('default to an official Node.js image whose major version is the one the runtimes declare', () => {
    const runtimeNode = new Set(runtimeNames.map((r) => (JSON.parse(read(`runtimes/${r}/runtime.json`)) as { nodeJsVersion: string }).nodeJsVersion));
    expect([...runtimeNode]).toHaveLength(1);
    for (const key of keys) {
      const base = /^ARG BASE_IMAGE=node:(\d+)-bookworm-slim$/m.exec(parsed[key].text);
      expect(base, `${IMAGES[key].dockerfile}: ARG BASE_IMAGE=node:<major>-bookworm-slim`).not.toBeNull();
      expect(base?.[1]).toBe([...runtimeNode][0]);
      expect(Number(base?.[1])).toBeGreaterThanOrEqual(Number(/\d+/.exec(pkg.engines.node)?.[0]));
    }
    // The uptime image copies node onto plain Debian of the same release.
    expect(parsed.uptime.text).toMatch(/^ARG DEBIAN_IMAGE=debian:bookworm-slim$/m);
    expect(final('uptime').from).toBe(ref('DEBIAN_IMAGE'));
    expect(final('uptime').lines).toContain('COPY --from=build /usr/local/bin/node /usr/local/bin/node');
  });

  it('set NODE_OPTIONS to RECOMMENDED_NODE_OPTIONS from src/node-options.ts', () => {
    for (const key of keys) {
      const env = final(key).lines.find((l) => l.startsWith('ENV ')) ?? '';
      expect(env, IMAGES[key].dockerfile).toContain(`NODE_OPTIONS="${RECOMMENDED_NODE_OPTIONS}"`);
    }
  });

  it('label the version of package.json', () => {
    for (const key of keys) {
      expect(final(key).lines, IMAGES[key].dockerfile).toContain(`ARG VERSION=${pkg.version}`);
      expect(parsed[key].text).toContain(`org.opencontainers.image.version="${ref('VERSION')}"`);
    }
  });

  it('run the agent as uid 10001 under tini, with the state volume, the probe port, SIGTERM and a liveness healthcheck', () => {
    for (const key of keys) {
      const lines = final(key).lines;
      const file = IMAGES[key].dockerfile;
      expect(lines, file).toContain('USER 10001:10001');
      expect(lines, file).toContain('VOLUME ["/var/lib/outpost"]');
      expect(lines.find((l) => l.startsWith('ENV ')), file).toContain('STATE_DIR=/var/lib/outpost');
      expect(lines, file).toContain('EXPOSE 8081');
      expect(lines, file).toContain('STOPSIGNAL SIGTERM');
      expect(lines, file).toContain('ENTRYPOINT ["/usr/bin/tini", "--", "node", "/app/dist/main.js"]');
      expect(lines, file).toContain('CMD ["agent"]');
      const healthcheck = lines.find((l) => l.startsWith('HEALTHCHECK ')) ?? '';
      expect(healthcheck, file).toContain('/-/liveness');
      expect(healthcheck, file).toContain('process.env.AGENT_HEALTH_PORT||8081');
      const osLayer = lines.find((l) => l.includes('apt-get install') && l.includes('iputils-ping')) ?? '';
      for (const tool of ['iputils-ping', 'iputils-tracepath', 'traceroute', 'tcpdump', 'iproute2', 'tini']) expect(osLayer, `${file}: ${tool}`).toContain(tool);
      expect(osLayer, `${file}: ping loses its file capability`).toContain('setcap -r /usr/bin/ping');
      expect(osLayer, `${file}: the state directory belongs to 10001`).toContain('install -d -o 10001 -g 10001');
    }
  });

  it('put build tools only in the dev image', () => {
    for (const key of keys) {
      const tools = final(key).lines.some((l) => /apt-get install .*\bgcc g\+\+ make python3\b/.test(l));
      expect(tools, IMAGES[key].dockerfile).toBe(key === 'dev');
    }
  });

  it('install Chromium (no recommends) as the first layer of the full, dev and migration images, word for word, and not in the uptime image', () => {
    const chromium = (key: ImageKey) => final(key).lines.filter((l) => /apt-get install .*\bchromium\b/.test(l));
    const reference = final('full').lines[0] ?? '';
    expect(reference).toMatch(/^RUN .*apt-get install -y --no-install-recommends chromium fonts-liberation;/);
    for (const key of ['full', 'dev', 'migration'] as const) {
      expect(final(key).from, IMAGES[key].dockerfile).toBe(final('full').from);
      expect(final(key).lines[0], `${IMAGES[key].dockerfile}: the final stage starts with the same Chromium layer`).toBe(reference);
      expect(chromium(key), IMAGES[key].dockerfile).toEqual([reference]);
    }
    expect(chromium('uptime')).toEqual([]);
  });

  it('copy only paths that exist in the repository', () => {
    for (const key of keys) {
      for (const s of parsed[key].stages) {
        for (const line of s.lines.filter((l) => l.startsWith('COPY ') && !l.includes('--from='))) {
          const sources = line.split(' ').slice(1, -1);
          for (const source of sources) expect(existsSync(path.join(REPO, source)), `${IMAGES[key].dockerfile}: ${line}`).toBe(true);
        }
      }
    }
  });
});
