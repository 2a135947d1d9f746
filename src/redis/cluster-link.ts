import { createCluster, ErrorReply } from '@redis/client';
import { credentials, socketOptions, type LinkOptions, type RedisTargetSpec } from './link-types.js';
import { RetriedLink, type TopologyClient } from './retried-link.js';

/** A cluster link asks the cluster for its slots at most this often after failures (ms). */
const REDISCOVER_MS = 500;

type Cluster = ReturnType<typeof createCluster>;

/**
 * A Redis Cluster through node-redis' cluster client: it learns the slots from the seeds, follows
 * MOVED and ASK, and rediscovers after a failover. Every command is routed by the deployment's
 * hash tag, so all of them (scripts, WAIT, PUBLISH) go to the one master that owns the slot.
 */
export class ClusterLink extends RetriedLink {
  private readonly cluster: Cluster;
  private lastRediscover = 0;

  constructor(
    spec: Extract<RedisTargetSpec, { kind: 'cluster' }>,
    private readonly options: LinkOptions,
  ) {
    // The cluster client gives up when no seed answers at start: RetriedLink connects again.
    super(options.events);
    const first = new URL(spec.urls[0]!);
    this.cluster = createCluster({
      rootNodes: spec.urls.map((url) => ({ url })),
      defaults: { ...credentials(first), disableOfflineQueue: true, socket: socketOptions(first, spec, options.connectTimeoutMs) as never },
      useReplicas: false,
    });
    this.cluster.on('error', (err: unknown) => options.events.error('command', err));
    this.cluster.on('node-error', (err: unknown) => options.events.error('command', err));
    // A node's client that reconnects or goes (a failover, slots moved: its subscriber with it,
    // replaced on another node) may have missed what was published meanwhile.
    for (const event of ['node-reconnecting', 'node-disconnect', 'node-ready']) this.cluster.on(event, () => options.events.disturbed());
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

  private rediscover(): void {
    const now = Date.now();
    if (now - this.lastRediscover < REDISCOVER_MS) return;
    this.lastRediscover = now;
    const nodes = [...this.cluster._slots.nodeByAddress.values()];
    const start = nodes.find((n) => n.client?.isReady)?.client ?? nodes.find((n) => n.client)?.client;
    if (!start) return;
    this.cluster._slots.rediscover(start).catch((err: unknown) => this.options.events.error('command', err));
  }

  protected client(): TopologyClient {
    return this.cluster;
  }

  protected closeClient(): void {
    try {
      if (this.cluster.isOpen) this.cluster.destroy();
    } catch {
      // already closed
    }
  }
}
