import { createClient } from '@redis/client';
import { describe, expect, it, vi } from 'vitest';
import { silentLogger } from '../../src/observability/index.js';
import { createRegistry } from '../../src/observability/registry.js';
import { RedisClaimStore } from '../../src/redis/index.js';
import { createSharedDedupMetrics, MarkerMacs, MemoryDedupStore, SharedDedup } from '../../src/webhooks/index.js';
import { adminOn, spawnRedisServer, unreadBytesAt, useTestRedis } from '../helpers/redis.js';
import { connectionTo, count, DEDUP_TEST_SECRET, redisWithUser, single, up } from './room.js';

const fx = useTestRedis();

const { opened } = fx;
const macs = new MarkerMacs(() => [DEDUP_TEST_SECRET]);
/** What an accepted id holds: the marker with its MAC (keyed from the webhook secret). */
const acceptedMarker = (id: string): string => `accepted:${macs.sign('accepted', id)}`;

/** One replica's shared dedup: its own connection, its own memory store, the same prefix. */
async function replica(prefix: string, o: { leaseMs?: number; forwardTimeoutMs?: number; url?: string; commandTimeoutMs?: number; waitUp?: boolean } = {}) {
  const c = connectionTo(single(o.url ?? fx.redis.url), { prefix, opened, commandTimeoutMs: o.commandTimeoutMs ?? 500 });
  if (o.waitUp ?? !o.url) await up(c);
  const metrics = createSharedDedupMetrics(createRegistry({ defaultMetrics: false }));
  const store = new SharedDedup({
    store: new RedisClaimStore(c.conn, c.keyspace),
    local: new MemoryDedupStore({ retentionMs: 60_000, maxEntries: 1000 }),
    leaseMs: o.leaseMs ?? 10_000,
    // 1 ms unless a test says: only an answer later than the whole lease is refused.
    forwardTimeoutMs: o.forwardTimeoutMs ?? 1,
    retentionMs: 60_000,
    metrics,
    macs,
    logger: silentLogger(),
    now: Date.now,
  });
  await store.start();
  opened.push(store);
  return { store, metrics, conn: c.conn, redisMetrics: c.metrics, key: (id: string) => c.keyspace.key('dedup', id) };
}

