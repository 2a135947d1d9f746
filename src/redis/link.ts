import { createClient, createCluster, createSentinel, ErrorReply } from '@redis/client';

/** First reconnect delay (ms); doubles per attempt up to {@link REDIS_RECONNECT_MAX_MS}. */
export const REDIS_RECONNECT_MIN_MS = 100;
export const REDIS_RECONNECT_MAX_MS = 2000;
/** A cluster link asks the cluster for its slots at most this often after failures (ms). */
const REDISCOVER_MS = 500;

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

const reconnectStrategy = (retries: number): number => Math.min(REDIS_RECONNECT_MIN_MS * 2 ** Math.min(retries, 10), REDIS_RECONNECT_MAX_MS);

function socketOptions(url: URL, spec: RedisTargetSpec, connectTimeoutMs: number): Record<string, unknown> {
  const tls = url.protocol === 'rediss:';
  return {
    connectTimeout: connectTimeoutMs,
    reconnectStrategy,
    ...(tls ? { tls: true, servername: url.hostname, ...(spec.tlsCa ? { ca: spec.tlsCa } : {}) } : {}),
  };
}

function credentials(url: URL): { username?: string; password?: string } {
  const out: { username?: string; password?: string } = {};
  if (url.username) out.username = decodeURIComponent(url.username);
  if (url.password) out.password = decodeURIComponent(url.password);
  return out;
}

/** Builds the link for `spec`; nothing connects until {@link RedisLink.connect}. */
export function createLink(spec: RedisTargetSpec, options: LinkOptions): RedisLink {
  switch (spec.kind) {
    case 'single':
      return new SingleLink(spec, options);
    case 'cluster':
      return new ClusterLink(spec, options);
    case 'sentinel':
      return new SentinelLink(spec, options);
  }
}

/** The part of a node-redis client this link uses (its full generic type does not survive the options object). */
interface Client {
  readonly isReady: boolean;
  readonly isOpen: boolean;
  connect(): Promise<unknown>;
  destroy(): void;
  sendCommand(args: string[]): Promise<unknown>;
  subscribe(channel: string, listener: (message: string) => void): Promise<void>;
  on(event: string, listener: (...args: unknown[]) => void): unknown;
}

/** One server: a command client, and a second client for subscriptions opened on first use. */
class SingleLink implements RedisLink {
  private readonly client: Client;
  private subscriber: Client | undefined;
  private started = false;

  constructor(
    private readonly spec: Extract<RedisTargetSpec, { kind: 'single' }>,
    private readonly options: LinkOptions,
  ) {
    this.client = this.newClient('command');
    this.client.on('ready', () => options.events.ready());
  }

  get connected(): boolean {
    return this.client.isReady;
  }

  send(args: readonly string[]): Promise<unknown> {
    return this.client.sendCommand([...args]);
  }

  async subscribe(channel: string, listener: (message: string) => void): Promise<void> {
    if (!this.subscriber) {
      this.subscriber = this.newClient('subscriber');
      if (this.started) this.subscriber.connect().catch((err: unknown) => this.options.events.error('subscriber', err));
    }
    // The subscriber keeps an offline queue (the command client has none): a subscription asked
    // before the first connection is sent once connected, and node-redis replays every
    // subscription after a reconnect.
    await this.subscriber.subscribe(channel, listener);
  }

  connect(): void {
    if (this.started) return;
    this.started = true;
    this.client.connect().catch((err: unknown) => this.options.events.error('command', err));
    this.subscriber?.connect().catch((err: unknown) => this.options.events.error('subscriber', err));
  }

  destroy(): void {
    for (const c of [this.client, this.subscriber]) {
      try {
        if (c?.isOpen) c.destroy();
      } catch {
        // already closed
      }
    }
  }

  private newClient(role: 'command' | 'subscriber'): Client {
    const url = new URL(this.spec.url);
    const client = createClient({ url: this.spec.url, disableOfflineQueue: role === 'command', socket: socketOptions(url, this.spec, this.options.connectTimeoutMs) as never }) as unknown as Client;
    // Without an 'error' listener node-redis errors would crash the process.
    client.on('error', (err: unknown) => this.options.events.error(role, err));
    return client;
  }
}

type Cluster = ReturnType<typeof createCluster>;

/**
 * A Redis Cluster through node-redis' cluster client: it learns the slots from the seeds, follows
 * MOVED and ASK, and rediscovers after a failover. Every command is routed by the deployment's
 * hash tag, so all of them (scripts, WAIT, PUBLISH) go to the one master that owns the slot.
 */
class ClusterLink implements RedisLink {
  private readonly cluster: Cluster;
  private started = false;
  private ready = false;

  constructor(
    spec: Extract<RedisTargetSpec, { kind: 'cluster' }>,
    private readonly options: LinkOptions,
  ) {
    const first = new URL(spec.urls[0]!);
    this.cluster = createCluster({
      rootNodes: spec.urls.map((url) => ({ url })),
      defaults: { ...credentials(first), disableOfflineQueue: true, socket: socketOptions(first, spec, options.connectTimeoutMs) as never },
      useReplicas: false,
    });
    this.cluster.on('error', (err: unknown) => options.events.error('command', err));
    this.cluster.on('node-error', (err: unknown) => options.events.error('command', err));
  }

