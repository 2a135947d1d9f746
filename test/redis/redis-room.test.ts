import { createClient } from '@redis/client';
import { describe, expect, it, vi } from 'vitest';
import type { Revocation } from '../../src/lib/revocation-hook.js';
import { silentLogger } from '../../src/observability/index.js';
import { createRegistry } from '../../src/observability/registry.js';
import {
  createRedisMetrics,
  InvalidationBus,
  RedisConnection,
  RedisDedupStore,
  RedisError,
  RedisKeyspace,
  RedisScript,
  type RedisMetrics,
} from '../../src/redis/index.js';
import { MemoryDedupStore } from '../../src/webhooks/index.js';
import { spawnRedisServer, useTestRedis } from '../helpers/redis.js';

const fx = useTestRedis();
const { opened } = fx;

async function connection(url = fx.redis.url, commandTimeoutMs = 500): Promise<{ conn: RedisConnection; metrics: RedisMetrics; registry: ReturnType<typeof createRegistry> }> {
  const registry = createRegistry({ defaultMetrics: false });
  const metrics = createRedisMetrics(registry);
  const conn = new RedisConnection({ url: () => url, commandTimeoutMs, logger: silentLogger(), metrics, healthIntervalMs: 100 });
  opened.push(conn);
  conn.start();
  return { conn, metrics, registry };
}

async function upConnection(url = fx.redis.url, commandTimeoutMs = 500): ReturnType<typeof connection> {
  const c = await connection(url, commandTimeoutMs);
  await vi.waitFor(() => expect(c.conn.isUp).toBe(true), { timeout: 5000 });
  return c;
}

async function replica(prefix: string, o: { leaseMs?: number; url?: string } = {}) {
  const { conn, metrics } = o.url ? await connection(o.url) : await upConnection();
  const store = new RedisDedupStore({
    connection: conn,
    keyspace: new RedisKeyspace(prefix),
    local: new MemoryDedupStore({ retentionMs: 60_000, maxEntries: 1000 }),
    leaseMs: o.leaseMs ?? 10_000,
    retentionMs: 60_000,
    metrics,
    logger: silentLogger(),
  });
  await store.start();
  opened.push(store);
  return { store, metrics, conn };
}

const count = async (c: { get(): Promise<{ values: { value: number; labels: Record<string, unknown> }[] }> }, labels: Record<string, string> = {}): Promise<number> =>
  (await c.get()).values.filter((v) => Object.entries(labels).every(([k, x]) => v.labels[k] === x)).reduce((s, v) => s + v.value, 0);

