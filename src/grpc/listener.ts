import { constants, createServer as createHttp2Server, type Http2Server, type IncomingHttpHeaders, type ServerHttp2Session, type ServerHttp2Stream } from 'node:http2';
import { createServer, type Server as NetServer, type Socket } from 'node:net';
import type { ServiceDefinition } from '@grpc/grpc-js';
import type { GrpcBounds } from '../config/index.js';
import type { DecisionService } from '../decision/index.js';
import type { DecisionBoundary } from '../edge/decision-boundary.js';
import { peerOf, type ConnectionState, type HeldConnection } from '../edge/listener-fairness.js';
import { ListenerGate, type ListenerMetrics } from '../edge/listener-gate.js';
import { DeadlineQueue, DeadlineQueues } from '../lib/deadline-queue.js';
import type { Logger, Readiness } from '../observability/index.js';
import { UnverifiedBudget } from '../webhooks/unverified-budget.js';
import { createCheckHandler, extAuthzBoundary } from './ext-authz.js';
import { HealthService } from './health.js';
import { MESSAGE_PREFIX_BYTES } from './message-reader.js';
import { drainThenCut, GrpcCall, respondStatus, STATUS, type CallLimits, type UnaryMethod } from './server-call.js';

export const CHECK_METHOD = '/envoy.service.auth.v3.Authorization/Check';
export const HEALTH_CHECK_METHOD = '/grpc.health.v1.Health/Check';
export const HEALTH_WATCH_METHOD = '/grpc.health.v1.Health/Watch';

const identity = (b: Buffer): Buffer => b;

/**
 * Time a stream has, once its answer is written whole (its end queued), to be closed: the client
 * reading it and ending its side. A client that does not read (a zero flow-control window) would
 * keep the stream, and its connection, open for ever; past this, the stream is reset (CANCEL) and
 * its connection let go (GOAWAY), counted as `write_timeout`.
 */
export const WRITE_DEADLINE_MS = 5000;
/** How long a connection whose side we ended waits for the peer to close its half before it is cut (ms). */
const LINGER_MS = 1000;
/** Health Watches open at once on the listener, and per peer address (each never ends by itself). */
export const MAX_WATCHES = 64;
export const MAX_WATCHES_PER_PEER = 16;

/**
 * `Authorization/Check` as a grpc-js client describes it, its messages as raw bytes (read and
 * written by src/grpc/wire.ts): for a client of ours (`check --grpc`). The listener itself does
 * not use grpc-js; the type is all that is imported.
 */
export const AUTHORIZATION_SERVICE: ServiceDefinition = {
  Check: { path: CHECK_METHOD, requestStream: false, responseStream: false, requestSerialize: identity, requestDeserialize: identity, responseSerialize: identity, responseDeserialize: identity, originalName: CHECK_METHOD },
};

export interface GrpcListenerOptions {
  readonly service: DecisionService;
  /** The decision boundary the HTTP decision routes answer through (one fail-closed log rate, one count). */
  readonly boundary: DecisionBoundary;
  readonly readiness: Readiness;
  /** Lower-case header carrying the user reference (`--forward-auth-user-header`). */
  readonly userHeader: string;
  /** Each call's deadline (ms), `--upstream-timeout-ms`. */
  readonly timeoutMs: number;
  /** Largest CheckRequest decided, `--grpc-max-message-bytes`. */
  readonly maxMessageBytes: number;
  /** Streams one connection may have open at once, `--grpc-max-concurrent-streams`. */
  readonly maxConcurrentStreams: number;
  /** The connection cap, the timeouts and the byte budget (`--grpc-max-connections` …). */
  readonly bounds: GrpcBounds;
  readonly metrics: ListenerMetrics;
  readonly logger: Logger;
}

/** One accepted connection: its place in the share, its HTTP/2 session, whether its preface came. */
interface Connection {
  readonly socket: Socket;
  readonly held: HeldConnection;
  readonly acceptedAt: number;
  session: ServerHttp2Session | undefined;
  prefaced: boolean;
  /** Asked to close (GOAWAY sent); cut at `cutAt` if it has not closed by then. */
  cutAt: number;
}

/** Whether a content-type is gRPC's: `application/grpc`, alone or with a `+format` or parameters. */
function isGrpc(contentType: string | undefined): boolean {
  return contentType !== undefined && contentType.startsWith('application/grpc') && (contentType.length === 16 || contentType[16] === '+' || contentType[16] === ';');
}

