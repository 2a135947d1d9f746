import { describe, expect, it, vi } from 'vitest';
import { RedisQueueStore } from '../../src/redis/index.js';
import { deadLetterBounds, listDeadLetters, MarkerMacs, replayDeadLetters, RouterDirectory, type QueuedEvent } from '../../src/webhooks/index.js';
import { useTestRedis } from '../helpers/redis.js';
import { envelope, SECRET_A, sign, startApp, type FakeApp } from '../helpers/webhooks.js';
import { connectionTo, count, queueReplica, single, up, type QueueReplicaOptions } from './room.js';

/**
 * Queue mode when replicas route differently (a rollout: one replica has a route the other has
 * not), on a real Redis, in process (the rolling update with real `serve` processes is in
 * test/e2e/rolling-routes.test.ts): an entry a worker's routes do not take is never dropped; it
 * goes to a replica whose routes take it, or waits without spending an attempt, and no route
 * until the horizon makes it a dead letter `unrouted` that a replay sends once a route exists.
 */
const fx = useTestRedis();
const { opened } = fx;
const BOUNDS = deadLetterBounds(1_048_576);

async function app(): Promise<FakeApp> {
  const a = await startApp();
  opened.push(a);
  return a;
}

/** A replica forwarding `consent_action.*` to `appUrl`, and `newtype.*` too when `withNewType`; no default route. */
const replica = (prefix: string, appUrl: string, withNewType: boolean, o: Omit<QueueReplicaOptions, 'opened' | 'routes'> & { ignore?: readonly string[] } = {}) =>
  queueReplica(fx.redis.url, prefix, '', {
    secrets: [SECRET_A],
    ...o,
    opened,
    routes: { routes: [{ glob: 'consent_action.*', url: appUrl }, ...(withNewType ? [{ glob: 'newtype.*', url: appUrl }] : [])], ignore: o.ignore ?? [] },
  });

function signed(id: string, type = 'newtype.created'): QueuedEvent {
  const body = envelope({ id, type });
  const timestamp = String(Math.floor(Date.now() / 1000));
  return { facts: { eventId: id, timestamp, signature: sign(SECRET_A, timestamp, body) }, body };
}

const forwards = (registry: { getSingleMetric(name: string): unknown }, outcome: string): Promise<number> =>
  count(registry.getSingleMetric('consent_sidecar_webhook_queue_forwards_total') as never, { outcome });
const ids = (a: FakeApp): string[] => a.received.map((r) => String(r.headers['x-service-event-id'])).sort();

/** The route table of a replica that routes `newtype.*` but reads nothing (gone, or not reading yet), filed in `store`. */
async function tableOf(store: ConstructorParameters<typeof RouterDirectory>[0]['store'], consumer: string): Promise<RouterDirectory> {
  const table = new RouterDirectory({ store, consumer, globs: { routes: ['newtype.*'], ignore: [], fallback: false }, macs: new MarkerMacs(() => [SECRET_A]), mismatches: { inc: () => undefined }, now: Date.now });
  await table.advertise();
  return table;
}

let n = 0;
const prefix = (): string => `${fx.redis.prefix()}routes${++n}:`;

