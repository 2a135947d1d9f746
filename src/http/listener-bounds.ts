import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import type { ListenerBounds } from '../config/index.js';
import { ListenerGate, type ListenerMetrics, type ListenerName } from '../edge/listener-gate.js';
import type { HeldConnection } from '../edge/listener-fairness.js';
import type { Logger } from '../observability/index.js';

/** How often node looks for requests past their header or request timeout (ms; its default is 30 s). */
export const TIMEOUT_CHECK_INTERVAL_MS = 1000;

const HELD = Symbol('consent-sidecar.held-connection');
type Tracked = Socket & { [HELD]?: HeldConnection };

/**
 * Bounds one HTTP listener: a connection cap, fair to every peer at the cap ({@link ListenerGate};
 * an idle keep-alive or request-less connection is let go for a new one before anything else), and
 * its header, request and keep-alive timeouts. The server must have been created with
 * `connectionsCheckingInterval: TIMEOUT_CHECK_INTERVAL_MS` for timeouts of seconds to be kept.
 */
export function bound(server: Server, name: ListenerName, b: ListenerBounds, metrics: ListenerMetrics, logger: Logger): void {
  // One over the cap: node accepts the newcomer so the share can judge it; the share brings the
  // count back to the cap at once (a socket let go is uncounted by net synchronously).
  server.maxConnections = b.maxConnections + 1;
  server.headersTimeout = b.headersTimeoutMs;
  server.requestTimeout = b.requestTimeoutMs;
  server.keepAliveTimeout = b.keepAliveTimeoutMs;
  metrics.servers.set(name, server);
  const gate = new ListenerGate(name, b.maxConnections, metrics, logger);
  const { share } = gate;
  // Before node's own connection listener: a refused socket never gets a parser.
  server.prependListener('connection', (socket: Tracked) => {
    const held = gate.admit(socket, () => socket.destroy());
    if (held === null) return;
    socket[HELD] = held;
    socket.once('close', () => share.release(held));
  });
  server.on('request', (req, res) => {
    const held = (req.socket as Tracked)[HELD];
    if (held === undefined) return;
    share.begin(held);
    res.once('close', () => share.end(held));
  });
  // Past the cap plus the one being judged (never, while the share keeps the count): still counted.
  server.on('drop', (data?: { remoteAddress?: string }) => gate.refused(data?.remoteAddress));
}