/**
 * The gRPC listener: `envoy.service.auth.v3.Authorization/Check` and `grpc.health.v1.Health` on
 * node:http2, fed by a `net.Server` of ours ({@link server}) that the composition root binds like
 * every other listener (a Unix socket with the same mode and stale-socket rules as `--listen`).
 *
 * Bounded like the HTTP listeners: a connection cap fair to every peer (`ListenerGate`), a time
 * for the HTTP/2 preface and one for a connection with no call, a deadline for each request to
 * arrive whole, and one budget of bytes held in requests not arrived whole, across all streams.
 * Every Check that reaches it ends as a CheckResponse ({@link createCheckHandler}); what is not a
 * gRPC call of ours gets HTTP 415 or `UNIMPLEMENTED` (docs/ext-authz-grpc.md).
 * {@link drain} ends it within a budget.
 */
export class GrpcListener {
  /** What to bind: each connection it accepts is handed to the HTTP/2 server. */
  readonly server: NetServer;
  private readonly h2: Http2Server;
  private readonly gate: ListenerGate;
  private readonly health: HealthService;
  private readonly methods: ReadonlyMap<string, UnaryMethod>;
  private readonly limits: CallLimits;
  private readonly deadlines = new DeadlineQueue();
  /** Checks' deadlines set sooner by their caller's `grpc-timeout`. */
  private readonly callerDeadlines = new DeadlineQueues();
  private readonly connections = new Set<Connection>();
  private readonly bySession = new WeakMap<ServerHttp2Session, Connection>();
  /** Open streams, across all connections: each with when its answer was seen written whole (0: not yet). */
  private readonly streams = new Map<ServerHttp2Stream, number>();
  /** Open Watches by peer, and their sum. */
  private readonly watchesByPeer = new Map<string, number>();
  private watches = 0;
  /** The connection being handed to the HTTP/2 server (its 'session' comes synchronously). */
  private handing: Connection | undefined;
  private readonly sweep: NodeJS.Timeout;
  /** How long a connection asked to close (GOAWAY) may take to end its calls before it is cut (ms). */
  private readonly closeGraceMs: number;
  private draining: Promise<void> | undefined;

  constructor(private readonly o: GrpcListenerOptions) {
    const b = o.bounds;
    const budget = new UnverifiedBudget(
      b.maxUnfinishedBytes,
      Math.min(b.maxUnfinishedBytes, Math.max(o.maxMessageBytes + MESSAGE_PREFIX_BYTES, Math.floor(b.maxUnfinishedBytes / 4))),
      (n) => o.metrics.grpcUnfinishedBytes.set(n),
    );
    this.limits = { budget, arrivals: new DeadlineQueue(), requestTimeoutMs: b.requestTimeoutMs };
    this.closeGraceMs = b.requestTimeoutMs + o.timeoutMs + 1000;
    this.health = new HealthService(o.readiness);
    const check = createCheckHandler({
      service: o.service,
      answers: extAuthzBoundary(o.boundary),
      userHeader: o.userHeader,
      maxMessageBytes: o.maxMessageBytes,
      timeoutMs: o.timeoutMs,
      deadlines: this.deadlines,
      callerDeadlines: this.callerDeadlines,
    });
    this.methods = new Map([
      [CHECK_METHOD, check],
      [HEALTH_CHECK_METHOD, this.health.check],
      [HEALTH_WATCH_METHOD, this.health.watch],
    ]);
    this.h2 = createHttp2Server({ settings: { maxConcurrentStreams: o.maxConcurrentStreams } });
    this.h2.on('session', (session: ServerHttp2Session) => this.onSession(session));
    this.h2.on('stream', (stream: ServerHttp2Stream, headers: IncomingHttpHeaders) => this.onStream(stream, headers));
    this.gate = new ListenerGate('grpc', b.maxConnections, o.metrics, o.logger);
    this.server = createServer({ noDelay: true }, (socket) => this.onConnection(socket));
    // One over the cap: the share judges the newcomer and brings the count back at once.
    this.server.maxConnections = b.maxConnections + 1;
    this.server.on('drop', (data?: { remoteAddress?: string }) => this.gate.refused(data?.remoteAddress));
    o.metrics.servers.set('grpc', this.server);
    // Connection timeouts are swept (one timer for all), often enough for the shorter of them.
    this.sweep = setInterval(() => this.sweepConnections(), Math.min(1000, Math.max(10, Math.floor(Math.min(b.prefaceTimeoutMs, b.idleTimeoutMs) / 4))));
    this.sweep.unref();
  }

