import type { RedisCommands } from './commands.js';
import { RedisScript } from './script.js';

/** How long the health probe's key lives (ms): it only proves a write went through. */
export const HEALTH_KEY_TTL_MS = 60_000;

/**
 * The health probe is a write of the kind every user of Redis here makes: a script on a key under
 * the deployment's hash tag. So it fails exactly when they would: MOVED (a cluster node given as
 * one server), CROSSSLOT, READONLY (a replica), NOAUTH or WRONGPASS, OOM. A PING would pass them all.
 */
const HEALTH = new RedisScript(`redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) return 1`);

/** Runs `work` as one call of the connection (its deadline, its outcome). */
type Call = <T>(op: string, work: (commands: RedisCommands) => Promise<T>) => Promise<T>;

/** Whether the one server given is a cluster node: each call would go to it alone and follow no MOVED (not shared state). */
export async function isClusterNode(call: Call): Promise<boolean> {
  return /cluster_enabled:1/.test(String(await call('health', (c) => c.sendCommand(['INFO', 'cluster']))));
}

/** The probe's write under `key`. Rejects as the write does (see `RedisError`). */
export async function probeWrite(call: Call, key: string): Promise<void> {
  await call('health', (c) => HEALTH.run(c, [key], ['1', String(HEALTH_KEY_TTL_MS)]));
}
