import { createServer } from 'node:net';

/** A free loopback port (the OS picks one; it is released at once, for a server to take). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

/**
 * A loopback port nothing listens on, for a test that wants ECONNREFUSED: a privileged one, below the
 * ephemeral range every server of the suite takes (port 0), so no server started by another file
 * running at the same time can take it (a port freePort() gave and released can be).
 */
export async function refusedPort(): Promise<number> {
  const { connect } = await import('node:net');
  for (const port of [1, 7, 9, 13, 17, 19]) {
    const refused = await new Promise<boolean>((resolve) => {
      const s = connect(port, '127.0.0.1');
      s.once('connect', () => {
        s.destroy();
        resolve(false);
      });
      s.once('error', (err: NodeJS.ErrnoException) => resolve(err.code === 'ECONNREFUSED'));
    });
    if (refused) return port;
  }
  throw new Error('every candidate privileged port on 127.0.0.1 accepts connections: something listens there');
}
