import type { RedisCommands } from './commands.js';
import { RedisError } from './errors.js';

/** `--redis-wait-replicas` and how long Redis may take to get the acknowledgements (ms). */
export interface ReplicaWait {
  readonly waitReplicas?: number;
  readonly waitTimeoutMs?: number;
}

/**
 * `WAIT n timeout` on the connection that just wrote, so a failover (Sentinel or cluster) cannot
 * lose what we are about to acknowledge. No-op when no replicas are asked for.
 * @throws RedisError `ERR_REDIS_NOT_REPLICATED` when fewer replicas acknowledged in time (the write is
 *   on the master: its outcome is unknown).
 */
export async function waitForReplicas(c: RedisCommands, wait: ReplicaWait): Promise<void> {
  const n = wait.waitReplicas ?? 0;
  if (n <= 0) return;
  const timeoutMs = Math.max(1, wait.waitTimeoutMs ?? 400);
  const acked = await c.sendCommand(['WAIT', String(n), String(timeoutMs)]);
  if (typeof acked !== 'number' || acked < n) {
    throw new RedisError('ERR_REDIS_NOT_REPLICATED', `only ${String(acked)} of ${n} Redis replicas acknowledged the write within ${timeoutMs} ms`);
  }
}
