import { describe, expect, it, vi } from 'vitest';
import { execFileSync } from 'node:child_process';
import { RedisRedecState } from '../../src/redis/index.js';
import { redisCliBinary, useTestRedis } from '../helpers/redis.js';
import { connectionTo, single, up } from './room.js';

const fx = useTestRedis();
const { opened } = fx;

async function state(prefix: string, o: { leaseMs?: number; holdMs?: number; commandTimeoutMs?: number } = {}): Promise<RedisRedecState> {
  const { conn, keyspace } = await up(connectionTo(single(fx.redis.url), { prefix, opened, commandTimeoutMs: o.commandTimeoutMs ?? 2000 }));
  return new RedisRedecState({ connection: conn, keyspace, leaseMs: o.leaseMs ?? 10_000, holdMs: o.holdMs ?? 60_000, now: () => 42 });
}

// Keys now carry the prefix as a hash tag, `{<prefix>}redec:…` (contract, Redis topologies).
describe('the reconciler bookkeeping in Redis (redec:*)', () => {
  it('first-seen survives a restart (a new replica reads the same clock); handed times too; what left the listing is forgotten', async () => {
    const prefix = fx.redis.prefix();
    const a = await state(prefix);
    expect([...(await a.sync(['x', 'y'], 1000))]).toEqual([
      ['x', { firstSeenAt: 1000, handedAt: null }],
      ['y', { firstSeenAt: 1000, handedAt: null }],
    ]);
    await a.markHanded(['x'], 1500);
    const b = await state(prefix); // another process, or the same one restarted
    expect([...(await b.sync(['x', 'y', 'z'], 5000))]).toEqual([
      ['x', { firstSeenAt: 1000, handedAt: 1500 }],
      ['y', { firstSeenAt: 1000, handedAt: null }],
      ['z', { firstSeenAt: 5000, handedAt: null }],
    ]);
    // x left the listing: forgotten, first-seen and handed alike; it starts over if it comes back.
    await b.sync(['y', 'z'], 6000);
    expect(await fx.admin.hKeys(`{${prefix}}redec:first-seen`)).toEqual(expect.arrayContaining(['y', 'z']));
    expect(await fx.admin.hLen(`{${prefix}}redec:first-seen`)).toBe(2);
    expect(await fx.admin.hLen(`{${prefix}}redec:handed`)).toBe(0);
    expect((await b.sync(['x', 'y'], 7000)).get('x')).toEqual({ firstSeenAt: 7000, handedAt: null });
    // An empty listing forgets everything.
    await b.sync([], 8000);
    expect(await fx.admin.exists([`{${prefix}}redec:first-seen`, `{${prefix}}redec:handed`])).toBe(0);
  });

  it('a listing longer than one chunk (1000 per call) is remembered and forgotten whole', async () => {
    const prefix = fx.redis.prefix();
    const s = await state(prefix);
    const ids = Array.from({ length: 2500 }, (_, i) => `obl_${i}`);
    const first = await s.sync(ids, 1000);
    expect(first.size).toBe(2500);
    await s.markHanded(ids.slice(0, 1500), 2000);
    const kept = ids.filter((_, i) => i % 2 === 0);
    const second = await s.sync(kept, 3000);
    expect([...second.values()].every((e) => e.firstSeenAt === 1000)).toBe(true);
    expect([...second].filter(([, e]) => e.handedAt === 2000)).toHaveLength(750);
    expect(await fx.admin.hLen(`{${prefix}}redec:first-seen`)).toBe(1250);
    expect(await fx.admin.hLen(`{${prefix}}redec:handed`)).toBe(750);
  });

  it('one replica at a time: a complete run keeps the lease as done for the hold and leaves its summary; a failed run releases it', async () => {
    const prefix = fx.redis.prefix();
    const a = await state(prefix);
    const b = await state(prefix);
    expect(await a.acquire()).toBe(true);
    expect(await b.acquire()).toBe(false);
    expect(await a.renew()).toBe(true);
    expect(await b.lastSummary()).toBeNull();
    await a.finish({ pending: 3, oldestFirstSeenAt: 1000 });
    expect(await fx.admin.get(`{${prefix}}redec:lease`)).toMatch(/^done:/);
    expect(await b.acquire()).toBe(false); // ran within the interval
    expect(await b.lastSummary()).toEqual({ pending: 3, oldestFirstSeenAt: 1000 });
    await fx.admin.del(`{${prefix}}redec:lease`); // the hold ran out
    expect(await b.acquire()).toBe(true);
    await b.finish(null);
    expect(await fx.admin.exists(`{${prefix}}redec:lease`)).toBe(0);
    expect(await a.acquire()).toBe(true);
    await a.finish({ pending: 0, oldestFirstSeenAt: null });
    expect(await b.lastSummary()).toEqual({ pending: 0, oldestFirstSeenAt: null });
  });

  it('a lease that lapsed and was taken by another replica is lost: renew says so and finish touches nothing', async () => {
    const prefix = fx.redis.prefix();
    const a = await state(prefix, { leaseMs: 3 });
    const b = await state(prefix, { leaseMs: 60_000 });
    expect(await a.acquire()).toBe(true);
    await vi.waitFor(async () => expect(await b.acquire()).toBe(true), { timeout: 2000 });
    expect(await a.renew()).toBe(false);
    await a.finish({ pending: 1, oldestFirstSeenAt: 1 });
    expect(await fx.admin.get(`{${prefix}}redec:lease`)).toMatch(/^running:/);
    expect(await b.lastSummary()).toBeNull();
  });

  it('a lease is counted from when it was asked for, not from when the answer arrived: a reply held up past the lease does not make renew believe it', async () => {
    // CI saw this: a busy machine read `a`'s OK after the lease had lapsed in Redis; `b` took it,
    // and `a`, counting from the late reply, still trusted its lease without asking Redis.
    const prefix = fx.redis.prefix();
    const key = `{${prefix}}redec:lease`;
    // Long enough that a redis-cli round on a busy machine (each PTTL below is a process) sees it set;
    // the held event loop must not outlast the call's own timeout (the reply would be a timeout).
    const a = await state(prefix, { leaseMs: 3000, commandTimeoutMs: 90_000 });
    const b = await state(prefix, { leaseMs: 60_000 });
    const cli = redisCliBinary();
    const pttl = (): number => Number(execFileSync(cli, ['-u', fx.redis.url, 'PTTL', key], { encoding: 'utf8' }).trim());
    const asked = a.acquire();
    // The client writes on its next turn (setImmediate); ours comes after it, in the same check phase,
    // before the poll phase that could read the reply.
    await new Promise((resolve) => setImmediate(resolve));
    // This process's event loop is held (synchronously) until Redis has set the lease and let it lapse,
    // so `a` reads its OK only after that: the late reply of a busy machine, made certain.
    let seen = false;
    for (const until = Date.now() + 60_000; Date.now() < until; ) {
      const left = pttl();
      if (left >= 0) seen = true;
      else if (seen && left === -2) break;
    }
    expect(seen, 'the SET never reached Redis while the event loop was held').toBe(true);
    expect(pttl()).toBe(-2);
    expect(await asked).toBe(true);
    expect(await b.acquire()).toBe(true);
    expect(await a.renew()).toBe(false);
    await a.finish(null);
    expect(await fx.admin.get(key)).toMatch(/^running:/);
  });
});
