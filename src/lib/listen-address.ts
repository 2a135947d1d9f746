/**
 * A `host:port` a listener binds to. IPv6 hosts are written in brackets: `[::1]:7700`. With
 * `path`, a Unix socket (`unix:/path/to.sock`); host and port are then `unix` and 0.
 */
export interface ListenAddress {
  readonly host: string;
  readonly port: number;
  readonly path?: string;
}

/**
 * Parses `host:port` (port 0 picks a free port), and `unix:/absolute/path` when `unix` is allowed.
 * Returns an error message instead of throwing so configuration can report every problem at once.
 */
export function parseListenAddress(text: string, opts: { unix?: boolean } = {}): ListenAddress | string {
  if (opts.unix && text.trim().startsWith('unix:')) {
    const path = text.trim().slice('unix:'.length);
    if (!path.startsWith('/') || path.length < 2 || path.includes('\0')) return `expected unix:/absolute/path/to.sock, got "${text}"`;
    // Linux's sun_path holds 107 bytes and a terminator.
    if (Buffer.byteLength(path) > 107) return `a Unix socket path is at most 107 bytes, got ${Buffer.byteLength(path)}`;
    return { host: 'unix', port: 0, path };
  }
  const match = /^(?:\[([0-9a-fA-F:.]+)\]|([^:[\]\s]+)):(\d{1,5})$/.exec(text.trim());
  if (!match) return `expected host:port (e.g. 127.0.0.1:7700 or [::1]:7700)${opts.unix ? ' or unix:/path/to.sock' : ''}, got "${text}"`;
  const host = (match[1] ?? match[2]) as string;
  const port = Number(match[3]);
  if (port > 65535) return `port must be 0..65535, got ${port}`;
  return { host, port };
}

/** Formats an address for a URL authority (brackets around IPv6). */
export function formatHostPort(host: string, port: number): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}
