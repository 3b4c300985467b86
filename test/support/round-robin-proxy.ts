// A TCP load balancer as a test runs one in front of server replicas: each
// new connection goes to the next upstream in turn; one whose upstream
// refuses (a killed replica) is tried on the next, so clients see a replica
// die only as a dropped connection, as behind a real load balancer.

import net from 'node:net';

export interface RoundRobinProxy {
  port: number;
  /** Replaces the upstream ports (a restarted replica on a new port). */
  setUpstreams(ports: readonly number[]): void;
  /** Connections handed to each upstream port so far. */
  connections: Map<number, number>;
  close(): Promise<void>;
}

export async function startRoundRobinProxy(upstreams: readonly number[]): Promise<RoundRobinProxy> {
  let ports = [...upstreams];
  let next = 0;
  const connections = new Map<number, number>();
  const sockets = new Set<net.Socket>();
  const connect = (client: net.Socket, triesLeft: number) => {
    if (triesLeft === 0 || ports.length === 0) {
      client.destroy();
      return;
    }
    const port = ports[next++ % ports.length] as number;
    const upstream = net.connect(port, '127.0.0.1');
    sockets.add(upstream);
    upstream.once('close', () => sockets.delete(upstream));
    let connected = false;
    upstream.once('connect', () => {
      connected = true;
      connections.set(port, (connections.get(port) ?? 0) + 1);
      client.pipe(upstream).pipe(client);
      client.resume();
      const end = () => {
        client.destroy();
        upstream.destroy();
      };
      client.once('error', end).once('close', end);
      upstream.once('error', end).once('close', end);
    });
    upstream.once('error', () => {
      if (!connected) connect(client, triesLeft - 1);
    });
  };
  const server = net.createServer({ pauseOnConnect: true }, (client) => {
    sockets.add(client);
    client.once('close', () => sockets.delete(client));
    connect(client, ports.length);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    setUpstreams(list) {
      ports = [...list];
    },
    connections,
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
