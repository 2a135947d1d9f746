import { connect, createServer, type Server, type Socket } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import type { RedisTargetSpec } from '../../src/redis/index.js';
import { spawnRedisCluster, spawnSentinels, type SpawnedCluster, type SpawnedSentinels } from '../helpers/redis.js';
import { connectionTo, up } from './room.js';

/**
 * node-redis' cluster and sentinel clients give up when no seed or sentinel answers at start; the
 * links connect again (src/redis/retried-link.ts) until one does. Here the only address the link
 * is given is a door that closes every connection at once, then, once the link has knocked at it
 * again after giving up, lets them through to the real seed or sentinel: the link comes up.
 */
class Door {
  knocks = 0;
  private open = false;
  private readonly sockets = new Set<Socket>();
  private readonly server: Server;

  private constructor(to: number) {
    this.server = createServer((socket) => {
      this.knocks += 1;
      if (!this.open) return void socket.destroy();
      const through = connect(to, '127.0.0.1');
      for (const s of [socket, through]) {
        this.sockets.add(s);
        s.on('error', () => undefined);
        s.on('close', () => (this.sockets.delete(s), socket.destroy(), through.destroy()));
      }
      socket.pipe(through).pipe(socket);
    });
  }

  static async to(port: number): Promise<Door> {
    const door = new Door(port);
    await new Promise<void>((resolve) => door.server.listen(0, '127.0.0.1', resolve));
    return door;
  }

  get url(): string {
    return `redis://127.0.0.1:${(this.server.address() as { port: number }).port}`;
  }

  letIn(): void {
    this.open = true;
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

const opened: { close(): Promise<void> }[] = [];
afterEach(async () => {
  await Promise.allSettled(opened.splice(0).reverse().map((o) => o.close()));
});

/** The link behind `target(door)` knocks, gives up, knocks again; let in, it comes up. */
async function comesUpLate(door: Door, target: RedisTargetSpec): Promise<void> {
  opened.push(door);
  const c = connectionTo(target, { opened, prefix: 'link-start:', commandTimeoutMs: 2000 });
  // More knocks than one connect makes: the client gave up at least once and was started again.
  await vi.waitFor(() => expect(door.knocks).toBeGreaterThanOrEqual(3), { timeout: 30_000 });
  expect(c.conn.isUp).toBe(false);
  door.letIn();
  await up(c, 30_000);
}

describe('a Redis Cluster whose seed answers only after the start', () => {
  let cluster: SpawnedCluster;
  beforeAll(async () => {
    cluster = await spawnRedisCluster({ masters: 3, replicasPerMaster: 0 });
  }, 120_000);
  afterAll(async () => {
    await cluster?.stop();
  });

  it('the cluster link connects again until it does, then is up', async () => {
    const door = await Door.to(cluster.nodes[0]!.port);
    await comesUpLate(door, { kind: 'cluster', urls: [door.url] });
  });
});

describe('Redis with Sentinel whose sentinel answers only after the start', () => {
  let sentinels: SpawnedSentinels;
  beforeAll(async () => {
    sentinels = await spawnSentinels();
  }, 120_000);
  afterAll(async () => {
    await sentinels?.stop();
  });

  it('the sentinel link connects again until it does, then is up', async () => {
    const door = await Door.to(sentinels.sentinels[0]!.port);
    await comesUpLate(door, { kind: 'sentinel', urls: [door.url], masterName: sentinels.masterName });
  });
});