  private onConnection(socket: Socket): void {
    // A connection reset before the HTTP/2 server reads it must not be an unhandled 'error'.
    socket.on('error', () => undefined);
    // Once our side has ended (a GOAWAY sent, then FIN) nothing more can be said on it. The
    // descriptor is freed when the peer closes its half, or LINGER_MS after ours, not when a peer
    // that keeps its half open would: not at once, since a socket destroyed while the peer still
    // sends (a HEADERS sent before it read the GOAWAY, a WINDOW_UPDATE) answers with a reset, which
    // can discard the last answers still unacknowledged. A connection let go at the cap for a
    // newcomer is freed at once instead ({@link letGo}): it had no call open.
    socket.once('finish', () => {
      const linger = setTimeout(() => socket.destroy(), LINGER_MS);
      linger.unref();
      socket.once('close', () => clearTimeout(linger));
    });
    socket.once('end', () => socket.destroy());
    const held = this.gate.admit(socket, (state) => this.letGo(conn, state, true));
    if (held === null) return;
    const conn: Connection = { socket, held, acceptedAt: performance.now(), session: undefined, prefaced: false, cutAt: Infinity };
    this.connections.add(conn);
    socket.once('close', () => {
      this.gate.share.release(held);
      this.connections.delete(conn);
    });
    this.handing = conn;
    try {
      this.h2.emit('connection', socket);
    } catch {
      socket.destroy();
    } finally {
      this.handing = undefined;
    }
  }

  private onSession(session: ServerHttp2Session): void {
    const conn = this.handing;
    if (conn === undefined) return;
    conn.session = session;
    this.bySession.set(session, conn);
    session.on('error', () => undefined);
    // The client's SETTINGS follow its preface: from then on it is an HTTP/2 connection.
    session.once('remoteSettings', () => (conn.prefaced = true));
  }

  private onStream(stream: ServerHttp2Stream, headers: IncomingHttpHeaders): void {
    stream.on('error', () => undefined);
    this.streams.set(stream, 0);
    this.o.metrics.grpcStreams.set(this.streams.size);
    stream.once('close', () => {
      this.streams.delete(stream);
      this.o.metrics.grpcStreams.set(this.streams.size);
    });
    try {
      this.route(stream, headers, this.streams.size > this.o.bounds.maxStreams);
    } catch {
      // Nothing of ours throws here by design; a throw must not leave the stream open or end the process.
      if (!stream.destroyed) stream.close(constants.NGHTTP2_INTERNAL_ERROR);
    }
  }

  private route(stream: ServerHttp2Stream, headers: IncomingHttpHeaders, overCap: boolean): void {
    const conn = this.bySession.get(stream.session as ServerHttp2Session);
    const path = headers[':path'] ?? '';
    // A Watch never makes its connection busy: one holding only Watches may be let go (they end).
    if (conn !== undefined && path === HEALTH_WATCH_METHOD) conn.held.served = true;
    else if (conn !== undefined) {
      const { held } = conn;
      this.gate.share.begin(held);
      stream.once('close', () => this.gate.share.end(held));
    }
    if (headers[':method'] !== 'POST' || !isGrpc(headers['content-type'])) {
      // Not a gRPC call: the protocol's answer (no CheckResponse is readable to such a client).
      stream.respond({ ':status': 415 }, { endStream: true });
      drainThenCut(stream);
      return;
    }
    const method = this.methods.get(path);
    if (method === undefined) {
      respondStatus(stream, STATUS.UNIMPLEMENTED, `${path.slice(0, 128)} is not served`);
      drainThenCut(stream);
      return;
    }
    const peer = conn?.held.peer ?? peerOf(undefined);
    if (path === HEALTH_WATCH_METHOD && !overCap) {
      const mine = this.watchesByPeer.get(peer) ?? 0;
      if (this.watches >= MAX_WATCHES || mine >= MAX_WATCHES_PER_PEER) {
        respondStatus(stream, STATUS.UNAVAILABLE, 'the listener holds its most health Watches');
        drainThenCut(stream);
        return;
      }
      this.watches++;
      this.watchesByPeer.set(peer, mine + 1);
      stream.once('close', () => {
        this.watches--;
        const n = (this.watchesByPeer.get(peer) ?? 1) - 1;
        if (n === 0) this.watchesByPeer.delete(peer);
        else this.watchesByPeer.set(peer, n);
      });
    }
    const call = new GrpcCall(stream, headers, method, this.limits, peer);
    // Past the cap of open calls: answered at once (a Check a 503 overload denial), never reset.
    if (overCap) call.shed();
  }

