import { SidecarError } from '../lib/errors.js';

/**
 * Why a Redis call did not give an answer:
 * - `ERR_REDIS_UNAVAILABLE`: not connected (no offline queue: the call fails at once), or the
 *   connection broke under it;
 * - `ERR_REDIS_TIMEOUT`: no answer within `--redis-command-timeout-ms`;
 * - `ERR_REDIS_REPLY`: Redis answered with an error (a script bug, a wrong type, OOM…);
 * - `ERR_REDIS_CLOSED`: the connection was closed on purpose (shutdown).
 */
export type RedisErrorCode = 'ERR_REDIS_UNAVAILABLE' | 'ERR_REDIS_TIMEOUT' | 'ERR_REDIS_REPLY' | 'ERR_REDIS_CLOSED';

/** A Redis failure with a stable code; tests assert the code, never the message. */
export class RedisError extends SidecarError<RedisErrorCode> {}

/** `outcome` label of `consent_sidecar_redis_call_duration_seconds`. */
export type RedisCallOutcome = 'ok' | 'unavailable' | 'timeout' | 'reply' | 'closed';

export function outcomeOf(code: RedisErrorCode): RedisCallOutcome {
  switch (code) {
    case 'ERR_REDIS_UNAVAILABLE':
      return 'unavailable';
    case 'ERR_REDIS_TIMEOUT':
      return 'timeout';
    case 'ERR_REDIS_REPLY':
      return 'reply';
    case 'ERR_REDIS_CLOSED':
      return 'closed';
  }
}
