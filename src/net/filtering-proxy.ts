// The in-agent HTTP proxy that scripts' traffic goes through when a network
// policy is set (docs/network-policy.md): CONNECT tunnels and absolute-form
// requests (http://, and https:// as axios sends it), each target resolved once, judged by the policy, and connected
// to at the address judged — or handed to the upstream proxy (CHECK_PROXY)
// by that address. It listens on loopback only, on an ephemeral port; its
// connections, header sizes and idle times are bounded.

import http from 'node:http';
import net, { type AddressInfo, isIP } from 'node:net';
import tls from 'node:tls';

import { errorCode } from '../core/errors.js';
import type { ResolvedTarget } from './ip-family.js';
import { type NetworkPolicy, NetworkPolicyError, resolvePermitted } from './network-policy.js';

export interface FilteringProxyOptions {
  policy: NetworkPolicy;
  /** An HTTP proxy to chain to (http://[user:pass@]host:port); its own address is judged by the policy too. */
  upstream?: string;
  /** Connections held at once; the kernel's backlog waits beyond that. */
  maxConnections?: number;
  /** A tunnel or request with no traffic for this long is closed. */
  idleTimeoutMs?: number;
}

export interface FilteringProxy {
  /** http://127.0.0.1:<port> */
  readonly url: string;
  /** Connections refused by the policy so far. */
  readonly refused: number;
  /** The reason of the latest refusal, for a client that shows only a bare 403 (a package manager). */
  readonly lastRefusal: string | undefined;
  close(): Promise<void>;
}

export const PROXY_MAX_CONNECTIONS = 256;
export const PROXY_IDLE_TIMEOUT_MS = 60_000;
/** The largest answer head an upstream proxy may send to a CONNECT. */
const MAX_UPSTREAM_HEAD_BYTES = 16 * 1024;
/** The header a refusal carries, so a script (or a person reading a HAR) can tell the policy from the target. */
export const POLICY_HEADER = 'x-outpost-network-policy';

const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'proxy-authorization', 'proxy-authenticate', 'te', 'trailer', 'transfer-encoding', 'upgrade']);

/** "host:port" of a CONNECT line; IPv6 in brackets. */
function parseAuthority(authority: string): { host: string; port: number } | undefined {
  const match = /^(\[[^\]]+\]|[^:[\]]+):(\d{1,5})$/.exec(authority);
  if (!match) return undefined;
  const port = Number(match[2]);
  if (port < 1 || port > 65535) return undefined;
  return { host: (match[1] as string).replace(/^\[(.*)\]$/, '$1'), port };
}

const hostPort = (address: string, port: number) => (isIP(address) === 6 ? `[${address}]:${port}` : `${address}:${port}`);

function plainAnswer(status: number, text: string, policyReason?: string): string {
  const body = `${text}\n`;
  const header = policyReason ? `${POLICY_HEADER}: ${policyReason.replace(/[\r\n]/g, ' ')}\r\n` : '';
  return `HTTP/1.1 ${status} ${http.STATUS_CODES[status] ?? ''}\r\ncontent-type: text/plain; charset=utf-8\r\n${header}content-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`;
}

interface Upstream {
  host: string;
  port: number;
  authorization?: string;
}

function parseUpstream(raw: string | undefined): Upstream | undefined {
  if (!raw) return undefined;
  const url = new URL(raw);
  const authorization =
    url.username || url.password ? `Basic ${Buffer.from(`${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}`).toString('base64')}` : undefined;
  return { host: url.hostname.replace(/^\[(.*)\]$/, '$1'), port: Number(url.port) || 80, ...(authorization ? { authorization } : {}) };
}

/** Waits for a CONNECT answer's head from an upstream proxy; resolves with its status and what followed the head. */
function upstreamConnectAnswer(socket: net.Socket, timeoutMs: number): Promise<{ status: number; rest: Buffer }> {
  return new Promise((resolve, reject) => {
    let head = Buffer.alloc(0);
    const timer = setTimeout(() => done(new Error(`the upstream proxy did not answer CONNECT within ${timeoutMs} ms`)), timeoutMs);
    const done = (error: Error | null, value?: { status: number; rest: Buffer }) => {
      clearTimeout(timer);
      socket.off('data', onData);
      socket.off('error', onError);
      socket.off('close', onClose);
      if (error) reject(error);
      else resolve(value as { status: number; rest: Buffer });
    };
    const onData = (chunk: Buffer) => {
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) {
        if (head.length > MAX_UPSTREAM_HEAD_BYTES) done(new Error('the upstream proxy answered CONNECT with an oversized head'));
        return;
      }
      const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(head.subarray(0, end).toString('latin1'))?.[1] ?? 0);
      done(null, { status, rest: head.subarray(end + 4) });
    };
    const onError = (error: Error) => done(error);
    const onClose = () => done(new Error('the upstream proxy closed the connection'));
    socket.on('data', onData);
    socket.once('error', onError);
    socket.once('close', onClose);
  });
}