describe('the store: hand-over and route tables', () => {
  it('hands an entry pending with one consumer to another, whose visibility starts afresh, and tells it; not an entry that is no longer the caller\'s', async () => {
    const c = await up(connectionTo(single(fx.redis.url), { prefix: prefix(), opened }));
    const store = new RedisQueueStore(c.conn, c.keyspace);
    const told: string[] = [];
    await store.onHandedOver('b', () => told.push('b'));
    // Only the consumer given the entry is told: a channel of its own, one delivery whatever the fleet's size.
    await store.onHandedOver('x', () => told.push('x'));
    expect(await fx.admin.sendCommand(['PUBSUB', 'NUMSUB', `${store.keys.handed}:b`, `${store.keys.handed}:x`, store.keys.handed])).toEqual([`${store.keys.handed}:b`, 1, `${store.keys.handed}:x`, 1, store.keys.handed, 0]);
    await store.enqueue('evt_h', '{"x":1}', Date.now(), 60_000, { mac: 'm', accepted: ['m'] });
    const [entry] = (await store.readNew('a', 10, BOUNDS)).entries;
    // Idle for a while with a, so that a fresh visibility shows.
    await vi.waitFor(async () => expect(Number(((await fx.admin.sendCommand(['XPENDING', store.keys.events, 'workers', '-', '+', '1'])) as unknown[][])[0]![2])).toBeGreaterThanOrEqual(200), { timeout: 5000 });
    expect(await store.handOver('c', entry!.entryId, 'b')).toBe(false);
    expect(await store.handOver('a', entry!.entryId, 'b')).toBe(true);
    const [pending] = (await fx.admin.sendCommand(['XPENDING', store.keys.events, 'workers', '-', '+', '1'])) as [string, string, number, number][];
    expect(pending![1]).toBe('b');
    expect(Number(pending![2])).toBeLessThan(200);
    await vi.waitFor(() => expect(told).toEqual(['b']), { timeout: 3000 });
    // b reads it as its own pending entry; a cannot move it any more.
    expect((await store.readPending('b', 10, '0-0', BOUNDS)).entries.map((e) => e.entryId)).toEqual([entry!.entryId]);
    expect(await store.retryLater('a', entry!.entryId, Date.now(), '{}')).toBe(false);
  });

  it('lists the route tables filed, never one larger than the bound, at most as many as asked; a table forgotten is gone', async () => {
    const c = await up(connectionTo(single(fx.redis.url), { prefix: prefix(), opened }));
    const store = new RedisQueueStore(c.conn, c.keyspace);
    await store.advertiseRoutes('a', '{"t":1}');
    await store.advertiseRoutes('b', 'x'.repeat(5000));
    await store.advertiseRoutes('c', '{"t":3}');
    const all = await store.routers({ max: 10, entryBytes: 1000, totalBytes: 100_000 });
    // The oversized one is skipped, not a cut: the listing is whole.
    expect(all.whole).toBe(true);
    expect([...all.tables].sort((x, y) => x.consumer.localeCompare(y.consumer))).toEqual([
      { consumer: 'a', json: '{"t":1}' },
      { consumer: 'c', json: '{"t":3}' },
    ]);
    const one = await store.routers({ max: 1, entryBytes: 1000, totalBytes: 100_000 });
    expect(one.tables).toHaveLength(1);
    expect(one.whole).toBe(false);
    expect(await store.routers({ max: 2, entryBytes: 1000, totalBytes: 100_000 })).toMatchObject({ whole: true });
    await store.forgetRoutes('a');
    expect(await store.routers({ max: 10, entryBytes: 1000, totalBytes: 100_000 })).toEqual({ tables: [{ consumer: 'c', json: '{"t":3}' }], whole: true });
    // The listing stops before it would pass its byte bound in all (each table counted with its consumer's name), and says so.
    await store.advertiseRoutes('d', 'y'.repeat(600));
    await store.advertiseRoutes('e', 'z'.repeat(600));
    const listed = await store.routers({ max: 10, entryBytes: 1000, totalBytes: 1000 });
    expect(listed.tables.reduce((n, r) => n + r.consumer.length + r.json.length, 0)).toBeLessThanOrEqual(1000);
    expect(listed.tables.filter((r) => r.json.length === 600)).toHaveLength(1);
    expect(listed.whole).toBe(false);
  });

  it('a key of another type where the tables go (a Redis writer\'s) lists no table and refuses none: the next table filed replaces it', async () => {
    const c = await up(connectionTo(single(fx.redis.url), { prefix: prefix(), opened }));
    const store = new RedisQueueStore(c.conn, c.keyspace);
    await fx.admin.set(store.keys.routes, 'x');
    expect(await store.routers({ max: 10, entryBytes: 1000, totalBytes: 100_000 })).toEqual({ tables: [], whole: true });
    await store.advertiseRoutes('a', '{"t":1}');
    expect(await store.routers({ max: 10, entryBytes: 1000, totalBytes: 100_000 })).toEqual({ tables: [{ consumer: 'a', json: '{"t":1}' }], whole: true });
  });
});

