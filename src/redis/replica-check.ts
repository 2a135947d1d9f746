import { performance } from 'node:perf_hooks';
import type { Logger } from '../observability/index.js';
import type { RedisTargetSpec } from './link.js';

/** How often the replicas the master has are compared with `--redis-wait-replicas` (ms). */
export const REPLICA_CHECK_INTERVAL_MS = 30_000;

export interface ReplicaCheckOptions {
  /** `--redis-wait-replicas`; nothing is checked at 0. */
  readonly waitReplicas: number;
  /** Default {@link REPLICA_CHECK_INTERVAL_MS}. */
  readonly intervalMs?: number;
  readonly logger: Logger;
}

/**
 * `WAIT n` protects an acknowledged write from a failover only when every replica that can be
 * promoted holds it: with fewer, Redis may promote one that missed it (the Sentinel chaos run lost
 * acknowledged events that way). So the master's replicas are compared with `--redis-wait-replicas`
 * and a difference is logged once per count: more replicas than `n` (a failover may lose what was
 * acknowledged), or fewer attached than `n` (nothing can be acknowledged: 503 until they are).
 * One server and Sentinel only; never changes whether Redis is up.
 */
export class ReplicaCheck {
  private last = Number.NEGATIVE_INFINITY;
  /** The replica count last logged as differing from `--redis-wait-replicas` ('' when none differs). */
  private logged = '';

  constructor(private readonly options: ReplicaCheckOptions) {}

  /** Compares, at most once per interval; `info` reads `INFO replication` (a failure skips this turn). */
  async check(target: RedisTargetSpec, info: () => Promise<string>): Promise<void> {
    const n = this.options.waitReplicas;
    if (n <= 0 || target.kind === 'cluster') return;
    const now = performance.now();
    if (now - this.last < (this.options.intervalMs ?? REPLICA_CHECK_INTERVAL_MS)) return;
    this.last = now;
    let text: string;
    try {
      text = await info();
    } catch {
      return; // the next check tries again; the health check says whether Redis is usable
    }
    const replicas = Number(/^connected_slaves:(\d+)\s*$/m.exec(text)?.[1]);
    if (!/^role:master\s*$/m.test(text) || !Number.isInteger(replicas)) return;
    const key = replicas === n ? '' : String(replicas);
    if (key === this.logged) return;
    this.logged = key;
    const facts = { waitReplicas: n, replicas };
    const { logger } = this.options;
    if (replicas > n) {
      logger.warn(
        { event: 'redis_wait_replicas_below_replicas', ...facts },
        `the Redis master has ${replicas} replicas and --redis-wait-replicas is ${n}: a failover may promote a replica that missed an acknowledged event; set it to ${replicas}`,
      );
    } else if (replicas < n) {
      logger.warn(
        { event: 'redis_wait_replicas_unmet', ...facts },
        `the Redis master has ${replicas} replicas attached, fewer than --redis-wait-replicas ${n}: queue mode, passthrough accepts and revocations answer 503 until ${n} are`,
      );
    } else {
      logger.info({ event: 'redis_wait_replicas_met', ...facts }, `the Redis master has the ${n} replicas --redis-wait-replicas asks for`);
    }
  }
}