describe('shared dedup on a real Redis', () => {
  it('one claim across replicas; the waiter learns "accepted" from the channel; then duplicate everywhere', async () => {
    const prefix = fx.redis.prefix();
    const a = await replica(prefix);
    const b = await replica(prefix);
    const claim = await a.store.claim('evt_1');
    expect(claim.kind).toBe('claimed');
    expect(await fx.admin.get(a.key('evt_1'))).toMatch(/^inflight:/);

    const waiting = await b.store.claim('evt_1');
    expect(waiting.kind).toBe('in_flight');
    if (claim.kind !== 'claimed' || waiting.kind !== 'in_flight') return;
    await a.store.markAccepted('evt_1', claim.token);
    expect(await waiting.outcome).toBe('accepted');

    expect(await fx.admin.get(a.key('evt_1'))).toBe(acceptedMarker('evt_1'));
    const ttl = await fx.admin.pTTL(a.key('evt_1'));
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
    expect(await fx.admin.exists(a.key('evt_2'))).toBe(0);
    expect((await b.store.claim('evt_2')).kind).toBe('claimed');
  });

  it('release and accept are guarded by the claim token', async () => {
    const prefix = fx.redis.prefix();
    const a = await replica(prefix);
    const claim = await a.store.claim('evt_3');
    if (claim.kind !== 'claimed') throw new Error('not claimed');
    await a.store.release('evt_3', 'someone-else');
    expect(await fx.admin.get(a.key('evt_3'))).toBe(`inflight:${claim.token}`);

    // the scripts themselves, called with another token
    const { RELEASE } = await import('../../src/redis/dedup-scripts.js');
    const r = await a.conn.call('t', (c) => RELEASE.run(c, [a.key('evt_3'), `{${prefix}}dedup-waiting:evt_3`], ['other', `{${prefix}}dedup-settled`, '{}', '256']));
    expect(r).toBe(0);
    expect(await fx.admin.get(a.key('evt_3'))).toBe(`inflight:${claim.token}`);
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
    expect(await count(dead.metrics.leaseLapses)).toBe(1);
    expect(await fx.admin.get(dead.key('evt_4'))).toBe(acceptedMarker('evt_4'));
  });

  it('Redis unreachable for less than a lease (a restart, a failover): the claim is refused, not guessed (a copy may be claimed elsewhere meanwhile)', async () => {
    const down = await spawnRedisServer();
    const url = down.url;
    await down.stop();
    const a = await replica(fx.redis.prefix(), { url, leaseMs: 60_000 });
    await expect(a.store.claim('evt_away')).rejects.toMatchObject({ code: 'ERR_WEBHOOK_DEDUP_UNKNOWN' });
    expect(await count(a.metrics.fallbacks)).toBe(0);
    expect(await count(a.metrics.unknownOutcomes, { op: 'claim' })).toBe(1);
  });

  // Before: any unreachable Redis fell back at once, and a Redis restart then let two replicas
  // forward the same event (npm run chaos found 8 in one run). Down now means silent past a lease.
  it('Redis unreachable for longer than a lease: claims fall back to this replica, counted, and accepted ids are still remembered here', async () => {
    const down = await spawnRedisServer();
    const url = down.url;
    await down.stop();
    const a = await replica(fx.redis.prefix(), { url, leaseMs: 300 });
    await vi.waitFor(() => expect(a.conn.silentForMs()).toBeGreaterThanOrEqual(300));
    const claim = await a.store.claim('evt_5');
    expect(claim.kind).toBe('claimed');
    if (claim.kind !== 'claimed') return;
    const local = await a.store.claim('evt_5');
    expect(local.kind).toBe('in_flight');
    await a.store.markAccepted('evt_5', claim.token);
    if (local.kind === 'in_flight') expect(await local.outcome).toBe('accepted');
    expect((await a.store.claim('evt_5')).kind).toBe('duplicate');
    expect(await count(a.metrics.fallbacks, { op: 'claim' })).toBe(1);
    expect(await count(a.metrics.fallbacks, { op: 'accept' })).toBe(1);
    expect(await count(a.redisMetrics.up)).toBe(0);
  });

  // READONLY is an answer that is not an answer (a failover under way): silence, not a refusal.
  // Within a lease it is 503 (test/redis/dedup-failover.test.ts); past a lease of nothing else, down.
  it('a read-only replica that answers nothing else for longer than a lease is down: claims fall back, counted', async () => {
    const primary = await spawnRedisServer();
    opened.push({ close: () => primary.stop() });
    const readOnly = await spawnRedisServer({ args: ['--save', '', '--appendonly', 'no', '--replicaof', '127.0.0.1', String(primary.port)] });
    opened.push({ close: () => readOnly.stop() });
    const a = await replica(fx.redis.prefix(), { url: readOnly.url, leaseMs: 300 });
    await vi.waitFor(async () => expect((await a.store.claim(`evt_ro_${Date.now()}`)).kind).toBe('claimed'), { timeout: 5000 });
    expect(await count(a.metrics.fallbacks, { op: 'claim' })).toBeGreaterThanOrEqual(1);
  });
});

/**
 * Every message on the dedup-settled channel of `prefix`, as a replica's subscription hears it.
 * `settled()` publishes a sentinel and waits for it: what was published before it has been heard
 * (one Redis delivers a channel's messages in the order they were published), so what it returns
 * is all there was.
 */
async function listen(prefix: string) {
  const sub = await adminOn(fx.redis.url);
  opened.push({ close: async () => sub.destroy() });
  const channel = `{${prefix}}dedup-settled`;
  const heard: string[] = [];
  await sub.subscribe(channel, (m) => heard.push(m));
  let n = 0;
  return {
    async settled(): Promise<string[]> {
      const sentinel = `sentinel-${++n}`;
      await fx.admin.publish(channel, sentinel);
      await vi.waitFor(() => expect(heard).toContain(sentinel), { timeout: 5000 });
      return heard.splice(0).filter((m) => !m.startsWith('sentinel-'));
    },
  };
}

