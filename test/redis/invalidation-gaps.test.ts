import { describe, expect, it, vi } from 'vitest';
import type { RedisTargetSpec } from '../../src/redis/index.js';
import { spawnRedisServer, useTestRedis } from '../helpers/redis.js';
import { count, holdingPublishes, invalidationReplica, redisWithUser, single } from './room.js';

/**
 * Whoever can write to Redis must not keep a revoked ALLOW alive: every entry removed after a
 * replica's position makes it purge, however it was removed, and a replica that cannot read the log
 * while Redis answers others stops serving from its cache.
 */
const fx = useTestRedis();
const { opened } = fx;

/** A replica of the fleet invalidation on the real log (see {@link invalidationReplica}). */
const replica = (prefix: string, target: RedisTargetSpec | (() => RedisTargetSpec), o: { maxSilenceMs?: number; pollIntervalMs?: number; quietPollIntervalMs?: number; waitUp?: boolean } = {}) =>
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

  /** The stream's counters as `XINFO STREAM` gives them. */
  const info = async (admin: { sendCommand(args: string[]): Promise<unknown> }, stream: string): Promise<Record<string, unknown>> => {
    const list = (await admin.sendCommand(['XINFO', 'STREAM', stream])) as unknown[];
    const all = new Map(Array.from({ length: list.length / 2 }, (_, i) => [String(list[2 * i]), list[2 * i + 1]]));
    return Object.fromEntries(['length', 'last-generated-id', 'entries-added', 'max-deleted-entry-id'].map((k) => [k, all.get(k)]));
  };

  /** The newest entry deleted and every trace of it: the counters as they were in `before`. */
  const deleteNewestWithoutTrace = async (admin: { sendCommand(args: string[]): Promise<unknown> }, stream: string, before: Record<string, unknown>): Promise<void> => {
    const [[newest]] = (await admin.sendCommand(['XREVRANGE', stream, '+', '-', 'COUNT', '1'])) as [[string]];
    await admin.sendCommand(['XDEL', stream, newest]);
    await admin.sendCommand(['XSETID', stream, String(before['last-generated-id']), 'ENTRIESADDED', String(before['entries-added']), 'MAXDELETEDID', '0-1']);
    // as if the entry had never been added (0-0 cannot be given back: 0-1 says as little)
    expect(await info(admin, stream)).toStrictEqual({ ...before, 'max-deleted-entry-id': '0-1' });
  };

  /** Replicas a and b, b as a user whose permissions the test changes, b having applied one revocation. */
  const twoReplicas = async () => {
    const { admin, urlB, own } = await redisWithUserB();
    const prefix = fx.redis.prefix();
    const a = await replica(prefix, single(own.url));
    const b = await replica(prefix, single(urlB));
    await a.fleet.publish({ scope: 'user', userReference: 'seen' });
    await vi.waitFor(() => expect(b.rec.calls).toStrictEqual(['user:seen']), { timeout: 10_000 });
    return { admin, a, b };
  };

  // Before: the nudge named the entry only, and a replica that could not read the log in time
  // depended on the log for it (it could only purge everything once the entry was gone).
  it("a revocation whose nudge reached a replica is applied there with no read: deleting it from the log and rewriting the stream's counters (XSETID) hides nothing from it", async () => {
    const { admin, a, b } = await twoReplicas();
    const before = await info(admin, a.stream);

    // b cannot read the log at all; its subscription is up.
    await admin.sendCommand(['ACL', 'SETUSER', 'b', '-xinfo']);
    await a.fleet.publish({ scope: 'user', userReference: 'erin' });
    await vi.waitFor(() => expect(b.rec.calls).toStrictEqual(['user:seen', 'user:erin']), { timeout: 10_000 });
    await deleteNewestWithoutTrace(admin, a.stream, before);
    expect(await count(b.metrics.nudges, { outcome: 'applied' })).toBe(2);
    expect(await count(b.metrics.readFailures)).toBe(0);
    expect(await count(b.metrics.purges)).toBe(0);
  });

  it("the newest entry deleted and the stream's counters rewritten (XSETID) so nothing looks removed: a replica that heard it announced, but had missed the one before, purges", async () => {
    const { admin, a, b } = await twoReplicas();
    const subscribers = async (): Promise<number> => ((await admin.sendCommand(['PUBSUB', 'NUMSUB', a.channel])) as [string, number])[1];

    // b's subscription is cut (Redis disconnects a subscriber whose channels are revoked) and it
    // cannot read: it misses one revocation.
    await admin.sendCommand(['ACL', 'SETUSER', 'b', 'resetchannels', '-xinfo']);
    await vi.waitFor(async () => expect(await subscribers()).toBe(1), { timeout: 10_000 });
    await a.fleet.publish({ scope: 'user', userReference: 'missed' });
    await vi.waitFor(() => expect(count(b.metrics.readFailures, { kind: 'refused' })).resolves.toBeGreaterThan(0), { timeout: 10_000 });
    // Subscribed again, still unable to read: the next nudge shows it what it missed, and names itself.
    await admin.sendCommand(['ACL', 'SETUSER', 'b', 'allchannels', '-xinfo']);
    await vi.waitFor(async () => expect(await subscribers()).toBe(2), { timeout: 10_000 });
    const before = await info(admin, a.stream);
    await a.fleet.publish({ scope: 'user', userReference: 'erin' });
    await vi.waitFor(() => expect(count(b.metrics.nudges, { outcome: 'gap' })).resolves.toBe(1), { timeout: 10_000 });
    await deleteNewestWithoutTrace(admin, a.stream, before);
    await admin.sendCommand(['ACL', 'SETUSER', 'b', '+xinfo']);

    await vi.waitFor(() => expect(b.rec.calls).toContain('all'), { timeout: 10_000 });
    expect(await count(b.metrics.purges, { cause: 'deleted' })).toBe(1);
    // Its nudge verified: erin's revocation was applied when heard, reads failing (before: held,
    // dropped, and covered only by the purge once b could read again).
    expect(b.rec.calls).toStrictEqual(['user:seen', 'user:erin', 'all']);
  });

  it("two nudges showing a gap, the newer heard first, the newer's entry deleted without trace: the read must find the newest announced (not the last heard), so the replica purges", async () => {
    const prefix = fx.redis.prefix();
    const publishes = holdingPublishes();
    const a = await invalidationReplica(single(fx.redis.url), { prefix, opened, maxSilenceMs: 60_000, through: publishes.through });
    const b = await replica(prefix, single(fx.redis.url), { quietPollIntervalMs: 600_000 });
    const seen = a.fleet.publish({ scope: 'user', userReference: 'seen' });
    await vi.waitFor(() => expect(publishes.held).toHaveLength(1), { timeout: 10_000 });
    publishes.held[0]!.send();
    await seen;
    await vi.waitFor(() => expect(b.rec.calls).toStrictEqual(['user:seen']), { timeout: 10_000 });

    // Three appends, each nudge held: the first never published (its appender answered 503).
    const appended: Promise<unknown>[] = [];
    let before: Record<string, unknown> = {};
    for (const [i, user] of ['missed', 'older', 'newest'].entries()) {
      if (user === 'newest') before = await info(fx.admin, a.stream);
      appended.push(a.fleet.publish({ scope: 'user', userReference: user }).catch(() => undefined));
      await vi.waitFor(() => expect(publishes.held).toHaveLength(i + 2), { timeout: 10_000 });
    }
    publishes.held[1]!.drop();
    await deleteNewestWithoutTrace(fx.admin, a.stream, before);
    // The newest announced first, then the older one: both show b a gap.
    // (One connection: Redis runs them, and b hears them, in the order they are sent.)
    publishes.held[3]!.send();
    publishes.held[2]!.send();
    await Promise.all(appended);
    await vi.waitFor(() => expect(b.rec.calls).toContain('all'), { timeout: 10_000 });
    expect(await count(b.metrics.purges, { cause: 'deleted' })).toBe(1);
    expect(await count(b.metrics.nudges, { outcome: 'gap' })).toBe(2);
  });
});

describe('a log this replica cannot read while Redis answers: the cache serves nothing until it has caught up', () => {
  it('reads refused (ACL -xinfo): each failure counted; past --fleet-invalidation-max-silence-ms the cache is bypassed (gauge 1), nothing purged; when reads work again it serves again', async () => {
    const { admin, urlB, own } = await redisWithUserB();
    const prefix = fx.redis.prefix();
    const a = await replica(prefix, single(own.url));
    const b = await replica(prefix, single(urlB), { maxSilenceMs: 600, pollIntervalMs: 100, quietPollIntervalMs: 100 });
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
