import { describe, expect, it, vi } from 'vitest';
import type { RedisTargetSpec } from '../../src/redis/index.js';
import { spawnRedisServer, useTestRedis } from '../helpers/redis.js';
import { count, invalidationReplica, single } from './room.js';

const fx = useTestRedis();
const { opened } = fx;

/** A replica of the fleet invalidation on the real log (see {@link invalidationReplica}). */
const replica = (prefix: string, target: RedisTargetSpec | (() => RedisTargetSpec), o: { maxEntries?: number; waitUp?: boolean; clockSlackMs?: number; quietPollIntervalMs?: number } = {}) =>
  invalidationReplica(target, { prefix, opened, ...o });

describe('revocations reach every replica through the invalidation log', () => {
  it('a published revocation reaches the other replicas, not its sender twice', async () => {
    const prefix = fx.redis.prefix();
    const a = await replica(prefix, single(fx.redis.url));
    const b = await replica(prefix, single(fx.redis.url));
    const c = await replica(prefix, single(fx.redis.url));
    await a.fleet.publish({ scope: 'user', userReference: 'erin' });
    await a.fleet.publish({ scope: 'all' });
    await vi.waitFor(() => {
      expect(b.rec.calls).toStrictEqual(['user:erin', 'all']);
      expect(c.rec.calls).toStrictEqual(['user:erin', 'all']);
    }, { timeout: 15_000 });
    expect(a.rec.calls).toStrictEqual(['user:erin', 'all']);
    expect(await count(b.metrics.received, { scope: 'user' })).toBe(1);
    expect(await count(a.metrics.published, { outcome: 'ok' })).toBe(2);
  });

  it('publish rejects when Redis is away (the local purge is done); Redis restarted empty: it cannot tell what it missed, so the whole cache is purged, counted as reset', async () => {
    const own = await spawnRedisServer();
    opened.push({ close: () => own.stop() });
    const a = await replica(fx.redis.prefix(), single(own.url));

    await own.stop();
    await vi.waitFor(() => expect(a.conn.isUp).toBe(false), { timeout: 5000 });
    await expect(a.fleet.publish({ scope: 'user', userReference: 'zoe' })).rejects.toMatchObject({ code: 'ERR_REDIS_UNAVAILABLE' });
    expect(a.rec.calls).toStrictEqual(['user:zoe']);
    expect(await count(a.metrics.published, { outcome: 'failed' })).toBe(1);

    await own.start();
    await vi.waitFor(() => expect(a.conn.isUp).toBe(true), { timeout: 10_000 });
    await vi.waitFor(() => expect(a.rec.calls).toContain('all'), { timeout: 5000 });
    expect(await count(a.metrics.purges, { cause: 'reset' })).toBe(1);
  });
});

