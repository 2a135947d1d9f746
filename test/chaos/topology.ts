import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnRedisServer, spawnSentinels, type SpawnedRedis, type SpawnedSentinels } from '../helpers/redis.js';
import { sleep, until } from './lib.js';

export type Topology = 'single' | 'sentinel';
export const TOPOLOGIES: readonly Topology[] = ['single', 'sentinel'];

/** Every data node keeps what it acknowledged: AOF, fsync before each reply. */
const AOF = ['--appendonly', 'yes', '--appendfsync', 'always', '--save', ''];

/**
 * The Redis a chaos run shares between its replicas, and what the nemesis can do to it. Faults hit
 * the node that is the master when they are made.
 */
export interface ChaosRedis {
  readonly topology: Topology;
  /** The `serve` flags that reach it. */
  readonly flags: Record<string, string>;
  /** A URL of the current master (to read what the queue holds). */
  masterUrl(): Promise<string>;
  /** SIGTERM and start again at once (AOF keeps the data). */
  restart(): Promise<void>;
  /** SIGKILL and start again at once. */
  kill(): Promise<void>;
  /** SIGSTOP for `ms`, then SIGCONT (the same node). */
  stall(ms: number): Promise<void>;
  /**
   * Sentinel only: SIGKILL the master, wait until the sentinels name another, then start the old
   * one again (the sentinels make it a replica). Null where there is no failover.
   */
  readonly failover: (() => Promise<void>) | null;
  close(): Promise<void>;
}

export async function startChaosRedis(topology: Topology): Promise<ChaosRedis> {
  return topology === 'single' ? single() : sentinel();
}

async function single(): Promise<ChaosRedis> {
  const dir = mkdtempSync(join(tmpdir(), 'cs-chaos-redis-'));
  const redis = await spawnRedisServer({ args: [...AOF, '--dir', dir] });
  return {
    topology: 'single',
    flags: { 'redis-url': redis.url },
    masterUrl: () => Promise.resolve(redis.url),
    restart: async () => {
      await redis.stop();
      await redis.start();
    },
    kill: async () => {
      await redis.kill();
      await redis.start();
    },
    stall: async (ms) => {
      redis.freeze();
      await sleep(ms);
      redis.thaw();
    },
    failover: null,
    close: async () => {
      await redis.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function sentinel(): Promise<ChaosRedis> {
  const s: SpawnedSentinels = await spawnSentinels({ sentinels: 3, replicas: 2, args: AOF });
  const nodes: SpawnedRedis[] = [s.primary, ...s.replicas];
  const master = async (): Promise<SpawnedRedis> => {
    const port = await s.currentMasterPort();
    const node = nodes.find((n) => n.port === port);
    if (!node) throw new Error(`the sentinels name a master on port ${port}, which is none of ours`);
    return node;
  };
  return {
    topology: 'sentinel',
    // Acknowledged events and revocations are on a replica too: a failover loses none of them.
    flags: { 'redis-sentinels': s.addresses, 'redis-sentinel-master': s.masterName, 'redis-wait-replicas': '2' },
    masterUrl: async () => (await master()).url,
    restart: async () => {
      const m = await master();
      await m.stop();
      await m.start();
    },
    kill: async () => {
      const m = await master();
      await m.kill();
      await m.start();
    },
    stall: async (ms) => {
      const m = await master();
      m.freeze();
      await sleep(ms);
      m.thaw();
    },
    failover: async () => {
      const old = await master();
      await old.kill();
      const moved = await until(async () => (await s.currentMasterPort().catch(() => old.port)) !== old.port, Date.now() + 30_000, 100);
      if (!moved) throw new Error('the sentinels named no new master within 30 s of the master being killed');
      await old.start();
    },
    close: () => s.stop(),
  };
}
