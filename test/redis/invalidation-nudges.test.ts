import { describe, expect, it, vi } from 'vitest';
import { spawnRedisServer, useTestRedis } from '../helpers/redis.js';
import { callsOf, count, holdingPublishes, invalidationReplica, redisWithUser, single, type InvalidationReplicaOptions } from './room.js';

/**
 * The nudge carries the revocation, sealed with the id of the entry before it: a replica whose
 * position is that id applies it with no read of the log, and only one that missed something
 * reads. Before, every nudge named an entry and every replica (its origin too) read the log for
 * it: 13 + 5N Redis commands per revocation.
 */
const fx = useTestRedis();
const { opened } = fx;

const replica = (prefix: string, o: Omit<InvalidationReplicaOptions, 'opened' | 'prefix'> & { url?: string } = {}) => invalidationReplica(single(o.url ?? fx.redis.url), { ...o, prefix, opened });

describe('a nudge carries the revocation', () => {
  it('a replica at the entry before applies it with no read; its origin moves on from its own append and reads nothing either', async () => {
    const prefix = fx.redis.prefix();
    const a = await replica(prefix);
    const b = await replica(prefix);
    const [readsA, readsB] = [await a.reads(), await b.reads()];
    for (const user of ['u1', 'u2', 'u3']) await a.fleet.publish({ scope: 'user', userReference: user });
    await vi.waitFor(() => expect(b.rec.calls).toStrictEqual(['user:u1', 'user:u2', 'user:u3']), { timeout: 10_000 });
    // Its own three nudges come back to the origin after each append's answer moved it on.
    await vi.waitFor(() => expect(count(a.metrics.nudges, { outcome: 'own' })).resolves.toBe(3), { timeout: 10_000 });
    expect(await count(b.metrics.nudges, { outcome: 'applied' })).toBe(3);
    expect(a.rec.calls).toStrictEqual(['user:u1', 'user:u2', 'user:u3']);
    expect(await a.reads()).toBe(readsA);
    expect(await b.reads()).toBe(readsB);
  });

  it('a forged nudge (no MAC that verifies, or a bare id as older versions sent) makes a replica read, never apply it, move on or purge', async () => {
    const prefix = fx.redis.prefix();
    const a = await replica(prefix);
    const b = await replica(prefix);
    await a.fleet.publish({ scope: 'user', userReference: 'before' });
    await vi.waitFor(() => expect(b.rec.calls).toStrictEqual(['user:before']), { timeout: 10_000 });
    const [[head]] = (await fx.admin.sendCommand(['XREVRANGE', b.stream, '+', '-', 'COUNT', '1'])) as [[string]];
    const reads = await b.reads();
    // Naming b's position as the one before, far ahead of anything: taken, it would skip what comes next.
    await fx.admin.sendCommand(['PUBLISH', b.channel, JSON.stringify(['e1', '99999999999999-0', head, 'writer', 'user', 'mallory', '0'.repeat(32)])]);
    await fx.admin.sendCommand(['PUBLISH', b.channel, JSON.stringify(['e1', '99999999999999-1', head, 'writer', 'all', '', ''])]);
    // An older version's nudge named the entry alone: one the log does not hold purged everything.
    await fx.admin.sendCommand(['PUBLISH', b.channel, '99999999999999-2']);
    await vi.waitFor(() => expect(count(b.metrics.nudges, { outcome: 'unverified' })).resolves.toBe(3), { timeout: 10_000 });
    await vi.waitFor(async () => expect(await b.reads()).toBeGreaterThan(reads), { timeout: 10_000 });
    await a.fleet.publish({ scope: 'user', userReference: 'after' });
    await vi.waitFor(() => expect(b.rec.calls).toStrictEqual(['user:before', 'user:after']), { timeout: 10_000 });
    expect(await count(b.metrics.purges)).toBe(0);
  });

  it('a reordered pair (the later entry announced first): the replica holds it until the one before comes, then applies both in order, with no read', async () => {
    const prefix = fx.redis.prefix();
    const publishes = holdingPublishes();
    const a = await replica(prefix, { through: publishes.through });
    const b = await replica(prefix);
    const reads = await b.reads();
    const first = a.fleet.publish({ scope: 'user', userReference: 'first' });
    const second = a.fleet.publish({ scope: 'user', userReference: 'second' });
    await vi.waitFor(() => expect(publishes.held).toHaveLength(2), { timeout: 10_000 });
    // One connection: Redis runs (and b hears) them in the order they are sent.
    publishes.held[1]!.send();
    publishes.held[0]!.send();
    await Promise.all([first, second]);
    await vi.waitFor(() => expect(b.rec.calls).toStrictEqual(['user:first', 'user:second']), { timeout: 10_000 });
    expect(await count(b.metrics.nudges, { outcome: 'applied' })).toBe(2);
    expect(await count(b.metrics.nudges, { outcome: 'gap' })).toBe(0);
    expect(await b.reads()).toBe(reads);
  });

  it('a nudge that never comes (its appender failed to publish, and answered 503): the next one is held, then the log is read, once, and nothing is skipped', async () => {
    const prefix = fx.redis.prefix();
    const publishes = holdingPublishes();
    const a = await replica(prefix, { through: publishes.through });
    const b = await replica(prefix);
    const c = await replica(prefix);
    await a.fleet.publish({ scope: 'user', userReference: 'seen' }).catch(() => undefined);
    await vi.waitFor(() => expect(publishes.held).toHaveLength(1), { timeout: 10_000 });
    publishes.held[0]!.send();
    await vi.waitFor(() => expect(c.rec.calls).toStrictEqual(['user:seen']), { timeout: 10_000 });
    const readsC = await c.reads();

    const lost = a.fleet.publish({ scope: 'user', userReference: 'unannounced' });
    await vi.waitFor(() => expect(publishes.held).toHaveLength(2), { timeout: 10_000 });
    publishes.held[1]!.drop();
    await expect(lost).rejects.toThrow();
    const next = a.fleet.publish({ scope: 'user', userReference: 'next' });
    await vi.waitFor(() => expect(publishes.held).toHaveLength(3), { timeout: 10_000 });
    publishes.held[2]!.send();
    await next;
    for (const r of [b, c]) {
      await vi.waitFor(() => expect(r.rec.calls).toStrictEqual(['user:seen', 'user:unannounced', 'user:next']), { timeout: 10_000 });
      expect(await count(r.metrics.nudges, { outcome: 'gap' })).toBe(1);
      expect(await count(r.metrics.purges)).toBe(0);
    }
    expect(await c.reads()).toBe(readsC + 1);
  });
});

