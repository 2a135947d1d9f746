import { describe, expect, it, vi } from 'vitest';
import { useTestRedis } from '../helpers/redis.js';
import { count, invalidationReplica, redisWithUser, single, type InvalidationReplicaOptions } from './room.js';

/**
 * A Redis writer holds no webhook secret: an entry of the invalidation log it wrote or rewrote is
 * not one the replicas act on as written. Each entry carries a MAC (keyed from the webhook secrets)
 * over the log's epoch, the entry's own id, its origin, scope and user; an entry that does not
 * verify is a revocation of unknown scope: the reader purges everything (`unauthenticated`).
 * Before, a writer with EVAL, DEL and XADD alone rewrote the newest entry's user in place (the
 * stream deleted and added back with the same ids) before the other replica read it: every gap
 * check passed, and that replica kept serving the revoked user's cached ALLOW.
 */
const fx = useTestRedis();
const { opened } = fx;

const replica = (target: Parameters<typeof invalidationReplica>[0], o: Omit<InvalidationReplicaOptions, 'opened'>) => invalidationReplica(target, { ...o, opened });

/**
 * The stream deleted and added back, every entry with its own id and fields but the newest, whose
 * fields become `newest(all)` (all: every entry's flat field list, oldest first): what a writer
 * with EVAL, DEL and XADD can do, in one step. Counters and ids come out as a reader expects.
 */
const REWRITE = `
local all = redis.call('XRANGE', KEYS[1], '-', '+')
local last = all[#all]
local fields = last[2]
if ARGV[1] == 'copy' then fields = all[tonumber(ARGV[2])][2]
else for i = 1, #fields, 2 do if fields[i] == ARGV[2] then fields[i + 1] = ARGV[3] end end end
redis.call('DEL', KEYS[1])
for i = 1, #all - 1 do redis.call('XADD', KEYS[1], all[i][1], unpack(all[i][2])) end
redis.call('XADD', KEYS[1], last[1], unpack(fields))
return last[1]
`;

const redisWithUserB = async () => {
  const r = await redisWithUser('b', opened);
  return { ...r, urlB: r.url };
};

