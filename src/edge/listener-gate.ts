import type { Server as NetServer, Socket } from 'node:net';
import { Counter, Gauge, type Registry } from '../observability/prom.js';
import { METRIC_PREFIX, RateLimiter, type Logger } from '../observability/index.js';
import { CONNECTION_STATES, ConnectionShare, peerOf, type ConnectionState, type HeldConnection } from './listener-fairness.js';

/** The listeners by name, as the metrics' `listener` label has them. */
export type ListenerName = 'decision' | 'webhook' | 'admin' | 'grpc';
const LISTENERS: readonly ListenerName[] = ['decision', 'webhook', 'admin', 'grpc'];
/** The flag that sets each listener's cap. */
const CAP_FLAG: Readonly<Record<ListenerName, string>> = {
  decision: '--max-connections',
  webhook: '--webhook-max-connections',
  admin: '--admin-max-connections',
  grpc: '--grpc-max-connections',
};

/** Why the gRPC listener closed a connection of its own accord (a bounded label). */
export type GrpcCloseReason = 'preface_timeout' | 'idle_timeout' | 'write_timeout';
const GRPC_CLOSE_REASONS: readonly GrpcCloseReason[] = ['preface_timeout', 'idle_timeout', 'write_timeout'];

/** At most one `connections_refused` (or `connections_evicted`) line per listener per this interval (ms); the rest are counted. */
const REFUSED_LOG_INTERVAL_MS = 10_000;

/** The listeners' connection metrics, against an injected registry. */
export interface ListenerMetrics {
  readonly refused: Counter<'listener'>;
  readonly evicted: Counter<'listener' | 'state'>;
  /** gRPC connections closed for a timeout of the connection (not of a call). */
  readonly grpcClosed: Counter<'reason'>;
  /** Bytes of gRPC request messages not yet arrived whole, held now. */
  readonly grpcUnfinishedBytes: Gauge;
  /** gRPC streams (calls) open now, across all connections. */
  readonly grpcStreams: Gauge;
  /** Each bounded server, for the open-connections gauge read on scrape. */
  readonly servers: Map<ListenerName, NetServer>;
  /** Each listener's share, for the largest-peer gauge read on scrape. */
  readonly shares: Map<ListenerName, ConnectionShare>;
}

export function createListenerMetrics(registry: Registry): ListenerMetrics {
  const servers = new Map<ListenerName, NetServer>();
  const shares = new Map<ListenerName, ConnectionShare>();
  const refused = new Counter({
    name: `${METRIC_PREFIX}connections_refused_total`,
    help: 'Connections closed at once because the listener held its most (--max-connections, --webhook-max-connections, --admin-max-connections, --grpc-max-connections) and none could make room for them, by listener.',
    labelNames: ['listener'],
    registers: [registry],
  });
  const evicted = new Counter({
    name: `${METRIC_PREFIX}connections_evicted_total`,
    help: 'Connections let go to make room for a new one at the cap (idle first, then request-less, busy only of a peer above its share), by listener and what the connection was doing.',
    labelNames: ['listener', 'state'],
    registers: [registry],
  });
  for (const l of LISTENERS) {
    refused.labels(l);
    for (const s of CONNECTION_STATES) evicted.labels(l, s);
  }
  const grpcClosed = new Counter({
    name: `${METRIC_PREFIX}grpc_connections_closed_total`,
    help: 'gRPC connections closed by the listener: no HTTP/2 preface in time (preface_timeout), no call for too long (idle_timeout), an answer not read in time (write_timeout).',
    labelNames: ['reason'],
    registers: [registry],
  });
  for (const r of GRPC_CLOSE_REASONS) grpcClosed.labels(r);
  const grpcUnfinishedBytes = new Gauge({
    name: `${METRIC_PREFIX}grpc_unfinished_bytes`,
    help: 'Bytes of gRPC request messages that have not arrived whole, held now, across all streams (--grpc-max-unfinished-bytes).',
    registers: [registry],
  });
  const grpcStreams = new Gauge({
    name: `${METRIC_PREFIX}grpc_streams`,
    help: 'gRPC streams (calls) open now, across all connections (--grpc-max-streams).',
    registers: [registry],
  });
  new Gauge({
    name: `${METRIC_PREFIX}connections`,
    help: 'Connections open now, by listener.',
    labelNames: ['listener'],
    registers: [registry],
    async collect() {
      for (const [name, server] of servers) {
        const n = await new Promise<number>((resolve) => server.getConnections((err, count) => resolve(err ? 0 : count)));
        this.labels(name).set(n);
      }
    },
  });
  new Gauge({
    name: `${METRIC_PREFIX}connections_largest_peer`,
    help: 'Connections held by the one peer address (an IPv6 /64) holding the most, by listener: at the cap, no peer keeps more than a quarter of it while others wait.',
    labelNames: ['listener'],
    registers: [registry],
    collect() {
      for (const [name, share] of shares) this.labels(name).set(share.largestPeer());
    },
  });
  return { refused, evicted, grpcClosed, grpcUnfinishedBytes, grpcStreams, servers, shares };
}

/**
 * One listener's door: its {@link ConnectionShare} at `cap`, counted and logged. A connection
 * refused or let go is counted by listener (and state), and logged at most once per interval
 * each: a flood is visible, and readiness never depends on it.
 */
export class ListenerGate {
  readonly share: ConnectionShare;
  private readonly refusedCount: ReturnType<Counter<'listener'>['labels']>;
  private readonly log = new RateLimiter(REFUSED_LOG_INTERVAL_MS);

  constructor(
    readonly name: ListenerName,
    readonly cap: number,
    metrics: ListenerMetrics,
    private readonly logger: Logger,
  ) {
    const evicted = Object.fromEntries(CONNECTION_STATES.map((s) => [s, metrics.evicted.labels(name, s)])) as Record<ConnectionState, { inc(): void }>;
    this.share = new ConnectionShare(cap, (state) => {
      evicted[state].inc();
      this.note('connections_evicted', state, undefined);
    });
    this.refusedCount = metrics.refused.labels(name);
    metrics.shares.set(name, this.share);
  }

  /**
   * A connection just accepted: held (another let go with `letGo` to make room, at the cap), or
   * null once it has been closed as refused. `letGo` ends a held connection the share gives up.
   */
  admit(socket: Socket, letGo: (state: ConnectionState) => void): HeldConnection | null {
    const held = this.share.admit(peerOf(socket.remoteAddress), letGo);
    if (held === null) {
      socket.destroy();
      this.refused(socket.remoteAddress);
    }
    return held;
  }

  /** Counts (and logs, at most once per interval) a connection closed at once. */
  refused(remoteAddress: string | undefined): void {
    this.refusedCount.inc();
    this.note('connections_refused', undefined, remoteAddress);
  }

  private note(event: 'connections_refused' | 'connections_evicted', state: ConnectionState | undefined, remoteAddress: string | undefined): void {
    const suppressed = this.log.admit(event);
    if (suppressed === undefined) return;
    const flag = CAP_FLAG[this.name];
    this.logger.warn(
      { event, listener: this.name, maxConnections: this.cap, peerShare: this.share.peerShare, ...(state === undefined ? { remoteAddress } : { state }), suppressedSinceLast: suppressed },
      event === 'connections_refused'
        ? `${this.name} listener at ${flag} (${this.cap}): a new connection is closed (its peer holds its share, or nothing can make room)`
        : `${this.name} listener at ${flag} (${this.cap}): a ${state} connection is let go for a new one`,
    );
  }
}