describe('an entry the Redis replicas did not acknowledge in time (--redis-wait-replicas)', () => {
  it('is announced with a bare nudge: a replica whose subscription is proven up reads it at once, not at its quiet poll', async () => {
    const { adminOn } = await import('../helpers/redis.js');
    const primary = await spawnRedisServer();
    opened.push({ close: () => primary.stop() });
    const lagging = await spawnRedisServer({ args: ['--save', '', '--appendonly', 'no', '--replicaof', '127.0.0.1', String(primary.port)] });
    opened.push({ close: async () => (lagging.thaw(), lagging.stop()) });
    const admin = await adminOn(primary.url);
    opened.push({ close: async () => admin.destroy() });
    await vi.waitFor(async () => expect(String(await admin.sendCommand(['INFO', 'replication']))).toMatch(/state=online/), { timeout: 20_000 });
    const prefix = fx.redis.prefix();
    // A WAIT long enough for a healthy replica on a busy machine (300 ms timed out the first, replicated, publish once in CI), within the 2 s a command may take; the frozen one never answers it.
    const a = await replica(prefix, { url: primary.url, waitReplicas: 1, waitTimeoutMs: 1500 });
    const b = await replica(prefix, { url: primary.url, quietPollIntervalMs: 600_000 });
    await vi.waitFor(() => expect(count(b.metrics.subscribed)).resolves.toBe(1), { timeout: 10_000 });
    await a.fleet.publish({ scope: 'user', userReference: 'replicated' });
    await vi.waitFor(() => expect(b.rec.calls).toStrictEqual(['user:replicated']), { timeout: 10_000 });
    const reads = await b.reads();

    // The replica freezes: still in sync by its last acknowledgement (lag <= 2 s), WAIT times out.
    lagging.freeze();
    await expect(a.fleet.publish({ scope: 'user', userReference: 'unreplicated' })).rejects.toThrow(/acknowledged/);
    await vi.waitFor(() => expect(b.rec.calls).toStrictEqual(['user:replicated', 'user:unreplicated']), { timeout: 10_000 });
    expect(await count(b.metrics.nudges, { outcome: 'bare' })).toBe(1);
    expect(await b.reads()).toBeGreaterThan(reads);
    expect(await count(b.metrics.purges)).toBe(0);
  });
});