  /**
   * Ends a connection the share gives up (or one past its idle timeout). One with no call open is
   * asked to close (GOAWAY: a call the client starts meanwhile is refused as not taken, to retry on
   * a new connection) and cut if it has not closed within {@link closeGraceMs}; one that never sent
   * its preface, or a busy one (of an address above its share while another waits), is cut at once:
   * its descriptor is what the newcomer needs.
   */
  private letGo(conn: Connection, state: ConnectionState = 'idle', forNewcomer = false): void {
    const session = conn.session;
    if (state === 'busy' || !conn.prefaced || session === undefined || session.closed || session.destroyed) {
      conn.socket.destroy();
      return;
    }
    // At the cap, the newcomer needs its descriptor: freed as soon as the GOAWAY is written (no call was open on it).
    if (forNewcomer) conn.socket.once('finish', () => conn.socket.destroy());
    conn.cutAt = performance.now() + this.closeGraceMs;
    session.close();
    // Its Watches end now (status OK); with no call open, the GOAWAY is flushed, then the socket freed.
    this.health.endWatchesOn(session);
  }

  /**
   * Streams whose answer was written whole but which have not closed within
   * {@link WRITE_DEADLINE_MS} (a client not reading): reset, and their connection let go.
   */
  private sweepStreams(now: number): void {
    for (const [stream, answeredAt] of this.streams) {
      if (answeredAt === 0) {
        if (stream.writableEnded) this.streams.set(stream, now);
        continue;
      }
      if (now - answeredAt < WRITE_DEADLINE_MS) continue;
      // Still counted until it has closed (its 'close' removes it): a reset a peer that reads
      // nothing cannot receive leaves the stream open, and it holds its memory until the cut.
      this.streams.set(stream, Infinity);
      const conn = this.bySession.get(stream.session as ServerHttp2Session);
      if (!stream.destroyed) stream.close(constants.NGHTTP2_CANCEL);
      if (conn !== undefined && conn.cutAt === Infinity) {
        this.o.metrics.grpcClosed.labels('write_timeout').inc();
        this.gate.share.release(conn.held);
        this.letGo(conn);
      }
    }
    this.o.metrics.grpcStreams.set(this.streams.size);
  }

  private sweepConnections(): void {
    const now = performance.now();
    const b = this.o.bounds;
    this.sweepStreams(now);
    for (const conn of this.connections) {
      if (now >= conn.cutAt) conn.socket.destroy();
      else if (conn.cutAt !== Infinity) continue;
      else if (!conn.prefaced) {
        if (now - conn.acceptedAt >= b.prefaceTimeoutMs) {
          this.o.metrics.grpcClosed.labels('preface_timeout').inc();
          conn.socket.destroy();
        }
      } else if (conn.held.active === 0 && now - conn.held.since >= b.idleTimeoutMs) {
        this.o.metrics.grpcClosed.labels('idle_timeout').inc();
        this.letGo(conn);
      }
    }
  }

  /**
   * Stops accepting, ends the health Watches (their last message said NOT_SERVING), lets calls in
   * flight finish for up to `timeoutMs` (each connection gets a GOAWAY), then cuts what is left.
   */
  drain(timeoutMs: number): Promise<void> {
    this.draining ??= new Promise<void>((resolve) => {
      this.health.endWatches();
      let done = false;
      const finish = (): void => {
        if (done) return;
        done = true;
        clearTimeout(force);
        clearInterval(this.sweep);
        this.deadlines.clear();
        this.callerDeadlines.clear();
        this.limits.arrivals.clear();
        resolve();
      };
      const force = setTimeout(() => {
        for (const c of this.connections) c.socket.destroy();
        finish();
      }, timeoutMs);
      force.unref();
      for (const c of this.connections) {
        if (c.prefaced && c.session !== undefined && !c.session.closed) c.session.close();
        else c.socket.destroy();
      }
      // close() calls back once every connection has ended (each closes when its last call has).
      if (this.server.listening) this.server.close(() => finish());
      else if (this.connections.size === 0) finish();
    });
    return this.draining;
  }
}
