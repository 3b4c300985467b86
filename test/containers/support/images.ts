// What the container tests share: the four images and how they are built
// (podman build, on local base images, with the CA npm needs here), a podman
// CLI runner, the README's `docker run` line, and TCP forwarders that let
// containers reach servers the tests run on the host's loopback.

import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { REPO } from '../../support/agent-process.js';
import { isAlive } from '../../support/daemon.js';
import { retryUntil } from '../../support/daemon.js';

export interface ImageSpec {
  dockerfile: string;
  tag: string;
  /** The runtimes the image bundles (runtimes/<name>). */
  runtimes: readonly string[];
}

export const IMAGES = {
  // `outpost` is the name the README's `docker build` gives it and its `docker run` line starts.
  full: { dockerfile: 'Dockerfile', tag: 'localhost/outpost:latest', runtimes: ['2026-04'] },
  uptime: { dockerfile: 'Dockerfile.uptime', tag: 'localhost/outpost-uptime:latest', runtimes: [] },
  dev: { dockerfile: 'Dockerfile.dev', tag: 'localhost/outpost-dev:latest', runtimes: ['2026-04'] },
  migration: { dockerfile: 'docker/migration/Dockerfile', tag: 'localhost/outpost-migration:latest', runtimes: ['2024-09', '2025-04', '2026-04'] },
} as const satisfies Record<string, ImageSpec>;

export type ImageKey = keyof typeof IMAGES;

/** Full first: dev and migration reuse its layers, uptime its build stages. */
export const BUILD_ORDER: readonly ImageKey[] = ['full', 'dev', 'migration', 'uptime'];

/** Stand-ins for node:24-bookworm-slim and debian:bookworm-slim, made by docker/base/build-base-images.sh. */
export const BASE_IMAGE = process.env.OUTPOST_TEST_BASE_IMAGE ?? 'localhost/outpost-node-base';
export const DEBIAN_IMAGE = process.env.OUTPOST_TEST_DEBIAN_IMAGE ?? 'localhost/debian:bookworm';
export const PODMAN_SOCKET = '/run/podman/podman.sock';

export interface Exec {
  code: number | null;
  stdout: string;
  stderr: string;
  ms: number;
}

