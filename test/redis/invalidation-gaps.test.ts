import { describe, expect, it, vi } from 'vitest';
import type { RedisTargetSpec } from '../../src/redis/index.js';
import { spawnRedisServer, useTestRedis } from '../helpers/redis.js';
import { count, invalidationReplica, redisWithUser, single } from './room.js';

/**
 * Whoever can write to Redis must not keep a revoked ALLOW alive: every entry removed after a
 * replica's position makes it purge, however it was removed, and a replica that cannot read the log
 * while Redis answers others stops serving from its cache.
 */
const fx = useTestRedis();
const { opened } = fx;

/** A replica of the fleet invalidation on the real log (see {@link invalidationReplica}). */
const replica = (prefix: string, target: RedisTargetSpec | (() => RedisTargetSpec), o: { maxSilenceMs?: number; pollIntervalMs?: number; waitUp?: boolean } = {}) =>
  invalidationReplica(target, { prefix, opened, maxSilenceMs: 60_000, ...o });

const redisWithUserB = async () => {
  const r = await redisWithUser('b', opened);
  return { ...r, urlB: r.url };
};

describe('every entry removed after a replica position makes it purge (counted as deleted)', () => {
  // Before: only a trim from the front was noticed (trimmedPast assumed entries only leave from the
  // front), so a revocation deleted before a replica read it was simply never applied there.
  it('the newest entry deleted (XDEL) while a replica was cut off: at its next read it purges everything', async () => {
    const prefix = fx.redis.prefix();
    const unreachable = await spawnRedisServer();
    await unreachable.stop();
    let target = single(fx.redis.url);
    const a = await replica(prefix, single(fx.redis.url));
    const b = await replica(prefix, () => target);
    await a.fleet.publish({ scope: 'user', userReference: 'before' });
    await vi.waitFor(() => expect(b.rec.calls).toStrictEqual(['user:before']), { timeout: 10_000 });
    target = single(unreachable.url);
    await vi.waitFor(() => expect(b.conn.isUp).toBe(false), { timeout: 5000 });

    await a.fleet.publish({ scope: 'user', userReference: 'erin' });
    const [[newest]] = (await fx.admin.sendCommand(['XREVRANGE', a.stream, '+', '-', 'COUNT', '1'])) as [[string]];
    expect(await fx.admin.sendCommand(['XDEL', a.stream, newest])).toBe(1);

    target = single(fx.redis.url);
    await vi.waitFor(() => expect(b.rec.calls).toContain('all'), { timeout: 10_000 });
    expect(await count(b.metrics.purges, { cause: 'deleted' })).toBe(1);
    // and it follows from the head on, purging nothing more
    await a.fleet.publish({ scope: 'user', userReference: 'after' });
    await vi.waitFor(() => expect(b.rec.calls.at(-1)).toBe('user:after'), { timeout: 10_000 });
    expect(await count(b.metrics.purges)).toBe(1);
  });

  it("the newest entry deleted and the stream's counters rewritten (XSETID) so nothing looks removed: the replica that heard it announced purges", async () => {
    const { admin, urlB, own } = await redisWithUserB();
    const prefix = fx.redis.prefix();
    const a = await replica(prefix, single(own.url));
    const b = await replica(prefix, single(urlB));
    await a.fleet.publish({ scope: 'user', userReference: 'seen' });
    await vi.waitFor(() => expect(b.rec.calls).toStrictEqual(['user:seen']), { timeout: 10_000 });
    const info = async (): Promise<Record<string, unknown>> => {
      const list = (await admin.sendCommand(['XINFO', 'STREAM', a.stream])) as unknown[];
      const all = new Map(Array.from({ length: list.length / 2 }, (_, i) => [String(list[2 * i]), list[2 * i + 1]]));
      return Object.fromEntries(['length', 'last-generated-id', 'entries-added', 'max-deleted-entry-id'].map((k) => [k, all.get(k)]));
    };
    const before = await info();

    // b cannot read for a moment (its nudges still arrive); the entry goes, and so does every trace.
    await admin.sendCommand(['ACL', 'SETUSER', 'b', '-xinfo']);
    await a.fleet.publish({ scope: 'user', userReference: 'erin' });
    await vi.waitFor(() => expect(count(b.metrics.readFailures, { kind: 'refused' })).resolves.toBeGreaterThan(0), { timeout: 10_000 });
    const [[newest]] = (await admin.sendCommand(['XREVRANGE', a.stream, '+', '-', 'COUNT', '1'])) as [[string]];
    await admin.sendCommand(['XDEL', a.stream, newest]);
    await admin.sendCommand(['XSETID', a.stream, String(before['last-generated-id']), 'ENTRIESADDED', String(before['entries-added']), 'MAXDELETEDID', '0-1']);
    // as if the entry had never been added (0-0 cannot be given back: 0-1 says as little)
    expect(await info()).toStrictEqual({ ...before, 'max-deleted-entry-id': '0-1' });
    await admin.sendCommand(['ACL', 'SETUSER', 'b', '+xinfo']);

    await vi.waitFor(() => expect(b.rec.calls).toContain('all'), { timeout: 10_000 });
    expect(await count(b.metrics.purges, { cause: 'deleted' })).toBe(1);
    expect(b.rec.calls).not.toContain('user:erin');
  });
});