/** Connects to `address:port`, bounded by `timeoutMs`. */
function connectTo(address: string, port: number, timeoutMs: number): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: address, port, noDelay: true });
    const timer = setTimeout(() => {
      socket.destroy();
      reject(Object.assign(new Error(`connecting to ${hostPort(address, port)} timed out`), { code: 'ETIMEDOUT' }));
    }, timeoutMs);
    socket.once('connect', () => {
      clearTimeout(timer);
      socket.removeAllListeners('error');
      resolve(socket);
    });
    socket.once('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
  });
}

export async function startFilteringProxy(options: FilteringProxyOptions): Promise<FilteringProxy> {
  const { policy } = options;
  const upstream = parseUpstream(options.upstream);
  const idleMs = options.idleTimeoutMs ?? PROXY_IDLE_TIMEOUT_MS;
  let refused = 0;
  let lastRefusal: string | undefined;

  /**
   * The address to connect to for a target: resolved and judged here. With an
   * upstream proxy, a name this host cannot resolve is left to the upstream
   * (undefined), which resolves it under its own rules.
   */
  const permitted = async (host: string, port: number): Promise<ResolvedTarget | undefined> => {
    try {
      return await resolvePermitted(host, isIP(host) === 6 ? 'IPv6' : 'IPv4', policy, port);
    } catch (error) {
      const code = errorCode(error);
      if (upstream && !(error instanceof NetworkPolicyError) && (code === 'ENOTFOUND' || code === 'EAI_AGAIN' || code === 'ENODATA')) return undefined;
      throw error;
    }
  };
  /** The upstream's own address, judged like any other. */
  const upstreamSocket = async (): Promise<net.Socket> => {
    const proxy = upstream as Upstream;
    const at = await resolvePermitted(proxy.host, isIP(proxy.host) === 6 ? 'IPv6' : 'IPv4', policy, proxy.port);
    return connectTo(at.address, proxy.port, idleMs);
  };
  /** TLS to an https:// target, over a tunnel through the upstream proxy when there is one. */
  const tlsThrough = async (host: string, resolved: ResolvedTarget | undefined, port: number): Promise<net.Socket> => {
    let raw: net.Socket;
    if (upstream) {
      raw = await upstreamSocket();
      const authority = resolved ? hostPort(resolved.address, port) : hostPort(host, port);
      const auth = upstream.authorization ? `proxy-authorization: ${upstream.authorization}\r\n` : '';
      raw.write(`CONNECT ${authority} HTTP/1.1\r\nhost: ${authority}\r\n${auth}\r\n`);
      const answer = await upstreamConnectAnswer(raw, idleMs);
      if (answer.status !== 200) {
        raw.destroy();
        throw new Error(`the upstream proxy answered CONNECT with ${answer.status || 'no status'}`);
      }
    } else {
      raw = await connectTo((resolved as ResolvedTarget).address, port, idleMs);
    }
    return new Promise((resolve, reject) => {
      const secure = tls.connect({ socket: raw, servername: isIP(host) ? undefined : host, ALPNProtocols: ['http/1.1'] });
      secure.once('secureConnect', () => {
        secure.removeAllListeners('error');
        resolve(secure);
      });
      secure.once('error', (error) => {
        raw.destroy();
        reject(error);
      });
    });
  };
  /** What a refusal or a failure tells the client. */
  const failure = (error: unknown): { status: number; text: string; policy?: string } => {
    if (error instanceof NetworkPolicyError) {
      refused++;
      lastRefusal = error.message;
      return { status: 403, text: error.message, policy: error.message };
    }
    const code = errorCode(error);
    return { status: code === 'ETIMEDOUT' ? 504 : 502, text: `the filtering proxy could not reach the target: ${(error as Error).message}` };
  };

  const server = http.createServer({ headersTimeout: 10_000, requestTimeout: 0, keepAliveTimeout: 5_000 });
  server.maxConnections = options.maxConnections ?? PROXY_MAX_CONNECTIONS;
  // A client connection with no traffic (a slow upload included) is closed, as a tunnel's is.
  server.timeout = idleMs;

  server.on('connect', (req: http.IncomingMessage, client: net.Socket, head: Buffer) => {
    client.on('error', () => undefined);
    client.setTimeout(idleMs, () => client.destroy());
    const target = parseAuthority(req.url ?? '');
    if (!target) {
      client.end(plainAnswer(400, 'CONNECT needs host:port'));
      return;
    }
    (async () => {
      const resolved = await permitted(target.host, target.port);
      let remote: net.Socket;
      if (upstream) {
        remote = await upstreamSocket();
        // By the address judged here, so the upstream cannot resolve the name to another one.
        const authority = resolved ? hostPort(resolved.address, target.port) : hostPort(target.host, target.port);
        const auth = upstream.authorization ? `proxy-authorization: ${upstream.authorization}\r\n` : '';
        remote.write(`CONNECT ${authority} HTTP/1.1\r\nhost: ${authority}\r\n${auth}\r\n`);
        const answer = await upstreamConnectAnswer(remote, idleMs);
        if (answer.status !== 200) {
          remote.destroy();
          client.end(plainAnswer(502, `the upstream proxy answered CONNECT with ${answer.status || 'no status'}`));
          return;
        }
        if (answer.rest.length > 0) client.write(answer.rest);
      } else {
        remote = await connectTo((resolved as ResolvedTarget).address, target.port, idleMs);
      }
      remote.on('error', () => client.destroy());
      client.on('error', () => remote.destroy());
      remote.setTimeout(idleMs, () => remote.destroy());
      remote.once('close', () => client.destroy());
      client.once('close', () => remote.destroy());
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      if (head.length > 0) remote.write(head);
      remote.pipe(client);
      client.pipe(remote);
    })().catch((error: unknown) => {
      const answer = failure(error);
      if (!client.destroyed) client.end(plainAnswer(answer.status, answer.text, answer.policy));
    });
  });

  server.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
    let target: URL;
    try {
      target = new URL(req.url ?? '');
    } catch {
      res.writeHead(400, { 'content-type': 'text/plain' }).end('a proxy request needs an absolute http:// URL\n');
      return;
    }
    if (target.protocol !== 'http:' && target.protocol !== 'https:') {
      res.writeHead(400, { 'content-type': 'text/plain' }).end('only http:// and https:// URLs are proxied\n');
      return;
    }
    // An https:// URL in absolute form (axios sends it so through an HTTP proxy): the proxy makes the TLS connection, verified as a client would.
    const secure = target.protocol === 'https:';
    const port = Number(target.port) || (secure ? 443 : 80);
    const host = target.hostname.replace(/^\[(.*)\]$/, '$1');
    (async () => {
      const resolved = await permitted(host, port);
      const headers: http.OutgoingHttpHeaders = {};
      for (const [key, value] of Object.entries(req.headers)) if (!HOP_BY_HOP.has(key) && value !== undefined) headers[key] = value;
      headers.host = target.host;
      headers.connection = 'close';
      let request: http.ClientRequest;
      if (upstream && !secure) {
        const socket = await upstreamSocket();
        const via = new URL(target.toString());
        if (resolved) via.hostname = isIP(resolved.address) === 6 ? `[${resolved.address}]` : resolved.address;
        if (upstream.authorization) headers['proxy-authorization'] = upstream.authorization;
        request = http.request({ createConnection: () => socket, method: req.method, path: via.toString(), headers, setHost: false });
      } else {
        const socket = secure ? await tlsThrough(host, resolved, port) : await connectTo((resolved as ResolvedTarget).address, port, idleMs);
        request = http.request({ createConnection: () => socket, method: req.method, path: `${target.pathname}${target.search}`, headers, setHost: false });
      }
      request.setTimeout(idleMs, () => request.destroy(Object.assign(new Error('the target went idle'), { code: 'ETIMEDOUT' })));
      request.on('response', (answer) => {
        const out: http.OutgoingHttpHeaders = {};
        for (const [key, value] of Object.entries(answer.headers)) if (!HOP_BY_HOP.has(key) && value !== undefined) out[key] = value;
        res.writeHead(answer.statusCode ?? 502, answer.statusMessage, out);
        answer.pipe(res);
      });
      request.on('error', (error) => {
        if (!res.headersSent) {
          const answer = failure(error);
          res.writeHead(answer.status, { 'content-type': 'text/plain' }).end(`${answer.text}\n`);
        } else res.destroy();
      });
      req.pipe(request);
    })().catch((error: unknown) => {
      const answer = failure(error);
      if (res.headersSent) return res.destroy();
      res.writeHead(answer.status, { 'content-type': 'text/plain; charset=utf-8', ...(answer.policy ? { [POLICY_HEADER]: answer.policy } : {}) });
      res.end(`${answer.text}\n`);
    });
  });
  server.on('clientError', (_error, socket) => socket.destroy());

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  // The agent's lifetime is its own: this server never keeps the process alive.
  server.unref();
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    get refused() {
      return refused;
    },
    get lastRefusal() {
      return lastRefusal;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

const shared = new Map<NetworkPolicy, Map<string, Promise<FilteringProxy>>>();

/** One proxy per policy and upstream for the agent's lifetime, started on first use. */
export function sharedFilteringProxy(policy: NetworkPolicy, upstream?: string): Promise<FilteringProxy> {
  let byUpstream = shared.get(policy);
  if (!byUpstream) {
    byUpstream = new Map();
    shared.set(policy, byUpstream);
  }
  const key = upstream ?? '';
  let started = byUpstream.get(key);
  if (!started) {
    started = startFilteringProxy({ policy, ...(upstream ? { upstream } : {}) });
    // A failed start is tried again by the next run, not remembered.
    started.catch(() => byUpstream?.delete(key));
    byUpstream.set(key, started);
  }
  return started;
}
