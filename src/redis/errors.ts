import { ClientClosedError, ClientOfflineError, ErrorReply } from '@redis/client';
import { SidecarError } from '../lib/errors.js';
import type { StoreFailure } from '../lib/store-failure.js';

/**
 * Why a Redis call did not give an answer:
 * - `ERR_REDIS_UNAVAILABLE`: not connected, so nothing was sent (no offline queue: the call fails
 *   at once); the call had no effect;
 * - `ERR_REDIS_TIMEOUT`: sent, no answer within `--redis-command-timeout-ms`: the outcome is unknown;
 * - `ERR_REDIS_CONNECTION_LOST`: sent, then the connection broke before the answer: unknown too;
 * - `ERR_REDIS_REPLY`: Redis answered with an error (NOAUTH, OOM, a wrong type, a script error…): it
 *   is there and refuses;
 * - `ERR_REDIS_IN_TRANSITION`: an answer that is not an answer (`READONLY`, `LOADING`, `MOVED`,
 *   `ASK`, `CLUSTERDOWN`, `TRYAGAIN`, `MASTERDOWN`): a failover, a restart or a slot move is under
 *   way; the command did not run here, and it says nothing of what the keys hold where it would
 *   have run (another replica may be writing there now). Treated like silence, never as a refusal;
 * - `ERR_REDIS_NOT_REPLICATED`: written on the master, but fewer replicas than
 *   `--redis-wait-replicas` acknowledged it in time: a failover may still lose it, so its outcome
 *   is unknown;
 * - `ERR_REDIS_CLOSED`: the connection was closed on purpose (shutdown).
 */
export type RedisErrorCode =
  | 'ERR_REDIS_UNAVAILABLE'
  | 'ERR_REDIS_TIMEOUT'
  | 'ERR_REDIS_CONNECTION_LOST'
  | 'ERR_REDIS_REPLY'
  | 'ERR_REDIS_IN_TRANSITION'
  | 'ERR_REDIS_NOT_REPLICATED'
  | 'ERR_REDIS_CLOSED';

/** Reply errors that say Redis cannot serve this now (see `ERR_REDIS_IN_TRANSITION`), by their first word. */
const IN_TRANSITION = new Set(['READONLY', 'LOADING', 'MOVED', 'ASK', 'CLUSTERDOWN', 'TRYAGAIN', 'MASTERDOWN']);

/** A Redis failure with a stable code; tests assert the code, never the message. */
export class RedisError extends SidecarError<RedisErrorCode> implements StoreFailure {
  /** The command may have run (see {@link StoreFailure}): a timeout or a connection lost after sending. */
  get outcomeUnknown(): boolean {
    return this.code === 'ERR_REDIS_TIMEOUT' || this.code === 'ERR_REDIS_CONNECTION_LOST' || this.code === 'ERR_REDIS_NOT_REPLICATED';
  }

  /**
   * Redis answered with an error (NOAUTH, OOM, a wrong type…): it is there and did nothing. An
   * answer that is not an answer (`ERR_REDIS_IN_TRANSITION`) is no refusal: it says a failover is
   * under way, not that Redis will not do it.
   */
  get refused(): boolean {
    return this.code === 'ERR_REDIS_REPLY';
  }

  /**
   * Redis answered: with a refusal, or with fewer replicas than asked for (it serves; its replicas
   * lag). An answer that is not an answer (`ERR_REDIS_IN_TRANSITION`) is not one.
   */
  get answered(): boolean {
    return this.code === 'ERR_REDIS_REPLY' || this.code === 'ERR_REDIS_NOT_REPLICATED';
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
    case 'ERR_REDIS_IN_TRANSITION':
    case 'ERR_REDIS_NOT_REPLICATED':
      return 'reply';
    case 'ERR_REDIS_CLOSED':
      return 'closed';
  }
}

/** The first word of a reply error (`MOVED`, `READONLY`, `NOAUTH`, `OOM`…) or what went wrong. */
export function reasonOf(err: unknown): string {
  if (err instanceof RedisError) {
    const cause = err.cause;
    if (cause instanceof ErrorReply) return cause.message.split(' ')[0] ?? 'error reply';
    switch (err.code) {
      case 'ERR_REDIS_TIMEOUT':
        return 'no answer in time';
      case 'ERR_REDIS_UNAVAILABLE':
        return 'not connected';
      case 'ERR_REDIS_CONNECTION_LOST':
        return 'connection lost';
      default:
        return err.code;
    }
  }
  return 'error';
}

/** `work`, or `ERR_REDIS_TIMEOUT` when it has not settled within `ms` (its outcome then unknown). */
export function withDeadline<T>(work: Promise<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new RedisError('ERR_REDIS_TIMEOUT', `no answer from Redis within ${ms} ms`)), ms);
    work.then(
      (v) => {
        clearTimeout(timer);
        resolve(v);
      },
      (err: unknown) => {
        clearTimeout(timer);
        reject(err instanceof Error ? err : new Error(String(err)));
      },
    );
  });
}

/** What a failed call means: an error reply (an answer), a call refused before it was written, a closed connection, or an unknown outcome. */
export function classify(err: unknown, closed: boolean): RedisError {
  if (err instanceof RedisError) return err;
  if (err instanceof ErrorReply) {
    const inTransition = IN_TRANSITION.has(err.message.split(' ')[0] ?? '');
    return new RedisError(inTransition ? 'ERR_REDIS_IN_TRANSITION' : 'ERR_REDIS_REPLY', `Redis answered an error: ${err.message}`, { cause: err });
  }
  if (closed) return new RedisError('ERR_REDIS_CLOSED', 'the Redis connection is closed', { cause: err });
  // Refused by the client before anything was written: the command did not run.
  if (err instanceof ClientOfflineError || err instanceof ClientClosedError) {
    return new RedisError('ERR_REDIS_UNAVAILABLE', `Redis is not connected: ${err.message}`, { cause: err });
  }
  return new RedisError('ERR_REDIS_CONNECTION_LOST', `Redis call failed: ${(err as Error)?.message ?? String(err)}`, { cause: err });
}