describe('appends sealed for the same millisecond', () => {
  // A bulk revocation reaches many replicas at once, and each seals its entry for the store's
  // millisecond as it sees it. Before, an append offered one id: of those reaching Redis together
  // one was taken per try and the rest tried again (O(k²) scripts), and most of a burst was
  // answered 503 (the fleet bench's storm, 20 at once to 20 replicas: 199 of 300 acknowledged).
  it('each takes one of the places it offers, in one try, and says which id it found last before it', async () => {
    const { APPEND } = await import('../../src/redis/invalidation-scripts.js');
    const prefix = fx.redis.prefix();
    const r = await replica(prefix);
    const keys = [r.stream, `{${prefix}}invalidations-epoch`];
    const epoch = String(await fx.admin.get(keys[1]!));
    const ms = Number(((await fx.admin.sendCommand(['TIME'])) as [string, string])[0]) * 1000 + 5;
    // The same places for every append, as when all seal at once: each takes the first one left.
    const places = Array.from({ length: 8 }, (_, i) => [`${ms + Math.floor(i / 2)}-${i % 2}`, `mac-${i}`]).flat();
    const replies = [];
    for (let k = 0; k < 8; k++) replies.push(await r.conn.call('test', (c) => APPEND.run(c, keys, [epoch, 'origin', 'user', `u${k}`, '10000', 'unused', '1000', ...places])));
    expect(replies.map((x) => (x as unknown[]).slice(0, 3))).toStrictEqual(Array.from({ length: 8 }, (_, k) => [1, epoch, places[2 * k]]));
    expect(replies.map((x) => (x as unknown[])[4])).toStrictEqual(['0-0', ...Array.from({ length: 7 }, (_, k) => places[2 * k])]);
    // Every place taken: the next one says so, and where the stream ends.
    expect(((await r.conn.call('test', (c) => APPEND.run(c, keys, [epoch, 'origin', 'user', 'u9', '10000', 'unused', '1000', ...places]))) as unknown[]).slice(0, 3)).toStrictEqual([0, epoch, places[14]]);
  });
});

