import { describe, expect, it, vi } from 'vitest';
import { silentLogger } from '../../src/observability/index.js';
import { createRegistry } from '../../src/observability/registry.js';
import { RedisError, RedisQueueStore } from '../../src/redis/index.js';
import {
  AppClient,
  AppRoutes,
  backoffMs,
  createQueueMetrics,
  createWebhookMetrics,
  DEAD_LETTER_PAGE,
  deadLetterBounds,
  listDeadLetters as listAll,
  MarkerMacs,
  QUEUE_BACKOFF_MAX_MS,
  QueueWorker,
  replayDeadLetters as replayAll,
  storeDelivery,
  type QueuedEvent,
} from '../../src/webhooks/index.js';
import { adminOn, spawnRedisServer, unreadBytesAt, useTestRedis } from '../helpers/redis.js';
import { envelope, SECRET_A, SECRET_B, sign, startApp, type FakeApp } from '../helpers/webhooks.js';
import { connectionTo, count, queueReplica, single, up, type QueueReplicaOptions } from './room.js';

/**
 * The queue's pieces against a real Redis, in process (the scenarios with real `serve` processes
 * are in test/e2e/queue-mode.test.ts). No timed assertions: waits poll for an outcome. Deliveries are
 * signed here with node:crypto (test/helpers/webhooks.ts), independently of src/.
 */
const fx = useTestRedis();
const { opened } = fx;
/** The listing and replay bounds of the default body limit. */
const BOUNDS = deadLetterBounds(1_048_576);
const listDeadLetters = (store: RedisQueueStore) => listAll(store, BOUNDS);
const replayDeadLetters = (store: RedisQueueStore, which: Parameters<typeof replayAll>[1], secrets: readonly string[], now: number) => replayAll(store, which, secrets, now, BOUNDS);

async function app(): Promise<FakeApp> {
  const a = await startApp();
  opened.push(a);
  return a;
}

/** A queue worker on the suite's Redis (or `o.url`, whose health is not waited for), secret A by default. */
const queue = (prefix: string, appUrl: string, o: Omit<QueueReplicaOptions, 'opened' | 'waitUp'> & { url?: string } = {}) =>
  queueReplica(o.url ?? fx.redis.url, prefix, appUrl, { secrets: [SECRET_A], ...o, opened, waitUp: !o.url || o.url === fx.redis.url });

/** A delivery as the ingress hands it to the queue: verified facts and the raw body, signed with `secret`. */
function signed(id: string, o: { secret?: string; body?: Buffer; timestamp?: number } = {}): QueuedEvent {
  const body = o.body ?? envelope({ id, type: 'test.event' });
  const timestamp = String(o.timestamp ?? Math.floor(Date.now() / 1000));
  return { facts: { eventId: id, timestamp, signature: sign(o.secret ?? SECRET_A, timestamp, body), deliveryId: `dlv_${id}` }, body };
}

let n = 0;
const prefix = (): string => `${fx.redis.prefix()}q${++n}:`;

describe('backoffMs', () => {
  it.each([
    [1, 800, 1200],
    [2, 1600, 2400],
    [5, 12_800, 19_200],
    [12, QUEUE_BACKOFF_MAX_MS, QUEUE_BACKOFF_MAX_MS],
    [1000, QUEUE_BACKOFF_MAX_MS, QUEUE_BACKOFF_MAX_MS],
  ])('after %i failures: between %i and %i ms', (attempts, lo, hi) => {
    expect(backoffMs(attempts, () => 0)).toBe(Math.min(lo, QUEUE_BACKOFF_MAX_MS));
    expect(backoffMs(attempts, () => 0.999999)).toBeLessThanOrEqual(hi);
    expect(backoffMs(attempts, () => 0.999999)).toBeGreaterThanOrEqual(hi - 1);
  });
});