/** Runs `podman <args>` (no shell); never rejects: look at `code`. */
export function podman(args: readonly string[], options: { env?: Record<string, string>; timeoutMs?: number } = {}): Promise<Exec> {
  const started = Date.now();
  return new Promise((resolve) => {
    const child = spawn('podman', args, { env: { ...process.env, ...options.env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => {
      stdout += c;
    });
    child.stderr.on('data', (c: Buffer) => {
      stderr += c;
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs ?? 120_000);
    child.on('error', (error) => {
      clearTimeout(timer);
      resolve({ code: null, stdout, stderr: `${stderr}${error.message}`, ms: Date.now() - started });
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr, ms: Date.now() - started });
    });
  });
}

/** podman's own log noise on hosts without systemd (healthcheck timers), left out of error messages. */
export function withoutSystemdNoise(text: string): string {
  return text
    .split('\n')
    .filter((l) => !/unable to get systemd connection|healthcheck: unable to/.test(l))
    .join('\n');
}

const SETUP_HINT =
  'The container tests need podman (with runc), its Docker-compatible socket and the local base images; ' +
  '`.ci/run` prepares all of them (as root). See docs/deployment.md.';

/** Fails with what is missing, in words: podman, the socket testcontainers uses, or the base images. */
export async function requirePodman(): Promise<void> {
  const version = await podman(['version', '--format', '{{.Client.Version}}'], { timeoutMs: 30_000 });
  if (version.code !== 0) throw new Error(`podman does not run (${version.stderr.trim() || `exit ${version.code}`}). ${SETUP_HINT}`);
  process.env.DOCKER_HOST ??= `unix://${PODMAN_SOCKET}`;
  process.env.TESTCONTAINERS_RYUK_DISABLED ??= 'true';
  const url = process.env.DOCKER_HOST;
  const remote = await podman(['--remote', '--url', url, 'version'], { timeoutMs: 30_000 });
  if (remote.code !== 0) {
    throw new Error(`No container API answers at DOCKER_HOST=${url} (${remote.stderr.trim()}): start \`podman system service --time=0 ${url}\`. ${SETUP_HINT}`);
  }
  for (const image of [BASE_IMAGE, DEBIAN_IMAGE]) {
    if (image.startsWith('localhost/') && (await podman(['image', 'exists', image])).code !== 0) {
      throw new Error(`The base image ${image} does not exist: run docker/base/build-base-images.sh. ${SETUP_HINT}`);
    }
  }
}

/** The CA npm must trust inside `podman build` here (TLS inspection): the host's NODE_EXTRA_CA_CERTS, mounted read-only. */
export function caBuildArgs(): string[] {
  const file = process.env.NODE_EXTRA_CA_CERTS ?? '/etc/ssl/certs/ca-certificates.crt';
  if (!existsSync(file)) return [];
  const dir = path.dirname(file);
  return ['-v', `${dir}:${dir}:ro`, '--build-arg', `NODE_EXTRA_CA_CERTS=${file}`];
}

export interface Built {
  seconds: number;
  /** Uncompressed size in bytes, as `podman images` reports it. */
  size: number;
  /** Build steps podman took from its layer cache, of all steps but FROM. */
  cached: number;
  steps: number;
}

/** `podman build` of one image from the repository root; throws with the build's tail on failure. */
export async function buildImage(key: ImageKey): Promise<Built> {
  const spec = IMAGES[key];
  const args = [
    'build',
    '--format',
    'docker', // HEALTHCHECK is part of the Docker image format only
    '-f',
    spec.dockerfile,
    '-t',
    spec.tag,
    '--build-arg',
    `BASE_IMAGE=${BASE_IMAGE}`,
    ...(key === 'uptime' ? ['--build-arg', `DEBIAN_IMAGE=${DEBIAN_IMAGE}`] : []),
    ...caBuildArgs(),
    '.',
  ];
  const started = Date.now();
  const result = await new Promise<Exec>((resolve) => {
    // At low priority: the other test files run beside the builds on two cores, and some measure time.
    const child = spawn('nice', ['-n', '15', 'podman', ...args], { cwd: REPO, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (c: Buffer) => {
      out += c;
    });
    child.stderr.on('data', (c: Buffer) => {
      out += c;
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), 20 * 60_000);
    child.on('error', (error) => resolve({ code: null, stdout: out, stderr: error.message, ms: 0 }));
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout: out, stderr: '', ms: Date.now() - started });
    });
  });
  if (result.code !== 0) {
    const tail = result.stdout.split('\n').slice(-60).join('\n');
    throw new Error(`podman ${args.join(' ')} failed (exit ${result.code}) after ${Math.round(result.ms / 1000)} s:\n${tail}${result.stderr}`);
  }
  const size = Number((await podman(['image', 'inspect', '--format', '{{.Size}}', spec.tag])).stdout.trim());
  return {
    seconds: Math.round(result.ms / 100) / 10,
    size,
    cached: (result.stdout.match(/^--> Using cache /gm) ?? []).length,
    steps: (result.stdout.match(/^\[\d+\/\d+\] STEP \d+\/\d+: (?!FROM )/gm) ?? []).length,
  };
}

export interface ImageInspect {
  Size: number;
  Config: {
    User: string;
    Env: string[];
    ExposedPorts: Record<string, unknown>;
    Volumes: Record<string, unknown>;
    WorkingDir: string;
    Entrypoint: string[];
    Cmd: string[];
    Labels: Record<string, string>;
    StopSignal: string;
  };
  Healthcheck?: { Test: string[]; Interval: number; Timeout: number };
}

export async function inspectImage(tag: string): Promise<ImageInspect> {
  const result = await podman(['image', 'inspect', tag]);
  if (result.code !== 0) throw new Error(`podman image inspect ${tag}: ${result.stderr}`);
  return (JSON.parse(result.stdout) as ImageInspect[])[0] as ImageInspect;
}

/** The name of the container that keeps podman's bridge up while the container tests forward ports to it. */
const BRIDGE_KEEPER = 'outpost-test-bridge-keeper';

/**
 * The host's address on podman's default bridge (containers reach it as
 * host.containers.internal). The bridge exists only while a container is on
 * it, so a container that sleeps holds it up until `release()`: a forwarder
 * listening on the bridge address must not lose it between two containers.
 */
export async function holdPodmanBridge(): Promise<{ gateway: string; release(): Promise<void> }> {
  const result = await podman(['network', 'inspect', 'podman']);
  const gateway = (JSON.parse(result.stdout) as Array<{ subnets?: Array<{ gateway?: string }> }>)[0]?.subnets?.[0]?.gateway;
  if (!gateway) throw new Error(`podman's default network has no gateway: ${result.stdout}${result.stderr}`);
  await podman(['rm', '-f', '-t', '0', BRIDGE_KEEPER]);
  const keeper = await podman(['run', '-d', '--rm', '--name', BRIDGE_KEEPER, '--entrypoint', 'sleep', IMAGES.uptime.tag, '7200']);
  if (keeper.code !== 0) throw new Error(`cannot start a container to hold podman's bridge up: ${keeper.stderr}`);
  const present = () => Object.values(os.networkInterfaces()).some((list) => list?.some((a) => a.address === gateway));
  const up = await retryUntil(30_000, async () => present());
  if (!up) throw new Error(`podman's bridge address ${gateway} is not on any interface of this host`);
  return { gateway, release: async () => void (await podman(['rm', '-f', '-t', '0', BRIDGE_KEEPER])) };
}