describe('the subscription up and the log unreadable are different states', () => {
  it('reads every 30 s while nothing is missed; a nudge showing a gap while reads are refused: past --fleet-invalidation-max-silence-ms the cache is bypassed; readable again, it serves again', async () => {
    const { admin, url } = await redisWithUser('b', opened);
    const prefix = fx.redis.prefix();
    const publishes = holdingPublishes();
    const a = await replica(prefix, { url: url.replace('b:b-password@', ''), through: publishes.through });
    const b = await replica(prefix, { url, maxSilenceMs: 600, pollIntervalMs: 100, quietPollIntervalMs: 600_000 });
    await vi.waitFor(() => expect(count(b.metrics.subscribed)).resolves.toBe(1), { timeout: 10_000 });

    // b can no longer read, and does not know it: it has everything (its subscription is up).
    await admin.sendCommand(['ACL', 'SETUSER', 'b', '-xinfo']);
    const lost = a.fleet.publish({ scope: 'user', userReference: 'unannounced' });
    await vi.waitFor(() => expect(publishes.held).toHaveLength(1), { timeout: 10_000 });
    publishes.held[0]!.drop();
    await expect(lost).rejects.toThrow();
    expect(b.trust.trusted).toBe(true);
    expect(await count(b.metrics.readFailures)).toBe(0);
    // The next nudge shows b it missed one: it reads, in vain, and stops serving from its cache.
    const next = a.fleet.publish({ scope: 'user', userReference: 'next' });
    await vi.waitFor(() => expect(publishes.held).toHaveLength(2), { timeout: 10_000 });
    publishes.held[1]!.send();
    await next;
    await vi.waitFor(() => expect(b.trust.trusted).toBe(false), { timeout: 10_000 });
    expect(await count(b.metrics.bypassed)).toBe(1);
    expect(await count(b.metrics.subscribed)).toBe(0);
    expect(await count(b.metrics.readFailures, { kind: 'refused' })).toBeGreaterThanOrEqual(1);
    // The nudge that showed the gap verified: its revocation was applied once the read failed (before: held 250 ms, then dropped).
    expect(b.rec.calls).toStrictEqual(['user:next']);

    await admin.sendCommand(['ACL', 'SETUSER', 'b', '+xinfo']);
    await vi.waitFor(() => expect(b.trust.trusted).toBe(true), { timeout: 10_000 });
    // The read applies what it missed, and not again what the nudge applied.
    expect(b.rec.calls).toStrictEqual(['user:next', 'user:unannounced']);
    expect(await count(b.metrics.bypassed)).toBe(0);
    await vi.waitFor(() => expect(count(b.metrics.subscribed)).resolves.toBe(1), { timeout: 10_000 });
  });
});

