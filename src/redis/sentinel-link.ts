import { createSentinel } from '@redis/client';
import { credentials, reconnectStrategy, socketOptions, type LinkOptions, type RedisLink, type RedisTargetSpec } from './link-types.js';

type Sentinel = ReturnType<typeof createSentinel>;

/**
 * A Sentinel-managed master through node-redis' sentinel client: it asks the sentinels for the
 * master, follows a failover, and keeps one connection to the master (so WAIT counts the writes
 * that came before it on that same connection).
 */
export class SentinelLink implements RedisLink {
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
    // A new master: the subscriber moves to it, and what was published there before it is lost to it.
    this.sentinel.on('topology-change', () => options.events.disturbed());
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