describe('settlements go only to waiters', () => {
  it('no replica waits: accepting and releasing publish nothing', async () => {
    const prefix = fx.redis.prefix();
    const channel = await listen(prefix);
    const a = await replica(prefix);
    const b = await replica(prefix);
    const first = await a.store.claim('evt_alone');
    if (first.kind !== 'claimed') throw new Error('not claimed');
    await a.store.markAccepted('evt_alone', first.token);
    const second = await b.store.claim('evt_let_go');
    if (second.kind !== 'claimed') throw new Error('not claimed');
    await b.store.release('evt_let_go', second.token);
    expect(await channel.settled()).toEqual([]);
    expect((await b.store.claim('evt_alone')).kind).toBe('duplicate');
  });

  it('a replica waits: it is woken by the one message the accept publishes; its waiting key lives no longer than the lease and is gone after', async () => {
    const prefix = fx.redis.prefix();
    const channel = await listen(prefix);
    const a = await replica(prefix, { leaseMs: 5000 });
    const b = await replica(prefix, { leaseMs: 5000 });
    const claim = await a.store.claim('evt_waited');
    if (claim.kind !== 'claimed') throw new Error('not claimed');
    const waiting = await b.store.claim('evt_waited');
    if (waiting.kind !== 'in_flight') throw new Error(`not in flight: ${waiting.kind}`);
    const waitingKey = `{${prefix}}dedup-waiting:evt_waited`;
    const ttl = await fx.admin.pTTL(waitingKey);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(5000 + 1000);
    await a.store.markAccepted('evt_waited', claim.token);
    expect(await waiting.outcome).toBe('accepted');
    expect((await channel.settled()).map((m) => JSON.parse(m) as { id: string; outcome: string })).toEqual([expect.objectContaining({ id: 'evt_waited', outcome: 'accepted' })]);
    expect(await fx.admin.exists(waitingKey)).toBe(0);
  });

  it('a waiter that died: while its waiting key lives, the settlement is one message no replica acts on wrongly; once it has expired, none', async () => {
    const prefix = fx.redis.prefix();
    const channel = await listen(prefix);
    const a = await replica(prefix);
    const c = await replica(prefix);
    // A waiter that dies before the settlement (its process gone, its subscription with it).
    const dying = await replica(prefix);
    const held = await a.store.claim('evt_dead_waiter');
    if (held.kind !== 'claimed') throw new Error('not claimed');
    expect((await dying.store.claim('evt_dead_waiter')).kind).toBe('in_flight');
    await dying.store.close();
    await dying.conn.close();
    // Another replica waits for another event meanwhile: a stale settlement must not wake it.
    const other = await a.store.claim('evt_other');
    const bystander = await c.store.claim('evt_other');
    if (other.kind !== 'claimed' || bystander.kind !== 'in_flight') throw new Error('not claimed / in flight');
    await a.store.release('evt_dead_waiter', held.token);
    expect((await channel.settled()).map((m) => (JSON.parse(m) as { id: string }).id)).toEqual(['evt_dead_waiter']);
    await a.store.markAccepted('evt_other', other.token);
    expect(await bystander.outcome).toBe('accepted');
    expect((await channel.settled()).map((m) => (JSON.parse(m) as { id: string }).id)).toEqual(['evt_other']);
    expect((await c.store.claim('evt_dead_waiter')).kind).toBe('claimed');

    // Its waiting key expires with the holder's lease (here 2 s): a settlement after that publishes nothing.
    const short = await replica(prefix, { leaseMs: 2000 });
    const late = await short.store.claim('evt_expired_waiter');
    if (late.kind !== 'claimed') throw new Error('not claimed');
    const gone = await replica(prefix, { leaseMs: 2000 });
    expect((await gone.store.claim('evt_expired_waiter')).kind).toBe('in_flight');
    await gone.store.close();
    await gone.conn.close();
    await vi.waitFor(async () => expect(await fx.admin.exists(`{${prefix}}dedup-waiting:evt_expired_waiter`)).toBe(0), { timeout: 10_000 });
    await short.store.markAccepted('evt_expired_waiter', late.token);
    expect(await channel.settled()).toEqual([]);
    expect((await c.store.claim('evt_expired_waiter')).kind).toBe('duplicate');
  });

  it('a waiter whose message is lost (its waiting key deleted by a writer) still resolves at the holder\'s lease end, and the retry is a duplicate', async () => {
    const prefix = fx.redis.prefix();
    const a = await replica(prefix, { leaseMs: 2000 });
    const b = await replica(prefix, { leaseMs: 2000 });
    const claim = await a.store.claim('evt_lost_message');
    const waiting = await b.store.claim('evt_lost_message');
    if (claim.kind !== 'claimed' || waiting.kind !== 'in_flight') throw new Error('not claimed / in flight');
    expect(await fx.admin.del(`{${prefix}}dedup-waiting:evt_lost_message`)).toBe(1);
    await a.store.markAccepted('evt_lost_message', claim.token);
    expect(await waiting.outcome).toBe('released');
    expect((await b.store.claim('evt_lost_message')).kind).toBe('duplicate');
  });
});

