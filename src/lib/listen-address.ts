/** A `host:port` a listener binds to. IPv6 hosts are written in brackets: `[::1]:7700`. */
export interface ListenAddress {
  readonly host: string;
  readonly port: number;
}

/**
 * Parses `host:port` (port 0 picks a free port). Returns an error message instead of throwing so
 * configuration can report every problem at once.
 */
export function parseListenAddress(text: string): ListenAddress | string {
  const match = /^(?:\[([0-9a-fA-F:.]+)\]|([^:[\]\s]+)):(\d{1,5})$/.exec(text.trim());
  if (!match) return `expected host:port (e.g. 127.0.0.1:7700 or [::1]:7700), got "${text}"`;
  const host = (match[1] ?? match[2]) as string;
  const port = Number(match[3]);
  if (port > 65535) return `port must be 0..65535, got ${port}`;
  return { host, port };
}

/** Formats an address for a URL authority (brackets around IPv6). */
export function formatHostPort(host: string, port: number): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}
