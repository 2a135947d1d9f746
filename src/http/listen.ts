import { lstatSync, unlinkSync, chmodSync } from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { formatHostPort, type ListenAddress } from '../lib/listen-address.js';

/** Starts listening and resolves with the bound address (port 0 picks a free port). */
export async function listen(server: Server, address: ListenAddress): Promise<AddressInfo> {
  await bind(server, (done) => server.listen(address.port, address.host, done));
  return server.address() as AddressInfo;
}

/** Runs `start` (a `server.listen` call) and resolves once listening, or rejects with its error. */
function bind(server: Server, start: (done: () => void) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    const onError = (err: Error): void => reject(err);
    server.once('error', onError);
    start(() => {
      server.off('error', onError);
      resolve();
    });
  });
}

/**
 * Listens on a TCP address or a Unix socket (`address.path`) and resolves with what to show:
 * `http://host:port`, or `unix:/path`. A socket file left by an earlier process is replaced (only
 * a socket, never another kind of file); the new one is made 0666, as reachable as a loopback
 * port to whoever can reach its directory (an emptyDir shared with the app, in Kubernetes).
 */
export async function listenAt(server: Server, address: ListenAddress): Promise<string> {
  const path = address.path;
  if (path === undefined) return baseUrlOf(await listen(server, address));
  try {
    if (lstatSync(path).isSocket()) unlinkSync(path);
  } catch {
    // nothing there
  }
  await bind(server, (done) => server.listen(path, done));
  chmodSync(path, 0o666);
  return `unix:${path}`;
}

/** `http://host:port` of a bound server. */
export function baseUrlOf(info: AddressInfo): string {
  const host = info.address === '0.0.0.0' ? '127.0.0.1' : info.address === '::' ? '::1' : info.address;
  return `http://${formatHostPort(host, info.port)}`;
}

/**
 * Stops accepting, lets in-flight requests finish for up to `timeoutMs`, then cuts what is left.
 * Idle keep-alive connections are closed at once so clients reconnect elsewhere.
 */
export function closeGracefully(server: Server, timeoutMs: number): Promise<void> {
  return new Promise((resolve) => {
    if (!server.listening) {
      resolve();
      return;
    }
    const timer = setTimeout(() => server.closeAllConnections(), timeoutMs);
    timer.unref();
    // A busy keep-alive connection would otherwise be served forever after close(): from now on
    // every response says `Connection: close` (prepended, so it runs before the route writes).
    server.prependListener('request', (_req, res) => {
      res.shouldKeepAlive = false;
    });
    // close() only drops connections idle at that instant; one whose last response finishes
    // later would hold the drain until the timeout, so keep sweeping while draining.
    const sweep = setInterval(() => server.closeIdleConnections(), 50);
    sweep.unref();
    server.close(() => {
      clearTimeout(timer);
      clearInterval(sweep);
      resolve();
    });
    server.closeIdleConnections();
  });
}