describe('RedisDedupStore against real Redis', () => {
  it('one claim across replicas; the waiter learns "accepted" from the channel; then duplicate everywhere', async () => {
    const prefix = fx.redis.prefix();
    const a = await replica(prefix);
    const b = await replica(prefix);
    const claim = await a.store.claim('evt_1');
    expect(claim.kind).toBe('claimed');
    expect(await fx.admin.get(`${prefix}dedup:evt_1`)).toMatch(/^inflight:/);

    const waiting = await b.store.claim('evt_1');
    expect(waiting.kind).toBe('in_flight');
    if (claim.kind !== 'claimed' || waiting.kind !== 'in_flight') return;
    await a.store.markAccepted('evt_1', claim.token);
    expect(await waiting.outcome).toBe('accepted');

    expect(await fx.admin.get(`${prefix}dedup:evt_1`)).toBe('accepted');
    const ttl = await fx.admin.pTTL(`${prefix}dedup:evt_1`);
    expect(ttl).toBeGreaterThan(10_000);
    expect(ttl).toBeLessThanOrEqual(60_000);
    expect((await b.store.claim('evt_1')).kind).toBe('duplicate');
    expect((await a.store.claim('evt_1')).kind).toBe('duplicate');
    // a replica that never saw the event (a restart) asks Redis
    const c = await replica(prefix);
    expect((await c.store.claim('evt_1')).kind).toBe('duplicate');
  });

  it('release lets the next copy claim; the waiter learns "released"', async () => {
    const prefix = fx.redis.prefix();
    const a = await replica(prefix);
    const b = await replica(prefix);
    const claim = await a.store.claim('evt_2');
    const waiting = await b.store.claim('evt_2');
    if (claim.kind !== 'claimed' || waiting.kind !== 'in_flight') throw new Error(`unexpected ${claim.kind} / ${waiting.kind}`);
    await a.store.release('evt_2', claim.token);
    expect(await waiting.outcome).toBe('released');
    expect(await fx.admin.exists(`${prefix}dedup:evt_2`)).toBe(0);
    expect((await b.store.claim('evt_2')).kind).toBe('claimed');
  });

  it('release and accept are guarded by the claim token', async () => {
    const prefix = fx.redis.prefix();
    const a = await replica(prefix);
    const claim = await a.store.claim('evt_3');
    if (claim.kind !== 'claimed') throw new Error('not claimed');
    await a.store.release('evt_3', 'someone-else');
    expect(await fx.admin.get(`${prefix}dedup:evt_3`)).toBe(`inflight:${claim.token}`);

    // the scripts themselves, called with another token
    const { RELEASE } = await import('../../src/redis/dedup-scripts.js');
    const r = await a.conn.call('t', (c) => RELEASE.run(c, [`${prefix}dedup:evt_3`], ['other', `${prefix}dedup-settled`, '{}']));
    expect(r).toBe(0);
    expect(await fx.admin.get(`${prefix}dedup:evt_3`)).toBe(`inflight:${claim.token}`);
  });

  it('a holder that never settles (killed) loses the claim after its lease; settling late counts a lapse', async () => {
    const prefix = fx.redis.prefix();
    const dead = await replica(prefix, { leaseMs: 300 });
    const b = await replica(prefix, { leaseMs: 300 });
    const claim = await dead.store.claim('evt_4');
    if (claim.kind !== 'claimed') throw new Error('not claimed');
    const waiting = await b.store.claim('evt_4');
    if (waiting.kind !== 'in_flight') throw new Error('not in flight');
    expect(await waiting.outcome).toBe('released');
    expect((await b.store.claim('evt_4')).kind).toBe('claimed');

    await dead.store.markAccepted('evt_4', claim.token);
    expect(await count(dead.metrics.dedupLeaseLapses)).toBe(1);
    expect(await fx.admin.get(`${prefix}dedup:evt_4`)).toBe('accepted');
  });

  it('Redis unreachable: claims fall back to this replica, counted, and accepted ids are still remembered here', async () => {
    const down = await spawnRedisServer();
    const url = down.url;
    await down.stop();
    const a = await replica(fx.redis.prefix(), { url });
    const claim = await a.store.claim('evt_5');
    expect(claim.kind).toBe('claimed');
    if (claim.kind !== 'claimed') return;
    const local = await a.store.claim('evt_5');
    expect(local.kind).toBe('in_flight');
    await a.store.markAccepted('evt_5', claim.token);
    if (local.kind === 'in_flight') expect(await local.outcome).toBe('accepted');
    expect((await a.store.claim('evt_5')).kind).toBe('duplicate');
    expect(await count(a.metrics.dedupFallbacks, { op: 'claim' })).toBe(1);
    expect(await count(a.metrics.dedupFallbacks, { op: 'accept' })).toBe(1);
    expect(await count(a.metrics.up)).toBe(0);
  });
});

describe('RedisDedupStore across an outage', () => {
  it('an event accepted while Redis was away is a duplicate on the other replicas once it is back', async () => {
    const own = await spawnRedisServer();
    opened.push({ close: () => own.stop() });
    const prefix = fx.redis.prefix();
    const a = await replica(prefix, { url: own.url });
    const b = await replica(prefix, { url: own.url });
    await vi.waitFor(() => expect(a.conn.isUp && b.conn.isUp).toBe(true), { timeout: 5000 });

    await own.stop();
    await vi.waitFor(() => expect(a.conn.isUp).toBe(false), { timeout: 5000 });
    const claim = await a.store.claim('evt_outage');
    if (claim.kind !== 'claimed') throw new Error('not claimed');
    await a.store.markAccepted('evt_outage', claim.token);
    expect(await count(a.metrics.dedupFallbacks, { op: 'accept' })).toBe(1);

    await own.start();
    await vi.waitFor(() => expect(a.conn.isUp && b.conn.isUp).toBe(true), { timeout: 10_000 });
    const look = createClient({ url: own.url });
    look.on('error', () => undefined);
    await look.connect();
    try {
      await vi.waitFor(async () => expect(await look.get(`${prefix}dedup:evt_outage`)).toBe('accepted'), { timeout: 5000 });
    } finally {
      await look.close();
    }
    expect((await b.store.claim('evt_outage')).kind).toBe('duplicate');
  });
});

