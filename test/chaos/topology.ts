import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { adminOn, slotOf, spawnRedisCluster, waitForClusterOk, spawnRedisServer, spawnSentinels, type SpawnedRedis, type SpawnedSentinels } from '../helpers/redis.js';
import { sleep, until } from './lib.js';

export type Topology = 'single' | 'sentinel' | 'cluster';
export const TOPOLOGIES: readonly Topology[] = ['single', 'sentinel', 'cluster'];

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
   * Sentinel and cluster: SIGKILL the master, wait until another is named (by the sentinels, or
   * the cluster for the deployment's slot), then start the old one again (it comes back a
   * replica). On Sentinel, a failover that names no other master within 15 s gets the old one
   * back anyway, and then a master a majority names. Null where there is no failover.
   */
  readonly failover: (() => Promise<void>) | null;
  close(): Promise<void>;
}

/** `prefix`: the deployment's key prefix (`--redis-key-prefix`), whose hash tag names the cluster slot. */
export async function startChaosRedis(topology: Topology, prefix: string): Promise<ChaosRedis> {
  if (topology === 'single') return single();
  return topology === 'sentinel' ? sentinel() : cluster(prefix);
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
    // In the middle of a failover no majority may name one yet: wait for it, as a client would.
    let port: number | undefined;
    const named = await until(async () => (port = await s.currentMasterPort().catch(() => undefined)) !== undefined, Date.now() + 30_000, 100);
    if (!named || port === undefined) throw new Error('no master named by a majority of the sentinels within 30 s');
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
      const moved = await until(async () => (await s.currentMasterPort().catch(() => old.port)) !== old.port, Date.now() + 15_000, 100);
      // A sentinel cannot end a failover while the replica it promoted is down: when the node killed
      // was such a replica, just promoted (the back-to-back faults of seed 4242), no majority may name
      // another until it is back. It is started again, as Kubernetes would restart its pod, and the
      // sentinels must then agree on a master, whichever.
      await old.start();
      if (!moved) process.stderr.write(`chaos: no other master named within 15 s of killing ${old.port} (a sentinel mid-failover); restarted it\n`);
      if (!moved && !(await until(async () => (await s.currentMasterPort().catch(() => null)) !== null, Date.now() + 30_000, 100))) {
        throw new Error(`the sentinels named no master within 45 s of the master (${old.port}) being killed and 30 s of its restart; they say:\n${await sentinelViews(s, nodes, old)}`);
      }
    },
    close: () => s.stop(),
  };
}

/** What each sentinel and each live data node say, and the tail of each sentinel's log: why no failover came. */
async function sentinelViews(s: SpawnedSentinels, nodes: readonly SpawnedRedis[], old: SpawnedRedis): Promise<string> {
  const ask = async (n: SpawnedRedis, command: string[]): Promise<string> => {
    const a = await adminOn(n.url).catch(() => null);
    if (!a) return 'down';
    try {
      return JSON.stringify(await a.sendCommand(command));
    } catch (err) {
      return `error: ${(err as Error).message}`;
    } finally {
      a.destroy();
    }
  };
  const out: string[] = [];
  for (const sn of s.sentinels) {
    out.push(`sentinel ${sn.port}: master ${await ask(sn, ['SENTINEL', 'MASTER', s.masterName])}`);
    out.push(`  replicas ${await ask(sn, ['SENTINEL', 'REPLICAS', s.masterName])}`);
    out.push(`  log tail:\n${sn.output().split('\n').slice(-25).join('\n')}`);
  }
  for (const n of nodes) if (n !== old) out.push(`node ${n.port}: ${(await ask(n, ['INFO', 'replication'])).replace(/\\r\\n/g, ' ')}`);
  return out.join('\n');
}

async function cluster(prefix: string): Promise<ChaosRedis> {
  // Three shards of a master and one replica: every key of the deployment is in one slot (its hash
  // tag), so every fault is aimed at the master of that slot.
  // A replica may take over however long it was cut off (validity factor 0): the nemesis stalls
  // and restarts masters, and a replica that judged its data too old would leave the slot down.
  const c = await spawnRedisCluster({ masters: 3, replicasPerMaster: 1, args: [...AOF, '--cluster-replica-validity-factor', '0'] });
  const slot = slotOf(`{${prefix}}`);
  const master = (): Promise<SpawnedRedis> => c.masterOf(slot);
  return {
    topology: 'cluster',
    // The shard's one replica holds everything acknowledged: a failover loses none of it.
    flags: { 'redis-cluster-nodes': c.seeds, 'redis-wait-replicas': '1' },
    masterUrl: async () => (await master()).url,
    // A fault ends when the cluster says it is whole again (cluster_state:ok on every node), not
    // when the process is back: until then the slot may be down, and what waits is the fault's.
    restart: async () => {
      const m = await master();
      await m.stop();
      await m.start();
      await waitForClusterOk(c.nodes, 60_000);
    },
    kill: async () => {
      const m = await master();
      await m.kill();
      await m.start();
      await waitForClusterOk(c.nodes, 60_000);
    },
    stall: async (ms) => {
      const m = await master();
      m.freeze();
      await sleep(ms);
      m.thaw();
      await waitForClusterOk(c.nodes, 60_000);
    },
    failover: async () => {
      const old = await master();
      await old.kill();
      const moved = await until(async () => (await master().catch(() => old)).port !== old.port, Date.now() + 30_000, 100);
      if (!moved) {
        const views = await Promise.all(
          c.nodes.filter((n) => n !== old).map(async (n) => {
            const a = await adminOn(n.url).catch(() => null);
            if (!a) return `${n.port}: down`;
            try {
              return `${n.port}:\n${String(await a.sendCommand(['CLUSTER', 'NODES']))}`;
            } finally {
              a.destroy();
            }
          }),
        );
        throw new Error(`no replica took over slot ${slot} within 30 s of its master (${old.port}) being killed; the nodes say:\n${views.join('\n')}`);
      }
      await old.start();
      await waitForClusterOk(c.nodes, 60_000);
    },
    close: () => c.stop(),
  };
}