describe('the queue on a real Redis', () => {
  it('refuses a visibility timeout not above the forward timeout (a slow app would get two copies)', async () => {
    const c = await up(connectionTo(single(fx.redis.url), { opened }));
    expect(
      () =>
        new QueueWorker({
          store: new RedisQueueStore(c.conn, c.keyspace),
          logger: silentLogger(),
          metrics: createQueueMetrics(createRegistry({ defaultMetrics: false })),
          secrets: () => [SECRET_A],
          app: new AppClient({ timeoutMs: 1000 }),
          routes: new AppRoutes([], new URL('http://127.0.0.1:1/h')),
          routeForwards: createWebhookMetrics(createRegistry({ defaultMetrics: false })).routeForwards,
          forwardTimeoutMs: 1000,
          visibilityMs: 1000,
          horizonMs: 1,
          toleranceS: 300,
          maxBodyBytes: 1_048_576,
          deliveredRetentionMs: 1,
          now: Date.now,
        }),
    ).toThrow(RangeError);
  });

  it('forwards the raw body with headers rebuilt from what was signed, then leaves nothing behind but the delivered marker', async () => {
    const a = await app();
    const p = prefix();
    const { q, registry, keys } = await queue(p, a.url);
    const body = Buffer.from('{"id":"evt_raw","sequence":1,"type":"t","occurredAt":1,"data":{"n":"\xc3\xa9"}}', 'latin1'); // bytes kept, é as UTF-8
    const event = signed('evt_raw', { body });
    await q.enqueue(event);
    await vi.waitFor(() => expect(a.received).toHaveLength(1), { timeout: 5000 });
    expect(a.received[0]!.body.equals(body)).toBe(true);
    expect(a.received[0]!.headers).toMatchObject({
      'content-type': 'application/json',
      'x-service-event-id': 'evt_raw',
      'x-service-delivery-id': 'dlv_evt_raw',
      'x-service-timestamp': event.facts.timestamp,
      'x-service-signature': event.facts.signature,
      'x-consent-sidecar-verified': 'v1',
    });
    await vi.waitFor(async () => expect(Number(await fx.admin.sendCommand(['XLEN', keys.events]))).toBe(0), { timeout: 3000 });
    expect(Number(await fx.admin.sendCommand(['ZCARD', keys.born]))).toBe(0);
    expect(Number(await fx.admin.sendCommand(['EXISTS', keys.delivered('evt_raw')]))).toBe(1);
    expect(Number(await fx.admin.sendCommand(['PTTL', keys.delivered('evt_raw')]))).toBeGreaterThan(50_000);
    const forwards = await registry.getSingleMetric('consent_sidecar_webhook_queue_forwards_total')!.get();
    expect(forwards.values.find((v) => v.labels.outcome === 'delivered')?.value).toBe(1);
  });

  it('a refused event is retried after its backoff, with the attempt and last error kept', async () => {
    const a = await app();
    a.behaviour = { status: 503 };
    const p = prefix();
    const { q, keys } = await queue(p, a.url);
    await q.enqueue(signed('evt_retry'));
    await vi.waitFor(async () => expect(Number(await fx.admin.sendCommand(['ZCARD', keys.delayed]))).toBe(1), { timeout: 5000 });
    const [member] = (await fx.admin.sendCommand(['ZRANGE', keys.delayed, '0', '0'])) as string[];
    expect(JSON.parse(member!)).toMatchObject({ id: 'evt_retry', attempts: 1, lastError: 'app answered 503' });
    a.behaviour = { status: 204 };
    await vi.waitFor(() => expect(a.received.length).toBe(2), { timeout: 5000 });
    // the app can tell the retry from the first forward
    expect(a.received.map((r) => r.headers['x-consent-sidecar-attempt'])).toEqual(['1', '2']);
    await vi.waitFor(async () => expect(Number(await fx.admin.sendCommand(['ZCARD', keys.born]))).toBe(0), { timeout: 3000 });
  });

  it('past the horizon: a dead letter; list shows it; two replays at once move it once', async () => {
    const a = await app();
    a.behaviour = { status: 500 };
    const p = prefix();
    const { q, store, keys } = await queue(p, a.url, { horizonMs: 1 });
    await q.enqueue(signed('evt_dl'));
    await vi.waitFor(async () => expect(await listDeadLetters(store)).toHaveLength(1), { timeout: 5000 });
    const [dead] = await listDeadLetters(store);
    expect(dead).toMatchObject({ id: 'evt_dl', type: 'test.event', attempts: 1, lastError: 'app answered 500' });
    expect(a.received).toHaveLength(1);

    // Stop the workers first so the replayed event stays where the replay put it.
    await q.stop();
    const now = Date.now();
    const [r1, r2] = await Promise.all([replayDeadLetters(store, { all: true }, [SECRET_A], now), replayDeadLetters(store, { ids: ['evt_dl'] }, [SECRET_A], now)]);
    expect([...r1.replayed, ...r2.replayed]).toEqual(['evt_dl']);
    expect(Number(await fx.admin.sendCommand(['XLEN', keys.events]))).toBe(1);
    expect(await listDeadLetters(store)).toEqual([]);
    expect(await replayDeadLetters(store, { ids: ['evt_dl', 'evt_other'] }, [SECRET_A], now)).toEqual({ replayed: [], notFound: ['evt_dl', 'evt_other'], notVerified: [], delivered: [] });
  });

  it('deduplicates in the same step as it stores: again, from another replica at once, or accepted before in passthrough', async () => {
    const a = await app();
    const p = prefix();
    const [one, two] = [await queue(p, a.url), await queue(p, a.url)];
    expect(await one.q.enqueue(signed('evt_once'))).toBe('queued');
    expect(await one.q.enqueue(signed('evt_once'))).toBe('duplicate');
    const results = await Promise.all(Array.from({ length: 10 }, (_, i) => (i % 2 ? one : two).q.enqueue(signed('evt_race'))));
    expect(results.filter((r) => r === 'queued')).toHaveLength(1);
    // accepted before in passthrough: the marker passthrough writes (its MAC keyed from the secret)
    await fx.admin.sendCommand(['SET', one.keys.dedup('evt_passthrough'), `accepted:${new MarkerMacs(() => [SECRET_A]).sign('accepted', 'evt_passthrough')}`, 'PX', '60000']);
    expect(await two.q.enqueue(signed('evt_passthrough'))).toBe('duplicate');
    expect(Number(await fx.admin.sendCommand(['PTTL', one.keys.dedup('evt_once')]))).toBeGreaterThan(50_000);
    await vi.waitFor(() => expect(a.received.map((r) => r.headers['x-service-event-id']).sort()).toEqual(['evt_once', 'evt_race']), { timeout: 5000 });
  });

  it('an entry that comes back after its delivery (a failover replayed an older state) is dropped, and its id stops counting as waiting (depth 0)', async () => {
    const a = await app();
    const p = prefix();
    const { q, keys, registry } = await queue(p, a.url);
    const event = signed('evt_phantom');
    expect(await q.enqueue(event)).toBe('queued');
    const forwards = (outcome: string): Promise<number> => count(registry.getSingleMetric('consent_sidecar_webhook_queue_forwards_total') as never, { outcome });
    await vi.waitFor(() => expect(forwards('delivered')).resolves.toBe(1), { timeout: 10_000 });
    expect(Number(await fx.admin.sendCommand(['ZCARD', keys.born]))).toBe(0);
    // What a promoted replica can hold: the entry and its id in born again, the delivered marker too.
    const acceptedAt = Date.now();
    await fx.admin.sendCommand(['ZADD', keys.born, String(acceptedAt), 'evt_phantom']);
    await fx.admin.sendCommand(['XADD', keys.events, '*', 'e', JSON.stringify(storeDelivery(event.facts, event.body, acceptedAt))]);
    await vi.waitFor(() => expect(forwards('already_delivered')).resolves.toBe(1), { timeout: 10_000 });
    expect(Number(await fx.admin.sendCommand(['XLEN', keys.events]))).toBe(0);
    expect(Number(await fx.admin.sendCommand(['ZCARD', keys.born]))).toBe(0);
    expect(a.received.filter((r) => r.headers['x-service-event-id'] === 'evt_phantom')).toHaveLength(1);
  });

  it('list reads dead letters page by page: all of them, oldest first, across several pages', async () => {
    const a = await app();
    const p = prefix();
    const { store, keys } = await queue(p, a.url);
    const total = DEAD_LETTER_PAGE * 2 + 7;
    for (let i = 0; i < total; i++) {
      const stored = { v: 2, id: `evt_page_${i}`, timestamp: '1', signature: 'v1=00', body: Buffer.from('{}').toString('base64'), acceptedAt: 1, attempts: 3, deadAt: 2 };
      await fx.admin.sendCommand(['XADD', keys.dead, '*', 'e', JSON.stringify(stored)]);
    }
    const listed = await listDeadLetters(store);
    expect(listed.map((d) => d.id)).toEqual(Array.from({ length: total }, (_, i) => `evt_page_${i}`));
  });

  it('consumers of dead processes with nothing pending are removed from the group; those holding events are not', async () => {
    const a = await app();
    const p = prefix();
    const c = connectionTo(single(fx.redis.url), { prefix: p, opened });
    const events = new RedisQueueStore(c.conn, c.keyspace).keys.events;
    await fx.admin.sendCommand(['XGROUP', 'CREATE', events, 'workers', '0', 'MKSTREAM']);
    await fx.admin.sendCommand(['XGROUP', 'CREATECONSUMER', events, 'workers', 'ghost-idle']);
    // a ghost holding an event (read, never acknowledged): it must stay until the event is taken over
    await fx.admin.sendCommand(['XADD', events, '*', 'e', 'not-json']);
    await fx.admin.sendCommand(['XREADGROUP', 'GROUP', 'workers', 'ghost-holding', 'COUNT', '1', 'STREAMS', events, '>']);
    const idleOf = async (name: string): Promise<number> =>
      Number(((await fx.admin.sendCommand(['XINFO', 'CONSUMERS', events, 'workers'])) as unknown[][]).find((x) => String(x[1]) === name)?.[5] ?? -1);
    await vi.waitFor(async () => expect(await idleOf('ghost-idle')).toBeGreaterThanOrEqual(10));
    await queue(p, a.url, { staleConsumerMs: 10 });
    const names = async (): Promise<string[]> =>
      ((await fx.admin.sendCommand(['XINFO', 'CONSUMERS', events, 'workers'])) as unknown[][]).map((x) => String(x[1]));
    await vi.waitFor(async () => expect(await names()).not.toContain('ghost-idle'), { timeout: 5000 });
    expect(await names()).toContain('ghost-holding');
  });

  it('an entry another consumer took over is neither parked nor dead-lettered by the one that had it (its call answered after the takeover)', async () => {
    const c = connectionTo(single(fx.redis.url), { prefix: prefix(), opened });
    await up(c);
    const store = new RedisQueueStore(c.conn, c.keyspace);
    const { events, delayed, dead } = store.keys;
    await fx.admin.sendCommand(['XGROUP', 'CREATE', events, 'workers', '0', 'MKSTREAM']);
    const entryId = String(await fx.admin.sendCommand(['XADD', events, '*', 'e', '{}', 'i', 'evt_1']));
    await fx.admin.sendCommand(['XREADGROUP', 'GROUP', 'workers', 'first', 'COUNT', '1', 'STREAMS', events, '>']);
    // What XAUTOCLAIM does once the entry is idle past the visibility: it is the second's now.
    await fx.admin.sendCommand(['XCLAIM', events, 'workers', 'second', '0', entryId]);
    const owner = async (): Promise<string | undefined> => String(((await fx.admin.sendCommand(['XPENDING', events, 'workers', entryId, entryId, '1'])) as unknown[][])[0]?.[1]);
    expect(await store.retryLater('first', entryId, Date.now(), '{}')).toBe(false);
    expect(await store.deadLetter('first', entryId, 'evt_1', '{}')).toBe(false);
    expect(await owner()).toBe('second');
    expect(await fx.admin.sendCommand(['ZCARD', delayed])).toBe(0);
    expect(await fx.admin.sendCommand(['XLEN', dead])).toBe(0);
    // The one holding it decides.
    expect(await store.retryLater('second', entryId, Date.now(), '{}')).toBe(true);
    expect(await fx.admin.sendCommand(['ZCARD', delayed])).toBe(1);
    expect(await fx.admin.sendCommand(['XLEN', events])).toBe(0);
  });

  it('Redis unreachable: enqueue rejects with a RedisError (the ingress answers 503), nothing is claimed to be stored', async () => {
    const a = await app();
    const { q } = await queue(prefix(), a.url, { url: 'redis://127.0.0.1:1' });
    await expect(q.enqueue(signed('evt_nowhere'))).rejects.toBeInstanceOf(RedisError);
  });

  it('bounded: beyond --webhook-queue-max-events an event is refused (full, counted), nothing of it stored; room again once delivered', async () => {
    const a = await app();
    a.behaviour = 'hang';
    const p = prefix();
    const { q, registry, keys } = await queue(p, a.url, { maxEvents: 2 });
    expect(await q.enqueue(signed('evt_b1'))).toBe('queued');
    expect(await q.enqueue(signed('evt_b2'))).toBe('queued');
    expect(await q.enqueue(signed('evt_b3'))).toBe('full');
    expect(await fx.admin.exists(keys.dedup('evt_b3'))).toBe(0);
    expect(await count(registry.getSingleMetric('consent_sidecar_webhook_queue_full_total') as never)).toBe(1);
  });
});

