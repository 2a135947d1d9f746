import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { formatHostPort, type ListenAddress } from '../lib/listen-address.js';

/** Starts listening and resolves with the bound address (port 0 picks a free port). */
export function listen(server: Server, address: ListenAddress): Promise<AddressInfo> {
  return new Promise((resolve, reject) => {
    const onError = (err: Error): void => reject(err);
    server.once('error', onError);
    server.listen(address.port, address.host, () => {
      server.off('error', onError);
      resolve(server.address() as AddressInfo);
    });
  });
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
    server.close(() => {
      clearTimeout(timer);
      resolve();
    });
    server.closeIdleConnections();
  });
}
