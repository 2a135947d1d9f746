import { describe, expect, it } from 'vitest';
import { useTestRedis } from '../helpers/redis.js';
import { count, dedupReplica } from './room.js';

/**
 * Dedup markers a Redis writer can make without the webhook secrets are no markers: not a
 * duplicate, not an accepted announcement, not a claim that never ends.
 */
const fx = useTestRedis();
const { opened } = fx;

describe('dedup values without our MAC', () => {
  it('a forged "accepted" announcement does not answer a waiting copy 200: it waits for the holder, then 503 (released), counted', async () => {
    const prefix = fx.redis.prefix();
    const a = await dedupReplica(fx.redis.url, prefix, { opened, leaseMs: 1500 });
    // a claim "in flight" written by the writer (its lease is real: a delay, at most one lease)
    await fx.admin.sendCommand(['SET', a.key('evt_waiting'), 'inflight:not-ours', 'PX', '1500']);
    const waiting = await a.store.claim('evt_waiting');
    if (waiting.kind !== 'in_flight') throw new Error(`not in flight: ${waiting.kind}`);
    await fx.admin.publish(`{${prefix}}dedup-settled`, JSON.stringify({ id: 'evt_waiting', outcome: 'accepted' }));
    await fx.admin.publish(`{${prefix}}dedup-settled`, JSON.stringify({ id: 'evt_waiting', outcome: 'accepted', mac: 'f'.repeat(32) }));
    expect(await waiting.outcome).toBe('released');
    expect(await count(a.metrics.markerMismatches, { marker: 'announced' })).toBe(2);
    // the lease over, the service's retry claims it
    expect((await a.store.claim('evt_waiting')).kind).toBe('claimed');
  });

  it('an in-flight value with no TTL (it would hold the event for ever) and a value larger than any of ours are taken over by a claim, counted', async () => {
    const prefix = fx.redis.prefix();
    const a = await dedupReplica(fx.redis.url, prefix, { opened });
    await fx.admin.sendCommand(['SET', a.key('evt_forever'), 'inflight:forever']);
    await fx.admin.sendCommand(['SET', a.key('evt_large'), 'x'.repeat(100_000)]);
    expect(await a.store.claim('evt_forever')).toMatchObject({ kind: 'claimed' });
    expect(await a.store.claim('evt_large')).toMatchObject({ kind: 'claimed' });
    expect(await count(a.metrics.markerMismatches, { marker: 'accepted' })).toBe(2);
    expect(await fx.admin.pTTL(a.key('evt_forever'))).toBeGreaterThan(0);
  });

  it('a key of another type (HSET dedup:<id>) is no marker: a claim takes it over, counted, as a forged one; nothing falls back to this replica alone', async () => {
    const prefix = fx.redis.prefix();
    const a = await dedupReplica(fx.redis.url, prefix, { opened });
    await fx.admin.hSet(a.key('evt_hashed'), 'x', 'y');
    const claim = await a.store.claim('evt_hashed');
    if (claim.kind !== 'claimed') throw new Error(`not claimed: ${claim.kind}`);
    expect(await count(a.metrics.markerMismatches, { marker: 'accepted' })).toBe(1);
    expect(await count(a.metrics.fallbacks)).toBe(0);
    expect(await fx.admin.get(a.key('evt_hashed'))).toBe(`inflight:${claim.token}`);
    // a writer who types the key again between the claim and the accept: the accept writes over it
    await fx.admin.del(a.key('evt_hashed'));
    await fx.admin.hSet(a.key('evt_hashed'), 'x', 'y');
    await a.store.markAccepted('evt_hashed', claim.token);
    expect(await count(a.metrics.fallbacks)).toBe(0);
    const b = await dedupReplica(fx.redis.url, prefix, { opened });
    expect((await b.store.claim('evt_hashed')).kind).toBe('duplicate');
  });

  it('an in-flight value with a TTL no lease of ours could leave (30 days) is taken over by a claim at once, counted: a delay of at most about a lease, never a silence', async () => {
    const prefix = fx.redis.prefix();
    const a = await dedupReplica(fx.redis.url, prefix, { opened, leaseMs: 1500 });
    await fx.admin.sendCommand(['SET', a.key('evt_held'), 'inflight:forged', 'PX', String(30 * 86_400_000)]);
    const claim = await a.store.claim('evt_held');
    expect(claim).toMatchObject({ kind: 'claimed' });
    expect(await count(a.metrics.markerMismatches, { marker: 'accepted' })).toBe(1);
    // our claim in its place, with our lease
    expect(await fx.admin.get(a.key('evt_held'))).toMatch(/^inflight:/);
    expect(await fx.admin.get(a.key('evt_held'))).not.toBe('inflight:forged');
    const ttl = await fx.admin.pTTL(a.key('evt_held'));
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(1500);
  });

  it("another replica's claim under a lease up to twice ours (a rollout raising the lease) is in flight, not taken over", async () => {
    const prefix = fx.redis.prefix();
    const a = await dedupReplica(fx.redis.url, prefix, { opened, leaseMs: 1500 });
    const b = await dedupReplica(fx.redis.url, prefix, { opened, leaseMs: 3000 });
    const held = await b.store.claim('evt_longer_lease');
    if (held.kind !== 'claimed') throw new Error(`not claimed: ${held.kind}`);
    const waiting = await a.store.claim('evt_longer_lease');
    if (waiting.kind !== 'in_flight') throw new Error(`not in flight: ${waiting.kind}`);
    await b.store.release('evt_longer_lease', held.token);
    expect(await waiting.outcome).toBe('released');
    expect(await count(a.metrics.markerMismatches)).toBe(0);
  });
});
