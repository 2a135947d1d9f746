import { ErrorReply } from '@redis/client';
import { describe, expect, it, vi } from 'vitest';
import { classify } from '../../src/redis/errors.js';
import { adminOn, spawnRedisServer, useTestRedis } from '../helpers/redis.js';
import { count, dedupReplica } from './room.js';

/**
 * Shared dedup across a failover: an answer that is not an answer (READONLY, LOADING, MOVED,
 * CLUSTERDOWN…) is silence, never a reason to decide alone; with --redis-wait-replicas a claim and
 * an accept count only once the replicas hold them.
 */
const fx = useTestRedis();
const { opened } = fx;

describe('what a Redis error reply means', () => {
  it.each(['READONLY You can\'t write against a read only replica.', 'LOADING Redis is loading the dataset in memory', 'MOVED 3999 127.0.0.1:6381', 'ASK 3999 127.0.0.1:6381', 'CLUSTERDOWN The cluster is down', 'TRYAGAIN Multiple keys request during rehashing of slot', 'MASTERDOWN Link with MASTER is down'])(
    '%s: in transition (no refusal, no answer, nothing ran)',
    (message) => {
      const e = classify(new ErrorReply(message), false);
      expect(e).toMatchObject({ code: 'ERR_REDIS_IN_TRANSITION', refused: false, answered: false, outcomeUnknown: false });
    },
  );

  it.each(['NOAUTH Authentication required.', 'WRONGPASS invalid username-password pair', 'OOM command not allowed when used memory > maxmemory', 'WRONGTYPE Operation against a key holding the wrong kind of value', 'NOPERM this user has no permissions'])(
    '%s: a refusal (an answer: Redis is there and will not do it)',
    (message) => {
      expect(classify(new ErrorReply(message), false)).toMatchObject({ code: 'ERR_REDIS_REPLY', refused: true, answered: true, outcomeUnknown: false });
    },
  );
});

describe('a read-only replica is a failover under way, not a Redis that refuses', () => {
  // Before: READONLY counted as a refusal, so each replica fell back to its own dedup at once, and
  // on Sentinel an event whose copies landed on two replicas reached two apps (69 of 2,001).
  it('claims are answered 503 (unknown), never decided alone, while it lasts less than a lease', async () => {
    const primary = await spawnRedisServer();
    opened.push({ close: () => primary.stop() });
    const readOnly = await spawnRedisServer({ args: ['--save', '', '--appendonly', 'no', '--replicaof', '127.0.0.1', String(primary.port)] });
    opened.push({ close: () => readOnly.stop() });
    const a = await dedupReplica(readOnly.url, fx.redis.prefix(), { opened, leaseMs: 60_000, waitUp: false });
    await vi.waitFor(() => expect(count(a.redisMetrics.callDuration as never, { op: 'health', outcome: 'reply' })).resolves.toBeGreaterThan(0), { timeout: 10_000 });
    for (let i = 0; i < 3; i++) await expect(a.store.claim(`evt_ro_${i}`)).rejects.toMatchObject({ code: 'ERR_WEBHOOK_DEDUP_UNKNOWN' });
    expect(await count(a.metrics.fallbacks)).toBe(0);
    expect(await count(a.metrics.unknownOutcomes, { op: 'claim' })).toBe(3);
    expect(a.conn.isUp).toBe(false);
  });
});

describe('--redis-wait-replicas: a passthrough claim and accept are replicated before they count', () => {
  it('with the replica up, the accept is on the replica when markAccepted resolves; with it gone, claim and accept are 503 (unknown), never a fallback, and the claim is let go', async () => {
    const primary = await spawnRedisServer();
    opened.push({ close: () => primary.stop() });
    const replica = await spawnRedisServer({ args: ['--save', '', '--appendonly', 'no', '--replicaof', '127.0.0.1', String(primary.port)] });
    opened.push({ close: () => replica.stop() });
    const look = await adminOn(primary.url);
    opened.push({ close: async () => look.destroy() });
    await vi.waitFor(async () => expect(String(await look.sendCommand(['INFO', 'replication']))).toMatch(/slave0:.*state=online/), { timeout: 20_000 });
    const prefix = fx.redis.prefix();
    // A replica in sync acknowledges a WAIT within its command timeout even on a busy machine (300 ms
    // did not, under a load of 12); with it gone, nothing waits for WAIT (the in-sync check fails first).
    const a = await dedupReplica(primary.url, prefix, { opened, waitReplicas: 1, commandTimeoutMs: 5000 });
    const b = await dedupReplica(primary.url, prefix, { opened, waitReplicas: 1, commandTimeoutMs: 5000 });

    const claim = await a.store.claim('evt_replicated');
    if (claim.kind !== 'claimed') throw new Error(`not claimed: ${claim.kind}`);
    await a.store.markAccepted('evt_replicated', claim.token);
    const onReplica = await adminOn(replica.url);
    try {
      expect(await onReplica.get(a.key('evt_replicated'))).toMatch(/^accepted/);
    } finally {
      onReplica.destroy();
    }

    // The replica goes away (a failover's victim, a resync): nothing can be made durable.
    const held = await a.store.claim('evt_accept_unreplicated');
    if (held.kind !== 'claimed') throw new Error(`not claimed: ${held.kind}`);
    await replica.stop();
    await vi.waitFor(async () => expect(String(await look.sendCommand(['INFO', 'replication']))).toMatch(/connected_slaves:0\b/), { timeout: 20_000 });
    await expect(a.store.markAccepted('evt_accept_unreplicated', held.token)).rejects.toMatchObject({ code: 'ERR_WEBHOOK_DEDUP_UNKNOWN' });
    expect(await count(a.metrics.unknownOutcomes, { op: 'accept' })).toBe(1);

    await expect(b.store.claim('evt_claim_unreplicated')).rejects.toMatchObject({ code: 'ERR_WEBHOOK_DEDUP_UNKNOWN' });
    expect(await count(b.metrics.unknownOutcomes, { op: 'claim' })).toBe(1);
    expect(await count(a.metrics.fallbacks)).toBe(0);
    expect(await count(b.metrics.fallbacks)).toBe(0);
    // the claim it wrote on the master is let go, so the service's retry is not held for a lease
    await vi.waitFor(async () => expect(await look.exists(b.key('evt_claim_unreplicated'))).toBe(0), { timeout: 10_000 });

    // Replica back: the accept that got a 503 was written all along, so the retry is a duplicate.
    await replica.start();
    await vi.waitFor(async () => expect(String(await look.sendCommand(['INFO', 'replication']))).toMatch(/slave0:.*state=online/), { timeout: 20_000 });
    expect((await b.store.claim('evt_accept_unreplicated')).kind).toBe('duplicate');
  });
});