describe('shared dedup across an outage', () => {
  it('an event accepted while Redis was away is a duplicate on the other replicas once it is back', async () => {
    const own = await spawnRedisServer();
    opened.push({ close: () => own.stop() });
    const prefix = fx.redis.prefix();
    const a = await replica(prefix, { url: own.url, waitUp: true, leaseMs: 300 });
    const b = await replica(prefix, { url: own.url, waitUp: true, leaseMs: 300 });

    await own.stop();
    await vi.waitFor(() => expect(a.conn.isUp).toBe(false), { timeout: 5000 });
    await vi.waitFor(() => expect(a.conn.silentForMs()).toBeGreaterThanOrEqual(300)); // down, not just away
    const claim = await a.store.claim('evt_outage');
    if (claim.kind !== 'claimed') throw new Error('not claimed');
    await a.store.markAccepted('evt_outage', claim.token);
    expect(await count(a.metrics.fallbacks, { op: 'accept' })).toBe(1);

    await own.start();
    await vi.waitFor(() => expect(a.conn.isUp && b.conn.isUp).toBe(true), { timeout: 10_000 });
    const look = createClient({ url: own.url });
    look.on('error', () => undefined);
    await look.connect();
    try {
      await vi.waitFor(async () => expect(await look.get(a.key('evt_outage'))).toBe(acceptedMarker('evt_outage')), { timeout: 5000 });
    } finally {
      await look.close();
    }
    expect((await b.store.claim('evt_outage')).kind).toBe('duplicate');
  });
});

describe('shared dedup after one failed accept, Redis up all along', () => {
  it('the id is written to Redis soon after, though no restore happens, and is a duplicate on another replica', async () => {
    const { admin, url, own } = await redisWithUser('a', opened);
    const prefix = fx.redis.prefix();
    const a = await replica(prefix, { url, waitUp: true });
    const b = await replica(prefix, { url: own.url, waitUp: true });
    const claim = await a.store.claim('evt_one_failure');
    if (claim.kind !== 'claimed') throw new Error('not claimed');
    // The accept script is refused (NOPERM on the event's keys, which end in "e": a reply error;
    // the health check's key is untouched). A key of another type no longer fails it: that is a
    // forged marker, taken over.
    const key = a.key('evt_one_failure');
    await admin.sendCommand(['ACL', 'SETUSER', 'a', 'resetkeys', '~*[^e]']);
    try {
      await a.store.markAccepted('evt_one_failure', claim.token);
    } finally {
      await admin.sendCommand(['ACL', 'SETUSER', 'a', '~*']);
    }
    expect(await count(a.metrics.fallbacks, { op: 'accept' })).toBe(1);
    expect(a.conn.isUp).toBe(true);
    await vi.waitFor(async () => expect(await admin.get(key)).toBe(acceptedMarker('evt_one_failure')), { timeout: 5000 });
    expect((await b.store.claim('evt_one_failure')).kind).toBe('duplicate');
  });
});

