/** First reconnect delay (ms); doubles per attempt up to {@link REDIS_RECONNECT_MAX_MS}. */
export const REDIS_RECONNECT_MIN_MS = 100;
export const REDIS_RECONNECT_MAX_MS = 2000;

/**
 * Where Redis is, as the connection last read it from the configuration (a mounted Secret may
 * rotate): one server, the seeds of a cluster, or the sentinels of a master. URLs carry the
 * credentials; `rediss://` turns TLS on, trusting `tlsCa` (PEM) when given.
 */
export type RedisTargetSpec =
  | { readonly kind: 'single'; readonly url: string; readonly tlsCa?: string }
  | { readonly kind: 'cluster'; readonly urls: readonly string[]; readonly tlsCa?: string }
  | { readonly kind: 'sentinel'; readonly urls: readonly string[]; readonly masterName: string; readonly tlsCa?: string };

/** What a link tells the connection; none of these may throw. */
export interface LinkEvents {
  /** A client of the link reported an error (logged, rate-limited, by the connection). */
  error(role: 'command' | 'subscriber', err: unknown): void;
  /** The command path became ready (a health check is due). */
  ready(): void;
  /**
   * A client of the link (re)connected, or moved to another server (a failover, a slot moved)
   * without an error: what was published before it was subscribed again may not have reached it.
   */
  disturbed(): void;
}

/**
 * One topology's clients behind the one shape the connection needs: send a command routed to the
 * slot of the deployment's hash tag, subscribe to a channel, close. node-redis' own clients do
 * the work (single, cluster, sentinel); nothing here retries or decides.
 */
export interface RedisLink {
  /** False while nothing can be sent (not connected): a call then fails at once, known not sent. */
  readonly connected: boolean;
  send(args: readonly string[]): Promise<unknown>;
  subscribe(channel: string, listener: (message: string) => void): Promise<void>;
  /** Starts connecting in the background; never throws. */
  connect(): void;
  destroy(): void;
}

export interface LinkOptions {
  readonly connectTimeoutMs: number;
  /** A key carrying the deployment's hash tag: commands without keys (PING, PUBLISH, WAIT) go to its slot. */
  readonly routingKey: string;
  readonly events: LinkEvents;
}

export const reconnectStrategy = (retries: number): number => Math.min(REDIS_RECONNECT_MIN_MS * 2 ** Math.min(retries, 10), REDIS_RECONNECT_MAX_MS);

export function socketOptions(url: URL, spec: RedisTargetSpec, connectTimeoutMs: number): Record<string, unknown> {
  const tls = url.protocol === 'rediss:';
  return {
    connectTimeout: connectTimeoutMs,
    reconnectStrategy,
    ...(tls ? { tls: true, servername: url.hostname, ...(spec.tlsCa ? { ca: spec.tlsCa } : {}) } : {}),
  };
}

export function credentials(url: URL): { username?: string; password?: string } {
  const out: { username?: string; password?: string } = {};
  if (url.username) out.username = decodeURIComponent(url.username);
  if (url.password) out.password = decodeURIComponent(url.password);
  return out;
}
