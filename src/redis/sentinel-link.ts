import { createSentinel } from '@redis/client';
import { credentials, socketOptions, type LinkOptions, type RedisLink, type RedisTargetSpec } from './link-types.js';
import { RetriedConnect } from './retried-connect.js';

type Sentinel = ReturnType<typeof createSentinel>;

/**
 * A Sentinel-managed master through node-redis' sentinel client: it asks the sentinels for the
 * master, follows a failover, and keeps one connection to the master (so WAIT counts the writes
 * that came before it on that same connection).
 */
export class SentinelLink implements RedisLink {
  private readonly sentinel: Sentinel;
  private readonly start: RetriedConnect;

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
    this.start = new RetriedConnect(this.sentinel, options.events);
    this.sentinel.on('error', (err: unknown) => options.events.error('command', err));
  }

  get connected(): boolean {
    return this.sentinel.isReady;
  }

  send(args: readonly string[]): Promise<unknown> {
    return this.sentinel.sendCommand(false, [...args]);
  }

  subscribe(channel: string, listener: (message: string) => void): Promise<void> {
    return this.start.subscribe(channel, listener);
  }

  connect(): void {
    // The sentinel client gives up when no sentinel answers at start: tried again with the same backoff.
    this.start.connect();
  }

  destroy(): void {
    this.start.stop();
    void this.sentinel.destroy().catch(() => undefined);
  }
}
