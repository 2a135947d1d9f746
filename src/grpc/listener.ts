import { createServer, type Server as NetServer, type Socket } from 'node:net';
import { Server, ServerCredentials, type ServiceDefinition } from '@grpc/grpc-js';
import type { DecisionService } from '../decision/index.js';
import type { DecisionBoundary } from '../http/decision-boundary.js';
import { DeadlineQueue } from '../lib/deadline-queue.js';
import type { Readiness } from '../observability/index.js';
import { createCheckHandler, extAuthzBoundary } from './ext-authz.js';
import { HealthService } from './health.js';

/**
 * The transport's own limit on one message (bytes): beyond it grpc-js ends the call with
 * RESOURCE_EXHAUSTED before reading it. Between `--grpc-max-message-bytes` and this, the sidecar
 * reads nothing and answers a successful 400 denial, so a CheckRequest grown by a client's large
 * headers is a denial of ours, not a transport error `failure_mode_allow` could act on. 8 MiB is
 * the largest request-header budget Envoy accepts (`max_request_headers_kb` 8192).
 */
export const GRPC_TRANSPORT_MAX_MESSAGE_BYTES = 8 * 1024 * 1024;

/** Connections the gRPC listener holds at once (a proxy keeps a few, one per worker); more are closed at accept. */
export const GRPC_MAX_CONNECTIONS = 256;

const identity = (b: Buffer): Buffer => b;

/** A method whose messages reach the handler, and leave it, as raw bytes (src/grpc/wire.ts reads and writes them). */
function rawMethod(path: string, responseStream: boolean) {
  return { path, requestStream: false, responseStream, requestSerialize: identity, requestDeserialize: identity, responseSerialize: identity, responseDeserialize: identity, originalName: path };
}

export const AUTHORIZATION_SERVICE: ServiceDefinition = { Check: rawMethod('/envoy.service.auth.v3.Authorization/Check', false) };
export const HEALTH_SERVICE: ServiceDefinition = {
  Check: rawMethod('/grpc.health.v1.Health/Check', false),
  Watch: rawMethod('/grpc.health.v1.Health/Watch', true),
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
}

/**
 * The gRPC listener: `envoy.service.auth.v3.Authorization` and `grpc.health.v1.Health` on
 * grpc-js, fed by a `net.Server` of ours ({@link server}), which the composition root binds like
 * every other listener (a Unix socket with the same mode and stale-socket rules as `--listen`).
 * {@link drain} ends it within a budget.
 */
export class GrpcListener {
  /** What to bind: each connection it accepts is handed to grpc-js. */
  readonly server: NetServer;
  private readonly grpc: Server;
  private readonly health: HealthService;
  private readonly deadlines = new DeadlineQueue();
  private readonly sockets = new Set<Socket>();
  private draining: Promise<void> | undefined;

  constructor(o: GrpcListenerOptions) {
    this.grpc = new Server({
      'grpc.max_receive_message_length': Math.max(GRPC_TRANSPORT_MAX_MESSAGE_BYTES, o.maxMessageBytes),
      'grpc.max_concurrent_streams': o.maxConcurrentStreams,
      'grpc.enable_channelz': 0,
    });
    const check = createCheckHandler({
      service: o.service,
      answers: extAuthzBoundary(o.boundary),
      userHeader: o.userHeader,
      maxMessageBytes: o.maxMessageBytes,
      timeoutMs: o.timeoutMs,
      deadlines: this.deadlines,
    });
    this.health = new HealthService(o.readiness);
    this.grpc.addService(AUTHORIZATION_SERVICE, { Check: check });
    this.grpc.addService(HEALTH_SERVICE, { Check: this.health.check, Watch: this.health.watch });
    const injector = this.grpc.createConnectionInjector(ServerCredentials.createInsecure());
    this.injector = injector;
    this.server = createServer({ noDelay: true }, (socket) => {
      this.sockets.add(socket);
      socket.once('close', () => this.sockets.delete(socket));
      // A connection reset before grpc-js reads it must not be an unhandled 'error'.
      socket.on('error', () => undefined);
      injector.injectConnection(socket);
    });
    this.server.maxConnections = GRPC_MAX_CONNECTIONS;
  }

  private readonly injector: ReturnType<Server['createConnectionInjector']>;

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
        this.deadlines.clear();
        this.grpc.forceShutdown();
        resolve();
      };
      const force = setTimeout(() => {
        for (const s of this.sockets) s.destroy();
        finish();
      }, timeoutMs);
      force.unref();
      this.injector.drain(timeoutMs);
      // close() calls back once every connection has ended (each closes when its last call has).
      if (this.server.listening) this.server.close(() => finish());
      else if (this.sockets.size === 0) finish();
    });
    return this.draining;
  }
}
