import type { ListenAddress } from '../lib/listen-address.js';
import type { OptionSpec } from './option-spec.js';
import type { Reader } from './reader.js';

// The gRPC ext_authz listener (contract, gRPC ext_authz): off unless --grpc-listen is given.

/** Largest CheckRequest decided (bytes); a larger one is answered a 400 denial. */
export const DEFAULT_GRPC_MAX_MESSAGE_BYTES = 65_536;
/** Streams (calls) one gRPC connection may have open at once. */
export const DEFAULT_GRPC_MAX_CONCURRENT_STREAMS = 1000;

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
];

/** The gRPC ext_authz listener (`--grpc-listen`). */
export interface GrpcConfig {
  readonly listen: ListenAddress;
  /** Largest CheckRequest decided (bytes). */
  readonly maxMessageBytes: number;
  /** Streams one connection may have open at once. */
  readonly maxConcurrentStreams: number;
}

/** `--grpc-listen` and its bounds; null when the gRPC listener is off. */
export function readGrpc(r: Reader): GrpcConfig | null {
  const maxMessageBytes = r.int('grpc-max-message-bytes', DEFAULT_GRPC_MAX_MESSAGE_BYTES, 1024, 8 * 1024 * 1024);
  const maxConcurrentStreams = r.int('grpc-max-concurrent-streams', DEFAULT_GRPC_MAX_CONCURRENT_STREAMS, 1, 100_000);
  if (!r.raw('grpc-listen')) return null;
  const listen = r.listen('grpc-listen', '', true);
  return Object.freeze({ listen, maxMessageBytes, maxConcurrentStreams });
}