describe('the queue does not trust what Redis hands back', () => {
  it('an entry altered in Redis (body changed, signature kept) is dead-lettered as signature_mismatch, counted, never forwarded; a genuine one still goes through', async () => {
    const a = await app();
    a.behaviour = 'hang'; // nothing is delivered until the tampering is done
    const p = prefix();
    const { q, registry, keys } = await queue(p, a.url);
    const genuine = signed('evt_genuine');
    await q.enqueue(genuine);
    await vi.waitFor(() => expect(a.received).toHaveLength(1), { timeout: 5000 });
    // Copy the stored delivery, change what the app would do, keep the stolen signature, and add it back.
    const entries = (await fx.admin.sendCommand(['XRANGE', keys.events, '-', '+'])) as [string, [string, string]][];
    const json = entries[0]![1][1];
    const stored = JSON.parse(json) as Record<string, unknown>;
    const forgedBody = Buffer.from(Buffer.from(String(stored.body), 'base64').toString().replace('test.event', 'consent_action.created'));
    await fx.admin.sendCommand(['XADD', keys.events, '*', 'e', JSON.stringify({ ...stored, id: 'evt_forged', body: forgedBody.toString('base64') })]);
    // an id swapped on a body signed for another id
    await fx.admin.sendCommand(['XADD', keys.events, '*', 'e', JSON.stringify({ ...stored, id: 'evt_swapped' })]);
    // signed with a secret the sidecar does not hold
    const foreign = signed('evt_foreign', { secret: 'whsec_not_ours' });
    await fx.admin.sendCommand(['XADD', keys.events, '*', 'e', JSON.stringify({ v: 2, id: 'evt_foreign', timestamp: foreign.facts.timestamp, signature: foreign.facts.signature, body: foreign.body.toString('base64'), acceptedAt: Date.now(), attempts: 0 })]);
    const mismatches = async (): Promise<number> => count(registry.getSingleMetric('consent_sidecar_webhook_queue_forwards_total') as never, { outcome: 'signature_mismatch' });
    await vi.waitFor(async () => expect(await mismatches()).toBe(3), { timeout: 5000 });
    const dead = (await fx.admin.sendCommand(['XRANGE', keys.dead, '-', '+'])) as [string, [string, string]][];
    expect(dead.map(([, [, j]]) => JSON.parse(j) as { id: string; lastError: string }).map((d) => [d.id, d.lastError]).sort()).toEqual([
      ['evt_foreign', 'signature_mismatch'],
      ['evt_forged', 'signature_mismatch'],
      ['evt_swapped', 'signature_mismatch'],
    ]);
    expect(a.received.map((r) => r.headers['x-service-event-id'])).toEqual(['evt_genuine']);
  });

  it('a forged dead letter is never replayed, and one replayed by hand is dead-lettered again by the worker, never forwarded', async () => {
    const a = await app();
    const p = prefix();
    const { store, registry, keys } = await queue(p, a.url);
    const forged = signed('evt_dead_forged', { secret: 'whsec_attacker' });
    const entry = { v: 2, id: 'evt_dead_forged', timestamp: forged.facts.timestamp, signature: forged.facts.signature, body: forged.body.toString('base64'), acceptedAt: 1, attempts: 8, deadAt: 2, lastError: 'x' };
    await fx.admin.sendCommand(['XADD', keys.dead, '*', 'e', JSON.stringify(entry)]);
    const r = await replayDeadLetters(store, { all: true }, [SECRET_A], Date.now());
    expect(r).toEqual({ replayed: [], notFound: [], notVerified: ['evt_dead_forged'], delivered: [] });
    // Put on the queue by whoever can write to Redis, past the replay's check:
    await fx.admin.sendCommand(['XADD', keys.events, '*', 'e', JSON.stringify({ ...entry, attempts: 0 })]);
    await vi.waitFor(async () => expect(await count(registry.getSingleMetric('consent_sidecar_webhook_queue_forwards_total') as never, { outcome: 'signature_mismatch' })).toBe(1), { timeout: 5000 });
    expect(a.received).toHaveLength(0);
  });

  it('secrets rotate: an entry signed under the old secret still verifies while both are configured', async () => {
    const a = await app();
    a.behaviour = 'hang';
    const p = prefix();
    const { q, setSecrets } = await queue(p, a.url, { secrets: [SECRET_B, SECRET_A] });
    void setSecrets;
    await q.enqueue(signed('evt_rotated', { secret: SECRET_A }));
    await vi.waitFor(() => expect(a.received.map((r) => r.headers['x-service-event-id'])).toEqual(['evt_rotated']), { timeout: 5000 });
  });
});