describe('RedisDedupStore after one failed accept, Redis up all along', () => {
  it('the id is written to Redis soon after, though no restore happens, and is a duplicate on another replica', async () => {
    const prefix = fx.redis.prefix();
    const a = await replica(prefix);
    const b = await replica(prefix);
    const claim = await a.store.claim('evt_one_failure');
    if (claim.kind !== 'claimed') throw new Error('not claimed');
    // The accept script fails on a key of the wrong type (a reply error; the health PING is untouched).
    const look = createClient({ url: fx.redis.url });
    look.on('error', () => undefined);
    await look.connect();
    try {
      const key = `${prefix}dedup:evt_one_failure`;
      await look.del(key);
      await look.hSet(key, 'x', 'y');
      await a.store.markAccepted('evt_one_failure', claim.token);
      expect(await count(a.metrics.dedupFallbacks, { op: 'accept' })).toBe(1);
      await look.del(key);
      expect(a.conn.isUp).toBe(true);
      await vi.waitFor(async () => expect(await look.get(key)).toBe('accepted'), { timeout: 5000 });
    } finally {
      await look.close();
    }
    expect((await b.store.claim('evt_one_failure')).kind).toBe('duplicate');
  });
});

describe('RedisConnection', () => {
  it('turns failures into typed errors: reply, timeout, unavailable, closed', async () => {
    // A Redis of its own: CLIENT PAUSE stops every client, and REDIS_URL may be shared with other tests.
    const own = await spawnRedisServer();
    opened.push({ close: () => own.stop() });
    const { conn, metrics } = await upConnection(own.url, 200);
    await expect(conn.call('bad', (c) => c.sendCommand(['NO_SUCH_COMMAND']))).rejects.toMatchObject({ code: 'ERR_REDIS_REPLY' });

    const pauser = createClient({ url: own.url });
    pauser.on('error', () => undefined);
    await pauser.connect();
    try {
      await pauser.sendCommand(['CLIENT', 'PAUSE', '1500', 'ALL']);
      await expect(conn.call('slow', (c) => c.sendCommand(['GET', 'x']))).rejects.toMatchObject({ code: 'ERR_REDIS_TIMEOUT' });
    } finally {
      await pauser.sendCommand(['CLIENT', 'UNPAUSE']);
      await pauser.close();
    }
    expect(await count(metrics.callDuration as never, { op: 'slow', outcome: 'timeout' })).toBeGreaterThan(0);

    const dead = await spawnRedisServer();
    await dead.stop();
    const { conn: offline } = await connection(dead.url);
    await expect(offline.call('get', (c) => c.sendCommand(['GET', 'x']))).rejects.toMatchObject({ code: 'ERR_REDIS_UNAVAILABLE' });

    await conn.close();
    const err = await conn.call('get', (c) => c.sendCommand(['GET', 'x'])).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RedisError);
    expect((err as RedisError).code).toBe('ERR_REDIS_CLOSED');
  });

  it('RedisScript loads itself again after SCRIPT FLUSH (NOSCRIPT → EVAL)', async () => {
    const { conn } = await upConnection();
    const script = new RedisScript(`return ARGV[1] .. '!'`);
    expect(await conn.call('s', (c) => script.run(c, [], ['a']))).toBe('a!');
    await fx.admin.sendCommand(['SCRIPT', 'FLUSH']);
    expect(await conn.call('s', (c) => script.run(c, [], ['b']))).toBe('b!');
  });

  it('keys and channels live under the prefix', () => {
    const ks = new RedisKeyspace('tenant-a:');
    expect(ks.key('dedup', 'evt_1')).toBe('tenant-a:dedup:evt_1');
    expect(ks.key('queue', 'stream')).toBe('tenant-a:queue:stream');
    expect(ks.channel('invalidate')).toBe('tenant-a:invalidate');
  });
});