describe('an entry of the invalidation log rewritten by a Redis writer is not acted on as written', () => {
  /**
   * B misses the nudge of the new entry (its channels revoked: Redis disconnects its subscriber)
   * and cannot read for a moment (ACL -xinfo: the writer's head start, which the review's writer
   * won with a pipelined script); the entry is rewritten with the same id, so the stream's
   * counters agree.
   */
  async function rewrittenBeforeBReads(rewrite: string[], earlier: string[]) {
    const { admin, urlB, own } = await redisWithUserB();
    const prefix = fx.redis.prefix();
    const a = await replica(single(own.url), { prefix });
    const b = await replica(single(urlB), { prefix });
    for (const user of earlier) await a.fleet.publish({ scope: 'user', userReference: user });
    await vi.waitFor(() => expect(b.rec.calls).toStrictEqual(earlier.map((u) => `user:${u}`)), { timeout: 10_000 });

    await admin.sendCommand(['ACL', 'SETUSER', 'b', 'resetchannels', '-xinfo']);
    try {
      await vi.waitFor(async () => expect(((await admin.sendCommand(['PUBSUB', 'NUMSUB', a.channel])) as [string, number])[1]).toBe(1), { timeout: 10_000 });
      await a.fleet.publish({ scope: 'user', userReference: 'alice' });
      await vi.waitFor(() => expect(count(b.metrics.readFailures, { kind: 'refused' })).resolves.toBeGreaterThan(0), { timeout: 10_000 });
      const [[newest]] = (await admin.sendCommand(['XREVRANGE', a.stream, '+', '-', 'COUNT', '1'])) as [[string]];
      expect(await admin.sendCommand(['EVAL', REWRITE, '1', a.stream, ...rewrite])).toBe(newest);
    } finally {
      await admin.sendCommand(['ACL', 'SETUSER', 'b', 'allchannels', '+xinfo']);
    }
    await vi.waitFor(() => expect(b.rec.calls.length).toBeGreaterThan(earlier.length), { timeout: 10_000 });
    return b;
  }

  it("the newest entry's user rewritten in place (stream deleted and added back with the same ids): the replica purges everything, counted as unauthenticated", async () => {
    const b = await rewrittenBeforeBReads(['set', 'u', 'nobody'], ['seen']);
    expect(b.rec.calls).toStrictEqual(['user:seen', 'all']);
    expect(await count(b.metrics.purges, { cause: 'unauthenticated' })).toBe(1);
    // No gap check could tell: the nudged id is there, and the counters agree.
    expect(await count(b.metrics.purges, { cause: 'deleted' })).toBe(0);
  });

  it("an older entry's fields, MAC included, copied onto the newest id: the MAC binds an entry to its id, so the replica purges everything", async () => {
    const b = await rewrittenBeforeBReads(['copy', '1'], ['bob']);
    expect(b.rec.calls).toStrictEqual(['user:bob', 'all']);
    expect(await count(b.metrics.purges, { cause: 'unauthenticated' })).toBe(1);
  });

  // Before: the nudge named the entry only, so what a replica applied was what the log held when
  // it read it.
  it('an entry rewritten after its nudge reached a replica: the replica applied what the nudge carried (sealed), and nothing the log says afterwards', async () => {
    const { admin, urlB, own } = await redisWithUserB();
    const prefix = fx.redis.prefix();
    const a = await replica(single(own.url), { prefix });
    const b = await replica(single(urlB), { prefix });
    await admin.sendCommand(['ACL', 'SETUSER', 'b', '-xinfo']);
    await a.fleet.publish({ scope: 'user', userReference: 'alice' });
    await vi.waitFor(() => expect(b.rec.calls).toStrictEqual(['user:alice']), { timeout: 10_000 });
    await admin.sendCommand(['EVAL', REWRITE, '1', a.stream, 'set', 'u', 'nobody']);
    await admin.sendCommand(['ACL', 'SETUSER', 'b', '+xinfo']);
    await a.fleet.publish({ scope: 'user', userReference: 'bob' });
    await vi.waitFor(() => expect(b.rec.calls).toStrictEqual(['user:alice', 'user:bob']), { timeout: 10_000 });
    expect(await count(b.metrics.readFailures)).toBe(0);
    expect(await count(b.metrics.purges)).toBe(0);
  });

  it('an entry without a MAC (a version before this one, or a writer) purges everything, even one naming the reader as its origin', async () => {
    const prefix = fx.redis.prefix();
    // Written without a nudge: found by the poll (every 30 s by default while the subscription is up).
    const b = await replica(single(fx.redis.url), { prefix, replicaId: 'replica-b', quietPollIntervalMs: 200 });
    await fx.admin.sendCommand(['XADD', b.stream, '*', 'o', 'replica-b', 's', 'user', 'u', 'carol']);
    await vi.waitFor(() => expect(b.rec.calls).toStrictEqual(['all']), { timeout: 10_000 });
    await fx.admin.sendCommand(['XADD', b.stream, '*', 'o', 'older-replica', 's', 'user', 'u', 'carol', 'm', '0'.repeat(32)]);
    await vi.waitFor(() => expect(b.rec.calls).toStrictEqual(['all', 'all']), { timeout: 10_000 });
    expect(await count(b.metrics.purges, { cause: 'unauthenticated' })).toBe(2);
    expect(await count(b.metrics.received)).toBe(0);
  });

  it('revocations published at once by two replicas (each seals for the id it takes; a place taken first is sealed for again): a third applies every one, purging nothing', async () => {
    const prefix = fx.redis.prefix();
    const a = await replica(single(fx.redis.url), { prefix });
    const b = await replica(single(fx.redis.url), { prefix });
    const c = await replica(single(fx.redis.url), { prefix });
    const users = Array.from({ length: 12 }, (_, i) => `u${i}`);
    await Promise.all(users.map((u, i) => (i % 2 === 0 ? a : b).fleet.publish({ scope: 'user', userReference: u })));
    await vi.waitFor(() => expect(c.rec.calls.length).toBe(users.length), { timeout: 10_000 });
    expect([...c.rec.calls].sort()).toStrictEqual(users.map((u) => `user:${u}`).sort());
    expect(await count(c.metrics.purges)).toBe(0);
    expect(await count(a.metrics.published, { outcome: 'ok' })).toBe(6);
    expect(await count(b.metrics.published, { outcome: 'ok' })).toBe(6);
  });

  it('secret rotation: an entry sealed under the first secret is applied by a replica that holds it anywhere in its list; one that holds none of them purges', async () => {
    const prefix = fx.redis.prefix();
    const a = await replica(single(fx.redis.url), { prefix, secrets: ['whsec_new', 'whsec_old'] });
    const b = await replica(single(fx.redis.url), { prefix, secrets: ['whsec_old', 'whsec_new'] });
    const c = await replica(single(fx.redis.url), { prefix, secrets: ['whsec_old'] });
    await a.fleet.publish({ scope: 'user', userReference: 'dave' });
    await vi.waitFor(() => expect(b.rec.calls).toStrictEqual(['user:dave']), { timeout: 10_000 });
    await vi.waitFor(() => expect(c.rec.calls).toStrictEqual(['all']), { timeout: 10_000 });
    expect(await count(b.metrics.purges)).toBe(0);
    expect(await count(c.metrics.purges, { cause: 'unauthenticated' })).toBe(1);
  });

  // Its own entry it no longer reads back (the append's answer says where it went): it used to
  // purge everything for that too, which nothing required, since it had applied the revocation itself.
  it("a replica without a webhook secret shares its revocations as purges of everything, and can authenticate no other replica's entry: it purges everything for each", async () => {
    const prefix = fx.redis.prefix();
    const keyed = await replica(single(fx.redis.url), { prefix });
    const keyless = await replica(single(fx.redis.url), { prefix, secrets: [] });
    await keyless.fleet.publish({ scope: 'user', userReference: 'erin' });
    expect(keyless.rec.calls[0]).toBe('user:erin');
    await vi.waitFor(() => expect(keyed.rec.calls).toStrictEqual(['all']), { timeout: 10_000 });
    await keyed.fleet.publish({ scope: 'user', userReference: 'frank' });
    // Reads are made in turn: a purge for its own entry would have come before this one.
    await vi.waitFor(() => expect(keyless.rec.calls).toStrictEqual(['user:erin', 'all']), { timeout: 10_000 });
    expect(await count(keyless.metrics.purges, { cause: 'unauthenticated' })).toBe(1);
    expect(keyed.rec.calls).toStrictEqual(['all', 'user:frank']);
  });
});