describe('nothing is stranded', () => {
  it('Redis frozen while events flow: reads whose replies were lost are taken up by the replica itself after the thaw, each event once, not after the visibility timeout', async () => {
    const own = await spawnRedisServer();
    opened.push({ close: () => own.stop() });
    const a = await app();
    const p = prefix();
    // A visibility timeout far beyond the test: only the replica's own recovery can deliver in time.
    const { q, redisMetrics } = await queue(p, a.url, { url: own.url, commandTimeoutMs: 300, visibilityMs: 600_000 });
    await vi.waitFor(() => expect(count(redisMetrics.up)).resolves.toBe(1), { timeout: 10_000 });
    const acknowledged: string[] = [];
    let enqueuing = true;
    const flow = (async () => {
      for (let i = 0; enqueuing; i++) {
        const id = `evt_s${i}`;
        if ((await q.enqueue(signed(id)).catch(() => 'failed')) === 'queued') acknowledged.push(id);
      }
    })();
    await vi.waitFor(() => expect(a.received.length).toBeGreaterThan(20), { timeout: 10_000 });
    own.freeze();
    const readTimeouts = (): Promise<number> => count(redisMetrics.callDuration as never, { op: 'queue_read', outcome: 'timeout' });
    const before = await readTimeouts();
    try {
      // Enqueues and reads pile up in the frozen connection: at the thaw Redis runs them in order,
      // so the reads move the new entries to this consumer though nobody hears the replies.
      await vi.waitFor(async () => expect(await readTimeouts()).toBeGreaterThanOrEqual(before + 3), { timeout: 15_000 });
    } finally {
      enqueuing = false;
      own.thaw();
    }
    await flow;
    const received = (): string[] => a.received.map((r) => String(r.headers['x-service-event-id']));
    await vi.waitFor(() => expect(new Set(received())).toEqual(new Set([...received(), ...acknowledged])), { timeout: 10_000 });
    // every acknowledged event exactly once (events whose enqueue timed out may arrive too, once)
    expect(received().length).toBe(new Set(received()).size);
    for (const id of acknowledged) expect(received()).toContain(id);
  });
});

