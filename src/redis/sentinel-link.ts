import { createSentinel } from '@redis/client';
import { credentials, socketOptions, type LinkOptions, type RedisTargetSpec } from './link-types.js';
import { RetriedLink, type TopologyClient } from './retried-link.js';

type Sentinel = ReturnType<typeof createSentinel>;

/**
 * A Sentinel-managed master through node-redis' sentinel client: it asks the sentinels for the
 * master, follows a failover, and keeps one connection to the master (so WAIT counts the writes
 * that came before it on that same connection).
 */
export class SentinelLink extends RetriedLink {
  private readonly sentinel: Sentinel;

  constructor(spec: Extract<RedisTargetSpec, { kind: 'sentinel' }>, options: LinkOptions) {
    // The sentinel client gives up when no sentinel answers at start: RetriedLink connects again.
    super(options.events);
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

  protected client(): TopologyClient {
    return this.sentinel;
  }

  protected closeClient(): void {
    void this.sentinel.destroy().catch(() => undefined);
  }
}