describe('an idle replica', () => {
  it('costs Redis one read of the log per quiet poll, the health check folded in: at most 0.2 commands a second at the default 30 s (INFO commandstats of its own redis-server)', async () => {
    const { INVALIDATION_QUIET_POLL_INTERVAL_MS } = await import('../../src/decision/index.js');
    const { adminOn } = await import('../helpers/redis.js');
    const own = await spawnRedisServer();
    opened.push({ close: () => own.stop() });
    const admin = await adminOn(own.url);
    opened.push({ close: async () => admin.destroy() });
    // As the sidecar wires it (src/assembly/fleet.ts), its intervals scaled down: the connection checks
    // Redis on its own only when no read passed for two quiet polls.
    const quietPollIntervalMs = 300;
    const r = await replica(fx.redis.prefix(), { url: own.url, quietPollIntervalMs, quietHealthIntervalMs: 2 * quietPollIntervalMs, healthIntervalMs: 1000 });
    await vi.waitFor(() => expect(count(r.metrics.subscribed)).resolves.toBe(1), { timeout: 10_000 });
    const stats = async (): Promise<Record<string, number>> => {
      const text = String(await admin.sendCommand(['INFO', 'commandstats']));
      return Object.fromEntries([...text.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)].filter((m) => !['info', 'config', 'client', 'hello'].includes(m[1]!)).map((m) => [m[1]!, Number(m[2])]));
    };
    const s0 = await stats();
    const reads0 = await r.reads();
    await vi.waitFor(async () => expect((await r.reads()) - reads0).toBeGreaterThanOrEqual(10), { timeout: 60_000 });
    const s1 = await stats();
    const reads = (await r.reads()) - reads0;
    expect(await count(r.metrics.subscribed)).toBe(1);
    const delta = Object.fromEntries(Object.entries(s1).map(([k, v]) => [k, v - (s0[k] ?? 0)]).filter(([, v]) => (v as number) > 0)) as Record<string, number>;
    const total = Object.values(delta).reduce((a, b) => a + b, 0);
    // Every command is one of a read's (the script, the epoch, the health write, the stream's
    // facts, the echo): nothing else, no health check of its own (a SET per read, no more).
    expect(Object.keys(delta).sort()).toStrictEqual(['evalsha', 'get', 'publish', 'set', 'xinfo|stream']);
    for (const k of Object.keys(delta)) expect(Math.abs(delta[k]! - reads)).toBeLessThanOrEqual(1);
    const perPoll = total / reads;
    expect(perPoll).toBeLessThanOrEqual(5.5);
    expect(perPoll / (INVALIDATION_QUIET_POLL_INTERVAL_MS / 1000)).toBeLessThanOrEqual(0.2);
  });

  it('keeps its proof between quiet polls with a keep-alive echo: one PUBLISH each time nothing was heard for 4/5 of --fleet-invalidation-max-silence-ms less the echo wait (3 s at the default 5 s): 0.5 commands a second in all at the defaults', async () => {
    const { INVALIDATION_QUIET_POLL_INTERVAL_MS, keepAliveTimings } = await import('../../src/decision/index.js');
    const { adminOn } = await import('../helpers/redis.js');
    const own = await spawnRedisServer();
    opened.push({ close: () => own.stop() });
    const admin = await adminOn(own.url);
    opened.push({ close: async () => admin.destroy() });
    // The quiet poll out of the way, the connection's own checks as the sidecar wires them.
    // 2.5 s: an echo every 1.5 s with 500 ms to come back (at 1 s, 200 ms: a busy machine can miss it, and then reads).
    const maxSilenceMs = 2500;
    const r = await replica(fx.redis.prefix(), { url: own.url, maxSilenceMs, quietPollIntervalMs: 600_000, quietHealthIntervalMs: 1_200_000, healthIntervalMs: 1000 });
    await vi.waitFor(() => expect(count(r.metrics.subscribed)).resolves.toBe(1), { timeout: 10_000 });
    const stats = async (): Promise<Record<string, number>> => {
      const text = String(await admin.sendCommand(['INFO', 'commandstats']));
      return Object.fromEntries([...text.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)].filter((m) => !['info', 'config', 'client', 'hello'].includes(m[1]!)).map((m) => [m[1]!, Number(m[2])]));
    };
    const echoes = () => callsOf(r.redisMetrics, 'invalidate_echo');
    const [s0, e0, reads0] = [await stats(), await echoes(), await r.reads()];
    const t0 = performance.now();
    await vi.waitFor(async () => expect((await echoes()) - e0).toBeGreaterThanOrEqual(6), { timeout: 60_000 });
    const [s1, sent, elapsed] = [await stats(), (await echoes()) - e0, performance.now() - t0];
    expect(await r.reads()).toBe(reads0);
    expect(await count(r.metrics.subscribed)).toBe(1);
    const delta = Object.fromEntries(Object.entries(s1).map(([k, v]) => [k, v - (s0[k] ?? 0)]).filter(([, v]) => (v as number) > 0)) as Record<string, number>;
    // An echo is a PUBLISH and nothing else; and no more often than the timings say.
    expect(Object.keys(delta)).toStrictEqual(['publish']);
    expect(Math.abs(delta.publish! - sent)).toBeLessThanOrEqual(1);
    expect(elapsed / (sent - 1)).toBeGreaterThanOrEqual(keepAliveTimings(maxSilenceMs).everyMs * 0.9);
    // At the defaults: a read of five commands every 30 s, and an echo every 3 s.
    const { everyMs } = keepAliveTimings(5000);
    expect(everyMs).toBe(3000);
    expect(5 / (INVALIDATION_QUIET_POLL_INTERVAL_MS / 1000) + 1 / (everyMs / 1000)).toBeLessThanOrEqual(0.5);
  });
});