describe('a stall, a reconnect or a cut-off costs no cache: replicas catch up', () => {
  it('Redis frozen (SIGSTOP) long enough to be marked down: no purge anywhere, and revocations still flow after the thaw', async () => {
    const own = await spawnRedisServer();
    opened.push({ close: () => own.stop() });
    const prefix = fx.redis.prefix();
    const a = await replica(prefix, single(own.url));
    const b = await replica(prefix, single(own.url));
    own.freeze();
    try {
      await vi.waitFor(() => expect(a.conn.isUp || b.conn.isUp).toBe(false), { timeout: 10_000 });
    } finally {
      own.thaw();
    }
    await vi.waitFor(() => expect(a.conn.isUp && b.conn.isUp).toBe(true), { timeout: 10_000 });
    await a.fleet.publish({ scope: 'user', userReference: 'after-thaw' });
    await vi.waitFor(() => expect(b.rec.calls).toContain('user:after-thaw'), { timeout: 5000 });
    expect(a.rec.calls).not.toContain('all');
    expect(b.rec.calls).not.toContain('all');
    expect(await count(a.metrics.purges)).toBe(0);
    expect(await count(b.metrics.purges)).toBe(0);
  });

  it('a replica cut off from Redis while others revoke reads what it missed when it is back, and purges nothing else', async () => {
    const prefix = fx.redis.prefix();
    const unreachable = await spawnRedisServer();
    await unreachable.stop();
    let target = single(fx.redis.url);
    const a = await replica(prefix, single(fx.redis.url));
    const cut = await replica(prefix, () => target);
    target = single(unreachable.url); // the partition: its next health check moves it to an address that does not answer
    await vi.waitFor(() => expect(cut.conn.isUp).toBe(false), { timeout: 5000 });

    await a.fleet.publish({ scope: 'user', userReference: 'missed-1' });
    await a.fleet.publish({ scope: 'user', userReference: 'missed-2' });
    expect(cut.rec.calls).toStrictEqual([]);

    target = single(fx.redis.url);
    await vi.waitFor(() => expect(cut.rec.calls).toStrictEqual(['user:missed-1', 'user:missed-2']), { timeout: 10_000 });
    expect(await count(cut.metrics.purges)).toBe(0);
  });

  it('a replica that could not reach Redis when it started applies, at first contact, what was written since it started, and purges nothing', async () => {
    const prefix = fx.redis.prefix();
    const unreachable = await spawnRedisServer();
    await unreachable.stop();
    let target = single(unreachable.url);
    const a = await replica(prefix, single(fx.redis.url));
    // Its start read fails. Redis runs on this machine's clock: no slack is needed to tell that the
    // log was born before `late` started (so it lost nothing `late` should have read).
    const late = await replica(prefix, () => target, { waitUp: false, clockSlackMs: 0 });
    await a.fleet.publish({ scope: 'user', userReference: 'while-away-1' });
    await a.fleet.publish({ scope: 'all' });
    target = single(fx.redis.url);
    await vi.waitFor(() => expect(late.rec.calls).toStrictEqual(['user:while-away-1', 'all']), { timeout: 10_000 });
    expect(await count(late.metrics.purges)).toBe(0);
    // and it follows from the head on
    await a.fleet.publish({ scope: 'user', userReference: 'after' });
    await vi.waitFor(() => expect(late.rec.calls).toContain('user:after'), { timeout: 5000 });
  });

  it('a replica that never reached Redis before it restarted empty cannot tell what it missed: it purges everything at first contact, counted as reset', async () => {
    const own = await spawnRedisServer();
    opened.push({ close: () => own.stop() });
    const prefix = fx.redis.prefix();
    let target = single(fx.redis.url);
    const unreachable = await spawnRedisServer();
    await unreachable.stop();
    // `a` writes to a Redis that `late` never reads (it cannot reach it from its start on)
    const a = await replica(prefix, single(own.url));
    target = single(unreachable.url);
    const late = await replica(prefix, () => target, { waitUp: false, clockSlackMs: 0 });
    await a.fleet.publish({ scope: 'user', userReference: 'lost-with-the-restart' });
    // Redis restarts empty: the revocation is gone from the log `late` is about to read
    await own.stop();
    await own.start();
    target = single(own.url);
    await vi.waitFor(() => expect(late.rec.calls).toStrictEqual(['all']), { timeout: 10_000 });
    expect(await count(late.metrics.purges, { cause: 'reset' })).toBe(1);
    // and it follows from the head on, without purging again (once `a` is back on the restarted Redis)
    await vi.waitFor(() => expect(a.conn.isUp).toBe(true), { timeout: 10_000 });
    await a.fleet.publish({ scope: 'user', userReference: 'after' });
    await vi.waitFor(() => expect(late.rec.calls).toStrictEqual(['all', 'user:after']), { timeout: 10_000 });
    expect(await count(late.metrics.purges)).toBe(1);
  });

  it('a replica that fell further behind than the log keeps purges everything, counted as trimmed', async () => {
    const prefix = fx.redis.prefix();
    const unreachable = await spawnRedisServer();
    await unreachable.stop();
    let target = single(fx.redis.url);
    const a = await replica(prefix, single(fx.redis.url), { maxEntries: 10 });
    const cut = await replica(prefix, () => target, { maxEntries: 10 });
    target = single(unreachable.url);
    await vi.waitFor(() => expect(cut.conn.isUp).toBe(false), { timeout: 5000 });
    // Enough that whole stream nodes (100 entries each) are trimmed past what `cut` read.
    for (let i = 0; i < 300; i++) await a.fleet.publish({ scope: 'user', userReference: `u${i}` });

    target = single(fx.redis.url);
    await vi.waitFor(() => expect(cut.rec.calls).toContain('all'), { timeout: 10_000 });
    expect(await count(cut.metrics.purges, { cause: 'trimmed' })).toBe(1);
    // and it follows from the head after it
    await a.fleet.publish({ scope: 'user', userReference: 'after-gap' });
    await vi.waitFor(() => expect(cut.rec.calls).toContain('user:after-gap'), { timeout: 5000 });
    expect(cut.rec.calls.filter((c) => c.startsWith('user:u')).length).toBe(0);
  });

  it('an entry it cannot read (written by something else) purges everything, counted as unreadable; a forged "all" is just a purge', async () => {
    const prefix = fx.redis.prefix();
    // Written without a nudge: found by the poll (every 30 s by default while the subscription is up).
    const a = await replica(prefix, single(fx.redis.url), { quietPollIntervalMs: 200 });
    const key = `{${prefix}}invalidations`;
    await fx.admin.sendCommand(['XADD', key, '*', 'o', 'intruder', 's', 'nonsense']);
    await vi.waitFor(() => expect(a.rec.calls).toContain('all'), { timeout: 5000 });
    expect(await count(a.metrics.purges, { cause: 'unreadable' })).toBe(1);
  });
});
