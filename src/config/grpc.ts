import type { ListenAddress } from '../lib/listen-address.js';
import type { OptionSpec } from './option-spec.js';
import type { Reader } from './reader.js';

// The gRPC ext_authz listener (contract, gRPC ext_authz): off unless --grpc-listen is given.

/** Largest CheckRequest decided (bytes); a larger one is answered a 400 denial. */
export const DEFAULT_GRPC_MAX_MESSAGE_BYTES = 65_536;
/** The most `--grpc-max-message-bytes` may be (bytes): Envoy's largest request-header budget (`max_request_headers_kb` 8192). */
export const GRPC_MAX_MESSAGE_BYTES_LIMIT = 8 * 1024 * 1024;
/** Streams (calls) one gRPC connection may have open at once (Envoy opens another connection beyond). */
export const DEFAULT_GRPC_MAX_CONCURRENT_STREAMS = 100;
/** Streams (calls) open at once across all gRPC connections; beyond, a Check is denied 503 `overload` at once. */
export const DEFAULT_GRPC_MAX_STREAMS = 4096;
/** Connections the gRPC listener holds at once (a proxy keeps a few, one per worker). */
export const DEFAULT_GRPC_MAX_CONNECTIONS = 256;
/** Time a new connection has to send the HTTP/2 preface and its SETTINGS (ms). */
export const DEFAULT_GRPC_PREFACE_TIMEOUT_MS = 10_000;
/** A connection with no call open this long is closed with a GOAWAY (ms). */
export const DEFAULT_GRPC_IDLE_TIMEOUT_MS = 300_000;
/** Time a call's request has to arrive whole, from the start of its stream (ms). */
export const DEFAULT_GRPC_REQUEST_TIMEOUT_MS = 10_000;
/** Bytes held at once, across all streams, in requests that have not arrived whole. */
export const DEFAULT_GRPC_MAX_UNFINISHED_BYTES = 16 * 1024 * 1024;

export const GRPC_OPTIONS: readonly OptionSpec[] = [
  {
    name: 'grpc-listen',
    arg: '<host:port>',
    description: 'gRPC ext_authz (envoy.service.auth.v3.Authorization) and gRPC health listener; also unix:/path (off when not set)',
  },
  {
    name: 'grpc-max-message-bytes',
    arg: '<bytes>',
    description: 'largest CheckRequest decided; a larger one is answered denied (400, INVALID_ARGUMENT)',
    defaultText: String(DEFAULT_GRPC_MAX_MESSAGE_BYTES),
  },
  {
    name: 'grpc-max-concurrent-streams',
    arg: '<n>',
    description: 'calls one gRPC connection may have open at once (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS)',
    defaultText: String(DEFAULT_GRPC_MAX_CONCURRENT_STREAMS),
  },
  {
    name: 'grpc-max-streams',
    arg: '<n>',
    description: 'calls open at once across all gRPC connections; beyond, a Check is answered denied at once (503 overload)',
    defaultText: String(DEFAULT_GRPC_MAX_STREAMS),
  },
  {
    name: 'grpc-max-connections',
    arg: '<n>',
    description: 'connections at once on the gRPC listener; beyond, a new one takes the place of an idle one or is closed (counted)',
    defaultText: String(DEFAULT_GRPC_MAX_CONNECTIONS),
  },
  {
    name: 'grpc-preface-timeout-ms',
    arg: '<ms>',
    description: 'time a new gRPC connection has to send the HTTP/2 preface; beyond, it is closed',
    defaultText: String(DEFAULT_GRPC_PREFACE_TIMEOUT_MS),
  },
  {
    name: 'grpc-idle-timeout-ms',
    arg: '<ms>',
    description: 'a gRPC connection with no call open this long is closed (GOAWAY)',
    defaultText: String(DEFAULT_GRPC_IDLE_TIMEOUT_MS),
  },
  {
    name: 'grpc-request-timeout-ms',
    arg: '<ms>',
    description: 'time a CheckRequest has to arrive whole; beyond, it is answered denied (400, INVALID_ARGUMENT)',
    defaultText: String(DEFAULT_GRPC_REQUEST_TIMEOUT_MS),
  },
  {
    name: 'grpc-max-unfinished-bytes',
    arg: '<bytes>',
    description: 'bytes held at once, across all gRPC streams, in requests not arrived whole; beyond, denied (503 overload)',
    defaultText: String(DEFAULT_GRPC_MAX_UNFINISHED_BYTES),
  },
];

