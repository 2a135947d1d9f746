import { lstatSync, unlinkSync } from '../lib/node-fs.js';
import type { Server } from 'node:http';
import { connect, type AddressInfo, type Server as NetServer } from 'node:net';
import { SidecarError } from '../lib/errors.js';
import { formatHostPort, type ListenAddress } from '../lib/listen-address.js';

/** Starts listening and resolves with the bound address (port 0 picks a free port). */
export async function listen(server: NetServer, address: ListenAddress): Promise<AddressInfo> {
  await bind(server, (done) => server.listen(address.port, address.host, done));
  return server.address() as AddressInfo;
}

/** Runs `start` (a `server.listen` call) and resolves once listening, or rejects with its error. */
function bind(server: NetServer, start: (done: () => void) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    const onError = (err: Error): void => reject(err);
    server.once('error', onError);
    start(() => {
      server.off('error', onError);
      resolve();
    });
  });
}

/** Mode of the decision socket: as reachable as a loopback port to whoever can reach its directory. */
const SOCKET_MODE = 0o666;
/** Leaves only the bits of {@link SOCKET_MODE} when bind() creates the socket (bind applies 0o777 & ~umask). */
const SOCKET_UMASK = 0o777 & ~SOCKET_MODE;

export type ListenErrorCode = 'ERR_LISTEN_IN_USE' | 'ERR_LISTEN_NOT_A_SOCKET' | 'ERR_LISTEN_SYMLINK' | 'ERR_LISTEN_PROBE';

/** A Unix socket path that cannot be taken; the message says what is there. */
export class ListenError extends SidecarError<ListenErrorCode> {}

/**
 * Listens on a TCP address or a Unix socket (`address.path`) and resolves with what to show:
 * `http://host:port`, or `unix:/path`.
 *
 * A Unix socket is created with mode 0666 by bind() itself (the process umask is set around the
 * synchronous bind), as reachable as a loopback port to whoever can reach its directory (an emptyDir
 * shared with the app, in Kubernetes). Its mode is never changed by path afterwards: whoever can
 * write to the directory could swap the path for a symlink in between. What is at the
 * path decides: nothing, bind; a socket nobody accepts on (a crashed process's, connect gives
 * ECONNREFUSED), replaced; a live socket, a symlink, or any other kind of file, refused
 * ({@link ListenError}).
 */
export async function listenAt(server: NetServer, address: ListenAddress): Promise<string> {
  const path = address.path;
  if (path === undefined) return baseUrlOf(await listen(server, address));
  await clearStaleSocket(path);
  await bind(server, (done) => {
    // net binds a pipe synchronously inside listen(): the umask holds for that bind() alone.
    const previous = process.umask(SOCKET_UMASK);
    try {
      server.listen(path, done);
    } finally {
      process.umask(previous);
    }
  });
  return `unix:${path}`;
}

/** Removes a stale socket at `path`; throws {@link ListenError} when the path holds anything else. */
async function clearStaleSocket(path: string): Promise<void> {
  let stat;
  try {
    stat = lstatSync(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw err;
  }
  if (stat.isSymbolicLink()) {
    throw new ListenError('ERR_LISTEN_SYMLINK', 'a symbolic link is there; it is not followed (remove it, or choose another path)');
  }
  if (!stat.isSocket()) {
    const what = stat.isFile() ? 'a regular file' : stat.isDirectory() ? 'a directory' : stat.isFIFO() ? 'a named pipe' : 'a device or other special file';
    throw new ListenError('ERR_LISTEN_NOT_A_SOCKET', `${what} is there, not a socket; it is not replaced (EADDRINUSE)`);
  }
  const probe = await probeSocket(path);
  if (probe === 'live') {
    throw new ListenError('ERR_LISTEN_IN_USE', 'a live socket is there (something accepts connections on it: another serve?); it is not replaced');
  }
  if (probe !== 'stale') throw new ListenError('ERR_LISTEN_PROBE', `a socket is there and cannot be probed (${probe}); it is not replaced`);
  try {
    unlinkSync(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
}

/** How long a connect to an existing socket may take before it is taken as live (ms). */
const PROBE_TIMEOUT_MS = 2000;

/** `live` when something accepts on the socket, `stale` when connect is refused, else the error code. */
function probeSocket(path: string): Promise<'live' | 'stale' | string> {
  return new Promise((resolve) => {
    const socket = connect({ path });
    const done = (result: string): void => {
      clearTimeout(timer);
      socket.destroy();
      resolve(result);
    };
    // A listener with a full backlog does not answer at once: it is alive.
    const timer = setTimeout(() => done('live'), PROBE_TIMEOUT_MS);
    socket.once('connect', () => done('live'));
    socket.once('error', (err: NodeJS.ErrnoException) => done(err.code === 'ECONNREFUSED' || err.code === 'ENOENT' ? 'stale' : (err.code ?? err.message)));
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

/**
 * One listener of the sidecar: its name in `urls`, the flag that sets its address, its server; an
 * HTTP server drains with {@link closeGracefully}, any other brings its own `drain`.
 */
export type NamedListener = {
  readonly name: string;
  readonly flag: string;
  readonly address: ListenAddress;
} & ({ readonly server: Server; readonly drain?: undefined } | { readonly server: NetServer; drain(timeoutMs: number): Promise<void> });

function drainOne(l: NamedListener, timeoutMs: number): Promise<void> {
  return l.drain !== undefined ? l.drain(timeoutMs) : closeGracefully(l.server, timeoutMs);
}

/**
 * Listens on every address in turn and resolves with each one's URL by name. When one cannot be
 * taken, closes those that were and rejects with the flag and what is wrong (a socket path says
 * what is there; a bind error, its code).
 */
export async function listenAll(listeners: readonly NamedListener[]): Promise<Record<string, string>> {
  const urls: Record<string, string> = {};
  try {
    for (const l of listeners) urls[l.name] = await listenAt(l.server, l.address);
    return urls;
  } catch (err) {
    const failed = listeners.find((l) => !l.server.listening && !urls[l.name]);
    await Promise.allSettled(listeners.map((l) => drainOne(l, 0)));
    const where = failed ? `${failed.flag} ${failed.address.path !== undefined ? `unix:${failed.address.path}` : `${failed.address.host}:${failed.address.port}`}` : 'listener';
    const why = err instanceof ListenError ? err.message : `cannot listen (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`;
    throw new Error(`${where}: ${why}`, { cause: err });
  }
}

/**
 * The listeners' part of a shutdown, within `deadline` (performance.now() ms): the traffic
 * listeners drain first (answers in flight complete, new connections are refused), the admin
 * listener last (at most 1 s), so /readyz says 503 until the end.
 */
export async function drainListeners(listeners: readonly NamedListener[], deadline: number): Promise<void> {
  const left = (): number => Math.max(0, deadline - performance.now());
  await Promise.all(listeners.filter((l) => l.name !== 'admin').map((l) => drainOne(l, left())));
  await Promise.all(listeners.filter((l) => l.name === 'admin').map((l) => drainOne(l, Math.min(1000, left()))));
}