describe('a log this replica cannot read while Redis answers: the cache serves nothing until it has caught up', () => {
  it('reads refused (ACL -xinfo): each failure counted; past --fleet-invalidation-max-silence-ms the cache is bypassed (gauge 1), nothing purged; when reads work again it serves again', async () => {
    const { admin, urlB, own } = await redisWithUserB();
    const prefix = fx.redis.prefix();
    const a = await replica(prefix, single(own.url));
    const b = await replica(prefix, single(urlB), { maxSilenceMs: 600, pollIntervalMs: 100 });
    await a.fleet.publish({ scope: 'user', userReference: 'seen' });
    await vi.waitFor(() => expect(b.rec.calls).toStrictEqual(['user:seen']), { timeout: 10_000 });
    expect(b.trust.trusted).toBe(true);
    await admin.sendCommand(['ACL', 'SETUSER', 'b', '-xinfo']);
    await vi.waitFor(() => expect(b.trust.trusted).toBe(false), { timeout: 10_000 });
    expect(await count(b.metrics.bypassed)).toBe(1);
    expect(await count(b.metrics.readFailures, { kind: 'refused' })).toBeGreaterThanOrEqual(2);
    expect(b.conn.isUp).toBe(true); // Redis answers everything else
    expect(b.rec.calls).toStrictEqual(['user:seen']);

    await a.fleet.publish({ scope: 'user', userReference: 'while-unread' });
    await admin.sendCommand(['ACL', 'SETUSER', 'b', '+xinfo']);
    await vi.waitFor(() => expect(b.trust.trusted).toBe(true), { timeout: 10_000 });
    expect(b.rec.calls).toStrictEqual(['user:seen', 'user:while-unread']);
    expect(await count(b.metrics.bypassed)).toBe(0);
  });

  it('Redis answering nobody (frozen) past --fleet-invalidation-max-silence-ms: the cache keeps serving (Redis down: decisions are unaffected)', async () => {
    const own = await spawnRedisServer();
    opened.push({ close: () => own.stop() });
    const b = await replica(fx.redis.prefix(), single(own.url), { maxSilenceMs: 300, pollIntervalMs: 100 });
    own.freeze();
    try {
      await vi.waitFor(() => expect(count(b.metrics.readFailures, { kind: 'no_answer' })).resolves.toBeGreaterThanOrEqual(3), { timeout: 20_000 });
      await vi.waitFor(() => expect(b.conn.silentForMs()).toBeGreaterThan(1000), { timeout: 20_000 });
      expect(b.trust.trusted).toBe(true);
    } finally {
      own.thaw();
    }
    await vi.waitFor(() => expect(b.conn.isUp).toBe(true), { timeout: 10_000 });
    expect(b.trust.trusted).toBe(true);
    expect(await count(b.metrics.bypassed)).toBe(0);
  });
});
