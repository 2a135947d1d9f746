import type { RedisCommands } from './commands.js';
import { RedisError } from './errors.js';
import { RedisScript } from './script.js';

/** `--redis-wait-replicas` and how long Redis may take to get the acknowledgements (ms). */
export interface ReplicaWait {
  readonly waitReplicas?: number;
  readonly waitTimeoutMs?: number;
}

/**
 * Replicas the master has that are in sync and acknowledged within the last two seconds (the `lag` of
 * `INFO replication`, from their once-a-second REPLCONF ACK). Run where the writes run (the
 * deployment's slot on a cluster).
 */
const IN_SYNC = new RedisScript(`
local n = 0
for state, lag in string.gmatch(redis.call('INFO', 'replication'), 'state=(%a+),offset=%d+,lag=(%d+)') do
  if state == 'online' and tonumber(lag) <= 2 then n = n + 1 end
end
return n
`);

/**
 * Before a write that must be replicated: fails at once when the master has fewer than
 * `--redis-wait-replicas` replicas in sync, rather than leave a `WAIT` to time out. `WAIT` blocks
 * the connection every call shares: with a replica down, each one held it for its whole timeout,
 * the calls behind them missed their deadlines, health checks included, and a Redis that answered
 * looked silent (replicas fell back to their own dedup at a failover).
 * @throws RedisError `ERR_REDIS_NOT_REPLICATED`.
 */
export async function replicasInSync(c: RedisCommands, wait: ReplicaWait): Promise<void> {
  const n = wait.waitReplicas ?? 0;
  if (n <= 0) return;
  const inSync = await IN_SYNC.run(c, [], []);
  if (typeof inSync !== 'number' || inSync < n) {
    throw new RedisError('ERR_REDIS_NOT_REPLICATED', `only ${String(inSync)} of the ${n} Redis replicas asked for are in sync: nothing written now is acknowledged`);
  }
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
