import { SidecarError } from '../lib/errors.js';
import type { StoreFailure } from '../lib/store-failure.js';

/**
 * Why a Redis call did not give an answer:
 * - `ERR_REDIS_UNAVAILABLE`: not connected, so nothing was sent (no offline queue: the call fails
 *   at once); the call had no effect;
 * - `ERR_REDIS_TIMEOUT`: sent, no answer within `--redis-command-timeout-ms`: the outcome is unknown;
 * - `ERR_REDIS_CONNECTION_LOST`: sent, then the connection broke before the answer: unknown too;
 * - `ERR_REDIS_REPLY`: Redis answered with an error (MOVED, READONLY, NOAUTH, OOM, a script error…);
 * - `ERR_REDIS_CLOSED`: the connection was closed on purpose (shutdown).
 */
export type RedisErrorCode = 'ERR_REDIS_UNAVAILABLE' | 'ERR_REDIS_TIMEOUT' | 'ERR_REDIS_CONNECTION_LOST' | 'ERR_REDIS_REPLY' | 'ERR_REDIS_CLOSED';

/** A Redis failure with a stable code; tests assert the code, never the message. */
export class RedisError extends SidecarError<RedisErrorCode> implements StoreFailure {
  /** The command may have run (see {@link StoreFailure}): a timeout or a connection lost after sending. */
  get outcomeUnknown(): boolean {
    return this.code === 'ERR_REDIS_TIMEOUT' || this.code === 'ERR_REDIS_CONNECTION_LOST';
  }
}

/** `outcome` label of `consent_sidecar_redis_call_duration_seconds`. */
export type RedisCallOutcome = 'ok' | 'unavailable' | 'timeout' | 'connection_lost' | 'reply' | 'closed';

export function outcomeOf(code: RedisErrorCode): RedisCallOutcome {
  switch (code) {
    case 'ERR_REDIS_UNAVAILABLE':
      return 'unavailable';
    case 'ERR_REDIS_TIMEOUT':
      return 'timeout';
    case 'ERR_REDIS_CONNECTION_LOST':
      return 'connection_lost';
    case 'ERR_REDIS_REPLY':
      return 'reply';
    case 'ERR_REDIS_CLOSED':
      return 'closed';
  }
}
