import type { Server } from 'node:http';
import { Counter, Gauge, type Registry } from '../observability/prom.js';
import type { ListenerBounds } from '../config/index.js';
import { METRIC_PREFIX, RateLimiter, type Logger } from '../observability/index.js';

/** The listeners by name, as the metrics' `listener` label has them. */
export type ListenerName = 'decision' | 'webhook' | 'admin';
const LISTENERS: readonly ListenerName[] = ['decision', 'webhook', 'admin'];

/** How often node looks for requests past their header or request timeout (ms; its default is 30 s). */
export const TIMEOUT_CHECK_INTERVAL_MS = 1000;
/** At most one `connections_refused` line per listener per this interval (ms); the rest are counted. */
const REFUSED_LOG_INTERVAL_MS = 10_000;

/** The listeners' connection metrics, against an injected registry. */
export interface ListenerMetrics {
  readonly refused: Counter<'listener'>;
  /** Each bounded server, for the open-connections gauge read on scrape. */
  readonly servers: Map<ListenerName, Server>;
}

export function createListenerMetrics(registry: Registry): ListenerMetrics {
  const servers = new Map<ListenerName, Server>();
  const refused = new Counter({
    name: `${METRIC_PREFIX}connections_refused_total`,
    help: 'Connections closed at once because the listener held its most (--max-connections, --webhook-max-connections, --admin-max-connections), by listener.',
    labelNames: ['listener'],
    registers: [registry],
  });
  for (const l of LISTENERS) refused.labels(l);
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
  return { refused, servers };
}

/**
 * Bounds one listener: a connection cap (beyond it node closes new connections at once, counted and
 * logged at most once per interval: a flood is visible, and readiness never depends on it), and
 * its header, request and keep-alive timeouts. The server must have been created with
 * `connectionsCheckingInterval: TIMEOUT_CHECK_INTERVAL_MS` for timeouts of seconds to be kept.
 */
export function bound(server: Server, name: ListenerName, b: ListenerBounds, metrics: ListenerMetrics, logger: Logger): void {
  server.maxConnections = b.maxConnections;
  server.headersTimeout = b.headersTimeoutMs;
  server.requestTimeout = b.requestTimeoutMs;
  server.keepAliveTimeout = b.keepAliveTimeoutMs;
  metrics.servers.set(name, server);
  const counter = metrics.refused.labels(name);
  const log = new RateLimiter(REFUSED_LOG_INTERVAL_MS);
  const flag = name === 'decision' ? '--max-connections' : `--${name}-max-connections`;
  server.on('drop', (data?: { remoteAddress?: string }) => {
    counter.inc();
    const suppressed = log.admit(name);
    if (suppressed !== undefined) {
      logger.warn(
        { event: 'connections_refused', listener: name, maxConnections: b.maxConnections, remoteAddress: data?.remoteAddress, suppressedSinceLast: suppressed },
        `${name} listener at ${flag} (${b.maxConnections}): new connections are closed`,
      );
    }
  });
}