/** The gRPC listener's bounds: connections, their timeouts, the requests' deadline and bytes. */
export interface GrpcBounds {
  readonly maxConnections: number;
  /** Streams (calls) open at once across all connections. */
  readonly maxStreams: number;
  /** Time a connection has to send the HTTP/2 preface (ms). */
  readonly prefaceTimeoutMs: number;
  /** A connection with no call this long is closed (ms). */
  readonly idleTimeoutMs: number;
  /** Time a request has to arrive whole (ms). */
  readonly requestTimeoutMs: number;
  /** Bytes held at once in requests not arrived whole, across all streams. */
  readonly maxUnfinishedBytes: number;
}

/** The gRPC ext_authz listener (`--grpc-listen`). */
export interface GrpcConfig {
  readonly listen: ListenAddress;
  /** Largest CheckRequest decided (bytes). */
  readonly maxMessageBytes: number;
  /** Streams one connection may have open at once. */
  readonly maxConcurrentStreams: number;
  readonly bounds: GrpcBounds;
}

/** `--grpc-listen` and its bounds; null when the gRPC listener is off. */
export function readGrpc(r: Reader): GrpcConfig | null {
  const maxMessageBytes = r.int('grpc-max-message-bytes', DEFAULT_GRPC_MAX_MESSAGE_BYTES, 1024, GRPC_MAX_MESSAGE_BYTES_LIMIT);
  const maxConcurrentStreams = r.int('grpc-max-concurrent-streams', DEFAULT_GRPC_MAX_CONCURRENT_STREAMS, 1, 100_000);
  const maxStreams = r.int('grpc-max-streams', DEFAULT_GRPC_MAX_STREAMS, 1, 1_000_000);
  const maxConnections = r.int('grpc-max-connections', DEFAULT_GRPC_MAX_CONNECTIONS, 1, 1_000_000);
  const prefaceTimeoutMs = r.int('grpc-preface-timeout-ms', DEFAULT_GRPC_PREFACE_TIMEOUT_MS, 1, 600_000);
  const idleTimeoutMs = r.int('grpc-idle-timeout-ms', DEFAULT_GRPC_IDLE_TIMEOUT_MS, 1, 86_400_000);
  const requestTimeoutMs = r.int('grpc-request-timeout-ms', DEFAULT_GRPC_REQUEST_TIMEOUT_MS, 1, 600_000);
  const maxUnfinishedBytes = r.int('grpc-max-unfinished-bytes', DEFAULT_GRPC_MAX_UNFINISHED_BYTES, 1024, 4 * 1024 * 1024 * 1024);
  // A message's 5-byte prefix is held with it.
  if (maxUnfinishedBytes < maxMessageBytes + 5) {
    r.problem('--grpc-max-unfinished-bytes', `must be at least --grpc-max-message-bytes plus 5 (${maxMessageBytes + 5}), or no request of the largest size could ever be read`);
  }
  if (!r.raw('grpc-listen')) return null;
  const listen = r.listen('grpc-listen', '', true);
  const bounds = Object.freeze({ maxConnections, maxStreams, prefaceTimeoutMs, idleTimeoutMs, requestTimeoutMs, maxUnfinishedBytes });
  return Object.freeze({ listen, maxMessageBytes, maxConcurrentStreams, bounds });
}