export interface Forward {
  port: number;
  close(): Promise<void>;
}

/**
 * Listens on `host` (the bridge address, never a wildcard) and pipes each
 * connection to 127.0.0.1:`targetPort`: the test servers listen on loopback only.
 */
export async function forward(targetPort: number, host: string): Promise<Forward> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((inbound) => {
    const outbound = net.connect(targetPort, '127.0.0.1');
    for (const s of [inbound, outbound]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => {
        inbound.destroy();
        outbound.destroy();
      });
    }
    inbound.pipe(outbound);
    outbound.pipe(inbound);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host, () => resolve());
  });
  return {
    port: (server.address() as net.AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

export const README_RUN_MARKER = '<!-- test/containers/images.test.ts runs the next `docker run` line exactly as written -->';

/** The one `docker run` line of the README that the tests run (the first after the marker). */
export function readmeDockerRunLine(): string {
  const readme = readFileSync(path.join(REPO, 'README.md'), 'utf8');
  const at = readme.indexOf(README_RUN_MARKER);
  if (at === -1) throw new Error(`README.md lacks the marker ${README_RUN_MARKER}`);
  const line = readme
    .slice(at)
    .split('\n')
    .find((l) => l.startsWith('docker run '));
  if (!line) throw new Error('README.md has no `docker run` line after the marker');
  return line;
}

/** POSIX shell words of one line: blanks separate, '…' and "…" quote, \ escapes (no expansions). */
export function shellWords(line: string): string[] {
  const words: string[] = [];
  let word: string | null = null;
  let quote: '"' | "'" | null = null;
  for (let i = 0; i < line.length; i++) {
    const c = line[i] as string;
    if (quote) {
      if (c === quote) quote = null;
      else if (c === '\\' && quote === '"' && /["\\$`]/.test(line[i + 1] ?? '')) word += line[++i] as string;
      else word += c;
    } else if (c === "'" || c === '"') {
      quote = c;
      word ??= '';
    } else if (c === '\\') {
      word = (word ?? '') + (line[++i] ?? '');
    } else if (/\s/.test(c)) {
      if (word !== null) words.push(word);
      word = null;
    } else {
      if (/[$`;&|<>()*?]/.test(c)) throw new Error(`shellWords: ${JSON.stringify(c)} needs a shell; keep the README line plain`);
      word = (word ?? '') + c;
    }
  }
  if (quote) throw new Error(`shellWords: unterminated ${quote} in ${line}`);
  if (word !== null) words.push(word);
  return words;
}

const LOCK_DIR = path.join(os.tmpdir(), 'outpost-container-tests.lock');


/**
 * One run of the container tests at a time on a machine: they publish port 8081
 * (the README's line), name a volume and tag the images. A lock left by a dead
 * process is taken over. Returns the release function.
 */
export async function lockContainerTests(timeoutMs: number): Promise<() => void> {
  const deadline = Date.now() + timeoutMs;
  let holder = 0;
  for (;;) {
    try {
      mkdirSync(LOCK_DIR);
      writeFileSync(path.join(LOCK_DIR, 'pid'), String(process.pid));
      return () => rmSync(LOCK_DIR, { recursive: true, force: true });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    let pid = 0;
    try {
      pid = Number(readFileSync(path.join(LOCK_DIR, 'pid'), 'utf8'));
    } catch {
      // Being written or removed right now.
    }
    if (pid > 0 && !isAlive(pid)) rmSync(LOCK_DIR, { recursive: true, force: true });
    else if (Date.now() > deadline) {
      throw new Error(`Another run of the container tests (pid ${pid || holder || '?'}) still holds ${LOCK_DIR} after ${timeoutMs / 1000} s`);
    } else {
      holder = pid || holder;
      await new Promise((r) => setTimeout(r, 1_000));
    }
  }
}

/**
 * A GenericContainer-ready list of ports: podman's Docker API reports every port
 * an image EXPOSEs as a port binding without a host port, and testcontainers then
 * waits for it to be published; publishing 8081 (to a random host port) avoids that.
 */
export function exposedPorts(...ports: number[]): number[] {
  return [...new Set([8081, ...ports])];
}