describe('a slow answer is not a fresh one', () => {
  it('an entry whose read is answered too late to forward it inside its visibility (this process stalled) is not forwarded then: read again, it reaches the app once, and no other replica takes it over', async () => {
    // Visibility 3000 ms, forward timeout 2500 ms, an app that answers in 1500 ms. Redis makes the
    // entry A's at the thaw; A's loop is held 1800 ms before it reads the answer. Before, A forwarded
    // it then: the app answered at 3300 ms, after B had taken the entry over (idle 3000 ms) and
    // forwarded it too, so the app had it twice.
    const own = await spawnRedisServer();
    opened.push({ close: () => own.stop() });
    const theApp = await app();
    const p = prefix();
    // A's clock stands still: after its first round a poll only reads (no promote, no takeover), so
    // the read is the one command a poll sends.
    const fixed = Date.now();
    const A = await queue(p, theApp.url, { url: own.url, commandTimeoutMs: 30_000, visibilityMs: 3000, forwardTimeoutMs: 2500, pollIntervalMs: 50, now: () => fixed });
    await vi.waitFor(() => expect(count(A.redisMetrics.up)).resolves.toBe(1), { timeout: 10_000 });
    await A.q.enqueue(signed('evt_warm'));
    await vi.waitFor(() => expect(count(A.registry.getSingleMetric('consent_sidecar_webhook_queue_forwards_total') as never, { outcome: 'delivered' })).resolves.toBe(1), { timeout: 10_000 });

    // Watch A's commands as they are sent. Freeze Redis the moment one of A's polls has read nothing
    // and nothing of A's is in flight (the poll is over; the next is 50 ms away).
    let inFlight = 0;
    let readSentWith = -1;
    let frozen!: () => void;
    const isFrozen = new Promise<void>((resolve) => (frozen = resolve));
    let armed = true;
    const call = A.conn.call.bind(A.conn);
    A.conn.call = (<T>(op: string, work: (c: never) => Promise<T>): Promise<T> => {
      inFlight++;
      return call(op, (c) => {
        if (op === 'queue_read' && !armed) readSentWith = unreadBytesAt(own.port);
        return work(c as never);
      }).finally(() => {
        inFlight--;
        if (armed && op === 'queue_read' && inFlight === 0) {
          armed = false;
          own.freeze();
          frozen();
        }
      });
    }) as typeof A.conn.call;
    await isFrozen;
    let forwarded: Promise<unknown>;
    try {
      // On A's own connection, in order: the event is stored (its wake reaches A only after the
      // thaw), then A's next poll reads it; both wait unread in Redis' socket.
      forwarded = A.q.enqueue(signed('evt_late'));
      forwarded.catch(() => undefined);
      await vi.waitFor(() => expect(readSentWith).toBeGreaterThan(0), { timeout: 10_000, interval: 5 });
      await vi.waitFor(() => expect(unreadBytesAt(own.port)).toBeGreaterThan(readSentWith), { timeout: 10_000, interval: 5 });
    } finally {
      own.thaw();
    }
    // Redis runs both at once; A reads the answer 1800 ms later: 1200 ms of visibility left, less
    // than a forward may take.
    for (const until = performance.now() + 1800; performance.now() < until; );
    theApp.delayMs = 1500;
    expect(await forwarded).toBe('queued');
    const B = await queue(p, theApp.url, { url: own.url, visibilityMs: 3000, forwardTimeoutMs: 2500, pollIntervalMs: 50 });

    const forwards = (r: typeof A, outcome: string): Promise<number> => count(r.registry.getSingleMetric('consent_sidecar_webhook_queue_forwards_total') as never, { outcome });
    await vi.waitFor(() => expect(forwards(A, 'delivered')).resolves.toBe(2), { timeout: 20_000 });
    const late = theApp.received.filter((r) => r.headers['x-service-event-id'] === 'evt_late');
    expect(late.length).toBe(1);
    expect(await forwards(A, 'read_too_late')).toBe(1);
    expect(await forwards(B, 'delivered')).toBe(0);
    const look = await adminOn(own.url);
    try {
      expect(Number(await look.sendCommand(['XLEN', A.keys.events]))).toBe(0);
    } finally {
      look.destroy();
    }
  });
});
