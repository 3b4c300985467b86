// A private npm registry served by the test itself (node:http): the packages
// the test describes are written to folders and packed with `npm pack`; the
// registry answers their packuments at /<name> and their tarballs at
// /<name>/-/<file>.tgz, and remembers every path it was asked for.
// (test/README.md: verdaccio does not install on these machines.)

import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server as HttpServer, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { tempDir } from './agent-process.js';

export interface RegistryPackage {
  name: string;
  version: string;
  dependencies?: Record<string, string>;
  /** Lifecycle scripts (`postinstall`, …). */
  scripts?: Record<string, string>;
  /** Files of the package besides its package.json (index.js, …). */
  files: Record<string, string>;
}

export interface NpmRegistry {
  /** http://127.0.0.1:<port>/ */
  url: string;
  /** https://127.0.0.1:<port>/, the same packages, when started with a certificate. */
  httpsUrl?: string;
  /** Every path asked for, in order. */
  requests: string[];
  stop(): Promise<void>;
}

interface Packed {
  manifest: Record<string, unknown>;
  tarball: Buffer;
  file: string;
}

function pack(pkg: RegistryPackage, root: string): Packed {
  const dir = path.join(root, pkg.name.replace('/', '+'));
  mkdirSync(dir, { recursive: true });
  const manifest = {
    name: pkg.name,
    version: pkg.version,
    main: 'index.js',
    license: 'MIT',
    ...(pkg.dependencies ? { dependencies: pkg.dependencies } : {}),
    ...(pkg.scripts ? { scripts: pkg.scripts } : {}),
  };
  writeFileSync(path.join(dir, 'package.json'), JSON.stringify(manifest));
  for (const [name, content] of Object.entries(pkg.files)) writeFileSync(path.join(dir, name), content);
  const out = execFileSync('npm', ['pack', '--json', '--pack-destination', root], { cwd: dir, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
  const file = (JSON.parse(out) as Array<{ filename: string }>)[0]?.filename as string;
  return {
    manifest,
    tarball: readFileSync(path.join(root, file)),
    file: path.basename(file),
  };
}

/** Packs the packages and serves them on loopback (also over TLS with `tls`: the same tarballs). */
export async function startNpmRegistry(packages: RegistryPackage[], tls?: { cert: string; key: string }): Promise<NpmRegistry> {
  const root = tempDir('outpost-registry-');
  const packed = packages.map((pkg) => pack(pkg, root));
  const requests: string[] = [];
  const bases = new Map<unknown, string>();
  const answer = (req: IncomingMessage, res: ServerResponse) => {
    // Tarball addresses on the scheme and port the packument was asked on.
    const base = `${(req.socket as { encrypted?: boolean }).encrypted ? 'https' : 'http'}://${req.headers.host}/`;
    const url = decodeURIComponent((req.url ?? '/').split('?')[0] as string);
    requests.push(url);
    const tarball = packed.find((p) => url === `/${p.manifest.name}/-/${p.file}`);
    if (tarball) {
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': tarball.tarball.length });
      res.end(tarball.tarball);
      return;
    }
    const name = url.slice(1);
    const versions = packed.filter((p) => p.manifest.name === name);
    if (versions.length === 0) {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end('{"error":"Not found"}');
      return;
    }
    const packument = {
      name,
      'dist-tags': { latest: versions.at(-1)?.manifest.version },
      versions: Object.fromEntries(
        versions.map((p) => [
          p.manifest.version,
          {
            ...p.manifest,
            dist: {
              tarball: `${base}${name}/-/${p.file}`,
              shasum: createHash('sha1').update(p.tarball).digest('hex'),
              integrity: `sha512-${createHash('sha512').update(p.tarball).digest('base64')}`,
            },
          },
        ]),
      ),
    };
    const body = JSON.stringify(packument);
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
    res.end(body);
  };
  const servers: Array<{ server: HttpServer | HttpsServer; scheme: string }> = [{ server: createServer(answer), scheme: 'http' }];
  if (tls) servers.push({ server: createHttpsServer({ cert: readFileSync(tls.cert), key: readFileSync(tls.key) }, answer), scheme: 'https' });
  for (const { server, scheme } of servers) {
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    bases.set(server, `${scheme}://127.0.0.1:${(server.address() as AddressInfo).port}/`);
  }
  const [plain, secure] = servers;
  return {
    url: bases.get(plain?.server) as string,
    ...(secure ? { httpsUrl: bases.get(secure.server) as string } : {}),
    requests,
    stop: async () => {
      await Promise.all(
        servers.map(
          ({ server }) =>
            new Promise<void>((resolve) => {
              server.closeAllConnections();
              server.close(() => resolve());
            }),
        ),
      );
    },
  };
}