  get connected(): boolean {
    return this.ready && this.cluster.isOpen;
  }

  send(args: readonly string[]): Promise<unknown> {
    return this.cluster.sendCommand(this.options.routingKey, false, [...args]).catch((err: unknown) => {
      // node-redis learns a new topology only from MOVED/ASK (redis/node-redis#2806): after a
      // failover it would go on writing to the dead master for good. Any failure that is not an
      // answer makes it ask the cluster again (at most every REDISCOVER_MS).
      if (!(err instanceof ErrorReply)) this.rediscover();
      throw err;
    });
  }

  private lastRediscover = 0;

  private rediscover(): void {
    const now = Date.now();
    if (now - this.lastRediscover < REDISCOVER_MS) return;
    this.lastRediscover = now;
    const nodes = [...this.cluster._slots.nodeByAddress.values()];
    const start = nodes.find((n) => n.client?.isReady)?.client ?? nodes.find((n) => n.client)?.client;
    if (!start) return;
    this.cluster._slots.rediscover(start).catch((err: unknown) => this.options.events.error('command', err));
  }

  async subscribe(channel: string, listener: (message: string) => void): Promise<void> {
    this.subscriptions.push([channel, listener]);
    // Before the first connection the cluster client cannot subscribe: done once connected.
    if (this.ready) await this.cluster.subscribe(channel, listener);
  }

  private readonly subscriptions: [string, (message: string) => void][] = [];

  connect(): void {
    if (this.started) return;
    this.started = true;
    // The cluster client gives up when no seed answers at start: try again with the same backoff.
    const attempt = (retries: number): void => {
      this.cluster.connect().then(
        () => {
          this.ready = true;
          for (const [channel, listener] of this.subscriptions) {
            this.cluster.subscribe(channel, listener).catch((err: unknown) => this.options.events.error('subscriber', err));
          }
          this.options.events.ready();
        },
        (err: unknown) => {
          this.options.events.error('command', err);
          if (!this.destroyed) setTimeout(() => attempt(retries + 1), reconnectStrategy(retries)).unref();
        },
      );
    };
    attempt(0);
  }

  private destroyed = false;

  destroy(): void {
    this.destroyed = true;
    try {
      if (this.cluster.isOpen) this.cluster.destroy();
    } catch {
      // already closed
    }
  }
}

type Sentinel = ReturnType<typeof createSentinel>;

/**
 * A Sentinel-managed master through node-redis' sentinel client: it asks the sentinels for the
 * master, follows a failover, and keeps one connection to the master (so WAIT counts the writes
 * that came before it on that same connection).
 */
class SentinelLink implements RedisLink {
  private readonly sentinel: Sentinel;
  private started = false;
  private destroyed = false;

  constructor(
    spec: Extract<RedisTargetSpec, { kind: 'sentinel' }>,
    private readonly options: LinkOptions,
  ) {
    const urls = spec.urls.map((u) => new URL(u));
    const first = urls[0]!;
    const nodeOptions = { ...credentials(first), disableOfflineQueue: true, socket: socketOptions(first, spec, options.connectTimeoutMs) as never };
    this.sentinel = createSentinel({
      name: spec.masterName,
      sentinelRootNodes: urls.map((u) => ({ host: u.hostname, port: Number(u.port || 26379) })),
      nodeClientOptions: nodeOptions,
      sentinelClientOptions: nodeOptions,
      masterPoolSize: 1,
    });
    this.sentinel.on('error', (err: unknown) => options.events.error('command', err));
  }

  get connected(): boolean {
    return this.sentinel.isReady;
  }

  send(args: readonly string[]): Promise<unknown> {
    return this.sentinel.sendCommand(false, [...args]);
  }

  async subscribe(channel: string, listener: (message: string) => void): Promise<void> {
    this.subscriptions.push([channel, listener]);
    if (this.ready) await this.sentinel.subscribe(channel, listener);
  }

  private readonly subscriptions: [string, (message: string) => void][] = [];
  private ready = false;

  connect(): void {
    if (this.started) return;
    this.started = true;
    const attempt = (retries: number): void => {
      this.sentinel.connect().then(
        () => {
          this.ready = true;
          for (const [channel, listener] of this.subscriptions) {
            this.sentinel.subscribe(channel, listener).catch((err: unknown) => this.options.events.error('subscriber', err));
          }
          this.options.events.ready();
        },
        (err: unknown) => {
          this.options.events.error('command', err);
          if (!this.destroyed) setTimeout(() => attempt(retries + 1), reconnectStrategy(retries)).unref();
        },
      );
    };
    attempt(0);
  }

  destroy(): void {
    this.destroyed = true;
    void this.sentinel.destroy().catch(() => undefined);
  }
}