describe('InvalidationBus', () => {
  const recorder = () => {
    const calls: string[] = [];
    return { calls, hook: { revokeUser: (u: string) => (calls.push(`user:${u}`), 1), revokeAll: () => (calls.push('all'), 2) } };
  };

  it('a shared revocation reaches the other replicas, not its sender twice', async () => {
    const prefix = fx.redis.prefix();
    const mk = async () => {
      const { conn, metrics } = await upConnection();
      const rec = recorder();
      const bus = new InvalidationBus({ connection: conn, keyspace: new RedisKeyspace(prefix), local: rec.hook, metrics, logger: silentLogger() });
      await bus.start();
      return { bus, rec, metrics };
    };
    const a = await mk();
    const b = await mk();
    const c = await mk();
    a.bus.revokeUser('erin');
    await a.bus.share({ scope: 'user', userReference: 'erin' } satisfies Revocation);
    await a.bus.share({ scope: 'all' });
    await vi.waitFor(() => {
      expect(b.rec.calls).toStrictEqual(['user:erin', 'all']);
      expect(c.rec.calls).toStrictEqual(['user:erin', 'all']);
    }, { timeout: 15_000 });
    expect(a.rec.calls).toStrictEqual(['user:erin']);
    expect(await count(b.metrics.invalidationsReceived, { scope: 'user' })).toBe(1);
    expect(await count(a.metrics.invalidationsPublished, { outcome: 'ok' })).toBe(2);
  });

  it('share rejects when Redis is away; when Redis comes back the whole cache is purged and counted', async () => {
    const own = await spawnRedisServer();
    opened.push({ close: () => own.stop() });
    const { conn, metrics } = await upConnection(own.url);
    const rec = recorder();
    const bus = new InvalidationBus({ connection: conn, keyspace: new RedisKeyspace(fx.redis.prefix()), local: rec.hook, metrics, logger: silentLogger() });
    await bus.start();

    await own.stop();
    await vi.waitFor(() => expect(conn.isUp).toBe(false), { timeout: 5000 });
    await expect(bus.share({ scope: 'all' })).rejects.toMatchObject({ code: 'ERR_REDIS_UNAVAILABLE' });
    expect(await count(metrics.invalidationsPublished, { outcome: 'failed' })).toBe(1);

    await own.start();
    await vi.waitFor(() => expect(conn.isUp).toBe(true), { timeout: 10_000 });
    await vi.waitFor(() => expect(rec.calls).toContain('all'), { timeout: 5000 });
    expect(await count(metrics.reconnectPurges)).toBeGreaterThanOrEqual(1);
  });
});

describe('RedisConnection follows a rotated URL', () => {
  it('moves to the new URL read from the secret, and subscriptions follow', async () => {
    const dead = await spawnRedisServer();
    await dead.stop();
    let url = dead.url;
    const registry = createRegistry({ defaultMetrics: false });
    const metrics = createRedisMetrics(registry);
    const conn = new RedisConnection({ url: () => url, commandTimeoutMs: 300, logger: silentLogger(), metrics, healthIntervalMs: 100 });
    opened.push(conn);
    conn.start();
    const got: string[] = [];
    const channel = `${fx.redis.prefix()}rotation`;
    await conn.subscribe(channel, (m) => got.push(m));
    expect(conn.isUp).toBe(false);

    url = fx.redis.url; // what a re-read --redis-url-file would give
    await vi.waitFor(() => expect(conn.isUp).toBe(true), { timeout: 5000 });
    expect(await conn.call('get', (c) => c.sendCommand(['PING']))).toBe('PONG');
    await vi.waitFor(
      async () => {
        await fx.admin.publish(channel, 'hello');
        expect(got).toContain('hello');
      },
      { timeout: 5000, interval: 100 },
    );
  });
});