describe('replicas that route differently', () => {
  it('events a replica does not route, queued through it while both run: every one reaches the app of the replica that routes it, once, as a first attempt', async () => {
    const a = await app();
    const p = prefix();
    const old = await replica(p, a.url, false);
    const updated = await replica(p, a.url, true);
    const events = Array.from({ length: 40 }, (_, i) => `evt_mixed_${i}`);
    for (const id of events) expect(await old.q.enqueue(signed(id))).toBe('queued');
    await vi.waitFor(() => expect(ids(a)).toEqual([...events].sort()), { timeout: 20_000 });
    // Waiting for a route spends no attempt of the app's.
    expect(new Set(a.received.map((r) => r.headers['x-consent-sidecar-attempt']))).toEqual(new Set(['1']));
    // Counted once the app's 2xx is recorded, which may be after the app holds the event.
    await vi.waitFor(() => expect(forwards(updated.registry, 'delivered')).resolves.toBe(events.length), { timeout: 10_000 });
    expect(await forwards(old.registry, 'delivered')).toBe(0);
    expect((await forwards(old.registry, 'unrouted')) + (await forwards(updated.registry, 'unrouted'))).toBe(0);
    await vi.waitFor(async () => expect(Number(await fx.admin.sendCommand(['ZCARD', old.keys.born]))).toBe(0), { timeout: 5000 });
  });

  it('a worker hands each entry its routes do not take to the replica whose filed table does, which reads it at once; one handed to a replica that is gone is taken over after the visibility', async () => {
    const a = await app();
    const p = prefix();
    const old = await replica(p, a.url, false);
    // A replica whose table is filed but which reads nothing (it died after filing it).
    const gone = await tableOf(old.store, 'gone-replica');
    for (const id of ['evt_g1', 'evt_g2', 'evt_g3']) await old.q.enqueue(signed(id));
    await vi.waitFor(() => expect(forwards(old.registry, 'handed_over')).resolves.toBe(3), { timeout: 10_000 });
    const pending = (await fx.admin.sendCommand(['XPENDING', old.keys.events, 'workers', '-', '+', '10'])) as [string, string][];
    expect(pending.map((e) => e[1])).toEqual(['gone-replica', 'gone-replica', 'gone-replica']);
    expect(a.received).toHaveLength(0);
    await gone.withdraw();
    // A replica that routes them: it takes them over from the gone one, and forwards each once.
    const updated = await replica(p, a.url, true, { visibilityMs: 1500 });
    await vi.waitFor(() => expect(ids(a)).toEqual(['evt_g1', 'evt_g2', 'evt_g3']), { timeout: 15_000 });
    // Counted once the app's 2xx is recorded, which may be after the app holds the event.
    await vi.waitFor(() => expect(forwards(updated.registry, 'delivered')).resolves.toBe(3), { timeout: 10_000 });
  });

  it('a table copied from another deployment (another prefix, the same secrets) is no table here: nothing is handed to it', async () => {
    const a = await app();
    const p = prefix();
    const old = await replica(p, a.url, false);
    const elsewhere = await replica(prefix(), a.url, false);
    await tableOf(elsewhere.store, 'theirs');
    const copied = (await fx.admin.sendCommand(['HGET', elsewhere.keys.routes, 'theirs'])) as string;
    await fx.admin.sendCommand(['HSET', old.keys.routes, 'theirs', copied]);
    await old.q.enqueue(signed('evt_copied'));
    await vi.waitFor(() => expect(forwards(old.registry, 'awaiting_route')).resolves.toBeGreaterThanOrEqual(1), { timeout: 10_000 });
    expect(await forwards(old.registry, 'handed_over')).toBe(0);
  });

  it('a hand-over never outlasts the horizon: handed again and again to a table whose replica never reads, the entry is a dead letter "unrouted" (replayable) at the horizon', async () => {
    const a = await app();
    const p = prefix();
    const old = await replica(p, a.url, false, { horizonMs: 3000, visibilityMs: 1200, forwardTimeoutMs: 1000 });
    await tableOf(old.store, 'gone-replica');
    await old.q.enqueue(signed('evt_circling'));
    await vi.waitFor(async () => expect(await listDeadLetters(old.store, BOUNDS)).toHaveLength(1), { timeout: 20_000 });
    const [dead] = await listDeadLetters(old.store, BOUNDS);
    expect(dead).toMatchObject({ id: 'evt_circling', lastError: 'unrouted' });
    expect(await forwards(old.registry, 'handed_over')).toBeGreaterThanOrEqual(1);
    expect(await forwards(old.registry, 'unrouted')).toBe(1);
  });

  it('a type this replica ignores but a live replica routes (a rollout from --app-webhook-ignore to a route) is handed to that replica, not removed', async () => {
    const a = await app();
    const p = prefix();
    const ignoring = await replica(p, a.url, false, { ignore: ['newtype.*'], visibilityMs: 1500 });
    const gone = await tableOf(ignoring.store, 'router-not-reading-yet');
    for (const id of ['evt_i1', 'evt_i2', 'evt_i3']) await ignoring.q.enqueue(signed(id));
    await vi.waitFor(() => expect(forwards(ignoring.registry, 'handed_over')).resolves.toBe(3), { timeout: 10_000 });
    expect(await forwards(ignoring.registry, 'ignored')).toBe(0);
    await gone.withdraw();
    const updated = await replica(p, a.url, true, { visibilityMs: 1500 });
    await vi.waitFor(() => expect(ids(a)).toEqual(['evt_i1', 'evt_i2', 'evt_i3']), { timeout: 15_000 });
    await vi.waitFor(() => expect(forwards(updated.registry, 'delivered')).resolves.toBe(3), { timeout: 10_000 });
  });

  it('route tables a writer\'s junk pushed out of the listing (cut at its bounds) are not "nobody routes it": an entry of a type this replica ignores waits, it is not removed', async () => {
    const a = await app();
    const p = prefix();
    const ignoring = await replica(p, a.url, false, { ignore: ['newtype.*'] });
    // Over 1 MiB of junk fields, each within the bound of one table: the listing is cut before its end.
    const junk = 'j'.repeat(16_000);
    for (let i = 0; i < 80; i++) await fx.admin.sendCommand(['HSET', ignoring.keys.routes, `junk-${i}`, junk]);
    await ignoring.q.enqueue(signed('evt_hidden'));
    await vi.waitFor(() => expect(forwards(ignoring.registry, 'awaiting_route')).resolves.toBeGreaterThanOrEqual(1), { timeout: 10_000 });
    expect(await forwards(ignoring.registry, 'ignored')).toBe(0);
  });

  it('a route table whose MAC does not verify is no table: nothing is handed to it (counted), the entry waits for a route', async () => {
    const a = await app();
    const p = prefix();
    const old = await replica(p, a.url, false);
    const forged = JSON.stringify({ consumer: 'forged', until: Date.now() + 600_000, routes: ['*'], ignore: [], fallback: true });
    await old.store.advertiseRoutes('forged', JSON.stringify({ advert: forged, mac: new MarkerMacs(() => ['whsec_not_ours']).sign('routes', forged) }));
    await old.q.enqueue(signed('evt_forged'));
    await vi.waitFor(() => expect(forwards(old.registry, 'awaiting_route')).resolves.toBeGreaterThanOrEqual(1), { timeout: 10_000 });
    expect(await forwards(old.registry, 'handed_over')).toBe(0);
    expect(await count(old.registry.getSingleMetric('consent_sidecar_webhook_marker_mismatches_total') as never, { marker: 'routes' })).toBeGreaterThanOrEqual(1);
    const [member] = (await fx.admin.sendCommand(['ZRANGE', old.keys.delayed, '0', '0'])) as string[];
    expect(JSON.parse(member!)).toMatchObject({ id: 'evt_forged', attempts: 0, routeWaits: 1 });
  });

  it('no replica routes it: it waits, spending no attempt, until the horizon, then is a dead letter "unrouted"; replayed once a route exists, it reaches the app once', async () => {
    const a = await app();
    const p = prefix();
    const old = await replica(p, a.url, false, { horizonMs: 2500 });
    await old.q.enqueue(signed('evt_nowhere'));
    await vi.waitFor(async () => expect(await listDeadLetters(old.store, BOUNDS)).toHaveLength(1), { timeout: 15_000 });
    const [dead] = await listDeadLetters(old.store, BOUNDS);
    expect(dead).toMatchObject({ id: 'evt_nowhere', type: 'newtype.created', attempts: 0, lastError: 'unrouted' });
    expect(await forwards(old.registry, 'awaiting_route')).toBeGreaterThanOrEqual(1);
    expect(await forwards(old.registry, 'unrouted')).toBe(1);
    expect(a.received).toHaveLength(0);
    expect(Number(await fx.admin.sendCommand(['ZCARD', old.keys.born]))).toBe(0);

    // The operator adds the route (the replica that has it replaces the old one) and replays.
    await old.q.stop();
    const updated = await replica(p, a.url, true);
    const replay = await replayDeadLetters(updated.store, { ids: ['evt_nowhere'] }, [SECRET_A], Date.now(), BOUNDS);
    expect(replay).toEqual({ replayed: ['evt_nowhere'], notFound: [], notVerified: [], delivered: [] });
    await vi.waitFor(() => expect(ids(a)).toEqual(['evt_nowhere']), { timeout: 10_000 });
    expect(a.received[0]!.headers['x-consent-sidecar-attempt']).toBe('1');
    expect(await listDeadLetters(updated.store, BOUNDS)).toEqual([]);
  });

  it('a type this replica ignores is removed when it meets it in the queue (counted), never forwarded', async () => {
    const a = await app();
    const p = prefix();
    const r = await replica(p, a.url, false, { ignore: ['internal.*'] });
    await r.q.enqueue(signed('evt_internal', 'internal.tick'));
    await r.q.enqueue(signed('evt_action', 'consent_action.created'));
    await vi.waitFor(() => expect(forwards(r.registry, 'ignored')).resolves.toBe(1), { timeout: 10_000 });
    await vi.waitFor(() => expect(ids(a)).toEqual(['evt_action']), { timeout: 10_000 });
    await vi.waitFor(async () => expect(Number(await fx.admin.sendCommand(['ZCARD', r.keys.born]))).toBe(0), { timeout: 5000 });
    expect(await listDeadLetters(r.store, BOUNDS)).toEqual([]);
  });
});