describe('shared dedup while Redis is slow (frozen with SIGSTOP): slow is not down', () => {
  it('a claim whose answer does not come is not taken as free: both replicas refuse (503), nothing falls back, and the claim it may have made is released after the thaw', async () => {
    const own = await spawnRedisServer();
    opened.push({ close: () => own.stop() });
    const prefix = fx.redis.prefix();
    const a = await replica(prefix, { url: own.url, waitUp: true, commandTimeoutMs: 200 });
    const b = await replica(prefix, { url: own.url, waitUp: true, commandTimeoutMs: 200 });

    own.freeze();
    try {
      await expect(a.store.claim('evt_stall')).rejects.toMatchObject({ code: 'ERR_WEBHOOK_DEDUP_UNKNOWN' });
      await expect(b.store.claim('evt_stall')).rejects.toMatchObject({ code: 'ERR_WEBHOOK_DEDUP_UNKNOWN' });
    } finally {
      own.thaw();
    }
    expect(await count(a.metrics.unknownOutcomes, { op: 'claim' })).toBe(1);
    expect(await count(a.metrics.fallbacks)).toBe(0);
    expect(await count(b.metrics.fallbacks)).toBe(0);

    // The frozen claims run at the thaw (one of them wins the key): once each connection answers
    // again its frozen commands have run; then each replica releases its own.
    await vi.waitFor(() => expect(a.conn.isUp && b.conn.isUp).toBe(true), { timeout: 10_000 });
    const look = createClient({ url: own.url });
    look.on('error', () => undefined);
    await look.connect();
    try {
      await vi.waitFor(async () => expect(await look.exists(a.key('evt_stall'))).toBe(0), { timeout: 10_000 });
    } finally {
      await look.close();
    }
    // The service's retry goes through, once.
    const retry = await a.store.claim('evt_stall');
    expect(retry.kind).toBe('claimed');
    expect((await b.store.claim('evt_stall')).kind).toBe('in_flight');
  });

  it('silent for longer than a lease is down: the claim is decided by this replica alone, counted', async () => {
    const own = await spawnRedisServer();
    opened.push({ close: () => own.stop() });
    const a = await replica(fx.redis.prefix(), { url: own.url, waitUp: true, commandTimeoutMs: 100, leaseMs: 400 });
    own.freeze();
    try {
      await vi.waitFor(() => expect(a.conn.silentForMs()).toBeGreaterThan(400), { timeout: 10_000 });
      const claim = await a.store.claim('evt_long_stall');
      expect(claim.kind).toBe('claimed');
      expect(await count(a.metrics.fallbacks, { op: 'claim' })).toBe(1);
    } finally {
      own.thaw();
    }
  });

  it('a claim answered too late to leave its lease a whole forward is not used: 503 (unknown), let go, and the retry claims it', async () => {
    // What a stalled or CPU-throttled replica sees: Redis set the lease when it ran the script, and
    // the answer is read long after. Before, the claim was used as if fresh, and the forward could
    // outlive the lease while another replica forwarded the service's retry.
    const own = await spawnRedisServer();
    opened.push({ close: () => own.stop() });
    const prefix = fx.redis.prefix();
    const a = await replica(prefix, { url: own.url, waitUp: true, leaseMs: 5000, forwardTimeoutMs: 4600, commandTimeoutMs: 10_000 });
    const b = await replica(prefix, { url: own.url, waitUp: true, leaseMs: 5000, forwardTimeoutMs: 4600 });
    // Redis frozen, the claim sent: it waits unread in Redis' socket (seen in /proc/net/tcp). Then,
    // without yielding, thaw Redis (it runs the script at once: the lease begins) and hold this
    // process's event loop for 500 ms: the answer is read 500 ms into a 5000 ms lease, leaving less
    // than the 4600 ms a forward may take.
    own.freeze();
    let asked: Promise<unknown>;
    try {
      asked = a.store.claim('evt_late');
      asked.catch(() => undefined);
      await vi.waitFor(() => expect(unreadBytesAt(own.port), 'the claim never reached Redis').toBeGreaterThan(0), { timeout: 10_000, interval: 5 });
    } finally {
      own.thaw();
    }
    for (const until = performance.now() + 500; performance.now() < until; );
    await expect(asked).rejects.toMatchObject({ code: 'ERR_WEBHOOK_DEDUP_UNKNOWN' });
    expect(await count(a.metrics.unknownOutcomes, { op: 'claim' })).toBe(1);
    // Let go before the 503, not left to lapse (4.5 s of the lease are left): the key is gone as the
    // claim is refused, and the service's retry, on either replica, claims it.
    const look = await adminOn(own.url);
    try {
      expect(await look.exists(a.key('evt_late'))).toBe(0);
    } finally {
      look.destroy();
    }
    expect((await b.store.claim('evt_late')).kind).toBe('claimed');
  });

  it('a claim answered in time is used as before (the same replica, no stall)', async () => {
    const prefix = fx.redis.prefix();
    const a = await replica(prefix, { leaseMs: 1000, forwardTimeoutMs: 600, commandTimeoutMs: 10_000 });
    const claim = await a.store.claim('evt_on_time');
    expect(claim.kind).toBe('claimed');
    expect(await count(a.metrics.unknownOutcomes, { op: 'claim' })).toBe(0);
  });
});
