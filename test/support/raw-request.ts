// One HTTP request over a raw socket from a chosen local address: what came
// back, and nothing when the server closed the connection without a byte.

import { connect, type Socket } from 'node:net';

export function rawRequest(port: number, localAddress: string, head: string): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect({ port, host: '127.0.0.1', localAddress });
    let text = '';
    socket.on('data', (chunk) => {
      text += chunk.toString('latin1');
    });
    socket.on('error', () => undefined);
    socket.on('close', () => resolve(text));
    socket.write(head);
  });
}

/** Opens `count` connections from `localAddress` that send nothing; resolves once all are connected. */
export async function idleConnections(port: number, localAddress: string, count: number): Promise<Socket[]> {
  return Promise.all(
    Array.from(
      { length: count },
      () =>
        new Promise<Socket>((resolve) => {
          const socket = connect({ port, host: '127.0.0.1', localAddress }, () => resolve(socket));
          socket.on('error', () => undefined);
        }),
    ),
  );
}
